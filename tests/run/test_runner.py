"""One training run: determinism, exact resume after a kill, divergence, schedule, CLI errors."""
from __future__ import annotations

import csv
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from helpers import REPO, tiny_config, with_dataset

from gptlab.model import GPT, ModelConfig, build_model
from gptlab.run.config import TrainConfig, resolve_run_config
from gptlab.run.corpora import DATASETS, DatasetSource
from gptlab.run.data import load_run_dataset
from gptlab.run.runner import train_run
from gptlab.run.trainer import Trainer, lr_at, make_optimizer
from gptlab.sample import sample_from_run
from gptlab.train import main as train_main

LOSS_COLUMNS = ("step", "train_loss", "val_loss", "grad_norm", "lr", "tokens")


def metric_rows(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.csv") as f:
        return [{k: row[k] for k in LOSS_COLUMNS} for row in csv.DictReader(f)]


def test_run_writes_the_results_layout_and_learns(corpus, tmp_path):
    summary = train_run(resolve_run_config(tiny_config(corpus)), tmp_path / "run")
    run = tmp_path / "run"
    for name in ("config.yaml", "metrics.csv", "summary.json", "ckpt_best.pt", "ckpt_last.pt", "train.log"):
        assert (run / name).is_file(), name
    assert summary["status"] == "ok" and summary["error"] is None
    rows = metric_rows(run)
    assert [int(r["step"]) for r in rows] == [10, 20, 30, 40]
    assert [bool(r["val_loss"]) for r in rows] == [False, True, False, True]
    vocab = len(set(corpus.read_text()))
    assert summary["best_val_loss"] < math.log(vocab) - 0.5  # well below a uniform guess
    assert summary["best_val_loss"] == min(float(r["val_loss"]) for r in rows if r["val_loss"])
    assert summary["params"] == build_model(ModelConfig(vocab_size=vocab, block_size=32, n_layer=2, n_head=2,
                                                        n_embd=32)).num_params()
    assert yaml.safe_load((run / "config.yaml").read_text()) == resolve_run_config(tiny_config(corpus)).to_dict()
    assert "finished: ok" in (run / "train.log").read_text()


def test_same_seed_gives_identical_losses_and_another_seed_does_not(corpus, tmp_path):
    train_run(resolve_run_config(tiny_config(corpus)), tmp_path / "a")
    train_run(resolve_run_config(tiny_config(corpus)), tmp_path / "b")
    other = tiny_config(corpus)
    other["seed"] = 1
    train_run(resolve_run_config(other), tmp_path / "c")
    assert metric_rows(tmp_path / "a") == metric_rows(tmp_path / "b")
    assert metric_rows(tmp_path / "a") != metric_rows(tmp_path / "c")


def test_finished_run_is_returned_not_retrained(corpus, tmp_path):
    first = train_run(resolve_run_config(tiny_config(corpus)), tmp_path / "run")
    mtime = (tmp_path / "run" / "ckpt_last.pt").stat().st_mtime_ns
    assert train_run(resolve_run_config(tiny_config(corpus)), tmp_path / "run") == first
    assert (tmp_path / "run" / "ckpt_last.pt").stat().st_mtime_ns == mtime


def _train_cli(config_path: Path, out: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "gptlab.train", "--config", str(config_path), "--out", str(out)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_run_killed_after_a_checkpoint_resumes_to_the_same_losses(corpus, tmp_path):
    config = tiny_config(corpus, max_iters=150, eval_interval=20, log_interval=10)
    config["model"]["dropout"] = 0.1  # the dropout masks after a resume come from the restored RNG state
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))

    # The uninterrupted reference trains alongside the victim: one thread each, on two cores.
    reference = _train_cli(config_path, tmp_path / "reference")
    victim = _train_cli(config_path, tmp_path / "killed")
    metrics = tmp_path / "killed" / "metrics.csv"
    deadline = time.time() + 300  # a bound, not a budget: under xdist on a busy machine startup alone takes long
    while time.time() < deadline and victim.poll() is None:  # wait for the evaluation (and checkpoint) of step 40
        if metrics.exists() and any(r["step"] == "40" and r["val_loss"] for r in csv.DictReader(metrics.open())):
            break
        time.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    assert not (tmp_path / "killed" / "summary.json").exists(), "the run finished before it could be killed"
    step = torch.load(tmp_path / "killed" / "ckpt_last.pt", weights_only=True)["step"]
    assert 20 <= step < 150  # the kill may land between step 40's metrics row and its checkpoint
    assert reference.wait(timeout=300) == 0, reference.stderr.read().decode()

    assert train_main(["--config", str(config_path), "--out", str(tmp_path / "killed")]) == 0  # resumed here
    assert metric_rows(tmp_path / "killed") == metric_rows(tmp_path / "reference")
    assert "resumed" in (tmp_path / "killed" / "train.log").read_text()


