"""The arms design's calibration by simulation (`calibration.arms_sim`), in small.

`python benchmarks/arms_calibration.py` prints the full table (docs/STATISTICS.md). Checked here on a
few hundred studies at most: the allocations, the planted model (its seed correlation and the true
variance of a comparison), coverage of the unblocked seed x block CIs within a binomial band of 0.95,
the familywise rate of the Holm-adjusted null comparisons, Dunnett's narrower CIs at equal total runs,
planted effects called in the right direction, and that the checks fail for a CI that leaves the text out.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as st

from calibration.arms_scores import WORLDS, calibrate, run, summarise
from calibration.arms_sim import (
    ArmsWorld,
    Setup,
    analyse_study,
    arms_design,
    comparisons,
    dunnett,
    equal,
    equal_total,
    planted_effects,
    pooled,
    seeds_only,
    simulate,
)
from gptlab.stats.calls import DEFAULT_MARGIN
from gptlab.stats.effects import analyse
from gptlab.stats.text_share import Blocks

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')


def test_the_allocations():
    w = ArmsWorld()  # 10 arms, 3 seeds each
    d, e, t = dunnett(w), equal(w), equal_total(w)
    assert (d.baseline, d.arm_seeds, d.runs) == (9, (3,) * 10, 39)  # round(sqrt(10) 3) = 9
    assert (e.baseline, e.runs) == (3, 33) and not e.paired and equal(w, paired=True).paired
    assert t.runs == 39 and t.baseline == 4 and sorted(t.arm_seeds) == [3] * 5 + [4] * 5
    assert t.seeds_label == "4 / 3-4" and d.seeds_label == "9 / 3"
    five = equal_total(ArmsWorld(seeds=5))  # 16 + 50 = 66 runs = 11 cells x 6
    assert (five.baseline, five.arm_seeds) == (6, (6,) * 10) and dunnett(ArmsWorld(seeds=5)).baseline == 16
    assert planted_effects(6) == (0.02, -0.02, 0.01, -0.01, 0.0, 0.0) and planted_effects(2) == (0.02, -0.02)
    design = arms_design(3)
    assert design.full_factorial and design.cells[0] == ("baseline",) and len(design.cells) == 4
    with pytest.raises(ValueError):
        simulate(ArmsWorld(arms=4), 1, (dunnett(w),))


def test_the_seed_is_shared_across_arms_with_correlation_rho():
    w = ArmsWorld(arms=3, rho=0.5, inter_sd=0.0, err_sd=0.0, block_sd=0.0)
    runs = w.draw(np.random.default_rng(0), 4000)[:, :, 0] - 1.5  # no block terms: every block the same
    r = np.corrcoef(runs)
    assert r[0, 1] == pytest.approx(0.5, abs=0.05) and r[1, 3] == pytest.approx(0.5, abs=0.05)
    assert runs.std() == pytest.approx(w.run_sd, rel=0.05)
    alone = ArmsWorld(arms=3, rho=0.0, inter_sd=0.0, err_sd=0.0, block_sd=0.0).draw(np.random.default_rng(0), 4000)
    assert abs(np.corrcoef(alone[:, :, 0])[0, 1]) < 0.05


def _reports_table(data, setup, counts, design):
    """The report's main table of one study: `effects.analyse` with the simple effects too (endpoint True)."""
    cell = np.repeat(np.arange(len(counts)), counts)
    seed = np.concatenate([np.arange(c) for c in counts])
    blocks = Blocks(data[cell, seed], np.ones((len(cell), data.shape[2])))
    return analyse(blocks.run_losses, [design.cells[c] for c in cell], seed, design, lambda f, lv: f"{f}={lv}",
                   DEFAULT_MARGIN, blocks=blocks if setup.blocks else None, block_seeds=setup.paired,
                   own_variance=setup.own_variance)


@pytest.mark.parametrize("which", ["dunnett", "equal total", "paired", "seeds only", "pooled", "welch", "noisy"])
def test_the_fast_comparisons_are_the_reports_main_table(which):
    w = ArmsWorld(arms=4, inter_sd=0.01 if which != "welch" else 0.002, noisy_arm=2 if which == "noisy" else 0)
    w = w.planted()
    s = {"dunnett": dunnett, "equal total": equal_total, "paired": lambda x: equal(x, paired=True),
         "seeds only": seeds_only, "pooled": pooled, "welch": pooled, "noisy": dunnett}[which](w)
    design = arms_design(4)
    for i in range(2):
        data = w.draw(np.random.default_rng(10 + i), 6)
        if which == "welch":  # one arm that trains erratically: Bartlett sends the seed model to per-cell variances
            data[2] = data[2].mean() + 30 * (data[2] - data[2].mean(axis=0))
        counts = np.array([s.baseline, *s.arm_seeds])
        full = _reports_table(data, s, counts, design)
        short = analyse_study(data, s, counts, design, DEFAULT_MARGIN)
        fast, kind = comparisons(data, s, counts, design, DEFAULT_MARGIN)
        assert kind == full.fit.kind and (kind == "welch") == (which == "welch")
        assert (kind == "own") == s.own_variance and s.own_variance == (which not in ("paired", "pooled", "welch"))
        assert full.n_tests == short.n_tests == 4 and full.fit.seed_block == s.paired
        cols = ["estimate", "ci_low", "ci_high", "ci95", "ci90_low", "ci90_high", "p_value", "p_adjusted"]
        assert short.main[cols + ["call"]].equals(full.main[cols + ["call"]])
        for c in cols + (["text_share"] if s.blocks else []):
            assert fast[c] == pytest.approx(full.main[c].to_numpy(), rel=1e-9, abs=1e-15), c
        assert fast["call"].tolist() == full.main["call"].tolist()
        assert s.blocks or np.isnan(fast["text_share"]).all()


