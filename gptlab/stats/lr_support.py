"""What one cell's tried lrs support: its own selection noise, and the sides its optimum is confined to.

Used by `stats.lr_curves` (whose docstring states the fit these feed).

- **Each cell's own noise** (`NoiseSums`, `own_noise`): the SD of one run's loss from the cell's own runs
  that trained (status ok): replicate runs at one lr (n - 1 df each, the estimation runs at its pick
  included) and its window's plain-parabola residual (window lrs - 3 df). Arms differ: results/scorecard's
  NoPE has a run SD of 0.031 nats where the pool over every arm says 0.0127, and a failed arm's residuals
  must not widen every other arm's CIs. A cell with no df of its own takes the pool over the cells
  (flag `pooled_noise`).
- **Confinement** (`confine`): the nearest tried lr on each side of the lowest mean whose mean is
  clearly above it (one-sided t test at `SIDE_LEVEL` on the cell's own noise, the two means' run
  counts). A loss curve with one minimum then has its optimum between those two lrs: if it lay beyond
  one of them, that lr would be lower than the lowest mean, not clearly above it (chance: at most
  `SIDE_LEVEL` per side). A side with no such lr (the lowest mean at the edge of what was tried, or
  every lr beyond it within noise) is open, and only the curve's own profile can close it.
Numbers only: no files, no sentences.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

SIDE_LEVEL = 0.025  # one-sided: a side's lr is "clearly above" the lowest mean at this level
POOLED = "pooled_noise"  # flag: the cell had no df of its own; its CIs use the pool over the cells


@dataclass(frozen=True)
class NoiseSums:
    """One cell's (or a pool's) sums of squares and degrees of freedom."""

    ss_replicates: float = 0.0
    df_replicates: int = 0
    ss_residual: float = 0.0
    df_residual: int = 0

    def __add__(self, other: NoiseSums) -> NoiseSums:
        return NoiseSums(self.ss_replicates + other.ss_replicates, self.df_replicates + other.df_replicates,
                         self.ss_residual + other.ss_residual, self.df_residual + other.df_residual)

    @property
    def df(self) -> int:
        return self.df_replicates + self.df_residual

    @property
    def sd(self) -> float:
        return math.sqrt((self.ss_replicates + self.ss_residual) / self.df) if self.df > 0 else math.nan


def replicate_sums(ok: pd.DataFrame) -> NoiseSums:
    """Replicate sums of ok runs (columns x or lr, capped): every lr with two or more runs, n - 1 df each."""
    key = "x" if "x" in ok else "lr"
    groups = ok.groupby(key)["capped"]
    return NoiseSums(float(groups.apply(lambda g: ((g - g.mean()) ** 2).sum()).sum()) if len(ok) else 0.0,
                     int((groups.count() - 1).clip(lower=0).sum()) if len(ok) else 0)


def own_noise(cell: NoiseSums, pool: NoiseSums) -> tuple[float, int, bool]:
    """(SD, df, pooled?) of a cell: its own when it has df, else the pool's."""
    return (cell.sd, cell.df, False) if cell.df > 0 else (pool.sd, pool.df, True)


def confine(ok: pd.DataFrame, centre: float, sd: float, df: int, level: float = SIDE_LEVEL) -> tuple[float, float]:
    """The optimum's confinement (log2 lr minus `centre`): the nearest lr on each side clearly above the lowest
    mean at `centre` (-inf / inf: that side is open). `ok`: the cell's ok runs, columns x (log2 lr) and capped."""
    if not (sd > 0 and df > 0):
        return -math.inf, math.inf
    g = ok.groupby("x")["capped"]
    means, counts = g.mean(), g.count()
    xs = means.index.to_numpy(float)
    at = int(np.argmin(np.abs(xs - centre)))
    y0, n0 = float(means.iloc[at]), int(counts.iloc[at])
    q = float(stats.t.ppf(1 - level, df))
    above = means.to_numpy(float) - y0 > q * sd * np.sqrt(1 / counts.to_numpy(float) + 1 / n0)
    left = [x for x, a in zip(xs, above) if a and x < xs[at]]
    right = [x for x, a in zip(xs, above) if a and x > xs[at]]
    return (max(left) - centre if left else -math.inf), (min(right) - centre if right else math.inf)
