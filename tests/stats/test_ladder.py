"""The ladder's statistics (`gptlab.stats.ladder`): the trend in log compute, its call, predictions, the ranking."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from calibration.ladder_sim import LADDER_WORLDS, LadderWorld, simulate_ladder
from gptlab.stats.calls import INCONCLUSIVE
from gptlab.stats.ladder import (
    GROWS,
    HOLDS,
    SHRINKS,
    compute_doublings,
    covered,
    fit_trend,
    kendall_tau,
    pooled_dispersion,
    predict,
    rank_agreement,
    trend_call,
)

X = [0.0, 2.0, 4.0]
DF = [8.0, 8.0, 8.0]


def test_compute_is_counted_in_doublings_above_the_smallest_rung():
    assert compute_doublings([1e12, 4e12, 1.6e13]).tolist() == pytest.approx([0.0, 2.0, 4.0])
    with pytest.raises(ValueError, match="positive"):
        compute_doublings([1e12, 0.0])


def test_an_exact_line_is_recovered_and_its_ci_comes_from_the_rungs_ses():
    t = fit_trend(X, [0.03, 0.01, -0.01], [0.005] * 3, DF)
    assert t.slope == pytest.approx(-0.01) and t.intercept == pytest.approx(0.03) and t.dispersion == 1.0
    # Var(b) = 1 / sum w (x - xbar)^2 with w = 1 / 0.005^2 and x - xbar = -2, 0, 2
    assert t.slope_se == pytest.approx(0.005 / math.sqrt(8))
    off = fit_trend(X, [0.03, 0.04, -0.01], [0.005] * 3, DF)  # the middle rung misses the line by far more than its SE
    assert off.dispersion > 1 and off.slope_se > t.slope_se
    with pytest.raises(ValueError, match="two rungs"):
        fit_trend([0.0], [0.1], [0.01], [8])


def test_the_dispersion_is_the_arms_together_and_widens_a_calm_arm_s_ci_and_its_prediction():
    se = [0.005] * 3
    calm, wild = (X, [0.03, 0.01, -0.01], se), (X, [0.03, 0.04, -0.01], se)
    # the calm arm lies on its line (chi^2 0), the wild one misses it by -0.01, +0.02, -0.01 (chi^2 24): 24 / 2 spare
    assert pooled_dispersion([calm, wild]) == pytest.approx(12.0)
    assert pooled_dispersion([calm, calm]) == 1.0  # never below 1: the SEs are the floor
    assert pooled_dispersion([(X[:2], [0.03, 0.01], se[:2])]) == 1.0  # two rungs leave no residual
    alone, pooled = fit_trend(*calm, DF), fit_trend(*calm, DF, dispersion=12.0)
    assert alone.dispersion == 1.0 and pooled.slope_se == pytest.approx(alone.slope_se * math.sqrt(12.0))
    assert pooled.slope == alone.slope
    narrow, wide = (predict(*calm, DF, 6.0, d) for d in (None, 12.0))
    assert wide.se == pytest.approx(narrow.se * math.sqrt(12.0))  # the line's variance and the measurement's alike


def test_the_call_reads_the_slope_against_the_effect_s_own_direction():
    se = [0.002] * 3
    assert trend_call(fit_trend(X, [0.03, 0.05, 0.07], se, DF), 0.01) == GROWS  # a cost that grows
    assert trend_call(fit_trend(X, [-0.03, -0.05, -0.07], se, DF), 0.01) == GROWS  # a gain that grows
    assert trend_call(fit_trend(X, [0.07, 0.05, 0.03], se, DF), 0.01) == SHRINKS
    assert trend_call(fit_trend(X, [0.05, 0.0501, 0.0499], se, DF), 0.01) == HOLDS
    assert trend_call(fit_trend(X, [0.05, 0.05, 0.05], [0.05] * 3, DF), 0.01) == INCONCLUSIVE  # too noisy for holds


def test_the_prediction_is_the_line_of_the_rungs_below_with_room_for_the_next_measurement():
    p = predict(X[:2], [0.03, 0.02], [0.004, 0.004], DF[:2], 4.0)
    assert p.predicted == pytest.approx(0.01)
    # the line at x = 4 from two points 2 apart: e2 + (e2 - e1), variance 4 s^2 + s^2; and the measurement's s^2
    assert p.se == pytest.approx(math.sqrt(6) * 0.004)
    assert covered(p, 0.01) and not covered(p, 0.2) and p.low < 0.01 < p.high
    assert predict([0.0], [0.03], [0.004], [8], 2.0) is None  # one rung below: nothing predicted


def test_the_ranking_agreement_is_kendall_s_tau_with_an_interval_from_the_effects_ses():
    a = np.array([0.1, 0.05, 0.0, -0.03, -0.09])
    same = rank_agreement(a, [0.001] * 5, a * 2, [0.001] * 5)
    assert same.tau == 1.0 and same.low == pytest.approx(1.0) and same.arms == 5
    flipped = rank_agreement(a, [0.001] * 5, -a, [0.001] * 5)
    assert flipped.tau == -1.0
    noisy = rank_agreement(a, [0.05] * 5, a, [0.05] * 5)
    assert noisy.low < 0.5 < noisy.high  # estimates that noisy cannot show the orders agree
    assert kendall_tau(np.array([[1.0, 2.0, 3.0]]), np.array([[1.0, 3.0, 2.0]])).tolist() == pytest.approx([1 / 3])


def test_in_simulated_linear_ladders_the_intervals_cover_and_the_calls_are_rarely_false():
    s = simulate_ladder(LADDER_WORLDS["linear, 3 rungs (16x), SE 0.008"], sims=60, seed=1)
    assert 0.9 <= s.slope_covered <= 1.0 and 0.9 <= s.prediction_covered <= 1.0
    assert s.false_calls <= 0.05 and s.power >= 0.8 and s.holds_false == 0.0
    bent = simulate_ladder(LadderWorld(bend=-0.01), sims=60, seed=1)  # a strong bend: the line misses the top rung
    assert bent.prediction_covered < s.prediction_covered and math.isnan(bent.slope_covered)


def test_scatter_no_se_counts_lowers_the_first_prediction_s_coverage_and_the_pooled_dispersion_keeps_the_rest():
    plain = LadderWorld(rungs=4, se=0.012, df=5.0)
    calm = simulate_ladder(plain, sims=60, seed=2)
    scattered = simulate_ladder(dataclasses.replace(plain, scatter=0.04), sims=60, seed=2)
    assert 0.9 <= calm.third_covered <= 1.0
    assert scattered.third_covered < calm.third_covered - 0.15
    # from three rungs the arms' residuals estimate the scatter together: the top rung's interval and the slope's
    # CI still cover
    assert scattered.prediction_covered >= 0.88 and scattered.slope_covered >= 0.9
    three = simulate_ladder(LadderWorld(), sims=20, seed=3)  # in a 3-rung ladder the third rung is the top one
    assert three.third_covered == three.prediction_covered
