"""Runs that finished but did not learn are `collapsed`: the rule, the runner, old summaries read under it, the sweep's
display and exit status, and the report's stability table (and no effect takes their loss)."""
from __future__ import annotations

import csv
import io
import json
import logging
import math

import pandas as pd
import pytest
import yaml
from fakes import write_spec
from helpers import skip_figures, tiny_config

from gptlab.executors import RunResult
from gptlab.report import write_report
from gptlab.report.load import load_results
from gptlab.run.data import load_dataset, unigram_loss, unigram_val_loss
from gptlab.run.reclassify import unigram_of
from gptlab.run.rundir import RunDir
from gptlab.stats.picks import Trial, pick_rows
from gptlab.statuses import (
    COLLAPSE_MARGIN,
    COLLAPSED,
    DIVERGED,
    FAILED_TO_TRAIN,
    FINISHED,
    OK,
    STATUSES,
    UNSTABLE,
    classify,
    collapse_note,
    is_collapsed,
)
from gptlab.sweep.progress import Progress
from gptlab.sweep.spec import load_spec
from gptlab.sweep_cli import main as sweep_main

NEVER_TRAINS = 1e-9  # an lr at which 40 steps leave the tiny model where it started (worse than the unigram loss)


# -- the rule ------------------------------------------------------------------------------------

def test_the_rule_on_both_sides_of_the_margin():
    unigram = 3.0
    just_learned = unigram * (1 - COLLAPSE_MARGIN) - 1e-6
    just_not = unigram * (1 - COLLAPSE_MARGIN) + 1e-6
    assert not is_collapsed(just_learned, unigram) and is_collapsed(just_not, unigram)
    assert is_collapsed(unigram, unigram) and is_collapsed(4.2, unigram)  # at the unigram loss, or worse
    assert not is_collapsed(None, unigram) and not is_collapsed(math.nan, unigram) and not is_collapsed(2.0, None)
    assert classify(OK, just_not, unigram) == COLLAPSED and classify(OK, just_learned, unigram) == OK
    assert classify(DIVERGED, 4.0, unigram) == DIVERGED  # a non-finite run stays diverged
    assert COLLAPSED in FINISHED and set(FAILED_TO_TRAIN) == {DIVERGED, COLLAPSED, UNSTABLE}
    assert UNSTABLE not in STATUSES  # given on read, never written
    assert "3.0000" in collapse_note(3.01, unigram) and "above it" in collapse_note(3.01, unigram)


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
    spec = write_spec(root, corpus, {"train.lr": [3e-3, NEVER_TRAINS]}, seeds=2, train={"min_lr": 0.0})
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
    for r in rows:
        summary = json.loads((results / "runs" / r["run_id"] / RunDir.SUMMARY).read_text())
        assert summary["status"] == r["status"] and summary["unigram_val_loss"] == pytest.approx(unigram)
        assert ("does not beat the unigram loss" in r["error"]) == (r["status"] == COLLAPSED)
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
    old = {k: v for k, v in folder.summary().items() if k != "unigram_val_loss"}  # as written before the rule
    (folder / RunDir.SUMMARY).write_text(json.dumps({**old, "status": OK, "error": None}))
    before = (folder / RunDir.SUMMARY).read_bytes()
    read = folder.summary()
    assert read["status"] == COLLAPSED and read["reclassified"] is True and "unigram loss" in read["error"]
    assert folder.state() == COLLAPSED and folder.finished_summary() is not None
    assert (folder / RunDir.SUMMARY).read_bytes() == before  # nothing written
    res = load_results(results)
    assert res.runs.set_index("run_id").loc[run_id, "status"] == COLLAPSED
    assert res.runs["reclassified"].sum() == 1
    report = write_report(results, tmp_path / "reports")
    stability = pd.read_csv(report / "tables" / "stability.csv")
    assert stability["n_reclassified"].sum() == 1 and stability["n_collapsed"].sum() == 2
    assert "1 run(s) recorded before the rule as ok are counted as collapsed" in (report / "report.md").read_text()
    assert (folder / RunDir.SUMMARY).read_bytes() == before


def test_an_old_summary_that_learned_or_whose_corpus_is_gone_stays_ok(tmp_path, corpus, caplog):
    unigram = unigram_val_loss("tiny", str(corpus))
    for name, path, best in (("learned", str(corpus), 0.5 * unigram), ("gone", str(tmp_path / "gone.txt"), unigram)):
        folder = RunDir(tmp_path / name)
        folder.path.mkdir()
        (folder / RunDir.CONFIG).write_text(yaml.safe_dump(tiny_config(corpus) | {"data": {"path": path}}))
        (folder / RunDir.SUMMARY).write_text(json.dumps({"run_id": name, "status": OK, "best_val_loss": best}))
        with caplog.at_level(logging.WARNING, logger="gptlab"):
            assert folder.summary()["status"] == OK and "reclassified" not in folder.summary()
    assert sum("not checked for the collapsed rule" in r.message for r in caplog.records) == 1  # logged once
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


def test_a_seed_far_above_its_cells_others_is_unstable_and_a_majority_is_not():
    from gptlab.stats.cliff import RISE, unstable

    swiglu = [1.7008, 1.6990, 2.4270, 1.6993, 1.7257, 1.6850]  # study 8's SwiGLU at its pick: seed 2 fell off
    assert unstable(swiglu) == [False, False, True, False, False, False]
    edge = 2.0 * (1 + RISE)
    assert unstable([2.0, 2.0, edge - 1e-9]) == [False] * 3 and unstable([2.0, 2.0, edge + 1e-9])[-1]
    assert unstable([1.7, 2.4]) == [False, False]  # one other is no reference
    assert unstable([1.7, 2.4, 2.4, 2.4]) == [False] * 4  # a majority that stalled is the setting, none is flagged
    assert unstable([1.7, 1.7, math.nan, 2.4]) == [False, False, False, True]
