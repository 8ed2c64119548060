"""Does an effect hold on another text? The unpaired change of an effect between two corpora, and its verdict.

Owns `unpaired_change` (the interval on arrays) and `transfer_calls` (the verdicts); the simulation that
checks both is `calibration.transfer_sim` (benchmarks/transfer_calibration.py prints it).

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

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as st

from gptlab.stats import calls
from gptlab.stats.calls import ALPHA, DEFAULT_MARGIN, DIRECTIONAL, INCONCLUSIVE

HOLDS, CHANGES, REVERSES = "holds", "changes", "reverses"  # and INCONCLUSIVE, the call's own word (`calls`)
TRANSFER_CALLS = (HOLDS, CHANGES, REVERSES, INCONCLUSIVE)
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
