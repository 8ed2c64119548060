"""Runs that finished but did not learn are `collapsed`: the rule, the runner, old summaries read under it, the sweep's
display and exit status, and the report's stability table (and no effect takes their loss)."""
from __future__ import annotations

import csv
import io
import json
import logging
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from fakes import write_spec
from helpers import REPO, skip_figures, tiny_config

from gptlab.executors import RunResult
from gptlab.report import write_report
from gptlab.report.load import load_results
from gptlab.report.load.runfiles import read_metrics
from gptlab.run.data import load_dataset, unigram_loss, unigram_val_loss
from gptlab.run.reclassify import unigram_of
from gptlab.run.rundir import RunDir
from gptlab.stats.picks import Trial, pick_rows
from gptlab.statuses import (
    COLLAPSED,
    DIVERGED,
    FAILED,
    FAILED_TO_TRAIN,
    FINISHED,
    MIN_ROWS,
    OK,
    STATUS_RULE,
    STATUSES,
    UNSTABLE,
    Verdict,
    classify,
    judge,
    row_noise,
)
from gptlab.sweep.progress import Progress
from gptlab.sweep.spec import load_spec
from gptlab.sweep_cli import main as sweep_main

NEVER_TRAINS = 1e-9  # an lr at which 40 steps leave the tiny model where it started (worse than the unigram loss)


# -- the rule ------------------------------------------------------------------------------------

PLATEAU = 3.31  # a training split's unigram loss (nats/char)


def noisy(values, sd=0.01, seed=0):
    rng = np.random.default_rng(seed)
    return (np.asarray(values, dtype=float) + sd * rng.standard_normal(len(values))).tolist()


def test_a_run_still_descending_near_the_unigram_loss_is_ok_whatever_its_level():
    # a 60-step smoke run: from 4.17 to 3% below the unigram loss, still falling (the 5% margin called it collapsed)
    smoke = noisy(np.linspace(3.9, PLATEAU * 0.97, 12), sd=0.01)
    assert judge(smoke, PLATEAU) == Verdict(OK)
    assert judge(noisy(np.linspace(4.1, 3.6, 12)), PLATEAU).status == OK  # above the plateau, but falling
    assert classify(OK, smoke, PLATEAU).status == OK


def test_a_run_stuck_on_the_plateau_is_collapsed_whatever_its_siblings_did():
    stuck = noisy([4.1, 3.5] + [PLATEAU + 0.002] * 14, sd=0.01)
    verdict = judge(stuck, PLATEAU)
    assert verdict.status == COLLAPSED and "unigram plateau" in verdict.note and "3.3100" in verdict.note
    assert judge(noisy([4.1, 3.5] + [PLATEAU + 0.5] * 14), PLATEAU).status == COLLAPSED  # worse than unigram, flat
    assert judge(stuck, None).status == OK  # no plateau known: nothing is collapsed
    # a plateau far below the unigram loss is a measurement (study 8's SwiGLU seed 2: 2.4 nats, slowly falling)
    assert judge(noisy([3.6, 2.9] + [2.5] * 14), PLATEAU).status == OK


def test_a_run_that_blew_up_and_stayed_is_unstable_and_one_that_came_back_is_ok():
    learn = np.linspace(3.5, 2.0, 20)
    blown = noisy(np.concatenate([learn, np.full(12, 2.4)]), sd=0.01)
    verdict = judge(blown, PLATEAU)
    assert verdict.status == UNSTABLE and "blew up" in verdict.note
    spike = np.concatenate([learn, [2.5, 2.3, 2.1], np.linspace(1.98, 1.9, 9)])
    assert judge(noisy(spike, sd=0.01), PLATEAU).status == OK
    onto = noisy(np.concatenate([learn, np.full(12, PLATEAU)]), sd=0.01)
    assert judge(onto, PLATEAU).status == COLLAPSED  # blown up onto the plateau: stuck comes first


def test_a_curve_too_short_to_judge_is_ok_and_other_statuses_are_kept():
    assert judge([4.1] + [PLATEAU] * (MIN_ROWS - 2), PLATEAU).status == OK
    assert judge([4.1] + [PLATEAU] * (MIN_ROWS - 1), PLATEAU).status == COLLAPSED
    assert classify(DIVERGED, [4.0] * 20, PLATEAU) == Verdict(DIVERGED)  # a non-finite run stays diverged
    assert classify(FAILED, [], PLATEAU) == Verdict(FAILED)
    assert set(FAILED_TO_TRAIN) == {DIVERGED, COLLAPSED, UNSTABLE} and set(FINISHED) == set(STATUSES) - {FAILED}
    assert judge([math.nan, math.inf] + [2.0 - 0.01 * i for i in range(10)], PLATEAU).status == OK  # finite rows


