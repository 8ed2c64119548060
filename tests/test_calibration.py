"""Calibration of the report's statistics by simulation with planted effects (stats layer only, no files).

600 simulated datasets over four designs (`CALIBRATION_DESIGNS`): a full factorial with strong
interactions, one-at-a-time changes plus all changes together, a full factorial whose cell has no
successful run, and a full factorial with one cell ten times noisier. For each: 95% CIs cover the
planted effects 93-97% of the time and truly-zero effects get `better`/`worse` at most 5% of the
time; in the full factorial, CI half-widths match the analytic pure-error value within 10% and a
main effect 2.3 noise SDs in size is called. `python benchmarks/calibration.py` prints the figures.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from gptlab.report.synthetic import CALIBRATION_DESIGNS, calibrate


@pytest.fixture(scope="module")
def runs():
    return {name: (case, calibrate(case.design, case.means, case.datasets, case.seeds, noise_sd=case.noise_sd,
                                   rng_seed=case.rng_seed))
            for name, case in CALIBRATION_DESIGNS.items()}


def test_at_least_500_datasets(runs):
    assert sum(case.datasets for case, _ in runs.values()) >= 500


@pytest.mark.parametrize("name", list(CALIBRATION_DESIGNS))
def test_coverage_and_false_calls(runs, name):
    _, cal = runs[name]
    assert 0.93 <= cal.coverage <= 0.97, (name, cal.coverage, cal.n_intervals)
    assert cal.n_null >= 100 and cal.false_calls <= 0.05, (name, cal.false_calls)


def test_full_factorial_uses_pure_error(runs):
    case, cal = runs["factorial, strong interactions"]
    d = case.design
    c = d.interaction((("a", "1"),))
    analytic = st.t.ppf(0.975, 12 * 3 - 12 - 2) * 0.01 * math.sqrt(c @ c / 3)  # t_22 x sigma x sqrt(c'c/seeds)
    half = np.mean([a.main.set_index("factor").loc["a", "ci95"] for a in cal.analyses])
    assert abs(half / analytic - 1) < 0.10, (half, analytic)
    # a's averaged main effect is 0.05 - 0.08 * 2/6 = 0.023 (2.3 noise SDs) under interactions of 0.06-0.08:
    # called nearly always (the additive model pooled those interactions into its error)
    assert float(c @ case.means) == pytest.approx(0.05 - 0.08 / 3)
    called = np.mean([a.main.set_index("factor").loc["a", "call"] == "worse" for a in cal.analyses])
    assert called >= 0.95, called
    assert np.mean([a.fit.kind == "pure" for a in cal.analyses]) >= 0.95  # equal variances seldom look unequal


def test_one_at_a_time_prints_simple_effects_and_aliases(runs):
    _, cal = runs["one at a time plus all"]
    a = cal.analyses[0]
    assert list(a.main["kind"].str.startswith("simple effect")) == [True] * 3
    assert a.interactions["estimate"].isna().all()
    alias = "x=1 x y=1 + x=1 x z=1 + y=1 x z=1 + x=1 x y=1 x z=1, aliased"
    assert set(a.interactions["alias"]) == {alias} and list(a.aliases["aliased"]) == [alias]


def test_cell_without_successful_runs_names_what_is_lost(runs):
    case, cal = runs["factorial, a cell with no ok run"]
    assert not case.design.full_factorial
    inter = cal.analyses[0].interactions.set_index(["factor_a", "factor_b"])
    assert math.isnan(inter.loc[("x", "y"), "estimate"])
    assert inter.loc[("x", "y"), "alias"] == "x=1 x y=1 + x=1 x y=1 x z=1, aliased"
    assert not math.isnan(inter.loc[("x", "z"), "estimate"])


def test_unequal_variances_use_per_cell_variances(runs):
    _, cal = runs["factorial, one cell 10x noisier"]
    assert np.mean([a.fit.kind == "welch" for a in cal.analyses]) >= 0.7
    welch = next(a for a in cal.analyses if a.fit.kind == "welch")
    simple = welch.simple.set_index(["factor", "at"])
    # cell 5 is a=0, b=1, c=2: contrasts through it are wide, the others stay narrow
    assert simple.loc[("a", "b=1, c=2"), "ci95"] > 5 * simple.loc[("a", "b=0, c=0"), "ci95"]
