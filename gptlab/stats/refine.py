"""The refining tuner's decisions: which learning rates (and seeds) each cell tries next, and when its pick is trusted.

Numbers only: the sweep's `refine` planner (`gptlab.kinds.tune.refine`) and the calibration by simulation
(`calibration.refine_sim`) call the same `decide` on the same observations, so what is calibrated is
what trains.

The lrs a cell may try form a lattice in log2(lr): the coarse levels of `tune.space` (a geometric
grid, ratio r) are the even half-steps k = 0, 2, ..., 2(n-1) (lr = lr_0 r^(k/2)); the odd ones are
their geometric midpoints; at most `extend` coarse steps beyond either end. Every step below sees a
cell's runs on the trained side of its stability cliff only (`stats.lr_model`, the curve model the
report shares: the lowest lr above the lowest mean where a run did not train, and every higher lr;
`trained_side`): those runs never enter a fit, a pick or the noise, and nothing at or beyond the
cliff is tried. After the coarse grid (one seed
per level), each round takes, for every cell, the first of these that applies:

1. edge: the lowest mean sits at the highest (lowest) lr tried -> try one coarse step beyond it.
2. refine: a half-step neighbour of the lowest mean is untried -> try it (the neighbours at half
   the spacing, so the pick is at most a quarter of a coarse step from the curve's minimum).
3. the pick: the model's parabola in k through the points within one coarse step of the lowest
   mean (`stats.lr_model.window`; weights: ok runs per lr; Wortsman et al. 2023 read the whole loss-vs-lr curve, not one
   point) smooths the means; the pick is the tried lr with the lowest fitted loss (the lowest
   mean where the fit is not convex). A pick that a tried point beats by more than `BEATEN` (2)
   SEs of the difference at the cell's noise is not made: the lowest mean is the pick and its
   bootstrap reads the means unsmoothed (`beaten` records the fit's minimum it overruled).
4. close: once the noise is known, a side of the lowest mean that the model finds open
   (`stats.lr_model.closed_sides`, the report's test: no tried lr there clearly above the lowest
   mean at one-sided 2.5% on the cell's noise, and none where a run did not train) -> try one coarse
   step beyond that side's farthest point (a half-step where the coarse one is out of bounds or
   tried; nothing where both are, or past the cliff). Every cell, the baseline included.
5. trust: a parametric bootstrap of the points under the cell's noise gives the pick's
   probability of being the best tried lr (`p_best`) and the loss it is expected to leave on the
   table against the best of them (`expected_regret`). The cell is done when p_best >= confidence,
   or the expected regret is below `tolerance` (two lrs whose true losses differ by less than
   that are never told apart, and need not be), or its budget is spent; otherwise one more seed
   trains at the pick and at its closest rival.

Runs that did not train (diverged, collapsed) count as an infinite loss (never a pick, never in a
fit). Each cell's noise is the model's (`stats.lr_model.noise_of`): its own replicate seeds at one
lr once they give `MIN_OWN_DF` df, the pool of every cell's replicates before that; never a fit's
residuals. With none yet, no pick is trusted and no curve is closed (more seeds at the pick and its
rival are the only way to learn it). Every random
draw comes from a generator seeded by the data's shape, so a rerun decides the same.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from gptlab.stats.lr_model import NoiseSums, beyond, cliff_edge, closed_sides, lagging, noise_of, parabola, replicate_sums, window

BOOTSTRAP_DRAWS = 2000  # parametric bootstrap draws behind p_best and the expected regret
WINDOW = 2  # half-steps either side of the lowest mean that the local quadratic sees (one coarse step)
BEATEN = 2.0  # a tried point whose mean is below the fit's pick by more than this many SEs of the difference wins
HALF_STEP = 0.5  # octaves per half-step on a factor-2 grid (where no lattice says otherwise)

Observations = Mapping[int, Sequence[float]]  # half-step k -> losses of its selection runs (inf: did not train)


@dataclass(frozen=True)
class Lattice:
    """The lrs a refine tuner may try: lr = levels[0] * ratio ** (k / 2), k from -2 extend to 2 (n - 1 + extend)."""

    levels: tuple[float, ...]  # tune.space's levels, ascending, a geometric grid (its even half-steps)
    extend: int = 2  # coarse steps an edge pick may add beyond each end of the space
    limits: tuple[int, int] | None = None  # narrower half-step bounds where lrs beyond are invalid (e.g. below min_lr)

    @property
    def ratio(self) -> float:
        return self.levels[1] / self.levels[0]

    @property
    def octaves(self) -> float:
        """The width of one half-step in octaves (log2 lr)."""
        return math.log2(self.ratio) / 2

    @property
    def bounds(self) -> tuple[int, int]:
        """The lowest and highest half-step a cell may try."""
        low, high = -2 * self.extend, 2 * (len(self.levels) - 1 + self.extend)
        return (low, high) if self.limits is None else (max(low, self.limits[0]), min(high, self.limits[1]))

    def coarse(self) -> list[int]:
        """The half-steps of the space's own levels."""
        return [2 * i for i in range(len(self.levels))]

    def value(self, k: int) -> float:
        """The lr of half-step k: a level of the space exactly, else rounded to 6 significant digits."""
        if k % 2 == 0 and 0 <= k // 2 < len(self.levels):
            return self.levels[k // 2]
        try:
            lr = self.levels[0] * self.ratio ** (k / 2)
        except OverflowError:  # the ratio's power leaves a float's range, though the lr may not: in logs (an lr
            lr = math.exp(math.log(self.levels[0]) + k / 2 * math.log(self.ratio))  # beyond it still raises)
        return float(f"{lr:.6g}")

    def steps(self) -> list[int]:
        low, high = self.bounds
        return list(range(low, high + 1))


def geometric_ratio(levels: Sequence[float]) -> float | None:
    """The common ratio of ascending positive levels (within 1e-6), or None when they are not a geometric grid."""
    if len(levels) < 3 or any(not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)) for v in levels):
        return None
    ratios = [b / a for a, b in zip(levels, levels[1:])]
    if ratios[0] <= 1 or any(abs(r / ratios[0] - 1) > 1e-6 for r in ratios):
        return None
    return ratios[0]


