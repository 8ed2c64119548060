"""Does an effect hold on another text? The unpaired change of an effect between two corpora, and its verdict.

Owns `unpaired_change` (the interval on arrays), `transfer_calls` (the verdicts) and the simulation that
checks both (`TransferWorld`, `calibrate_transfer`; benchmarks/transfer_calibration.py prints it).

An effect measured on two corpora comes from two analyses of disjoint runs scored on disjoint texts: each
estimate's CI already counts its seeds and its text's blocks (`effects`, `text_share`), and nothing is
shared between them that a pairing could remove. A seed's runs on the two texts share their
initialisation but not one batch, and the two test splits have no block in common, so the estimates are
independent and the change d = e_level - e_reference has variance se_ref^2 + se_level^2, with
Welch-Satterthwaite degrees of freedom from the two estimates' own (each a Satterthwaite df already).
This is the change test whenever the texts differ (`data.dataset` or `data.path` a scale factor), and
for an arms design at any scale factor (the baseline's extra seeds have no partner, `stats.arms`). A
grid's change along a scale factor on one text (training length, width) stays paired by seed
(`scale_change`). Effects are in bits per character when the texts differ: a nat of one text is not a
nat of another, and no loss is ever averaged across corpora.

Verdicts (ALPHA as in `calls`; p Holm-adjusted across the table's changes):
  `reverses`   the change is significant and the effect is called in opposite directions on the two texts
               (better on one, worse on the other, each by its own analysis);
  `changes`    the change is significant (its sign says which way), without a reversal;
  `holds`      the change's 90% CI lies inside +/- the margin (TOST): the same effect on both texts;
  `inconclusive` otherwise: neither shown to differ nor shown to be the same. Never read as `holds`.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as st

from gptlab.stats import calls
from gptlab.stats.calls import ALPHA, DEFAULT_MARGIN

HOLDS, CHANGES, REVERSES, INCONCLUSIVE = "holds", "changes", "reverses", "inconclusive"
TRANSFER_CALLS = (HOLDS, CHANGES, REVERSES, INCONCLUSIVE)
DIRECTIONAL = ("better", "worse")
UNPAIRED = "unpaired (independent texts)"  # effect_changes.csv's `pairing` for these rows
PAIRED = "paired by seed"  # the `scale_change` rows'


@dataclass(frozen=True)
class UnpairedChange:
    """Changes between two independent estimates, arrays of one shape."""

    change: np.ndarray
    se: np.ndarray
    df: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    ci90_low: np.ndarray
    ci90_high: np.ndarray
    p_value: np.ndarray


def se_from_ci(ci95_half_width: np.ndarray, df: np.ndarray) -> np.ndarray:
    """The standard error behind a 95% t interval of half-width `ci95_half_width` on `df` degrees of freedom."""
    return np.asarray(ci95_half_width, float) / st.t.ppf(1 - ALPHA / 2, np.asarray(df, float))


def unpaired_change(ref: np.ndarray, se_ref: np.ndarray, df_ref: np.ndarray,
                    level: np.ndarray, se_level: np.ndarray, df_level: np.ndarray) -> UnpairedChange:
    """level - ref with its Welch-Satterthwaite t interval (NaN where either side has no error)."""
    ref, level = np.asarray(ref, float), np.asarray(level, float)
    v_ref, v_level = np.asarray(se_ref, float) ** 2, np.asarray(se_level, float) ** 2
    df_ref, df_level = np.asarray(df_ref, float), np.asarray(df_level, float)
    var = v_ref + v_level
    with np.errstate(divide="ignore", invalid="ignore"):
        df = var ** 2 / (v_ref ** 2 / df_ref + v_level ** 2 / df_level)
    df = np.where((var > 0) & np.isfinite(df) & (df > 0), df, np.nan)
    se = np.sqrt(np.where(np.isfinite(df), var, np.nan))
    change = level - ref
    t95, t90 = st.t.ppf(1 - ALPHA / 2, df), st.t.ppf(1 - ALPHA, df)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(se > 0, 2 * st.t.sf(np.abs(change) / se, df), np.nan)
    return UnpairedChange(change, se, df, change - t95 * se, change + t95 * se, change - t90 * se,
                          change + t90 * se, p)


def transfer_calls(ch: UnpairedChange, call_ref: Sequence[str], call_level: Sequence[str],
                   margin: float = DEFAULT_MARGIN) -> tuple[np.ndarray, np.ndarray]:
    """(Holm-adjusted p over every change, the verdicts) for 1-d arrays; see the module docstring."""
    p_adj = calls.holm(ch.p_value)
    out = []
    for i, p in enumerate(p_adj):
        a, b = str(call_ref[i]), str(call_level[i])
        if not math.isnan(p) and p < ALPHA:
            out.append(REVERSES if {a, b} == set(DIRECTIONAL) else CHANGES)
        elif np.isfinite(ch.ci90_low[i]) and -margin < ch.ci90_low[i] and ch.ci90_high[i] < margin:
            out.append(HOLDS)
        else:
            out.append(INCONCLUSIVE)
    return p_adj, np.array(out, dtype=object)


# --- calibration by simulation ------------------------------------------------------------------------------------

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
    from gptlab.stats.arms_sim import ArmsWorld, dunnett, simulate

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
