"""A tuned arms study's verdicts in the cliff worlds, in small (fast tier).

`calibration.verdicts_sim` runs refine's rounds and the report's chain (lr curves, the arms table with its tuning
check, failure count and every-run effect) on `calibration.cliff_worlds`' studies; `python
benchmarks/verdicts_calibration.py` prints the full tables (docs/STATISTICS.md). Here a handful of studies check
that the chain is the report's (the arms table counts the failure-prone arm's failed runs, at their own loss or
the unigram loss), that the tuner never picks an lr where a selection run failed, and, loosely, that a world whose
probe always misses its optimum makes false calls at the picks that the check mostly declines to certify.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from calibration.cliff_worlds import ARMS, BASELINE, CEILING, LATTICE, PRONE, WORLDS, Draws, World
from calibration.verdicts_sim import RULE, SETUPS, Setup, estimation_runs, report, run, score, simulate, tune
from gptlab.statuses import DIVERGED, OK

SETUP = Setup(5)


@pytest.fixture(scope="module")
def study():
    """One study of a world whose failure-prone arm fails half its runs below its cliff."""
    world = dataclasses.replace(World(), prone=0.5)
    rng = np.random.default_rng(4)
    curves = world.draw(rng)
    draws = Draws.draw(rng, RULE.max_runs_per_cell, SETUP.baseline_seeds)
    tuned = tune(world, curves, draws)
    estimation = estimation_runs(world, curves, draws, tuned, SETUP)
    table, left, bounds = report(tuned, estimation)
    return world, curves, tuned, estimation, table, left, bounds


def test_the_tuner_never_picks_where_a_selection_run_failed(study):
    _, _, tuned, _, _, _, _ = study
    for arm, k in zip(ARMS, tuned.picks):
        mine = tuned.selection[(tuned.selection["cell"] == arm) & (tuned.selection["lr"] == LATTICE.value(k))]
        assert len(mine) and (mine["status"] == OK).all()


def test_the_estimation_runs_follow_the_arms_design(study):
    _, _, _, estimation, _, _, _ = study
    counts = estimation.groupby("cell").size()
    assert counts[BASELINE] == SETUP.baseline_seeds == 9 and (counts.drop(BASELINE) == SETUP.seeds).all()


def test_the_arms_table_counts_the_failure_prone_arms_failures(study):
    _, _, _, estimation, table, _, _ = study
    row = table.set_index("arm").loc[PRONE]
    mine = estimation[estimation["cell"] == PRONE]
    failed = int((mine["status"] != OK).sum())
    assert failed > 0 and int(row["n_diverged"]) == failed and int(row["n_ok"]) == len(mine) - failed
    assert row["failure_rate_low"] <= 0.5 <= row["failure_rate_high"]
    counted = np.where(mine["status"] == DIVERGED, CEILING, mine["loss"]).mean()
    base = estimation.loc[estimation["cell"] == BASELINE]
    expected = counted - np.where(base["status"] == DIVERGED, CEILING, base["loss"]).mean()
    assert row["estimate_all_runs"] == pytest.approx(expected, abs=1e-4)  # a failed run at its loss, diverged at the ceiling
    assert row["estimate_all_runs"] > row["estimate"] + 0.1


def test_the_records_score_against_the_worlds_truths(study):
    world, curves, tuned, _, table, left, bounds = study
    record = score(world, curves, tuned, table, left, bounds)
    assert set(record.bounds) <= {"curve", "tried", "not convex", "beyond the search", "too few points", "unbounded",
                                  "no loss left"} and len(record.bounds) == len(ARMS)
    prone = next(a for a in record.arms if a.arm == PRONE)
    assert prone.truth_optima == pytest.approx(0.0) and prone.failure == pytest.approx(0.5)
    # half its runs count at the unigram loss or, blown up, 0.3 to 0.9 above their curve
    assert 0.5 * world.stuck[0] < prone.truth_all - prone.truth_ok < 0.5 * (CEILING - world.best_loss)
    assert all(x >= -1e-12 for x in record.loss_left)


def test_every_setup_sees_the_same_tuner():
    world = next(w for name, w in WORLDS.items() if name.startswith("cliff:"))
    out = simulate(world, 2, SETUPS, rng_seed=5)
    a, b = (out[s] for s in SETUPS)
    assert [r.loss_left for r in a] == [r.loss_left for r in b] and [r.runs for r in a] == [r.runs for r in b]


def test_missed_picks_make_false_calls_that_the_check_mostly_declines():
    world = next(w for name, w in WORLDS.items() if name.startswith("artefact-wall:"))
    s, = run(world, 8, (SETUP,), rng_seed=21)
    assert s.false_picks >= 0.25  # certifying every call at the picks would fail the next line
    assert s.false_checked <= 1 / 8
    assert s.high_covers >= 0.8