def test_the_row_noise_is_the_curves_own_and_ignores_one_jump():
    rng = np.random.default_rng(3)
    for sd in (0.003, 0.03):
        curve = np.linspace(3.0, 1.8, 60) + sd * rng.standard_normal(60)
        assert row_noise(curve.tolist()) == pytest.approx(sd, rel=0.35)
        jumped = curve.copy()
        jumped[45:] += 0.5
        assert row_noise(jumped.tolist()) == pytest.approx(sd, rel=0.5)


def test_the_shipped_swiglu_seed_that_lagged_from_its_first_rows_is_ok():
    """Study 8's SwiGLU seed 2 at 8e-3: 2.94 at step 100, still falling at 2.42 at its end; the 10% `unstable` cut on
    its loss against its siblings' left it out, its own curve shows no failure."""
    rows = read_metrics(REPO / "results/scorecard/runs/swiglu-0.008_s2_d2f4c558da/metrics.csv")
    assert judge(rows["train_loss"].tolist(), 3.309) == Verdict(OK)


def test_a_collapsed_selection_run_rules_its_setting_out_like_a_diverged_one():
    cell, lrs = (("model.norm", "post"),), [(("train.lr", v),) for v in (1e-3, 2e-3)]
    trials = [Trial(cell, lrs[0], "ok", 2.0), Trial(cell, lrs[1], COLLAPSED, 1.0)]  # its loss is never a number
    rows = pick_rows(trials, [cell], lrs, {"train.lr": [1e-3, 2e-3]})
    assert [(r.picked, r.n_diverged, r.n_ok) for r in rows] == [(True, 0, 1), (False, 1, 0)]


def test_the_unigram_loss_has_one_formula(corpus):
    data = load_dataset("tiny", str(corpus))
    assert unigram_loss(data) == pytest.approx(unigram_val_loss("tiny", str(corpus)), rel=1e-12)


# -- a real sweep with an lr that cannot train -----------------------------------------------------

@pytest.fixture(scope="module")
def sweep(tmp_path_factory, corpus):
    root = tmp_path_factory.mktemp("collapse")
    spec = write_spec(root, corpus, {"train.lr": [3e-3, NEVER_TRAINS]}, seeds=2,
                      train={"min_lr": 0.0, "log_interval": 5})  # 8 rows: a curve long enough to judge
    with pytest.MonkeyPatch.context() as mp:
        skip_figures(mp)
        code = sweep_main([str(spec), "--results-dir", str(root / "results"), "--reports-dir", str(root / "reports")])
    return root, code


