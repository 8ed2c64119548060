"""The test split (`data.test_fraction`): where it lies, what it leaves unchanged, `best_test_loss` (measured
at the best validation step, kept across a resume, never used to choose), summary.csv's columns and the
report's outcome."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from helpers import REPO, SHAKESPEARE, tiny_config

from gptlab.errors import GptlabError
from gptlab.model import ModelConfig, build_model
from gptlab.report import write_report
from gptlab.report.load import load_results
from gptlab.report.tables import analyses, compute_tables
from gptlab.run.config import resolve_run_config
from gptlab.run.data import load_dataset, split_points
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir
from gptlab.run.runner import RunDirWriter, train_run
from gptlab.run.trainer import Trainer
from gptlab.sweep.spec import load_spec
from gptlab.sweep.summary import write_summary
from gptlab.train import main as train_main

LN2 = math.log(2)


def split_config(corpus: Path, test_fraction: float = 0.05, **train) -> dict:
    config = tiny_config(corpus, **{"max_iters": 20, "eval_interval": 10, **train})
    config["data"]["test_fraction"] = test_fraction
    return config


# -- where the splits lie ---------------------------------------------------------------------------------------
def test_tiny_shakespeare_5_plus_5_is_the_two_halves_of_nanogpts_validation_text():
    text = SHAKESPEARE.read_text(encoding="utf-8")
    nanogpt_val = text[int(len(text) * 0.9):]  # nanoGPT's prepare.py: the last 10%
    start_val, start_test = split_points(len(text), 0.1, 0.05)
    val, test = text[start_val:start_test], text[start_test:]
    assert val + test == nanogpt_val
    assert abs(len(val) - len(test)) <= 1 and len(val) > 50_000
    assert text[:start_val] + val + test == text


def test_the_test_split_is_the_tail_and_disjoint_from_validation(corpus):
    text = corpus.read_text(encoding="utf-8")
    old = load_dataset("tiny", str(corpus), 0.1)
    new = load_dataset("tiny", str(corpus), 0.1, test_fraction=0.05)
    tok = new.tokenizer
    train_text, val_text, test_text = (tok.decode(ids) for ids in (new.train, new.val, new.test))
    assert train_text + val_text + test_text == text  # nothing lost, nothing shared
    assert test_text == text[len(text) - len(test_text):]
    assert len(test_text) == len(text) - int(len(text) * 0.95)  # the last 5% of the whole text
    assert len(val_text) == int(len(text) * 0.95) - int(len(text) * 0.9)
    assert torch.equal(torch.cat([new.val, new.test]), old.val)  # the old held-out tail, cut in two
    assert torch.equal(new.train, old.train) and old.test is None


def test_test_bits_per_char_factor_counts_the_test_splits_own_characters(corpus):
    data = load_dataset("tiny", str(corpus), 0.1, "bpe", 300, test_fraction=0.05)
    text = corpus.read_text(encoding="utf-8")
    test_text = text[int(len(text) * 0.95):]
    scored = len(test_text) - len(data.tokenizer.decode(data.test[:1]))  # the first token is never a target
    assert data.test_bits_per_char_factor == pytest.approx((len(data.test) - 1) / scored / LN2, rel=1e-12)
    assert data.test_bits_per_char_factor != pytest.approx(data.bits_per_char_factor, rel=1e-9)


def test_the_unigram_ceiling_of_the_test_split_scores_the_test_tokens(corpus):
    from collections import Counter

    from gptlab.run.data import unigram_val_loss

    data = load_dataset("tiny", str(corpus), 0.1, test_fraction=0.05)
    counts = Counter(data.train.tolist())
    total = len(data.train) + data.tokenizer.vocab_size  # add-one smoothing over the whole vocabulary
    expected = -sum(math.log((counts[t] + 1) / total) for t in data.test.tolist()) / len(data.test)
    got = unigram_val_loss("tiny", str(corpus), 0.1, test_fraction=0.05, split="test")
    assert got == pytest.approx(expected, rel=1e-9)
    assert got != pytest.approx(unigram_val_loss("tiny", str(corpus), 0.1, test_fraction=0.05), rel=1e-6)


# -- the default changes nothing ----------------------------------------------------------------------------------
def test_default_zero_keeps_the_run_ids_of_finished_studies():
    folders = sorted((REPO / "results" / "four_axes" / "runs").iterdir())[:3]
    assert folders
    for folder in folders:
        recorded = yaml.safe_load((folder / "config.yaml").read_text())  # written before data.test_fraction existed
        assert "test_fraction" not in recorded["data"]
        config = resolve_run_config(recorded)
        assert config.data.test_fraction == 0.0
        assert folder.name.endswith("_" + config.run_hash())  # the id the study was trained under
        assert "test_fraction" not in config.identity()["data"]
        recorded["data"]["test_fraction"] = 0.05
        assert not folder.name.endswith("_" + resolve_run_config(recorded).run_hash())


def test_default_zero_keeps_the_splits(corpus):
    text = corpus.read_text(encoding="utf-8")
    default = load_dataset("tiny", str(corpus), 0.1)
    explicit = load_dataset("tiny", str(corpus), 0.1, test_fraction=0.0)
    assert explicit.test is None and default.test is None
    assert torch.equal(explicit.val, default.val) and torch.equal(explicit.train, default.train)
    assert default.tokenizer.decode(default.val) == text[int(len(text) * 0.9):]


def test_a_run_killed_before_the_key_existed_resumes(corpus, tmp_path):
    folder = tmp_path / "run"
    config = resolve_run_config(tiny_config(corpus))
    old = config.to_dict()
    del old["data"]["test_fraction"]
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump(old))
    RunDir(folder).claim(config)  # the same run: the new key at its default
    with pytest.raises(GptlabError, match="different config"):
        RunDir(folder).claim(config.with_settings({"data.test_fraction": 0.05}))


# -- best_test_loss -----------------------------------------------------------------------------------------------
def independent_test_loss(run: Path, corpus: Path, test_fraction: float) -> float:
    """The best checkpoint's mean loss on every target of the test text, one window at a time, in float64."""
    state = torch.load(run / "ckpt_best.pt", weights_only=True)
    chars = state["tokenizer"]["chars"]
    text = corpus.read_text(encoding="utf-8")
    ids = torch.tensor([chars.index(c) for c in text[int(len(text) * (1 - test_fraction)):]])
    model = build_model(ModelConfig(**state["config"]["model"], vocab_size=len(chars)))
    model.load_state_dict(state["model"])
    model.eval()
    T, n_targets = state["config"]["model"]["block_size"], len(ids) - 1
    total, scored, start = 0.0, 0, 0
    with torch.no_grad():
        while scored < n_targets:
            end = min(start + T, n_targets)  # the last window ends at the split's end, full length
            x, y = ids[end - T:end], ids[end - T + 1:end + 1]
            logits, _ = model(x[None])
            nll = -torch.log_softmax(logits[0].double(), dim=-1)[torch.arange(T), y]
            new = end - start
            total, scored, start = total + float(nll[-new:].sum()), scored + new, end
    return total / scored


