"""Simulated pairs of arms studies on two texts with planted changes: the check of `transfer`'s interval and verdicts.

Owns `se_from_ci`, `TransferWorld` (two corpora, each an arms study of `calibration.arms_sim`), `simulate_transfer`,
`calibrate_transfer` (the verdicts scored against the planted changes) and `TRANSFER_WORLDS`
(benchmarks/transfer_calibration.py's rows; tests/stats/test_transfer.py runs small versions).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from calibration.arms_sim import ArmsWorld, dunnett, simulate
from gptlab.stats.calls import ALPHA, DEFAULT_MARGIN
from gptlab.stats.transfer import CHANGES, HOLDS, REVERSES, UnpairedChange, transfer_calls, unpaired_change


def se_from_ci(ci95_half_width: np.ndarray, df: np.ndarray) -> np.ndarray:
    """The standard error behind a 95% t interval of half-width `ci95_half_width` on `df` degrees of freedom."""
    return np.asarray(ci95_half_width, float) / st.t.ppf(1 - ALPHA / 2, np.asarray(df, float))


# Planted: arms 1-2 keep their effect on the second text (change 0), arm 3 loses it, arm 4 reverses, arm 5 gains
# one, arms 6-8 are null on both texts (change 0).
PLANTED_REF = (0.03, -0.03, 0.03, 0.03, 0.0, 0.0, 0.0, 0.0)
PLANTED_LEVEL = (0.03, -0.03, 0.0, -0.03, -0.03, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class TransferWorld:
    """Two corpora, each an arms study (`arms_sim.ArmsWorld`, Dunnett's allocation), drawn independently.

    The second text is noisier (`level_scale` times every SD): a longer, different text need not be as easy
    to estimate on, so the two sides' variances and df differ, which is what Welch's df is for."""
    seeds: int = 3
    level_scale: float = 1.5
    ref: tuple[float, ...] = PLANTED_REF
    level: tuple[float, ...] = PLANTED_LEVEL
    inter_sd: float = 0.01
    rho: float = 0.0

    @property
    def planted_change(self) -> np.ndarray:
        return np.array(self.level, float) - np.array(self.ref, float)


@dataclass(frozen=True)
class TransferCalibration:
    """How the verdicts did on one world's simulated study pairs (rates are shares of studies or changes)."""
    world: TransferWorld
    studies: int
    coverage: float  # planted change inside its 95% CI, over every arm
    familywise_false_change: float  # studies with `changes`/`reverses` on a change planted at zero (Holm)
    false_reverse: float  # studies with `reverses` on an arm not planted to reverse
    holds_when_zero: float  # share of zero-change arms with an effect (arms 1-2) called `holds`
    holds_when_changed: float  # share of changed arms (3-5) called `holds` (a wrong "same")
    power_change: float  # share of changed arms (3-5) called `changes` or `reverses`
    power_reverse: float  # share of the reversing arm (4) called `reverses`
    half_width: float  # mean 95% CI half-width of a change
    welch_df: float  # median Welch df of a change


def simulate_transfer(world: TransferWorld, studies: int, rng_seed: int = 0,
                      margin: float = DEFAULT_MARGIN) -> dict[str, np.ndarray]:
    """`studies` pairs of arms studies (reference text, second text), analysed the report's way, and the verdicts."""
    k = len(world.ref)
    base = ArmsWorld(arms=k, seeds=world.seeds, rho=world.rho, inter_sd=world.inter_sd)
    noisy = dataclasses.replace(base, run_sd=base.run_sd * world.level_scale, inter_sd=base.inter_sd * world.level_scale,
                                err_sd=base.err_sd * world.level_scale)
    sides = []
    for i, (w, effects) in enumerate(((base, world.ref), (noisy, world.level))):
        w = dataclasses.replace(w, effects=tuple(effects))
        sides.append(simulate(w, studies, [dunnett(w)], (rng_seed, i), margin)[dunnett(w).name])
    ref, level = sides
    ch = unpaired_change(ref.estimate, se_from_ci(ref.half_width, ref.df), ref.df,
                         level.estimate, se_from_ci(level.half_width, level.df), level.df)
    verdicts, p_adj = [], []
    for s in range(studies):
        one = UnpairedChange(*(getattr(ch, f.name)[s] for f in dataclasses.fields(UnpairedChange)))
        p, v = transfer_calls(one, ref.call[s], level.call[s], margin)
        p_adj.append(p)
        verdicts.append(v)
    return {"change": ch.change, "ci_low": ch.ci_low, "ci_high": ch.ci_high, "df": ch.df,
            "p_adjusted": np.array(p_adj), "verdict": np.array(verdicts, dtype=object)}


def calibrate_transfer(world: TransferWorld, studies: int, rng_seed: int = 0,
                       margin: float = DEFAULT_MARGIN) -> TransferCalibration:
    """Simulate `world` and score the verdicts against its planted changes."""
    sim = simulate_transfer(world, studies, rng_seed, margin)
    truth = world.planted_change[None, :]
    verdict = sim["verdict"]
    zero = world.planted_change == 0
    ref, level = np.array(world.ref), np.array(world.level)
    reversing = np.sign(ref) * np.sign(level) < 0
    kept = zero & (ref != 0)
    changed = ~zero
    significant = np.isin(verdict, (CHANGES, REVERSES))
    covered = (sim["ci_low"] <= truth) & (truth <= sim["ci_high"])
    return TransferCalibration(
        world, studies, float(covered.mean()), float(significant[:, zero].any(axis=1).mean()),
        float((verdict[:, ~reversing] == REVERSES).any(axis=1).mean()),
        float((verdict[:, kept] == HOLDS).mean()) if kept.any() else math.nan,
        float((verdict[:, changed] == HOLDS).mean()) if changed.any() else math.nan,
        float(significant[:, changed].mean()) if changed.any() else math.nan,
        float((verdict[:, reversing] == REVERSES).mean()) if reversing.any() else math.nan,
        float(np.nanmean((sim["ci_high"] - sim["ci_low"]) / 2)), float(np.nanmedian(sim["df"])))


TRANSFER_WORLDS = {  # name -> world: benchmarks/transfer_calibration.py's rows
    "3 seeds, second text 1.5x noisier": TransferWorld(),
    "5 seeds, second text 1.5x noisier": TransferWorld(seeds=5),
    "3 seeds, equal noise": TransferWorld(level_scale=1.0),
    "3 seeds, rho 0.5 (seed shared by arms)": TransferWorld(rho=0.5),
    "5 seeds, equal noise, arm x block SD 0.002": TransferWorld(seeds=5, level_scale=1.0, inter_sd=0.002),
}
