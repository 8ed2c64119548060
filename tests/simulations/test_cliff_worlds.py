"""The cliff worlds' draws against their truths: what `calibration.verdicts_sim` scores the report against is what its
runs are, in expectation (failure rate, trained mean, every run counted), and the artefact world plants the miss."""
from __future__ import annotations

import math

import numpy as np
import pytest

from calibration.cliff_worlds import ARMS, CEILING, LATTICE, PRONE, WORLDS, ArmCurve, Draws, Truth, World, outcome
from gptlab.statuses import DIVERGED, OK

ARTEFACT = next(w for name, w in WORLDS.items() if name.startswith("artefact:"))


def _runs(world: World, curve: ArmCurve, lr: float, n: int, seed: int) -> list[tuple[str, float]]:
    draws = Draws.draw(np.random.default_rng(seed), 1, n)
    return [outcome(world, curve, lr, draws.estimation[0, i]) for i in range(n)]


@pytest.mark.parametrize("u", [0.0, 0.8, 1.3])  # at the optimum, on the failure ramp, near certain failure
def test_the_truths_are_the_runs_expectations(u):
    world = World()
    curve = ArmCurve(1.73, 3e-3, 0.02, cliff=0.5, width=1.0, floor=0.1)
    lr = curve.best_lr * 2 ** u
    runs = _runs(world, curve, lr, 20_000, seed=int(10 * u))
    truth = Truth(world)
    failed = np.array([s != OK for s, _ in runs])
    ok = np.array([y for s, y in runs if s == OK])
    counted = np.array([CEILING if s == DIVERGED else y for s, y in runs])
    q = curve.failure(lr)
    assert failed.mean() == pytest.approx(q, abs=4 * math.sqrt(q * (1 - q) / len(runs)))
    if len(ok) > 100:
        assert ok.mean() == pytest.approx(truth.ok_mean(curve, lr), abs=4 * ok.std() / math.sqrt(len(ok)))
    assert counted.mean() == pytest.approx(truth.all_mean(curve, lr), abs=4 * counted.std() / math.sqrt(len(runs)))


def test_slow_seeds_lag_as_planted():
    world = World()
    curve = ArmCurve(1.73, 3e-3, 0.02)
    lags = np.array([y for _, y in _runs(world, curve, 3e-3, 20_000, seed=3)]) - 1.73
    assert np.mean(lags > 0.02) == pytest.approx(world.slow, abs=0.01)  # noise rarely reaches 0.02 (3.3 SD)
    assert lags.std() == pytest.approx(world.total_sd, rel=0.05)


def test_the_artefact_arm_always_misses_its_optimum():
    curves = ARTEFACT.draw(np.random.default_rng(0))
    probe, truth = curves[1], Truth(ARTEFACT)
    assert probe.best_lr == pytest.approx(2e-3 * 2 ** 0.4)
    above = min(LATTICE.value(k) for k in LATTICE.steps() if LATTICE.value(k) > probe.best_lr)
    assert probe.failure(above) == 1.0  # the half-step above its optimum never trains
    assert truth.optimum(probe) == pytest.approx(probe.best_loss + ARTEFACT.slow_mean)
    assert truth.lattice_optimum(probe) - truth.optimum(probe) > 0.3 * probe.curvature  # 2c (0.4)^2 at best
    assert all(truth.optimum(c) == pytest.approx(truth.optimum(curves[0])) for c in curves)  # every effect 0


def test_the_failure_prone_arm_fails_at_its_floor_below_its_cliff():
    curves = World().draw(np.random.default_rng(1))
    prone = curves[ARMS.index(PRONE)]
    assert prone.failure(prone.best_lr) == pytest.approx(0.1)
    assert all(c.failure(c.best_lr) == 0.0 for c in curves if c is not prone)
    assert prone.failure(prone.best_lr * 2 ** (prone.cliff + prone.width)) == 1.0