def test_best_test_loss_is_the_best_checkpoints_loss_on_the_test_split(corpus, tmp_path):
    summary = train_run(resolve_run_config(split_config(corpus, 0.05)), tmp_path / "run")
    assert summary["best_test_loss"] == pytest.approx(independent_test_loss(tmp_path / "run", corpus, 0.05), rel=1e-5)
    assert summary["best_test_bpc"] == pytest.approx(summary["best_test_loss"] / LN2, rel=1e-12)  # char: 1 / ln 2
    assert summary["test_bpc_factor"] == pytest.approx(1 / LN2, rel=1e-12)
    assert summary["best_test_loss"] != summary["best_val_loss"]
    plain = train_run(resolve_run_config(split_config(corpus, 0.0)), tmp_path / "plain")
    assert plain["best_test_loss"] is None and plain["best_test_bpc"] is None


class Interrupted(Exception):
    """Raised by a callback to stop a run right after its first checkpoint, as a kill would."""


def test_best_test_loss_and_its_blocks_survive_a_resume(corpus, tmp_path, monkeypatch):
    run = tmp_path / "run"
    config = split_config(corpus, 0.05)
    save = RunDirWriter.on_evaluation

    def save_then_stop(self, trainer, val_loss, improved):
        save(self, trainer, val_loss, improved)
        raise Interrupted

    monkeypatch.setattr(RunDirWriter, "on_evaluation", save_then_stop)
    with pytest.raises(Interrupted):
        train_run(resolve_run_config(config), run)
    at_kill = torch.load(run / "ckpt_last.pt", weights_only=True)
    assert at_kill["step"] == 10 and at_kill["best_test_loss"] is not None
    monkeypatch.setattr(RunDirWriter, "on_evaluation", save)
    # After the resume validation never improves again: the test loss of the summary can only be the one
    # measured at step 10, before the interruption, so it must have come back from the checkpoint.
    monkeypatch.setattr(Trainer, "evaluate", lambda self: 50.0)
    summary = train_run(resolve_run_config(config), run)
    assert "resumed" in (run / "train.log").read_text()
    assert summary["best_step"] == 10 and summary["final_val_loss"] == 50.0
    assert summary["best_test_loss"] == at_kill["best_test_loss"]
    assert summary["best_test_loss"] == pytest.approx(independent_test_loss(run, corpus, 0.05), rel=1e-5)
    # Its test blocks too: measured at step 10 and carried by the checkpoint (test_blocks.csv).
    assert [float(b["loss"]) for b in read_blocks(run)] == pytest.approx(
        [b["loss"] for b in at_kill["best_test_blocks"]], rel=1e-12)


