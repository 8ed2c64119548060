"""One model of a cell's loss against log2(lr), shared by the refining tuner (`stats.refine`) and the report (`stats.lr_curves`).

Both call the functions below on the same runs, so a curve the tuner closes is a curve the report
finds closed, and a pick's noise is the same number in refine.csv and in `tables/lr_curves.csv`.

- **The points.** Every run of the cell that trained (status `ok`, `TRAINED`), at every lr tried:
  selection runs, replicate seeds, the estimation runs at its pick and at earlier picks alike (no
  finished run is left out of its curve). A run still descending when it ends is a measurement at its
  loss, however high; a lagging seed counts at its loss, so an lr where a seed lagged has a higher
  mean than a neighbour where none did. `failed` runs (a crash) say nothing about the lr and are left
  out (`SAYS_NOTHING`); every other status (`diverged`, `collapsed`, `unstable`:
  `gptlab.statuses.judge`, decided from each run's own curve) is a run that did not train.
- **The shape.** Smooth and unimodal in log2(lr), with one stability cliff at most: the cliff is the
  lowest lr above the lowest mean where a run did not train, and every lr above it (the edge of
  stability is crossed once; `cliff_edge`). When a run at the lowest mean's own lr did not train,
  that lr is the cliff and the lowest mean below it is the reference. Below the lowest mean a run that
  did not train is a failure there, not an edge. Nothing about a run's loss makes a cliff: that
  would be a cut on the outcome. An lr beyond the cliff is never picked and enters no fit or noise.
  Near its lowest point the curve is a parabola in log2(lr) (the window: every point within one
  coarse step of the lowest mean, at least 3; `window`, `parabola`), bent as `stats.lr_curves` states.
- **The noise.** Each cell's own SD of one run's loss, from its own replicates (two or more trained
  runs at one lr, n - 1 df each; `replicate_sums`): never from a fit's residuals, which hold lack of
  fit at a bend as well as noise. A cell with fewer than `MIN_OWN_DF` df of its own takes the pool
  over the cells (`noise_of`); with none at all the noise is unknown.
- **Lagging runs** (`lagging`): a trained run that lies above the median of its lr's runs by more than
  `Z_LAG` robust SDs of the cell's replicates (1.4826 x their median absolute deviation from their
  lr's median, which one lagging seed cannot inflate as it inflates an SD). It stays a point of the
  curve and a run of its effect at its own loss; it tells the tuner to read its pick again from the
  mean of every run at each lr, the lagging one included (`stats.refine.risk_free_pick`): an lr pays for
  the risk it carries, and a pick whose runs trained alike is never moved by noise.
- **The closed sides** (`closed_sides`): a side of the lowest mean is closed at the nearest tried lr
  there whose mean is clearly above it (one-sided t test at `SIDE_LEVEL` on the cell's noise and df,
  the two means' run counts); a unimodal curve then has its minimum between the two closed lrs (were
  it beyond, that lr would be below the lowest mean, not clearly above it: chance at most
  `SIDE_LEVEL` a side). A tried lr where a run did not train (the cliff) closes its side too.

Numbers only: no files, no sentences. docs/STATISTICS.md ("One model of the lr curve") states the
calibration.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
from scipy import stats

from gptlab.statuses import FAILED, OK

TRAINED = OK  # the one status of a run that trained (`gptlab.statuses` owns the names)
SAYS_NOTHING = FAILED  # a crashed run: no evidence about its lr, left out of everything here
TOLERANCE = 1e-4  # octaves: lrs written to 6 significant digits (1.41421e-3) are this close to the lattice's
SIDE_LEVEL = 0.025  # one-sided: a side's lr is "clearly above" the lowest mean at this level
MIN_OWN_DF = 3  # replicate df a cell needs before its own noise replaces the pool's
Z_LAG = 4.0  # a run this many robust SDs above its lr's median lagged (a normal run does so once in 30,000)
POOLED = "pooled_noise"  # flag: the cell had too few df of its own; its noise is the pool over the cells


def trained(status: str) -> bool:
    """Whether a run with this status trained (its loss is a point of its cell's curve)."""
    return status == TRAINED


def cliff_edge(runs: Iterable[tuple[float, float, bool]]) -> float:
    """The lowest x (log2 lr) beyond the cliff, inf when none: runs as (x, loss, trained) of one cell."""
    by_x: dict[float, list[tuple[float, bool]]] = {}
    for x, loss, ok in runs:
        by_x.setdefault(float(x), []).append((float(loss), bool(ok) and math.isfinite(loss)))
    xs = sorted(by_x)
    edge = math.inf
    while True:
        means = {x: float(np.mean([y for y, ok in by_x[x] if ok])) for x in xs
                 if x < edge - TOLERANCE and any(ok for _, ok in by_x[x])}
        if not means:
            return edge
        best = min(sorted(means), key=lambda x: means[x])
        if not all(ok for _, ok in by_x[best]):  # a run failed at the lowest mean: the cliff starts there
            edge = best
            continue
        return next((x for x in xs if best + TOLERANCE < x < edge - TOLERANCE and not all(ok for _, ok in by_x[x])),
                    edge)


def beyond(x: float | np.ndarray, edge: float) -> bool | np.ndarray:
    """Whether log2 lr `x` lies beyond the cliff that starts at `edge` (`cliff_edge`'s answer)."""
    return x >= edge - TOLERANCE


@dataclass(frozen=True)
class NoiseSums:
    """One cell's (or a pool's) replicate sum of squares and degrees of freedom."""

    ss: float = 0.0  # sum of squared deviations of trained runs from their lr's mean
    df: int = 0  # runs minus distinct lrs, over lrs with two or more trained runs

    def __add__(self, other: NoiseSums) -> NoiseSums:
        return NoiseSums(self.ss + other.ss, self.df + other.df)

    @property
    def sd(self) -> float:
        return math.sqrt(self.ss / self.df) if self.df > 0 else math.nan


def replicate_sums(points: Mapping[float, Sequence[float]]) -> NoiseSums:
    """Replicate sums of one cell's trained runs, `points`: x (or any lr key) -> their losses."""
    ss, df = 0.0, 0
    for ys in points.values():
        if len(ys) > 1:
            a = np.asarray(ys, float)
            ss, df = ss + float(((a - a.mean()) ** 2).sum()), df + len(a) - 1
    return NoiseSums(ss, df)


def noise_of(cell: NoiseSums, pool: NoiseSums) -> tuple[float, int, bool]:
    """(SD, df, pooled?) of a cell: its own with at least `MIN_OWN_DF` df, else the pool's (NaN, 0 with none)."""
    if cell.df >= MIN_OWN_DF or (cell.df > 0 and pool.df <= cell.df):
        return cell.sd, cell.df, False
    return (pool.sd, pool.df, True) if pool.df > 0 else (math.nan, 0, True)


def lagging(points: Mapping[float, Sequence[float]]) -> set[float]:
    """The x (lrs) of `points` (x -> trained runs' losses) where a run lagged (see the module's docstring)."""
    devs = [abs(y - float(np.median(ys))) for ys in points.values() if len(ys) > 1 for y in ys]
    scale = 1.4826 * float(np.median(devs)) if devs else math.nan
    if not scale > 0:
        return set()
    return {x for x, ys in points.items() if len(ys) > 1 and max(ys) - float(np.median(ys)) > Z_LAG * scale}


def closed_sides(means: Mapping[float, tuple[float, int]], centre: float, sd: float, df: float,
                 shut: Sequence[float] = (), level: float = SIDE_LEVEL) -> tuple[float, float]:
    """The nearest x on each side of `centre` whose mean is clearly above the mean there (-inf / inf: that side is
    open; `df` inf: the noise is known); `means`: x -> (mean, trained runs) on the trained side of the cliff;
    `shut`: tried x where a run did not train (a failure closes its side at that x without a test)."""
    m0, n0 = means[centre]
    q = float(stats.t.ppf(1 - level, df)) if sd > 0 and df > 0 else math.inf
    above = [x for x, (m, n) in means.items() if m - m0 > q * sd * math.sqrt(1 / n + 1 / n0)] + list(shut)
    left = [x for x in above if x < centre - TOLERANCE]
    right = [x for x in above if x > centre + TOLERANCE]
    return (max(left) if left else -math.inf), (min(right) if right else math.inf)


def window(xs: np.ndarray, centre: float, step: float) -> np.ndarray:
    """Which of the points `xs` the parabola sees: every x within one coarse `step` of `centre`, and the nearest
    others, one at a time (the smaller x first on a tie), until there are 3."""
    dist = np.abs(xs - centre)
    inside = dist <= step + TOLERANCE
    for i in np.argsort(dist, kind="stable"):
        if inside.sum() >= 3:
            break
        inside[i] = True
    return inside


def parabola(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
    """Weighted least-squares parabola through the points: (m0, b, c) of m0 + b z + c z^2, and its RSS."""
    X = np.column_stack([np.ones_like(z), z, z * z])
    coef = np.linalg.pinv((X.T * w) @ X) @ ((X.T * w) @ y)
    resid = y - X @ coef
    return coef, float(np.sum(w * resid * resid))
