"""Calibration of the report's statistics by simulation with planted effects (stats layer only, no files).

600 simulated datasets over four designs (`CALIBRATION_DESIGNS`): a full factorial with strong
interactions, one-at-a-time changes plus all changes together, a full factorial whose cell has no
successful run, and a full factorial with one cell ten times noisier. For each: 95% CIs cover the
planted effects 93-97% of the time and truly-zero effects get `better`/`worse` at most 5% of the
time; in the full factorial, CI half-widths match the analytic pure-error value within 10% and a
main effect 2.3 noise SDs in size is called. `python benchmarks/effects_calibration.py` prints the figures.

The planted truths come from `calibration.effects_sim.PlantedTruth`: group means and cell look-ups of the
planted cell means, never the `Design` contrasts that produce the estimates. A test checks them against values derived
by hand from the planted formulas, and mutation tests double a contrast and see the coverage test fail.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import stats as st

from calibration.effects_sim import CALIBRATION_DESIGNS, PlantedTruth, calibrate
from gptlab.stats.design import Design

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')


@functools.cache
def _simulated() -> dict:
    """Computed once per process (seeded: the same every time), though xdist may run this module's tests apart and
    pytest then sets the module's fixture up again."""
    return {name: (case, calibrate(case.design, case.means, case.datasets, case.seeds, noise_sd=case.noise_sd,
                                   rng_seed=case.rng_seed))
            for name, case in CALIBRATION_DESIGNS.items()}


@pytest.fixture(scope="module")
def runs():
    return _simulated()


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
    assert PlantedTruth(d, case.means)(("term", "a=1")) == pytest.approx(0.05 - 0.08 / 3)
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


@pytest.mark.parametrize("name, key, value", [
    # a = 1 adds 0.05; a x b x c (c != 0) adds -0.08 in 2 of the 6 (b, c) cells: averaged 0.05 - 0.08 / 3
    ("factorial, strong interactions", ("term", "a=1"), 0.05 - 0.08 / 3),
    # b x c=2: 0.06, plus the a x b x c term's -0.08 at a = 1 only, averaged over a: 0.06 - 0.04
    ("factorial, strong interactions", ("term", "b=1 x c=2"), 0.06 - 0.04),
    ("factorial, strong interactions", ("term", "a=1 x b=1 x c=1"), -0.08),
    ("factorial, strong interactions", ("simple", "a", "1", "b=1, c=2"), 0.05 - 0.08),
    ("one at a time plus all", ("term", "x=1"), 0.0),
    ("one at a time plus all", ("term", "y=1"), -0.08),
    ("one at a time plus all", ("cell", "x=1, y=1, z=1"), -0.20),
    # all three against the baseline (-0.20) minus the single changes (0, -0.08, -0.05)
    ("one at a time plus all", ("alias", "x=1 x y=1 + x=1 x z=1 + y=1 x z=1 + x=1 x y=1 x z=1, aliased"), -0.07),
    ("factorial, a cell with no ok run", ("term", "x=1"), 0.03),
    ("factorial, a cell with no ok run", ("term", "y=1 x z=1"), -0.02),
    ("factorial, a cell with no ok run", ("alias", "x=1 x y=1 + x=1 x y=1 x z=1, aliased"), 0.0),
])
def test_planted_truths_match_the_planted_formulas(name, key, value):
    case = CALIBRATION_DESIGNS[name]
    assert PlantedTruth(case.design, case.means)(key) == pytest.approx(value, abs=1e-12)


def test_a_term_the_cells_cannot_estimate_has_no_truth():
    case = CALIBRATION_DESIGNS["factorial, a cell with no ok run"]  # x=1, y=1, z=0 has no data
    with pytest.raises(AssertionError, match="no data"):
        PlantedTruth(case.design, case.means)(("term", "x=1 x y=1"))


def _doubled(method):
    def wrapper(self, *args):
        c = method(self, *args)
        return None if c is None else 2 * c
    return wrapper


@pytest.mark.parametrize("name, method", [
    ("factorial, strong interactions", "interaction"),  # averaged main effects and interactions
    ("one at a time plus all", "versus_baseline"),  # cells against the baseline (and the aliased sums)
])
def test_a_doubled_contrast_fails_the_calibration_test(monkeypatch, name, method):
    """Mutation: a contrast of `Design` doubled moves every estimate it makes but no truth, so coverage fails."""
    monkeypatch.setattr(Design, method, _doubled(getattr(Design, method)))
    case = CALIBRATION_DESIGNS[name]
    cal = calibrate(case.design, case.means, 20, case.seeds, noise_sd=case.noise_sd, rng_seed=case.rng_seed)
    with pytest.raises(AssertionError):
        test_coverage_and_false_calls({name: (case, cal)}, name)
    assert cal.coverage < 0.9, cal.coverage
