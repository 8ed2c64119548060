"""The outcome rule (`gptlab.stats.outcome`): which runs count, the unit of every loss, and which loss the effects are
on; and its two readers, an adaptive sweep's rounds (`gptlab.kinds.seeds.stages`) and the report's load step, each
handing it summary.csv's rows and taking its answer."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from fakes import fake_spec

import gptlab.kinds.seeds.stages as stages
from calibration.synthetic import make_results
from gptlab.report.load import load_results
from gptlab.roles import ESTIMATION, SELECTION
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir
from gptlab.stats.adaptive_seeds import SeedRule, Widest
from gptlab.stats.outcome import (
    BITS_PER_CHAR,
    CHAR_BPC_FACTOR,
    NATS_PER_CHAR,
    NATS_PER_TOKEN,
    TEST_OUTCOME,
    VAL_OUTCOME,
    Outcome,
    bpc_factor,
    counts,
    in_unit,
    outcome_of,
    role_of,
    unit_of,
)
from gptlab.statuses import STATUS_RULE


def row(role: str = "", status: str = "ok", val: object = 1.5, test: object = "", bpc: object = "",
        factor: object = None, **levels: object) -> dict[str, object]:
    """One run's record as summary.csv holds it (text), with its bits-per-char factor (summary.json's)."""
    return {"role": role, "status": status, "best_val_loss": val, "final_val_loss": val, "final_train_loss": val,
            "best_test_loss": test, "best_test_bpc": bpc, "val_bpc_factor": factor, **levels}


# -- which runs count -------------------------------------------------------------------------------------------

def test_a_runs_role_is_its_role_column_else_its_stage_else_estimation():
    assert role_of({"role": "selection "}) == SELECTION and role_of({"stage": "selection"}) == SELECTION
    assert role_of({"role": "", "stage": "selection"}) == ESTIMATION  # the role column, where there is one, decides
    for empty in ({}, {"role": ""}, {"role": None}, {"role": math.nan}, {"stage": "  "}):
        assert role_of(empty) == ESTIMATION, empty


def test_only_estimation_runs_that_finished_ok_with_a_finite_outcome_count():
    ok = row(status=" OK ", val="1.5")
    assert counts(ok, VAL_OUTCOME)
    assert not counts({**ok, "role": SELECTION}, VAL_OUTCOME) and not counts({**ok, "role": "worth"}, VAL_OUTCOME)
    for status in ("diverged", "collapsed", "unstable", "failed", ""):
        assert not counts({**ok, "status": status}, VAL_OUTCOME), status
    for value in ("", "nan", "inf", None, math.nan, -math.inf):
        assert not counts({**ok, "best_val_loss": value}, VAL_OUTCOME), value
    assert not counts(ok, TEST_OUTCOME)  # it has no test loss


# -- the unit ---------------------------------------------------------------------------------------------------

def test_one_tokenizer_on_one_text_keeps_its_unit_anything_else_is_bits_per_char():
    assert unit_of([CHAR_BPC_FACTOR] * 3) == NATS_PER_CHAR
    assert unit_of([0.45, 0.45 * (1 + 1e-12)]) == NATS_PER_TOKEN  # one tokenizer, its factor as each run computed it
    assert unit_of([CHAR_BPC_FACTOR, 0.45]) == BITS_PER_CHAR  # tokenizers differ: nats/token are incomparable
    assert unit_of([CHAR_BPC_FACTOR] * 2, several_texts=True) == BITS_PER_CHAR  # a nat of one text is not another's
    assert bpc_factor("0.45") == 0.45
    assert all(bpc_factor(v) == CHAR_BPC_FACTOR for v in (None, "", 0, math.nan))  # none recorded: a char run


def test_in_bits_every_loss_is_scaled_by_its_runs_factor_and_the_test_loss_is_its_own_bits():
    r = row(val="2.0", test="2.2", bpc="0.9", factor=0.5)
    assert in_unit(r, NATS_PER_TOKEN) == {"loss_scale": 1.0, "best_val_loss": 2.0, "final_val_loss": 2.0,
                                          "final_train_loss": 2.0, TEST_OUTCOME: 2.2}
    assert in_unit(r, BITS_PER_CHAR) == {"loss_scale": 0.5, "best_val_loss": 1.0, "final_val_loss": 1.0,
                                         "final_train_loss": 1.0, TEST_OUTCOME: 0.9}
    assert in_unit(row(val="2.0", factor=None), BITS_PER_CHAR)["best_val_loss"] == 2.0 * CHAR_BPC_FACTOR


# -- the outcome ------------------------------------------------------------------------------------------------

def test_the_outcome_is_the_test_loss_only_when_every_measured_estimation_run_has_one():
    tested = [row(val="1.5", test="1.6"), row(val="1.4", test="1.5")]
    assert outcome_of(tested) == Outcome(TEST_OUTCOME, NATS_PER_CHAR, 2, 2)
    assert outcome_of(tested + [row(status="failed", val="")]).column == TEST_OUTCOME  # measured nothing: no vote
    assert outcome_of(tested + [row(role=SELECTION, val="1.3")]).column == TEST_OUTCOME  # not an estimation run
    mixed = outcome_of(tested + [row(val="1.3")])
    assert mixed == Outcome(VAL_OUTCOME, NATS_PER_CHAR, 3, 2) and mixed.mixed  # validation for every run
    assert not outcome_of([row(val="1.5")]).mixed and outcome_of([]) == Outcome(VAL_OUTCOME, NATS_PER_CHAR)


def test_the_unit_is_every_roles_and_in_bits_a_test_loss_without_its_bits_is_none():
    tested = [row(val="1.5", test="1.6", bpc="0.7", factor=0.45), row(role=SELECTION, val="3.0")]  # a char selection
    assert outcome_of(tested) == Outcome(TEST_OUTCOME, BITS_PER_CHAR, 1, 1)
    assert outcome_of([row(val="1.5", test="1.6", factor=0.45), row(role=SELECTION, val="3.0")]).column == VAL_OUTCOME


# -- its readers ------------------------------------------------------------------------------------------------

GRID = {"model.norm": ["pre", "post"]}
RULE = SeedRule(2, 4, 0.01)


def _summary(folder: Path, rows: list[dict[str, object]], factors: dict[str, float] | None = None) -> ResultsDir:
    """A results folder holding summary.csv's `rows` (run ids r0, r1, ...) and, for the runs `factors` names, a
    summary.json recording that bits-per-char factor."""
    results = ResultsDir(folder)
    results.runs_dir.mkdir(parents=True)
    rows = [{"run_id": f"r{i}", **r} for i, r in enumerate(rows)]
    with results.summary_csv.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    for run_id, factor in (factors or {}).items():
        folder = RunDir(results.run(run_id).path)
        folder.path.mkdir(parents=True)
        (folder / RunDir.SUMMARY).write_text(json.dumps({"run_id": run_id, "status": "ok", "status_rule": STATUS_RULE,
                                                         "val_bpc_factor": factor}))
    return results


def _rule_input(monkeypatch, results: ResultsDir, n_seeds: int = 2) -> list[float]:
    """The outcome values the adaptive rounds hand the seed rule (`widest_called`'s y) for `results`' summary.csv."""
    seen = []
    monkeypatch.setattr(stages, "widest_called", lambda y, *args, **kw: seen.append(list(y)) or Widest(0.0, "x"))
    stages.widest_in_summary(fake_spec(GRID, [], {"model.norm": "pre"}, kinds={"seeds": RULE}), results, n_seeds)
    return seen[0] if seen else []


def _seeded(**kw: object) -> list[dict[str, object]]:
    return [row(seed=s, **{"model.norm": n}, **kw) for n in GRID["model.norm"] for s in range(2)]


def test_the_rounds_decide_on_the_test_loss_of_the_runs_that_count(tmp_path, monkeypatch):
    rows = [{**r, "best_val_loss": 1.5 + i / 100, "best_test_loss": 1.6 + i / 100} for i, r in enumerate(_seeded())]
    rows += [row(role=SELECTION, seed=0, val="9", **{"model.norm": "pre"}),  # not an estimation run
             row(status="diverged", seed=1, val="9", test="9", **{"model.norm": "pre"}),  # did not train
             row(seed=2, val="9", test="9", **{"model.norm": "pre"})]  # a seed beyond round 1's
    assert _rule_input(monkeypatch, _summary(tmp_path / "a", rows)) == pytest.approx([1.6, 1.61, 1.62, 1.63])
    rows[0] = {**rows[0], "best_test_loss": ""}  # one run without a test loss: validation for every run
    assert _rule_input(monkeypatch, _summary(tmp_path / "b", rows)) == pytest.approx([1.5, 1.51, 1.52, 1.53])


def test_the_rounds_take_each_runs_factor_from_its_summary_and_decide_in_bits_when_tokenizers_differ(tmp_path,
                                                                                                    monkeypatch):
    rows = [{**r, "best_val_loss": 2.0} for r in _seeded()]
    assert _rule_input(monkeypatch, _summary(tmp_path / "one", rows, {f"r{i}": 0.5 for i in range(4)})) == [2.0] * 4
    mixed = _rule_input(monkeypatch, _summary(tmp_path / "mixed", rows, {"r0": 0.5, "r1": 0.5, "r2": 0.25}))
    assert mixed == pytest.approx([1.0, 1.0, 0.5, 2.0 * CHAR_BPC_FACTOR])  # r3 records none: a char run's factor


def test_the_report_reads_its_outcome_unit_and_runs_by_the_same_rule(tmp_path):
    results = make_results(tmp_path, GRID, 3, status={(("post",), 2): "diverged"})
    with (results / "summary.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    res = load_results(results)
    outcome = outcome_of([{**r, "val_bpc_factor": None} for r in rows])
    assert (res.outcome, res.unit) == (outcome.column, outcome.unit) == (VAL_OUTCOME, NATS_PER_CHAR)
    expected = [r["run_id"] for r in rows if counts(r, outcome.column)]
    assert list(res.counted["run_id"]) == expected and len(expected) == 5  # the diverged run does not count
    assert np.isfinite(res.counted[res.outcome]).all()