@pytest.mark.slow
def test_runs_that_cannot_train_are_collapsed_everywhere_and_in_no_effect(sweep, corpus):
    root, code = sweep
    assert code == 0  # a collapsed run is a result, not an error
    results = root / "results" / "t"
    with open(results / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    status = {(r["train.lr"], r["seed"]): r["status"] for r in rows}
    assert status == {("0.003", "0"): OK, ("0.003", "1"): OK, ("1e-09", "0"): COLLAPSED, ("1e-09", "1"): COLLAPSED}
    unigram = unigram_val_loss("tiny", str(corpus))
    plateau = unigram_val_loss("tiny", str(corpus), split="train")
    for r in rows:
        summary = json.loads((results / "runs" / r["run_id"] / RunDir.SUMMARY).read_text())
        assert summary["status"] == r["status"] and summary["unigram_val_loss"] == pytest.approx(unigram)
        assert summary["unigram_train_loss"] == pytest.approx(plateau) and summary["status_rule"] == STATUS_RULE
        assert ("stuck on the unigram plateau" in r["error"]) == (r["status"] == COLLAPSED)
    tables = root / "reports" / "t" / "tables"
    stability = pd.read_csv(tables / "stability.csv")
    assert stability.set_index("cell")[["runs", "n_ok", "n_collapsed", "n_diverged", "n_reclassified"]].to_dict(
        "index") == {"lr=0.003": {"runs": 2, "n_ok": 2, "n_collapsed": 0, "n_diverged": 0, "n_reclassified": 0},
                     "lr=1e-09": {"runs": 2, "n_ok": 0, "n_collapsed": 2, "n_diverged": 0, "n_reclassified": 0}}
    cells = pd.read_csv(tables / "cells.csv").set_index("cell")
    assert cells.loc["lr=1e-09", "n_seeds"] == 0 and cells.loc["lr=1e-09", "n_diverged"] == 2  # failed to train: 2
    assert not pd.read_csv(tables / "main_effects.csv")["estimate"].notna().any()  # no ok run: no effect of lr
    report = (root / "reports" / "t" / "report.md").read_text()
    assert "lr=1e-09: 2 of 2 estimation runs did not train (2 collapsed)" in report
    assert report.index("## Stability") < report.index("## Cells")


@pytest.mark.slow
def test_an_old_summary_is_reclassified_on_read_and_its_file_is_left_as_it_was(sweep, tmp_path):
    root, _ = sweep
    results = root / "results" / "t"
    run_id = next(r for r in load_results(results).runs.to_dict("records") if r["status"] == COLLAPSED)["run_id"]
    folder = RunDir(results / "runs" / run_id)
    old = {k: v for k, v in folder.summary().to_dict().items()
           if k not in ("unigram_train_loss", "status_rule")}  # an older rule's
    (folder / RunDir.SUMMARY).write_text(json.dumps({**old, "status": OK, "error": None}))
    before = (folder / RunDir.SUMMARY).read_bytes()
    read = folder.summary()
    assert read.status == COLLAPSED and read.reclassified is True and "unigram plateau" in read.error
    assert folder.state() == COLLAPSED and folder.finished_summary() is not None
    assert (folder / RunDir.SUMMARY).read_bytes() == before  # nothing written
    res = load_results(results)
    assert res.runs.set_index("run_id").loc[run_id, "status"] == COLLAPSED
    assert res.runs["reclassified"].sum() == 1
    report = write_report(results, tmp_path / "reports")
    stability = pd.read_csv(report / "tables" / "stability.csv")
    assert stability["n_reclassified"].sum() == 1 and stability["n_collapsed"].sum() == 2
    assert "1 run(s) recorded under an earlier status rule read otherwise under today's" in (
        report / "report.md").read_text()
    assert (folder / RunDir.SUMMARY).read_bytes() == before


def write_old_run(folder: RunDir, config: dict, status: str, train: list[float]) -> None:
    """A run folder as an earlier rule left it: its summary has no `status_rule`; metrics.csv holds `train`."""
    folder.path.mkdir()
    (folder / RunDir.CONFIG).write_text(yaml.safe_dump(config))
    (folder / RunDir.SUMMARY).write_text(json.dumps({"run_id": folder.path.name, "status": status,
                                                     "best_val_loss": train[-1], "error": "did not learn: ..."}))
    folder.write_metrics([{"step": 10 * (i + 1), "train_loss": v} for i, v in enumerate(train)])


def test_an_old_summary_that_learned_or_whose_corpus_is_gone_keeps_its_status(tmp_path, corpus, caplog):
    plateau = unigram_val_loss("tiny", str(corpus), split="train")
    learning = noisy(np.linspace(plateau + 0.5, plateau * 0.97, 12), sd=0.005)  # the 5% margin's `collapsed`
    for name, path, status in (("learned", str(corpus), OK), ("gone", str(tmp_path / "gone.txt"), OK),
                               ("smoke", str(corpus), COLLAPSED)):
        folder = RunDir(tmp_path / name)
        write_old_run(folder, tiny_config(corpus) | {"data": {"path": path}}, status, learning)
        with caplog.at_level(logging.WARNING, logger="gptlab"):
            read = folder.summary()
        if name == "smoke":  # judged again from its own curve: still descending, so a measurement
            assert read.status == OK and read.reclassified is True and read.error is None
        else:
            assert read.status == OK and "reclassified" not in read.order
    assert sum("read with the status they recorded" in r.message for r in caplog.records) == 1  # logged once
    unigram_of.cache_clear()


# -- the live display ----------------------------------------------------------------------------

def test_the_live_display_counts_collapsed_runs_apart(tmp_path, corpus):
    spec = load_spec(write_spec(tmp_path, corpus, {"train.lr": [3e-3, 1e-3, 2e-3]}, seeds=1))
    out = io.StringIO()
    progress = Progress(spec.runs, spec.runs, tmp_path / "results", workers=1, stream=out, every_s=3600, live=False)
    progress.finished(RunResult(spec.runs[0].run_id, {"status": COLLAPSED, "best_val_loss": 3.3}, 1.0))
    progress.finished(RunResult(spec.runs[1].run_id, {"status": OK, "best_val_loss": 2.0}, 1.0))
    progress.finished(RunResult(spec.runs[2].run_id, {"status": COLLAPSED, "best_val_loss": 3.4}, 1.0))
    lines = out.getvalue().splitlines()
    assert ": collapsed, best val 3.3000" in lines[0] and lines[0].endswith(", 1 collapsed")
    assert lines[2].endswith(", 2 collapsed") and "diverged" not in out.getvalue()
    assert "3/3 runs finished, 2 collapsed, 0 in flight" in str(progress._table([]).renderables[0])