@dataclass(frozen=True)
class CellDecision:
    """What one cell does next, and how far its pick is trusted."""

    add: tuple[int, ...] = ()  # half-steps to train one more selection run at (one seed each)
    pick: int | None = None  # the half-step of the current pick (None: no ok run)
    p_best: float = math.nan  # probability that the pick is the best lr tried (NaN before a fit)
    expected_regret: float = math.nan  # expected loss the pick leaves against the best lr tried (nats)
    reason: str = ""  # edge | refine | close | replicate | confident | tolerance | budget | no ok run
    runs: int = 0  # selection runs of the cell so far
    cliff: int | None = None  # the lowest half-step beyond the stability cliff (`stats.lr_model`; None: none seen)
    window: tuple[int, ...] = ()  # the half-steps of the local fit behind the pick
    beaten: int | None = None  # the fit's minimum, where a tried point beat it by more than the noise explains
    noise_sd: float = math.nan  # the cell's noise SD behind p_best and the closed sides (`stats.lr_model.noise_of`)
    noise_df: float = 0  # its degrees of freedom (inf: a noise given as known)


@dataclass(frozen=True)
class RefineRule:
    """The refine tuner's settings (tune.confidence, tune.max_runs_per_cell, tune.tolerance)."""

    confidence: float = 0.8  # the pick's probability of being the best tried lr that ends a cell's search
    max_runs_per_cell: int = 10  # selection runs a cell may use in all (the coarse grid included)
    # Expected loss left on the table (nats) below which a pick is trusted anyway: 0.002 costs 1.43-1.46x the grid's
    # runs in every simulated world, with the regret, coverage and false calls of 0.001 (docs/STATISTICS.md).
    tolerance: float = 0.002


def cliff(obs: Observations, octaves: float = HALF_STEP) -> int | None:
    """The lowest tried half-step beyond the cell's stability cliff (`stats.lr_model`), None when none is."""
    edge = cliff_edge((k * octaves, y, math.isfinite(y)) for k, ys in obs.items() for y in ys)
    return min((k for k in obs if beyond(k * octaves, edge)), default=None)


def trained_side(obs: Observations, octaves: float = HALF_STEP) -> dict[int, Sequence[float]]:
    """The cell's runs on the trained side of its cliff: what fits, picks and the noise may see."""
    edge = cliff(obs, octaves)
    return {k: v for k, v in obs.items() if edge is None or k < edge}


def _means(obs: Observations) -> dict[int, tuple[float, int]]:
    """Per tried half-step: (mean loss of its ok runs, their count); inf and 0 when no run trained."""
    out = {}
    for k, losses in obs.items():
        ok = [x for x in losses if math.isfinite(x)]
        if losses:
            out[k] = (float(np.mean(ok)), len(ok)) if ok else (math.inf, 0)
    return out


