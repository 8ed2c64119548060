"""The tuning check's calibration by simulation, in small.

`calibration.robustness_sim` states the worlds (refine_sim's planted 2x2 with effects at the optima)
and `python benchmarks/robustness_calibration.py` prints the full table (docs/STATISTICS.md). Checked
here on a few dozen studies: the scoring rules, the worlds' planted optima and truths, the selection
runs the curves are fitted on are the ones the picks came from, a world whose relu picks always miss
plants spurious calls at the picks, and the check removes them only by turning calls into
`depends on the picks` (never by changing a call into another).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from calibration.refine_sim import LATTICE, Noise, World, grid_picks
from calibration.robustness_sim import MAIN, WORLDS, ArmOptima, Setup, false_call, selection_frame, simulate, summarise, true_call
from gptlab.stats.calls import DEFAULT_MARGIN
from gptlab.stats.robustness import DEPENDS

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

SETUP = Setup(2, 5)
STUDIES = 30


@pytest.fixture(scope="module")
def missed():
    """World a': best losses equal, relu's optima midway between grid lrs (its picks always miss)."""
    return simulate(ArmOptima(), STUDIES, (SETUP,), rng_seed=3)[SETUP]


def test_calls_are_scored_against_the_truth_at_the_optima():
    m = DEFAULT_MARGIN
    assert false_call("better", 0.0, m) and false_call("worse", -0.02, m) and not false_call("better", -0.001, m)
    assert false_call("equivalent", 0.012, m) and not false_call("equivalent", 0.004, m)
    assert not false_call("inconclusive", 0.1, m) and not false_call(DEPENDS, 0.1, m)
    assert true_call("equivalent", 0.0, m) and true_call("worse", 0.004, m)
    assert not true_call(DEPENDS, 0.0, m) and not true_call("inconclusive", 0.0, m) and not true_call("better", 0.0, m)


def test_arm_optima_put_relu_midway_and_plant_the_effect():
    curves = ArmOptima(effect=-0.012).draw(np.random.default_rng(0))
    assert [c.best_lr for c in curves] == pytest.approx([2e-3, 2e-3, 2e-3 * math.sqrt(2), 2e-3 * math.sqrt(2)])
    assert [c.best_loss for c in curves] == pytest.approx([1.73, 1.73, 1.718, 1.718])
    assert all(c.loss(lr) > c.best_loss + 1e-3 for c in curves[2:] for lr in (2e-3, 4e-3))  # every grid pick misses


def test_selection_frame_holds_the_runs_the_picks_came_from():
    world = World()
    rng = np.random.default_rng(5)
    for seeds in (1, 2):
        curves = world.draw(rng)
        noise = Noise.draw(world, rng, 2)
        ks, _ = grid_picks(curves, noise, seeds)
        frame = selection_frame(curves, noise, seeds)
        assert len(frame) == 4 * 5 * seeds
        lowest = frame.groupby(["cell", "lr"])["loss"].mean().groupby(level="cell").idxmin()
        assert [lr for _, lr in lowest] == [LATTICE.value(k) for k in ks]


def test_truths_come_from_the_curves_minima(missed):
    b = simulate(WORLDS["b: relu better by 0.015, optima per cell"], 2, (SETUP,), rng_seed=1)[SETUP]
    for r in b:
        truth = dict(zip(r.keys, r.truths))
        assert truth[MAIN] == pytest.approx(-0.015)
        assert sum(abs(t) > 1e-12 for t in r.truths) == 3  # the main effect and relu's two simple effects
    assert all(abs(t) < 1e-12 for r in missed for t in r.truths)
    assert all(left > 1e-3 for r in missed for left in r.loss_left[2:])  # relu's picks leave loss on the table


def test_the_check_only_turns_calls_into_depends(missed):
    for r in missed:
        for before, after in zip(r.at_picks, r.calls):
            assert after in (before, DEPENDS)
            if after == DEPENDS:
                assert before in ("better", "worse", "equivalent")


def test_missed_picks_make_spurious_calls_that_the_check_removes(missed):
    s = summarise(SETUP, missed)
    # relu looks worse at its picks: spurious calls (against the truth at the optima) well above Holm's 5%
    assert s.false_dir_picks >= 0.2
    assert s.false_dir <= 0.05 and s.false_eq <= 0.05
    assert 0 < s.cost <= 1 and s.true_checked <= s.true_picks
    assert s.high_covers >= 0.9  # L^hi is a valid bound on the loss the pick leaves
    assert s.unbounded < 0.15  # two selection seeds: most cells' L^hi is finite
