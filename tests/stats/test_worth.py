"""What each arm is worth (`gptlab.stats.worth`): the baseline's curve, the step multiplier and its CI, censoring,
the relative step cost and the wall-time multiplier; a small seeded calibration (`calibration.worth_sim`)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from calibration.worth_lr_sim import RetuneWorld, verdict_rates
from calibration.worth_sim import CURVES, WorthWorld, calibrate
from gptlab.stats.text_share import Blocks
from gptlab.stats.worth import (
    ArmLoss,
    arm_runs,
    baseline_curve,
    fit_power,
    step_cost,
    step_multiplier,
    wall_multiplier,
)
from gptlab.stats.worth_lr import retune_check, retuned_curve, retuned_multiplier

LENGTHS = (1000.0, 2000.0, 4000.0, 8000.0)


def lab(s):
    return CURVES["lab"](np.asarray(s, float))


def baseline(n0: int = 6, sd: float = 0.0, seed: int = 0, curve: str = "pchip", f=lab):
    rng = np.random.default_rng(seed)
    steps = np.repeat(LENGTHS, n0)
    seeds = np.tile(np.arange(n0), len(LENGTHS))
    return baseline_curve(steps, seeds, f(steps) + rng.normal(0, sd, len(steps)), curve=curve)


def test_power_law_fit_recovers_a_planted_curve():
    x = np.log2(LENGTHS)
    e, a, alpha = fit_power(x, 1.3 + 20.0 * np.exp2(-0.45 * x))
    assert (e, a, alpha) == pytest.approx((1.3, 20.0, 0.45), rel=1e-3)


@pytest.mark.parametrize("curve", ["pchip", "power"])
def test_exact_curve_passes_through_the_means_and_inverts(curve):
    fit = baseline(curve=curve)
    assert fit.at(fit.x) == pytest.approx(lab(LENGTHS), abs=1e-6)
    assert fit.gradient(np.array([11.3, 12.0])).sum(axis=1) == pytest.approx([1.0, 1.0], abs=1e-4)
    for m in (0.6, 1.0, 1.4, 3.7):  # an exact arm (zero spread) on the planted curve
        arm = ArmLoss(float(lab(m * 2000)), 1e-4, 10.0)
        w = step_multiplier(fit, 2000, arm)
        tol = 1e-3 if curve == "power" else 0.02  # pchip only interpolates a power law
        assert w.censored == "" and w.multiplier == pytest.approx(m, rel=tol)
        assert w.ci_low <= w.multiplier <= w.ci_high and not (w.ci_low_open or w.ci_high_open)


def test_inversion_on_a_straight_line_in_log_steps_is_exact():
    fit = baseline(f=lambda s: 2.2 - 0.1 * np.log2(np.asarray(s) / 1000))
    w = step_multiplier(fit, 2000, ArmLoss(2.2 - 0.1 * math.log2(2.8), 1e-5, 5.0))
    assert w.multiplier == pytest.approx(1.4, rel=1e-4)


def test_censoring_beyond_the_lengths():
    fit = baseline(sd=0.005)
    above = step_multiplier(fit, 2000, arm_runs(lab(5 * 2000) + np.array([-0.002, 0.0, 0.002])))
    below = step_multiplier(fit, 2000, arm_runs(lab(0.3 * 2000) + np.array([-0.002, 0.0, 0.002])))
    assert above.censored == "above" and math.isnan(above.multiplier) and above.ci_high_open and above.covers(5.0)
    assert above.highest == 4.0 and above.ci_high == pytest.approx(4.0)
    assert below.censored == "below" and math.isnan(below.multiplier) and below.ci_low_open and below.covers(0.3)
    assert not above.covers(1.0) and not below.covers(1.0)


def test_ci_contains_the_truth_in_an_easy_case_and_widens_with_noise():
    fit = baseline(n0=9, sd=0.004, seed=1)
    rng = np.random.default_rng(2)
    quiet = step_multiplier(fit, 2000, arm_runs(lab(2800) + rng.normal(0, 0.004, 5)))
    noisy = step_multiplier(fit, 2000, arm_runs(lab(2800) + rng.normal(0, 0.03, 5)))
    assert quiet.covers(1.4) and quiet.ci_high / quiet.ci_low < 1.3
    assert noisy.ci_high / noisy.ci_low > quiet.ci_high / quiet.ci_low


def test_blocks_add_the_texts_variance():
    rng = np.random.default_rng(3)
    n0, B = 6, 20
    steps, seeds = np.repeat(LENGTHS, n0), np.tile(np.arange(n0), 4)
    Y = lab(steps)[:, None] + rng.normal(0, 0.004, (len(steps), 1)) + rng.normal(0, 0.01, (len(steps), B))
    arm_inter = rng.normal(0, 0.08, B)  # the arm's own taste in text: only the blocks show it
    A = lab(2800) + arm_inter + rng.normal(0, 0.004, (3, 1)) + rng.normal(0, 0.01, (3, B))
    seeds_only = step_multiplier(baseline_curve(steps, seeds, Blocks(Y, np.ones_like(Y)).run_losses), 2000,
                                 arm_runs(A.mean(axis=1)))
    with_text = step_multiplier(baseline_curve(steps, seeds, Y.mean(axis=1), Blocks(Y, np.ones_like(Y))), 2000,
                                arm_runs(A.mean(axis=1), Blocks(A, np.ones_like(A))))
    assert with_text.multiplier == pytest.approx(seeds_only.multiplier)
    assert with_text.ci_high / with_text.ci_low > 1.2 * seeds_only.ci_high / seeds_only.ci_low


def test_incomplete_seeds_are_left_out_with_a_note():
    steps = np.array(list(np.repeat(LENGTHS, 3)) + [1000.0])
    seeds = np.array(list(np.tile(np.arange(3), 4)) + [7])
    fit = baseline_curve(steps, seeds, lab(steps) + 0.001 * np.arange(len(steps)) % 3)
    assert fit.losses.shape == (3, 4) and fit.left_out == 1
    assert "left out" in step_multiplier(fit, 2000, ArmLoss(float(lab(2000)), 0.002, 4)).note


def test_bad_input_is_refused_in_one_line():
    with pytest.raises(ValueError, match="3 positive lengths"):
        baseline_curve(np.array([1000.0, 2000.0] * 2), np.array([0, 0, 1, 1]), np.ones(4))
    with pytest.raises(ValueError, match="curve"):
        baseline(curve="spline")
    with pytest.raises(ValueError, match="outside"):
        step_multiplier(baseline(), 500, ArmLoss(2.0, 0.01, 3))
    with pytest.raises(ValueError, match=">= 2 runs"):
        arm_runs(np.array([1.9]))


def test_step_cost_and_wall_multiplier_arithmetic():
    cost = step_cost(np.array([1.2, 1.5, 0.9]), np.array([0.8, 1.0, 0.6]))  # each round 1.5x: drift cancels
    assert cost.ratio == pytest.approx(1.5) and cost.ci_low == pytest.approx(1.5) and cost.ci_high == pytest.approx(1.5)
    spread = step_cost(np.array([1.1, 1.3, 1.2]), np.array([1.1, 1.3, 1.2]) / np.array([1.4, 1.6, 1.5]))
    assert spread.ratio == pytest.approx((1.4 * 1.6 * 1.5) ** (1 / 3)) and spread.ci_low < 1.5 < spread.ci_high
    fit = baseline(sd=0.004)
    w = step_multiplier(fit, 2000, arm_runs(lab(2.4 * 2000) + np.array([-0.003, 0.0, 0.003])))
    wall = wall_multiplier(w, cost)  # an exact cost: the CI only divides
    assert wall.multiplier == pytest.approx(w.multiplier / 1.5)
    assert (wall.ci_low, wall.ci_high) == pytest.approx((w.ci_low / 1.5, w.ci_high / 1.5))
    wider = wall_multiplier(w, spread)
    assert wider.ci_low < wall.ci_low and wider.ci_high > wall.ci_high
    with pytest.raises(ValueError, match="positive"):
        step_cost(np.array([0.0, 1.0]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="one per round"):
        step_cost(np.array([1.0, 1.0]), np.array([1.0]))


def test_small_calibration_covers_and_censors():
    world = WorthWorld(n0=6, multipliers=(0.7, 1.4, 5.0))
    scores = calibrate(world, 40, rng_seed=11)
    for s in scores[:2]:
        assert s.coverage >= 0.85 and s.censored_above == 0 and s.median_estimate == pytest.approx(s.multiplier,
                                                                                                      rel=0.08)
    assert scores[2].censored_above >= 0.8 and scores[2].coverage >= 0.9


def test_step_cost_ci_covers_a_planted_ratio():
    rng = np.random.default_rng(5)  # 5 rounds, each slowing every arm alike (SD 0.15), timing noise SD 0.05
    hits = []
    for _ in range(400):
        drift = rng.lognormal(0, 0.15, 5)
        hits.append(step_cost(1.2 * drift * rng.lognormal(0, 0.05, 5), drift * rng.lognormal(0, 0.05, 5)))
    coverage = np.mean([c.ci_low <= 1.2 <= c.ci_high for c in hits])
    assert 0.9 <= coverage <= 0.99
    assert np.median([c.ci_high / c.ci_low for c in hits]) < 1.25  # the drift cancels: not +/-20% wide


def test_anchor_without_effect_gives_one_and_places_the_arm_on_the_shape():
    fit = baseline(sd=0.004)
    offset = 0.05  # the study's schedule (cosine) sits above the wsd curve at S: the shape alone matters
    anchor = arm_runs(lab(2000) + offset + np.array([-0.003, 0.0, 0.003, 0.001]))
    same = step_multiplier(fit, 2000, arm_runs(anchor.runs + 0.0005 * np.array([1, -1, 1, -1])), anchor=anchor)
    assert same.multiplier == pytest.approx(1.0, rel=0.02) and same.covers(1.0)
    shifted = arm_runs(anchor.runs + float(lab(1.4 * 2000) - lab(2000)))  # the arm's effect = the curve's 1.4x gain
    w = step_multiplier(fit, 2000, shifted, anchor=anchor)
    assert w.multiplier == pytest.approx(1.4, rel=0.03) and w.covers(1.4)
    unanchored = step_multiplier(fit, 2000, shifted)  # read against the wsd curve itself, the offset misplaces it
    assert not unanchored.covers(1.4)


def test_anchored_ci_covers_a_planted_truth_and_the_anchor_widens_it():
    rng = np.random.default_rng(7)
    n0, B = 8, 20
    steps, seeds = np.repeat(LENGTHS, n0), np.tile(np.arange(n0), 4)
    Y = lab(steps)[:, None] + rng.normal(0, 0.004, (len(steps), 1)) + rng.normal(0, 0.01, (len(steps), B))
    fit = baseline_curve(steps, seeds, Y.mean(axis=1), Blocks(Y, np.ones_like(Y)))
    def cell(loss, n, sd):
        A = loss + rng.normal(0, sd, (n, 1)) + rng.normal(0, 0.01, (n, B))
        return arm_runs(A.mean(axis=1), Blocks(A, np.ones_like(A)))
    arm = cell(lab(2800) + 0.04, 4, 0.004)
    quiet, noisy = cell(lab(2000) + 0.04, n0, 0.001), cell(lab(2000) + 0.04, n0, 0.03)
    w_quiet, w_noisy = (step_multiplier(fit, 2000, arm, anchor=a) for a in (quiet, noisy))
    assert w_quiet.covers(1.4) and w_noisy.covers(1.4)
    assert w_noisy.ci_high / w_noisy.ci_low > 1.1 * w_quiet.ci_high / w_quiet.ci_low


def test_small_anchored_calibration_covers():
    world = WorthWorld(n0=6, multipliers=(0.7, 1.4), anchor_offset=0.04)
    for s in calibrate(world, 30, rng_seed=12):
        assert s.coverage >= 0.85 and s.median_estimate == pytest.approx(s.multiplier, rel=0.1)


def lr_curve(f, optimum, c=0.03):
    """A planted loss against the lr factor of the pick: a parabola in log2 lr, 1 nat at its optimum."""
    return 1.0 + c * np.log2(np.asarray(f, float) / optimum) ** 2


def test_retune_verdicts_on_planted_curves():
    f = np.array([0.5, 1.0, 2.0] * 2)
    steps = np.repeat([1000.0, 8000.0], 3)
    losses = np.concatenate([lr_curve(f[:3], 1.0), lr_curve(f[3:], 2.0 ** 1.2)])  # short: stays; long: moved
    short, long = retune_check(steps, f, losses, noise_sd=0.005)
    assert short.steps == 1000 and short.verdict == "stays" and short.gap == 0 and short.best_factor == 1
    assert short.optimum == pytest.approx(1.0) and short.threshold == pytest.approx(1.96 * math.sqrt(2) * 0.005, rel=1e-3)
    assert long.verdict == "moves" and long.best_factor == 2 and long.beyond_noise
    assert long.gap == pytest.approx(0.03 * (1.2 ** 2 - 0.2 ** 2)) and long.optimum is None  # its vertex lies beyond 2
    flat = retune_check(steps[:3], f[:3], lr_curve(f[:3], 2.0 ** 0.8, c=0.002), noise_sd=0.005)[0]
    assert flat.verdict == "unclear" and flat.best_factor == 2 and not flat.beyond_noise
    assert flat.optimum == pytest.approx(2.0 ** 0.8)
    concave = retune_check(steps[:3], f[:3], np.array([1.0, 1.01, 0.99]), noise_sd=0.001)[0]
    assert concave.optimum is None and concave.verdict == "moves"
    diverged = retune_check(steps[:3], f[:3], np.array([1.02, 1.0, np.nan]), noise_sd=0.005)[0]
    assert diverged.verdict == "stays" and diverged.factors == (0.5, 1.0)
    lost_pick = retune_check(steps[:3], f[:3], np.array([1.02, np.nan, 1.1]), noise_sd=0.005)[0]
    assert lost_pick.verdict == "unclear" and math.isnan(lost_pick.gap)
    with pytest.raises(ValueError, match="lacks the pick"):
        retune_check(steps[:2], f[::2][:2], np.ones(2), noise_sd=0.005)
    with pytest.raises(ValueError, match="noise SD"):
        retune_check(steps[:3], f[:3], np.ones(3), noise_sd=0.0)


def test_a_retuned_curve_moves_the_multipliers():
    fit = baseline(sd=0.004)
    arm = arm_runs(lab(2.4 * 2000) + np.array([-0.003, 0.0, 0.003]))
    f = np.array([0.5, 1.0, 2.0] * 2)
    steps = np.repeat([1000.0, 8000.0], 3)
    stays = retune_check(steps, f, np.concatenate([lr_curve(f[:3], 1.0)] * 2), noise_sd=0.004)
    assert retuned_multiplier(fit, 2000, arm, stays).multiplier == pytest.approx(step_multiplier(fit, 2000,
                                                                                              arm).multiplier)
    moved = retune_check(steps, f, np.concatenate([lr_curve(f[:3], 1.0), lr_curve(f[3:], 2.0)]), noise_sd=0.004)
    curve = retuned_curve(fit, moved)
    assert curve.means[-1] == pytest.approx(fit.means[-1] - 0.03) and curve.means[0] == pytest.approx(fit.means[0])
    assert curve.extra_var.tolist() == pytest.approx([0, 0, 0, 2 * 0.004 ** 2])
    before, after = step_multiplier(fit, 2000, arm), retuned_multiplier(fit, 2000, arm, moved)
    assert after.multiplier < before.multiplier  # a better long baseline reaches the arm sooner
    with pytest.raises(ValueError, match="not among"):
        retuned_curve(fit, retune_check(np.full(3, 3000.0), f[:3], np.ones(3), noise_sd=0.004))


def test_small_retune_simulation_rarely_calls_a_move_and_finds_a_clear_one():
    null = verdict_rates(RetuneWorld(shift=0.0), 300, rng_seed=1)
    assert null["moves"] <= 0.05 and null["stays"] >= 0.6
    steep = verdict_rates(RetuneWorld(shift=1.0, curvature=0.05, sd=0.006), 300, rng_seed=2)
    assert steep["moves"] >= 0.8