def _window(means: Mapping[int, tuple[float, int]], best: int) -> list[int]:
    """The half-steps the local parabola sees (`stats.lr_model.window`, one coarse step = `WINDOW` half-steps)."""
    ks = np.array(sorted(k for k, (m, n) in means.items() if n > 0), float)
    return [int(k) for k in ks[window(ks, float(best), WINDOW)]] if len(ks) else []


def _fit(ks: Sequence[int], y: np.ndarray, w: np.ndarray) -> np.ndarray | None:
    """The shared parabola's coefficients (a, b, c) of y = a k^2 + b k + c (`stats.lr_model.parabola`); None with < 3."""
    if len(ks) < 3:
        return None
    (m0, b, c), _ = parabola(np.asarray(ks, float), y, w)
    return np.array([c, b, m0])


def noise_sums(obs: Observations, octaves: float = HALF_STEP) -> NoiseSums:
    """This cell's replicate sums (`stats.lr_model`): its trained runs repeated at one lr, on the trained side of its
    cliff only (never a fit's residuals)."""
    return replicate_sums({k: [y for y in v if math.isfinite(y)] for k, v in trained_side(obs, octaves).items()})


def pooled_sigma(cells: Sequence[Observations], octaves: float = HALF_STEP) -> tuple[float, int]:
    """The replicate noise SD pooled over cells and its degrees of freedom (NaN, 0 with none)."""
    pool = sum((noise_sums(obs, octaves) for obs in cells), NoiseSums())
    return pool.sd, pool.df


def judge(obs: Observations, sigma: float, seed: int = 0, octaves: float = HALF_STEP, df: float = math.inf) -> CellDecision:
    """The pick of one cell from its runs on the trained side of its cliff, with p_best and the expected regret
    under the cell's noise SD `sigma` on `df` degrees of freedom (inf: known; `octaves`: the width of a half-step)."""
    runs = sum(len(v) for v in obs.values())
    edge = cliff(obs, octaves)
    finite = {k: v for k, v in _means(trained_side(obs, octaves)).items() if math.isfinite(v[0])}
    if not finite:
        return CellDecision(reason="no ok run", runs=runs, cliff=edge)
    best = min(sorted(finite), key=lambda k: finite[k][0])
    ks = _window(finite, best)
    y, n = np.array([finite[k][0] for k in ks]), np.array([finite[k][1] for k in ks], float)
    coef = _fit(ks, y, n)
    convex = coef is not None and coef[0] > 0
    centre = np.polyval(coef, np.asarray(ks, float)) if convex else y
    pick, beaten = ks[int(np.argmin(centre))], None
    known = math.isfinite(sigma) and sigma > 0
    i, j = ks.index(pick), ks.index(best)
    if known and y[i] - y[j] > BEATEN * sigma * math.sqrt(1 / n[i] + 1 / n[j]):
        # The fit's minimum is beaten by a tried point beyond what the noise explains: the quadratic is wrong
        # here (a bent curve, a point near a cliff); the pick is the lowest mean and the bootstrap uses the means.
        pick, beaten, convex, centre = best, pick, False, y
    if not known:
        return CellDecision(pick=pick, runs=runs, cliff=edge, window=tuple(ks), beaten=beaten, noise_sd=sigma,
                            noise_df=df)
    rng = np.random.default_rng([seed, len(ks), int(n.sum())])
    draws = centre + rng.standard_normal((BOOTSTRAP_DRAWS, len(ks))) * sigma / np.sqrt(n)
    if convex:  # refit each draw: the smoothed losses a rerun of these runs would give
        x = np.asarray(ks, float)
        X = np.stack([x * x, x, np.ones_like(x)], axis=1)
        sw = np.sqrt(n)
        coefs = np.linalg.lstsq(X * sw[:, None], (draws * sw).T, rcond=None)[0]  # (3, draws)
        draws = (X @ coefs).T
    i = ks.index(pick)
    p_best = float(np.mean(np.argmin(draws, axis=1) == i))
    regret = float(np.mean(draws[:, i] - draws.min(axis=1)))
    return CellDecision(pick=pick, p_best=p_best, expected_regret=regret, runs=runs, cliff=edge, window=tuple(ks),
                        beaten=beaten, noise_sd=sigma, noise_df=df)


def risk_free_pick(obs: Observations, pick: int, octaves: float = HALF_STEP) -> int:
    """The pick once every run of the cell is read (its estimation runs included): where a run at `pick` lagged
    (`stats.lr_model.lagging`), the trained-side lr with the lowest mean of every run (the lagging one counted at its
    loss, so its lr pays for the risk it carries); else `pick` (a pick whose runs trained alike never moves: no
    churn by noise)."""
    side = {k: [y for y in v if math.isfinite(y)] for k, v in trained_side(obs, octaves).items()}
    side = {k: v for k, v in side.items() if v}
    if pick not in lagging(side):
        return pick
    means = {k: float(np.mean(v)) for k, v in side.items()}
    return min(sorted(means), key=lambda k: means[k])


