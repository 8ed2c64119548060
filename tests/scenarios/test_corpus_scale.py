"""A corpus as a scale factor: every arm tuned on each text, effects per text in bits per character, and the
unpaired change of each effect from one text to the other (`stats.transfer`), checked against both texts' picks."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from fakes import tuned_arms_spec
from helpers import make_corpus, skip_figures, tiny_config

from gptlab.stats.robustness import DEPENDS
from gptlab.stats.transfer import TRANSFER_CALLS, UNPAIRED


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("texts")
    prose = folder / "prose.txt"  # a second text with other words and longer lines: not the first one reshuffled
    words = "it is a truth universally acknowledged that a single man in possession of good fortune".split()
    rng = np.random.default_rng(1)
    prose.write_text("\n".join(" ".join(rng.choice(words, 14)).capitalize() + "." for _ in range(260)),
                     encoding="utf-8")
    return make_corpus(folder / "verse.txt"), prose


@pytest.mark.slow
def test_a_tuned_arms_sweep_over_two_texts(tmp_path, texts, monkeypatch, capsys):
    from gptlab.sweep_cli import main as sweep_main

    skip_figures(monkeypatch)
    verse, prose = texts
    config = tiny_config(verse, eval_interval=8)
    config["model"].update(n_layer=1, n_embd=16, block_size=16)
    config["data"] = {"test_fraction": 0.05}
    for key in ("lr", "max_iters"):
        config["train"].pop(key)
    config["train"]["max_iters"] = 32  # enough for the tiny model to learn on both texts (16 leaves prose collapsed)
    raw = tuned_arms_spec("texts", config, {"data.path": [str(verse), str(prose)]})
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    args = [str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results"),
            "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main(args + ["--dry-run"]) == 0
    texts_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("texts: "))
    assert str(verse) in texts_line and str(prose) in texts_line and "train 90%, val 5%, test 5%" in texts_line
    assert sweep_main(args) == 0
    results = tmp_path / "results" / "texts"
    summary = pd.read_csv(results / "summary.csv")
    tuning = pd.read_csv(results / "tuning.csv")
    picks = tuning[tuning["picked"].astype(bool)]
    assert len(picks) == 6 and set(picks["data.path"]) == {str(verse), str(prose)}  # each arm tuned on each text
    tables = tmp_path / "reports" / "texts" / "tables"

    # per text, in bits per character: the arm's mean test bpc minus the baseline's, from the runs themselves
    arms = pd.read_csv(tables / "arms.csv")
    est = summary[(summary["role"] == "estimation") & (summary["status"] == "ok")]
    means = est.groupby(["arm", "data.path"])["best_test_bpc"].mean()
    for r in arms.to_dict("records"):
        expected = means[(r["arm"], r["scale_level"])] - means[("nanogpt", r["scale_level"])]
        assert r["estimate"] == pytest.approx(expected, abs=1e-4)
        assert not math.isclose(expected, expected * math.log(2), abs_tol=1e-4)  # bits, not nats
    report = (tmp_path / "reports" / "texts" / "report.md").read_text()
    assert "bits/char" in report
    # the tuning check of each arm on each text, never of an average over the two texts
    checks = [line for line in report.splitlines() if line.startswith("- Tuning check: ")]
    assert len(checks) == 4 and all(" at data.path=" in line or " at path=" in line for line in checks), checks

    changes = pd.read_csv(tables / "effect_changes.csv")
    assert sorted(changes["level"]) == ["post_ln", "relu"] and (changes["pairing"] == UNPAIRED).all()
    assert set(changes["call"]) <= set(TRANSFER_CALLS) | {DEPENDS}
    for r in changes.to_dict("records"):
        at = arms.set_index(["arm", "scale_level"])["estimate"]
        assert r["effect_at_reference"] == pytest.approx(at[(r["level"], str(verse))], abs=1e-4)
        assert r["effect_at_level"] == pytest.approx(at[(r["level"], str(prose))], abs=1e-4)
        assert r["change"] == pytest.approx(r["effect_at_level"] - r["effect_at_reference"], abs=2e-4)
        assert r["ci_low"] < r["change"] < r["ci_high"] and r["df"] > 0
    card = pd.read_csv(tables / "scorecard.csv")
    assert "transfer" in card and card.loc[card["scale_level"] == str(verse), "transfer"].isna().all()
    assert set(card.loc[card["scale_level"] == str(prose), "transfer"]) <= set(TRANSFER_CALLS) | {DEPENDS}


def _grid_spec(folder, name: str, verse, prose=None) -> str:
    config = tiny_config(verse, max_iters=24, eval_interval=8, lr=2e-2, min_lr=1e-3)  # learns: no run collapses
    config["model"].update(n_layer=1, n_embd=16, block_size=16)
    raw = {"name": name, "base": {k: config[k] for k in ("model", "train", "data")},
           "grid": {"model.activation": ["gelu", "relu"]}, "seeds": [0, 1],
           "executor": {"backend": "loky", "n_jobs": 2}}
    if prose is not None:
        raw["base"]["data"] = {"dataset": "tiny"}
        raw["grid"]["data.path"] = [str(verse), str(prose)]
        raw["scale"] = ["data.path"]
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


@pytest.mark.slow
def test_reuse_takes_finished_runs_of_the_same_identity_and_trains_the_rest(tmp_path, texts, monkeypatch, capsys):
    import json

    from gptlab.sweep_cli import main as sweep_main

    skip_figures(monkeypatch)
    verse, prose = texts
    where = ["--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main([_grid_spec(tmp_path, "one", verse)] + where) == 0
    one = tmp_path / "results" / "one"
    before = {p.name: (p / "summary.json").read_text() for p in (one / "runs").iterdir()}
    capsys.readouterr()
    both = [_grid_spec(tmp_path, "both", verse, prose)] + where + ["--reuse", str(one)]
    assert sweep_main(both + ["--dry-run"]) == 0
    assert "reuse: 4 of the 8 are finished in" in capsys.readouterr().out
    assert sweep_main(both) == 0
    err = capsys.readouterr().err
    assert "reused 4 finished run(s)" in err and "4 already finished, 4 to train" in err
    summary = pd.read_csv(tmp_path / "results" / "both" / "summary.csv")
    old = pd.read_csv(one / "summary.csv")
    mine = summary[summary["data.path"] == str(verse)].sort_values(["model.activation", "seed"])
    old = old.sort_values(["model.activation", "seed"])
    assert mine["best_test_loss" if "best_test_loss" in mine else "best_val_loss"].tolist() == \
        old["best_test_loss" if "best_test_loss" in old else "best_val_loss"].tolist()
    assert [r.rpartition("_s")[2] for r in mine["run_id"]] == [r.rpartition("_s")[2] for r in old["run_id"]]
    assert set(mine["run_id"]).isdisjoint(old["run_id"])  # the cell's label changed: a copy under its new id
    for run_id in mine["run_id"]:
        copied = json.loads((tmp_path / "results" / "both" / "runs" / run_id / "summary.json").read_text())
        assert copied["run_id"] == run_id and copied["reused_from"].startswith(str(one.resolve()))
    assert {p.name: (p / "summary.json").read_text() for p in (one / "runs").iterdir()} == before  # source intact
    assert (summary["status"] == "ok").all() and len(summary) == 8


@pytest.mark.parametrize("target, message", [("absent", "is not a sweep's results folder"),
                                             ("own", "is this sweep's own results folder")])
def test_reuse_of_a_folder_that_cannot_serve_is_one_line(tmp_path, texts, capsys, target, message):
    from gptlab.sweep_cli import main as sweep_main

    spec = _grid_spec(tmp_path, "g", texts[0])
    own = tmp_path / "results" / "g"
    (own / "runs").mkdir(parents=True)
    folder = own if target == "own" else tmp_path / "nothing"
    assert sweep_main([spec, "--results-dir", str(tmp_path / "results"), "--reuse", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err and list((own / "runs").iterdir()) == []
