"""Simulated scale studies with a planted change of an effect: the check of `scale_change`'s paired-by-seed CIs.

Owns `SIM_DESIGN` (a 2 x 2), `ChangeSim` (one simulated study, the model of `gptlab.stats.scale_change`'s
docstring), `simulate_changes` and `calibrate_changes`, which scores `change_table`'s rows against the
planted changes and compares the paired interval with Welch's (tests/stats/test_scale_change.py,
benchmarks/scale_change_calibration.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gptlab.stats import calls
from gptlab.stats.design import Design
from gptlab.stats.scale_change import CHANGES, NO_CHANGE, change_table, paired_change

SIM_DESIGN = Design(("a", "b"), {"a": ("a0", "a1"), "b": ("b0", "b1")}, {"a": "a0", "b": "b0"},
                    (("a0", "b0"), ("a0", "b1"), ("a1", "b0"), ("a1", "b1")))


@dataclass(frozen=True)
class ChangeSim:
    """One simulated scale study: SIM_DESIGN (a 2 x 2: a0/a1, b0/b1) at a reference and one other scale level.

    Planted (the model of the module docstring): a1's main effect is `effect` at the reference and
    `effect + change` at the other level, with an a x b interaction of +/- `interaction` that the
    averaging over b removes; b1's effect is the same at both levels (a planted change of zero).
    The seed offset and the seed x cell effects (sd `seed_sd`) correlate `rho` across the two
    levels; run noise has sd `run_sd`.
    """

    n_seeds: int
    rho: float
    change: float = 0.0
    effect: float = -0.02
    interaction: float = 0.01
    seed_sd: float = 0.01
    run_sd: float = 0.005
    margin: float = calls.DEFAULT_MARGIN
    datasets: int = 1000
    rng_seed: int = 0


def simulate_changes(sim: ChangeSim) -> np.ndarray:
    """(datasets, 2 scale levels, n_seeds, 4 cells) losses of `sim`, cells in SIM_DESIGN's order."""
    rng = np.random.default_rng(sim.rng_seed)
    a1 = np.array([a == "a1" for a, _ in SIM_DESIGN.cells], float)
    b1 = np.array([b == "b1" for _, b in SIM_DESIGN.cells], float)
    means = np.stack([1.5 - 0.2 * k + effect * a1 + 0.01 * b1 + sim.interaction * a1 * (2 * b1 - 1)
                      for k, effect in enumerate((sim.effect, sim.effect + sim.change))])

    def correlated(shape: tuple[int, ...]) -> np.ndarray:  # shared part + own part: corr rho across levels
        return (math.sqrt(sim.rho) * rng.standard_normal(shape[:1] + (1,) + shape[2:])
                + math.sqrt(1 - sim.rho) * rng.standard_normal(shape))

    shape = (sim.datasets, 2, sim.n_seeds, len(SIM_DESIGN.cells))
    seed = sim.seed_sd * (correlated(shape[:3] + (1,)) + correlated(shape))
    return means[None, :, None, :] + seed + sim.run_sd * rng.standard_normal(shape)


@dataclass(frozen=True)
class ChangeCalibration:
    """How `change_table` did on `sim`'s datasets (rates are fractions of datasets)."""

    sim: ChangeSim
    coverage: float  # a1's planted change inside its 95% CI
    false_changes: float  # `changes` on any change planted at zero (b1's; a1's too when sim.change is 0)
    no_change_calls: float  # a1's change called `no change within margin`
    bias: float  # mean of a1's estimate - planted change
    bias_se: float  # its Monte Carlo standard error
    half_width: float  # mean 95% CI half-width of a1's change, paired by seed
    half_width_unpaired: float  # the same datasets with the pairing ignored (Welch)
    coverage_unpaired: float


def calibrate_changes(sim: ChangeSim) -> ChangeCalibration:
    """Simulate `sim`'s datasets and score `change_table`'s a1 and b1 rows against the planted changes."""
    values = simulate_changes(sim)
    contrasts = np.stack([SIM_DESIGN.interaction(t) for t in SIM_DESIGN.terms(1)])  # rows: a1, b1
    tests, _, call = change_table(values, contrasts, sim.margin)
    err = tests.change[:, 0, 0] - sim.change
    nulls = [1] if sim.change else [0, 1]
    per_seed = values @ contrasts[0]  # (datasets, 2, seeds): a1's effect per seed at each level
    welch = paired_change(per_seed[:, 0], per_seed[:, 1], paired=False)

    def covers(low: np.ndarray, high: np.ndarray) -> float:
        return float(np.mean((low <= sim.change) & (sim.change <= high)))

    low, high = tests.ci_low[:, 0, 0], tests.ci_high[:, 0, 0]
    return ChangeCalibration(sim, covers(low, high), float(np.mean((call[:, 0, nulls] == CHANGES).any(axis=-1))),
                             float(np.mean(call[:, 0, 0] == NO_CHANGE)), float(err.mean()),
                             float(err.std(ddof=1) / math.sqrt(len(err))), float(np.mean(high - low) / 2),
                             float(np.mean(welch.ci_high - welch.ci_low) / 2), covers(welch.ci_low, welch.ci_high))