def _rival(obs: Observations, pick: int, octaves: float = HALF_STEP) -> int | None:
    """The tried half-step (trained side) closest to the pick in mean loss (the one more seeds should tell apart)."""
    finite = {k: v for k, v in _means(trained_side(obs, octaves)).items() if math.isfinite(v[0]) and k != pick}
    return min(sorted(finite), key=lambda k: finite[k][0]) if finite else None


def open_sides(finite: Mapping[int, tuple[float, int]], sigma: float, df: float, low: int, high: int,
               tried: Sequence[int]) -> tuple[int, ...]:
    """Where the curve around its lowest mean is still open (`stats.lr_model.closed_sides`, the report's test: a side
    closes at a tried lr clearly above the lowest mean, or at one where a run did not train): per open side, one
    coarse step beyond its farthest trained point (a half-step where that is out of [low, high] or tried), if any;
    `finite`: half-step -> (mean, runs) on the trained side, `tried`: every half-step tried."""
    best = min(sorted(finite), key=lambda k: finite[k][0])
    shut = [k for k in tried if k not in finite]
    sides = closed_sides({float(k): v for k, v in finite.items()}, float(best), sigma, df, [float(k) for k in shut])
    add = []
    for s, side in zip((-1, 1), sides):
        if math.isfinite(side):
            continue
        far = max((k for k in finite if (k - best) * s >= 0), key=lambda k: k * s)
        add += [t for t in (far + 2 * s, far + s) if low <= t <= high and t not in tried][:1]
    return tuple(add)


def decide(obs: Observations, lattice: Lattice, rule: RefineRule, sigma: float, seed: int = 0,
           df: float = math.inf) -> CellDecision:
    """The next runs of one cell (see the module's steps), given its noise SD `sigma` on `df` df (inf: known)."""
    means = _means(obs)
    runs = sum(len(v) for v in obs.values())
    edge = cliff(obs, lattice.octaves)
    finite = {k: v for k, v in _means(trained_side(obs, lattice.octaves)).items() if math.isfinite(v[0])}
    low, high = lattice.bounds
    high = high if edge is None else min(high, edge - 1)  # nothing is tried beyond the cliff
    room = rule.max_runs_per_cell - runs
    if finite and room > 0:
        best = min(sorted(finite), key=lambda k: finite[k][0])
        tried = sorted(means)
        for side, end, step in ((1, tried[-1], 2), (-1, tried[0], -2)):
            if best == end and low <= best + step <= high:
                return CellDecision(add=(best + step,), pick=best, reason="edge", runs=runs, cliff=edge)
        missing = [k for k in (best - 1, best + 1) if low <= k <= high and k not in means]
        if missing:
            return CellDecision(add=tuple(missing[:room]), pick=best, reason="refine", runs=runs, cliff=edge)
    verdict = judge(obs, sigma, seed, lattice.octaves, df)
    if verdict.pick is None:
        return verdict
    if room > 0 and math.isfinite(sigma) and sigma > 0:
        add = open_sides(finite, sigma, df, low, high, sorted(means))
        if add:
            return replace(verdict, add=add[:room], reason="close")
    if verdict.p_best >= rule.confidence:
        return replace(verdict, reason="confident")
    if verdict.expected_regret <= rule.tolerance:
        return replace(verdict, reason="tolerance")
    rival = _rival(obs, verdict.pick, lattice.octaves)
    add = tuple(k for k in (verdict.pick, rival) if k is not None)[:max(room, 0)]
    return replace(verdict, add=add, reason="replicate" if add else "budget")


def decide_all(cells: Sequence[Observations], lattice: Lattice, rule: RefineRule) -> tuple[list[CellDecision], float, int]:
    """Every cell's next runs, each under its own noise (`stats.lr_model.noise_of`: its replicates, or the pool over
    the cells while it has too few); (decisions, the pool's SD, its df)."""
    sums = [noise_sums(obs, lattice.octaves) for obs in cells]
    pool = sum(sums, NoiseSums())
    out = []
    for i, (obs, own) in enumerate(zip(cells, sums)):
        sd, df, _ = noise_of(own, pool)
        out.append(decide(obs, lattice, rule, sd, seed=i, df=df))
    return out, pool.sd, pool.df