def test_checkpoint_choice_ignores_the_test_split(corpus, tmp_path, monkeypatch):
    vals, tests = iter([1.0, 0.5, 0.9, 0.8]), [0.1, 0.9, 0.05, 0.01]
    measured_at = []

    def fake_test(self):
        measured_at.append(self.step)
        return tests[len(measured_at) - 1]

    monkeypatch.setattr(Trainer, "evaluate", lambda self: next(vals))
    monkeypatch.setattr(Trainer, "evaluate_test", fake_test)
    summary = train_run(resolve_run_config(split_config(corpus, 0.05, max_iters=40)), tmp_path / "run")
    assert measured_at == [10, 20]  # only where validation improved
    assert (summary["best_step"], summary["best_val_loss"], summary["best_test_loss"]) == (20, 0.5, 0.9)
    assert torch.load(tmp_path / "run" / "ckpt_best.pt", weights_only=True)["step"] == 20


# -- bad values -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [-0.01, 0.1, 0.5, 1.0, float("nan"), "half", True])
def test_bad_test_fractions_are_refused_naming_the_key(corpus, value):
    with pytest.raises(GptlabError, match=r"data\.test_fraction") as err:
        resolve_run_config(split_config(corpus, value))
    assert "\n" not in str(err.value)


def test_a_test_split_too_short_for_the_block_is_refused(corpus, tmp_path):
    with pytest.raises(GptlabError, match=r"the test split has .* tokens.*data\.test_fraction"):
        train_run(resolve_run_config(split_config(corpus, 0.001)), tmp_path / "run")  # 20 characters, block_size 32
    assert not (tmp_path / "run" / "ckpt_last.pt").exists()