def test_non_finite_loss_ends_the_run_as_diverged(corpus, tmp_path, monkeypatch):
    original = GPT.forward
    calls = {"n": 0}

    def poisoned(self, idx, targets=None):
        logits, loss = original(self, idx, targets)
        if self.training and targets is not None:
            calls["n"] += 1
            if calls["n"] > 25:  # from the 26th training step on
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(GPT, "forward", poisoned)
    summary = train_run(resolve_run_config(tiny_config(corpus)), tmp_path / "run")
    assert summary["status"] == "diverged"
    assert summary["diverged_step"] == 26
    assert "step 26" in summary["error"]
    assert summary["best_step"] == 20 and summary["best_val_loss"] is not None  # kept, not dropped
    rows = metric_rows(tmp_path / "run")
    assert int(rows[-1]["step"]) == 30 and rows[-1]["train_loss"] == "nan"


def test_learning_rate_warms_up_linearly_then_follows_a_cosine_to_min_lr():
    cfg = TrainConfig(max_iters=1000, lr=1e-3, min_lr=1e-4, warmup_iters=100)
    assert lr_at(0, cfg) == pytest.approx(1e-3 / 101)
    assert lr_at(99, cfg) == pytest.approx(1e-3 * 100 / 101)
    assert lr_at(100, cfg) == pytest.approx(1e-3)
    assert lr_at(550, cfg) == pytest.approx((1e-3 + 1e-4) / 2)
    assert lr_at(1000, cfg) == pytest.approx(1e-4)
    steps = [lr_at(s, cfg) for s in range(100, 1001)]
    assert all(a >= b for a, b in zip(steps, steps[1:]))
    assert lr_at(0, TrainConfig(warmup_iters=0)) == pytest.approx(1e-3)


def test_weight_decay_only_on_matrices_and_tied_matrix_optimised_once():
    model = build_model(ModelConfig(vocab_size=20, block_size=8, n_layer=1, n_head=2, n_embd=16, bias=True))
    opt = make_optimizer(model, TrainConfig(), torch.device("cpu"))
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(ids) == len(set(ids)) and model.transformer.wte.weight in decay["params"]
    assert sum(p.numel() for g in opt.param_groups for p in g["params"]) == model.num_params()


def test_sampling_from_a_checkpoint_is_reproducible(corpus, tmp_path):
    train_run(resolve_run_config(tiny_config(corpus)), tmp_path / "run")
    a = sample_from_run(tmp_path / "run", prompt="The", max_new_tokens=50, seed=3)
    assert a == sample_from_run(tmp_path / "run", prompt="The", max_new_tokens=50, seed=3)
    assert a != sample_from_run(tmp_path / "run", prompt="The", max_new_tokens=50, seed=4)
    assert len(a) == 50 and set(a) <= set(corpus.read_text())
    with pytest.raises(FileNotFoundError):
        sample_from_run(tmp_path, prompt="x")


@pytest.mark.parametrize("joined", [lambda text: text.replace("\n", " "),  # a user's corpus with its lines joined
                                    lambda text: "".join(random.Random(0).choice("ab") for _ in text)],
                         ids=["lines-joined", "random-ab"])
def test_a_corpus_without_a_newline_trains_to_its_sample_and_the_cli_samples_it(corpus, tmp_path, joined, capsys):
    from gptlab.sample import main as sample_main

    text = joined(corpus.read_text())
    (tmp_path / "joined.txt").write_text(text)
    summary = train_run(resolve_run_config(tiny_config(tmp_path / "joined.txt", max_iters=10, eval_interval=5)),
                        tmp_path / "run")
    assert summary["status"] in ("ok", "collapsed"), summary["error"]  # random a/b has nothing to learn past its unigram
    sample = (tmp_path / "run" / "sample.txt").read_text()
    assert len(sample) == 200 and set(sample) <= set(text)
    assert sample_main([str(tmp_path / "run"), "--tokens", "5"]) == 0  # the default prompt: a token the corpus has
    shown = capsys.readouterr().out
    assert len(shown) == 1 + 5 + 1 and set(shown[:-1]) <= set(text)  # prompt, tokens, print's newline
    assert sample_main([str(tmp_path / "run"), "--prompt", "~"]) == 2  # a prompt of the user's is theirs to fix
    err = capsys.readouterr().err.strip()
    assert err == "error: character '~' is not in the vocabulary"