def test_coverage_is_near_95_and_the_estimates_vary_as_planted():
    w = ArmsWorld(arms=4).planted()
    rec = simulate(w, 200, (dunnett(w),), rng_seed=2)[dunnett(w).name]
    s = summarise(w, rec)
    assert s.studies == 200 and 0.925 <= s.coverage <= 0.975, s  # 800 CIs: about 3 Monte-Carlo SEs either side
    assert s.error_sd == pytest.approx(s.true_sd, rel=0.12)
    # each arm's own variance has 2 df: Satterthwaite's df (text included) near 7, t about 2.4, not 2.05 at 20 df
    assert 4 < np.median(rec.df) < 12
    assert s.half_width == pytest.approx(np.mean(st.t.ppf(0.975, rec.df)) * s.true_sd, rel=0.12)
    assert 0.15 < s.text_share < 0.5


def test_the_seed_only_ci_fails_the_same_checks_when_the_text_interaction_is_large():
    w = ArmsWorld(arms=4, inter_sd=0.02).null()
    cal = run(w, 100, (dunnett(w), seeds_only(w)), rng_seed=3)
    bad, good = cal["Dunnett, seeds-only CI"], cal[dunnett(w).name]
    assert bad.coverage < 0.85 and bad.familywise > 0.15 and math.isnan(bad.text_share)
    assert good.coverage > 0.92 and good.familywise <= 0.1 and good.text_share > 0.5


def test_the_null_familywise_rate_over_ten_holm_adjusted_comparisons():
    w = ArmsWorld(arms=10).null()
    s = run(w, 200, (dunnett(w),), rng_seed=4)[dunnett(w).name]
    assert s.familywise <= 0.09, s  # 5% + 2.5 binomial SEs at 200 studies
    assert s.false_rate <= 0.02 and s.power == ()


def test_dunnett_is_narrower_than_equal_allocation_of_the_same_total():
    w = ArmsWorld(arms=10, seeds=5, inter_sd=0.003)  # 16 + 10 x 5 = 66 runs, or 6 in each of the 11 cells
    d, t = dunnett(w), equal_total(w)
    assert t.arm_seeds == (6,) * 10 and t.runs == d.runs
    one = [dataclasses.replace(x, name=x.name + ", pooled", own_variance=False) for x in (d, t)]
    cal = run(w.null(), 30, (d, t, *one), rng_seed=5)
    ratio = cal[one[0].name].half_width / cal[one[1].name].half_width
    expected = math.sqrt(w.contrast_variance(5, 16) / w.contrast_variance(6, 6))
    assert ratio < 0.95 and ratio == pytest.approx(expected, abs=0.04)  # same df (55): the SEs' ratio, about 0.9
    # each arm's own variance: an arm's 4 df against 5 take back part of the gain, not all of it
    assert expected < cal[d.name].half_width / cal[t.name].half_width < 0.98


def test_equal_total_hands_its_extra_seeds_to_arms_drawn_per_study():
    w = ArmsWorld(arms=10)
    rec = simulate(w.planted(), 20, (equal_total(w),), rng_seed=6)[equal_total(w).name]
    assert (rec.arm_seeds.sum(axis=1) == 35).all()
    assert set(np.unique(rec.arm_seeds[:, 0]).tolist()) == {3, 4}  # the +0.02 arm sometimes has 4 seeds, sometimes 3


def test_planted_effects_are_called_in_the_right_direction():
    w = ArmsWorld(arms=4).planted((0.04, -0.04))  # about 4.5 true SEs (each arm's own variance: t near 2.4)
    rec = simulate(w, 40, (dunnett(w),), rng_seed=7)[dunnett(w).name]
    calls = rec.call
    assert (calls[:, 0] == "worse").mean() >= 0.85 and (calls[:, 1] == "better").mean() >= 0.85
    assert np.isin(calls[:, 2:], ("better", "worse")).any(axis=1).sum() <= 5  # Holm keeps these near 5% of studies
    assert (calls[:, 0] != "better").all() and (calls[:, 1] != "worse").all()


def test_positive_seed_correlation_only_widens_the_unblocked_cis():
    w = ArmsWorld(arms=4, rho=0.8, inter_sd=0.0, err_sd=0.005)
    plain, paired = equal(w), equal(w, paired=True)
    rec = simulate(w.null(), 60, (plain, paired), rng_seed=8)
    assert np.allclose(rec[plain.name].estimate, rec[paired.name].estimate)  # balanced: the same estimates
    s = {k: summarise(w.null(), r) for k, r in rec.items()}
    # its variance counts the seed's share that the comparison cancels (but that share of the error has only
    # seeds - 1 df, not the model's 10: a study whose three seeds happen to agree gets a narrow CI)
    assert s[plain.name].coverage >= 0.96
    assert s[plain.name].half_width > 1.5 * s[paired.name].half_width
    assert s[plain.name].half_width > 3 * s[plain.name].true_sd


def test_calibrate_scores_null_and_planted_studies_on_separate_draws():
    world, chosen = WORLDS["rho 0"]
    cal = calibrate(ArmsWorld(arms=3), 5, (dunnett(ArmsWorld(arms=3)),), rng_seed=9)["Dunnett sqrt(k)"]
    assert cal.null.power == () and [size for size, _ in cal.planted.power] == [0.01, 0.02]
    assert cal.null.half_width != cal.planted.half_width
    assert {s.name for s in chosen(world)} >= {"Dunnett sqrt(k)", "equal n", "equal, Dunnett's total"}
    assert isinstance(chosen(world)[0], Setup)