def test_the_cli_refuses_a_bad_test_fraction_in_one_line(capsys, tmp_path):
    assert train_main(["--data.val_fraction", "0.1", "--data.test_fraction", "0.2", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert "data.test_fraction" in err and "\n" not in err
    assert not (tmp_path / "r").exists()


# -- summary.csv ------------------------------------------------------------------------------------------------
def fake_sweep(tmp_path: Path, corpus: Path, test_fraction: float) -> tuple[Path, list[str]]:
    """A two-cell sweep whose runs 'finished' with made-up summaries; returns summary.csv's path and header."""
    config = split_config(corpus, test_fraction)
    raw = {"name": "t", "base": {k: config[k] for k in ("model", "train", "data")},
           "grid": {"model.activation": ["gelu", "relu"]}, "seeds": 1}
    path = tmp_path / f"sweep_{test_fraction}.yaml"
    path.write_text(yaml.safe_dump(raw))
    spec = load_spec(path)
    results = tmp_path / f"results_{test_fraction}"
    for i, run in enumerate(spec.runs):
        ResultsDir(results).run(run.run_id).write_summary(
            {"status": "ok", "best_val_loss": 2.0 + i, "best_test_loss": 3.0 + i if test_fraction else None,
             "best_test_bpc": (3.0 + i) / LN2 if test_fraction else None})
    write_summary(spec, results)
    with open(results / "summary.csv") as f:
        rows = list(csv.reader(f))
    return results, rows


def test_summary_csv_has_the_test_columns_last_only_with_a_test_split(corpus, tmp_path):
    _, plain = fake_sweep(tmp_path, corpus, 0.0)
    _, split = fake_sweep(tmp_path, corpus, 0.05)
    assert plain[0][-2:] == ["best_val_bpc", "role"]  # the columns of every sweep so far, then the run's role
    assert split[0] == plain[0][:-1] + ["best_test_loss", "best_test_bpc", "role"]
    assert [r[-3:-1] for r in split[1:]] == [["3.0", str(3.0 / LN2)], ["4.0", str(4.0 / LN2)]]


# -- the report's outcome -----------------------------------------------------------------------------------------
def planted_results(tmp_path: Path, with_test: list[bool]) -> Path:
    """One factor (activation), three seeds: relu is 0.1 better on validation and 0.2 worse on test."""
    out = tmp_path / "results" / "planted"
    out.mkdir(parents=True)
    (out / "sweep.yaml").write_text(yaml.safe_dump({"name": "planted", "grid": {"model.activation": ["gelu", "relu"]},
                                                    "seeds": [0, 1, 2]}))
    rows, noise = [], np.random.default_rng(0).normal(0, 0.01, size=(6, 2))
    for i, (act, seed) in enumerate((a, s) for a in ("gelu", "relu") for s in range(3)):
        val = 1.5 + (-0.1 if act == "relu" else 0.0) + noise[i, 0]
        test = 1.6 + (0.2 if act == "relu" else 0.0) + noise[i, 1]
        rows.append({"run_id": f"{act}_s{seed}", "seed": seed, "model.activation": act, "status": "ok",
                     "best_val_loss": val, "best_step": 100, "best_val_bpc": val / LN2,
                     "best_test_loss": test if with_test[i] else "",
                     "best_test_bpc": test / LN2 if with_test[i] else ""})
    with open(out / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out


def relu_effect(res) -> float:
    main = compute_tables(res).main
    return float(main.loc[main["level"] == "relu", "estimate"].iloc[0])


def test_a_sweep_with_a_test_split_reports_its_effects_on_the_test_loss(tmp_path):
    res = load_results(planted_results(tmp_path, [True] * 6))
    assert res.outcome == "best_test_loss"
    runs = res.runs
    expected = (runs.loc[runs["model.activation"] == "relu", "best_test_loss"].mean()
                - runs.loc[runs["model.activation"] == "gelu", "best_test_loss"].mean())
    assert expected > 0.15
    assert relu_effect(res) == pytest.approx(expected, abs=1e-4)
    out = write_report(res.results_dir, tmp_path / "reports")
    report = (out / "report.md").read_text()
    assert "**Outcome**: the test loss at the best validation step" in report
    assert "Difference in test loss at the best val step" in report
    cells = list(csv.DictReader(open(out / "tables" / "cells.csv")))
    assert list(cells[0])[-4:] == ["best_test_loss", "best_test_loss_ci95", "best_test_bpc", "best_test_bpc_ci95"]


def test_a_sweep_without_a_test_split_for_every_run_reports_on_validation(tmp_path):
    res = load_results(planted_results(tmp_path, [True] * 5 + [False]))
    assert res.outcome == "best_val_loss"
    runs = res.runs
    expected = (runs.loc[runs["model.activation"] == "relu", "best_val_loss"].mean()
                - runs.loc[runs["model.activation"] == "gelu", "best_val_loss"].mean())
    assert expected < -0.05
    assert relu_effect(res) == pytest.approx(expected, abs=1e-4)
    assert "best_test_loss" not in analyses.cell_table(res)


# -- test_blocks.csv ------------------------------------------------------------------------------------------------
def read_blocks(run: Path) -> list[dict]:
    import csv

    with open(run / "test_blocks.csv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_test_blocks_are_twenty_contiguous_blocks_whose_weighted_mean_is_the_test_loss(corpus, tmp_path):
    summary = train_run(resolve_run_config(split_config(corpus, 0.05)), tmp_path / "run")
    blocks = read_blocks(tmp_path / "run")
    assert [int(b["block"]) for b in blocks] == list(range(20))
    tokens = [int(b["tokens"]) for b in blocks]
    text = corpus.read_text(encoding="utf-8")
    n_test = len(text) - int(len(text) * 0.95)
    assert sum(tokens) == n_test - 1 and max(tokens) - min(tokens) <= 1  # every target once, equal blocks
    assert [int(b["chars"]) for b in blocks] == tokens  # a char tokenizer: one character per token
    weighted = sum(float(b["loss"]) * n for b, n in zip(blocks, tokens)) / sum(tokens)
    assert weighted == pytest.approx(summary["best_test_loss"], rel=1e-9)
    assert weighted == pytest.approx(independent_test_loss(tmp_path / "run", corpus, 0.05), rel=1e-5)
    assert len({round(float(b["loss"]), 6) for b in blocks}) > 5  # per-block losses, not one number copied
    assert not (tmp_path / "plain").exists()
    train_run(resolve_run_config(split_config(corpus, 0.0)), tmp_path / "plain")
    assert not (tmp_path / "plain" / "test_blocks.csv").exists()  # no test split, no blocks
