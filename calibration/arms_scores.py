"""How simulated arms studies score: coverage (every arm's and each arm's), false calls, widths and power per setup.

Owns `Summary` and `summarise` (one setup's `arms_sim.Records` of one world), `run` (simulate and summarise),
`calibrate` (a world null and planted, on separate draws) and `WORLDS` (benchmarks/arms_calibration.py's rows,
the world with one arm five times noisier among them; tests/simulations/test_arms_sim.py runs small versions).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from calibration.arms_sim import ArmsWorld, Records, Setup, dunnett, equal, pooled, seeds_only, setups, simulate
from gptlab.stats.calls import BETTER, DEFAULT_MARGIN, DIRECTIONAL, WORSE

NOISY = "rho 0, arm5 (an arm at 0) 5x the run SD"  # the world with one noisy arm

@dataclass(frozen=True)
class Summary:
    """How one setup did on one world's studies."""
    setup: Setup
    studies: int
    coverage: float  # share of the arms' 95% CIs (unadjusted) containing the arm's true effect
    coverage_se: float  # its Monte-Carlo SE, from the studies' coverage shares (the arms share the baseline)
    familywise: float  # share of studies with a false better/worse call (truth 0, or the other sign; Holm)
    false_rate: float  # share of the truly-zero comparisons called better or worse
    half_width: float  # mean 95% CI half-width
    median_half_width: float
    max_half_width: float
    low_df: float  # share of the comparisons whose t has fewer than 2 degrees of freedom
    error_sd: float  # root mean square of estimate minus truth
    true_sd: float  # root mean of `ArmsWorld.contrast_variance` over the comparisons
    text_share: float  # mean share of a comparison's variance due to the text (NaN: seeds only)
    power: tuple[tuple[float, float], ...]  # (|effect|, share of those comparisons called in the right direction)
    welch: float  # share of studies whose seed model used per-cell variances
    arm_coverage: tuple[float, ...] = ()  # each arm's coverage (arm1 .. armk)
    noisy_arm: int = 0  # the world's noisy arm (0: none)

    @property
    def noisy_coverage(self) -> float:
        """The noisy arm's coverage (NaN where the world has none)."""
        return self.arm_coverage[self.noisy_arm - 1] if self.noisy_arm else math.nan

    @property
    def others_coverage(self) -> tuple[float, float]:
        """The lowest and highest coverage of the arms other than the noisy one."""
        rest = [c for i, c in enumerate(self.arm_coverage, 1) if i != self.noisy_arm]
        return min(rest), max(rest)

    def power_at(self, size: float) -> float:
        return dict(self.power).get(size, math.nan)


def summarise(world: ArmsWorld, rec: Records) -> Summary:
    truth = rec.truth[None, :]
    covered = (rec.ci_low <= truth) & (truth <= rec.ci_high)
    directional = np.isin(rec.call, DIRECTIONAL)
    right = np.where(truth > 0, rec.call == WORSE, rec.call == BETTER)
    false = directional & ((truth == 0) | ~right)
    zero = np.broadcast_to(truth == 0, rec.call.shape)
    per_study = covered.mean(axis=1)
    arm = np.broadcast_to(np.arange(1, world.arms + 1), rec.arm_seeds.shape)
    var = np.vectorize(world.contrast_variance)(rec.arm_seeds, rec.setup.baseline, arm)
    sizes = sorted({abs(float(t)) for t in rec.truth if t != 0})
    power = tuple((size, float(right[:, np.abs(rec.truth) == size].mean())) for size in sizes)
    n = len(per_study)
    se = float(per_study.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return Summary(rec.setup, n, float(covered.mean()), se,
                   float(false.any(axis=1).mean()), float(false[zero].mean()) if zero.any() else math.nan,
                   float(rec.half_width.mean()), float(np.median(rec.half_width)), float(rec.half_width.max()),
                   float((rec.df < 2).mean()), float(np.sqrt(((rec.estimate - truth) ** 2).mean())),
                   float(np.sqrt(var.mean())), float(np.nanmean(rec.text_share)) if rec.setup.blocks else math.nan,
                   power, float(rec.welch.mean()), tuple(covered.mean(axis=0).tolist()), world.noisy_arm)


def run(world: ArmsWorld, studies: int, chosen: Sequence[Setup] | None = None, rng_seed: int | Sequence[int] = 0,
        margin: float = DEFAULT_MARGIN) -> dict[str, Summary]:
    """`simulate` and `summarise`: one Summary per setup (by name)."""
    return {name: summarise(world, rec) for name, rec in simulate(world, studies, chosen, rng_seed, margin).items()}


@dataclass(frozen=True)
class Calibration:
    """One setup on one world: its null version (every effect 0) and its planted one (`PLANTED`), on separate draws."""
    null: Summary
    planted: Summary


def calibrate(world: ArmsWorld, studies: int, chosen: Sequence[Setup] | None = None, rng_seed: int = 0,
              margin: float = DEFAULT_MARGIN) -> dict[str, Calibration]:
    """`studies` null and `studies` planted studies of `world` (rng streams (rng_seed, 0) and (rng_seed, 1))."""
    null = run(world.null(), studies, chosen, (rng_seed, 0), margin)
    planted = run(world.planted(), studies, chosen, (rng_seed, 1), margin)
    return {name: Calibration(null[name], planted[name]) for name in null}


WORLDS = {  # name -> (world, its setups): benchmarks/arms_calibration.py's rows (each world null and planted)
    "rho 0": (ArmsWorld(rho=0.0), lambda w: setups(w) + (seeds_only(w),)),
    "rho 0.5": (ArmsWorld(rho=0.5), setups),
    "rho 0.5, seed's text taste shared (block rho 0.5)": (ArmsWorld(rho=0.5, block_rho=0.5),
                                                           lambda w: (dunnett(w), equal(w))),
    "rho 0, arm x block SD 0.003": (ArmsWorld(rho=0.0, inter_sd=0.003), lambda w: (dunnett(w), equal(w))),
    NOISY: (ArmsWorld(rho=0.0, noisy_arm=5), lambda w: (dunnett(w), pooled(w))),
    NOISY + " and run x block SD": (ArmsWorld(rho=0.0, noisy_arm=5, noisy_blocks=True),
                                    lambda w: (dunnett(w), pooled(w))),
    NOISY + ", 5 seeds (16 baseline) as studies 8 and 9": (ArmsWorld(rho=0.0, seeds=5, noisy_arm=5),
                                                            lambda w: (dunnett(w), pooled(w))),
}