@pytest.mark.parametrize("flags, message", [
    (["--model.norm", "prenorm"], "model.norm: unknown norm 'prenorm' (did you mean 'pre'?); valid: pre, post"),
    (["--model.n_embd", "130"], "model.n_embd (130) must be divisible by model.n_head (4)"),
    (["--train.lr", "fast"], "train.lr must be float, got 'fast'"),
])
def test_cli_bad_input_is_one_line(flags, message, capsys, tmp_path):
    assert train_main(flags + ["--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "run").exists()


def test_cli_refuses_a_population_members_config(capsys, tmp_path, corpus):
    """A member's config.yaml (`population: true`) names a run trained in a population; the CLI trains alone, so it
    would write a lone run under the member's id: one line says so, and nothing is written."""
    config_path = tmp_path / "member.yaml"
    config_path.write_text(yaml.safe_dump({**tiny_config(corpus), "population": True}))
    assert train_main(["--config", str(config_path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: population: true marks a run trained in a population") and "\n" not in err
    assert not (tmp_path / "run").exists()


def test_cli_missing_dataset_offline_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("GPTLAB_DATA_DIR", raising=False)
    with_dataset(monkeypatch, "tinyshakespeare",
                 DatasetSource("http://127.0.0.1:9/input.txt", DATASETS.get("tinyshakespeare").sha256))
    assert train_main(["--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "dataset 'tinyshakespeare' not found" in err and "\n" not in err
    # the variable the README relies on is named, with the file to put under it
    assert "tinyshakespeare/input.txt under $GPTLAB_DATA_DIR (unset)" in err and "data.path" in err


@pytest.mark.slow
def test_cli_corrupted_dataset_exits_non_zero_without_traceback(tmp_path):
    data_dir = tmp_path / "data"
    (data_dir / "tinyshakespeare").mkdir(parents=True)
    (data_dir / "tinyshakespeare" / "input.txt").write_text("not shakespeare")
    env = {**os.environ, "GPTLAB_DATA_DIR": str(data_dir), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "gptlab.train", "--out", str(tmp_path / "run")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "is not the published file" in proc.stderr


def test_train_help_names_each_registry_entry_and_every_default(capsys):
    from gptlab.train import build_parser

    text = " ".join(build_parser().format_help().split())
    assert "one of: pre, post, sandwich, none; default: pre" in text
    assert "one of: layernorm, rmsnorm" in text and "REGISTRIES[" not in text
    assert "default: tinyshakespeare" in text and "default: 2000" in text  # data.dataset, train.max_iters


def test_sample_points_from_a_sweep_folder_to_its_runs_and_refuses_eval_on_a_run(tmp_path, capsys):
    from gptlab.sample import main as sample_main

    (tmp_path / "runs" / "a-run_s0_123").mkdir(parents=True)
    assert sample_main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "a sweep's results folder: give one of its runs, e.g." in err and "runs/a-run_s0_123" in err
    with pytest.raises(SystemExit) as exit_:
        sample_main([str(tmp_path / "runs" / "a-run_s0_123"), "--eval"])
    assert exit_.value.code == 2 and "--eval works with --nanogpt-ckpt" in capsys.readouterr().err


def test_a_state_is_a_snapshot_two_trainers_loaded_from_it_keep_their_own_rows(corpus):
    """A trunk's state handed to two branches: neither the trunk nor a branch grows the others' rows."""
    cfg = resolve_run_config({**tiny_config(corpus, max_iters=4, log_interval=1, eval_interval=2), "seed": 0})
    dataset = load_run_dataset(cfg.data)
    cfg = cfg.bind_vocab(dataset.tokenizer.vocab_size)
    trunk = Trainer(cfg, dataset, torch.device("cpu"))
    trunk.run()
    state = trunk.state_dict()
    kept = len(state["rows"])
    trunk.rows.append({"step": -1})
    assert len(state["rows"]) == kept
    first, second = Trainer(cfg, dataset, torch.device("cpu")), Trainer(cfg, dataset, torch.device("cpu"))
    first.load_state_dict(state)
    second.load_state_dict(state)
    first.rows.append({"step": -2})
    assert len(state["rows"]) == kept and len(second.rows) == kept


def test_a_damaged_best_checkpoint_samples_from_the_last_and_never_fails_the_run(tmp_path, monkeypatch, caplog):
    from gptlab.errors import GptlabError
    from gptlab.run import sampling
    from gptlab.run.rundir import RunDir
    from gptlab.run.runner import write_sample

    folder = RunDir(tmp_path / "run")
    folder.path.mkdir()
    (folder / RunDir.BEST).write_bytes(b"not a checkpoint")
    (folder / RunDir.LAST).write_bytes(b"stands for a good one")

    def sample(path, which="best"):
        if which == "best":
            raise GptlabError(f"{path}/ckpt_best.pt is not a gptlab checkpoint")
        return "text from the last checkpoint"

    monkeypatch.setattr(sampling, "sample_from_run", sample)
    write_sample(folder)
    assert (folder / RunDir.SAMPLE).read_text() == "text from the last checkpoint"
    assert "no sample from ckpt_best.pt" in caplog.text
    (folder / RunDir.SAMPLE).unlink()
    monkeypatch.setattr(sampling, "sample_from_run", lambda path, which="best": (_ for _ in ()).throw(OSError("bad")))
    write_sample(folder)  # neither readable: no sample, no exception
    assert not (folder / RunDir.SAMPLE).exists()
