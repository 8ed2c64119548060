"""Each cell's loss against log2(lr) near its lowest point: fitted optimum, curvature and the loss its pick leaves, with 95% CIs.

The fit, per cell, from every run of the cell (selection and estimation runs, at every lr: lr, loss,
status; `fit_curves`), by the curve model the refining tuner shares (`stats.lr_model`: the points, the
cliff, the noise, the closed sides, the window and its parabola):

- x = log2(lr). Runs that did not train (not ok), and lrs beyond the cell's cliff, are left
  out of fits and noise; an ok run's loss is capped at `ceiling` (the validation unigram loss, as the report's
  LR sensitivity caps it). Each lr with ok runs is one point: the mean of its runs, weighted by their number.
- The window: the lowest mean and every point within one coarse grid `step` (octaves) of it on
  each side, `step` being the spacing of `tune.space` (default: the widest gap between the cell's
  sampled lrs; give or take `stats.lr_model.TOLERANCE`: lrs have 6 digits). On a factor-2 grid that is the lowest point
  and its two neighbours, the fewest a
  parabola needs and the closest to the minimum (a loss curve is a parabola only near it: a wider
  window trades noise for shape bias), plus refine's half-step midpoints. With fewer than 3
  distinct lrs (the lowest at an edge, a diverged neighbour), the nearest other points join, one
  at a time, until there are 3.
- The curve: loss = m + c d^2 exp(a d), d = x - x*: a parabola in log2(lr) bent by `a` (a > 0:
  steeper at high lr). Real curves are bent: results/tuned's four, fitted so over all five lrs,
  have a = -0.31 to +0.30 (RMS 0.25). Three points cannot tell a from x*, so a has a N(0, 0.25^2)
  prior (`asymmetry`): the fit minimises RSS + s^2 (a / 0.25)^2 over m, c >= 0, x* and a. With 3
  points that is the plain parabola (a = 0); the prior's work is to widen the CIs by the shape bias
  a parabola can have. Without a noise estimate, the plain parabola. `curvature` is c, half the
  second derivative at the optimum: the loss added one octave away from it, nats per octave^2, as
  `calibration.tuning_sim` states curvatures; the fitted minimum is m.

The noise: the model's (`stats.lr_model.noise_of`): each cell's own SD of one run's loss from its
replicates (trained runs repeated at one lr, the estimation runs included: n - 1 df each), never from
the parabola's residuals (lack of fit at a bend is not noise). A cell with fewer than
`lr_model.MIN_OWN_DF` df of its own takes the pool over the cells (`Noise`; flag `pooled_noise`); with
no df at all there are no CIs (flag `no_noise_estimate`); the point estimates stand.

The CIs are profile-likelihood intervals of that penalised fit, with the cell's SD s and t
quantiles on its df: every value whose best fit constrained to it is within t^2 s^2 of the best fit.
(x*, a) are scanned on a grid, (m, c) solved exactly at each (`Scan`, at the end of this module, holds
those fits; `interval` reads the optimum's CI off it, `left_ci` the loss left's).

- The optimum: the piece around the estimate of that set of x*, searched up to half a coarse step
  (`REACH`) beyond the window, or on a closed side (`lr_model.closed_sides`: a tried lr there is clearly
  above the lowest mean, or one where a run did not train) up to that lr, which then ends the CI (flag

  CIs). For a parabola (a = 0) it is Fieller's interval, exact under normal noise. Coverage by simulation:
  `calibration.lr_curve_sim`, docs/STATISTICS.md.
- The loss the pick leaves on the table, L = c (x_pick - x*)^2 exp(a (x_pick - x*)) = the curve at
  the pick minus its minimum: every L0 >= 0 for which the best fit with L = L0 (c = L0 / that
  shape) is within the bound.
- Where the curve gives no finite upper end (the optimum's CI unbounded: an open side, the curve alone
  cannot say how far beyond the lrs tried its minimum lies; an optimum beyond the window, at the edge of
  a cliff; no convex fit), the upper end is taken against the lrs tried instead (`tried_bound`,
  flag `against_tried`): the largest simultaneous one-sided 97.5% upper bound, over every other lr
  the cell trained on this side of its cliff, of the pick's mean minus that lr's mean, from every
  run of the cell there (its estimation runs at the pick included), at the cell's own noise and t on
  its df, Bonferroni over those lrs. It needs no shape: it bounds what the pick leaves against the
  best lr tried, not against a minimum beyond them (never extrapolated), and it is finite whatever
  the sides (study 8's NoPE: its left side open at its noise of 0.031 nats, its pick within 0.14
  of every lr it tried). Where a cliff is next to the pick (a tried lr where a run did not train, no
  trained lr between), the lrs between them were not tried, and the curve may dip there: by its
  convexity near the optimum it lies above the line through the pick with the slope of the secant
  from the pick's other neighbour, so the bound takes the larger of the two (`gap_bound`: that
  slope's one-sided 97.5% upper end times the gap; study 9's post-LN on Austen, whose runs at 2e-3
  collapsed). Calibration: docs/STATISTICS.md ("The tuning check", "Verdicts in worlds with cliffs").

Flags: `edge` (the lowest mean is the cell's smallest or largest ok lr: the window is one-sided),
`diverged_nearby` (a run within one step of the lowest point did not train), `beyond_cliff` (lrs left out),
`too_few_points` (fewer than 3 ok lrs: no fit), `not_convex` (the parabola's c <= 0: no optimum),
`optimum_outside_window` (the optimum beyond the window's lrs: an extrapolation), `ci_unbounded`,
`pick_outside_window` (no loss left reported), `no_noise_estimate`, `confined`, `pooled_noise`, `against_tried`,
`lack_of_fit` (the window's points miss the parabola by more than the replicate noise explains, F test at 1%:
a wall or a bend; the loss left's upper end is then the larger of the curve's and the tried lrs' bounds).
Numbers only: no files, no sentences.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import optimize, stats

from gptlab.stats.lr_model import (
    POOLED,
    SAYS_NOTHING,
    TOLERANCE,
    TRAINED,
    NoiseSums,
    beyond,
    cliff_edge,
    closed_sides,
    noise_of,
    parabola,
    replicate_sums,
    window,
)
from gptlab.stats.picks import Trial, pick_rows
from gptlab.stats.picks import picks as picked_rows

LEVEL = 0.95
ASYMMETRY = 0.25  # prior SD of the bend a (per octave)
REACH = 0.5  # how far beyond the window's lrs (in coarse steps) the optimum's CI may reach before it is unbounded
Z_STEP, A_POINTS = 0.01, 41  # the scan: x* every 0.01 octave, a at 41 values over +/- 3 prior SDs
LR_CURVE_COLS = ["pick_lr", "optimum_lr", "optimum_lr_low", "optimum_lr_high", "curvature", "bend", "min_loss",
                 "loss_left", "loss_left_ci_low", "loss_left_ci_high", "n_points", "n_runs", "window_lr_low", "window_lr_high",
                 "noise_sd", "noise_df", "flags"]
EDGE, DIVERGED, FEW, NOT_CONVEX, OUTSIDE, UNBOUNDED, PICK_OUTSIDE, NO_NOISE, CLIFF, CONFINED, TRIED, MISFIT = (
    "edge", "diverged_nearby", "too_few_points", "not_convex", "optimum_outside_window", "ci_unbounded",
    "pick_outside_window", "no_noise_estimate", "beyond_cliff", "confined", "against_tried", "lack_of_fit")
MISFIT_LEVEL = 0.01  # the lack-of-fit F test's level: below it the parabola's shape is in doubt


@dataclass(frozen=True)
class Noise:
    """The replicate SD of one run's loss pooled over the cells (a cell with too few df of its own uses it)."""

    sd: float  # pooled SD (loss units); NaN without degrees of freedom
    df: int  # its degrees of freedom: runs repeated at one lr of one cell, n - 1 each


@dataclass(frozen=True)
class CurveFit:
    """One cell's fitted loss-against-lr curve near its lowest point (NaN where the flags say there is none)."""

    cell: Hashable  # the cell, as given
    pick_lr: float  # the cell's pick (stats.picks' rule unless given)
    optimum_lr: float  # the fitted optimum
    optimum_lr_low: float  # its 95% CI's lower end (0 when unbounded below)
    optimum_lr_high: float  # its upper end (inf when unbounded above)
    curvature: float  # half the fitted second derivative at the optimum in log2(lr) (nats per octave^2)
    min_loss: float  # the fitted minimum, the curve at the optimum
    loss_left: float  # the curve at the pick minus the fitted minimum (>= 0)
    loss_left_ci_low: float  # its 95% CI's lower end
    loss_left_ci_high: float  # its upper end (inf when the optimum's CI is unbounded)
    n_points: int  # distinct lrs in the fit
    n_runs: int  # ok runs in the fit
    window_lr_low: float  # smallest lr in the fit
    window_lr_high: float  # largest lr in the fit
    bend: float  # a of the fitted curve m + c d^2 exp(a d), d = log2(lr / optimum) (0: a parabola)
    flags: tuple[str, ...]  # what to read with care (the module docstring lists them)
    noise_sd: float = math.nan  # the SD behind its CIs: its own, or the pool's (flag pooled_noise)
    noise_df: int = 0  # its degrees of freedom

    def covers_optimum(self, lr: float) -> bool:
        """Whether `lr` lies in the optimum's 95% CI (False without one)."""
        return bool(self.optimum_lr_low <= lr <= self.optimum_lr_high)

    def loss_at(self, lr: np.ndarray | float) -> np.ndarray:
        """The fitted curve at `lr` (meant inside the window; NaN without an optimum)."""
        d = np.log2(np.asarray(lr, dtype=float) / self.optimum_lr)
        return self.min_loss + self.curvature * d * d * np.exp(self.bend * d)


@dataclass(frozen=True)
class LrCurves:
    """Every cell's fit and the pooled noise behind their CIs."""

    fits: tuple[CurveFit, ...]  # one per cell with selection runs, in the order given
    noise: Noise  # the selection noise pooled over the cells

    def frame(self) -> pd.DataFrame:
        """One row per cell: `cell`, then LR_CURVE_COLS (flags joined by '; ')."""
        rows = [{"cell": f.cell, **{k: getattr(f, k) for k in LR_CURVE_COLS[:-1]}, "flags": "; ".join(f.flags)}
                for f in self.fits]
        return pd.DataFrame(rows, columns=["cell", *LR_CURVE_COLS])


@dataclass(frozen=True)
class _Window:
    """A cell's points in its window, before the noise is known."""

    cell: Hashable
    pick: float  # the pick's lr
    z: np.ndarray  # log2 lr of the window's points, minus the centre, ascending
    y: np.ndarray  # their mean losses
    w: np.ndarray  # their ok run counts
    centre: float  # log2 of the lowest mean's lr
    step: float  # the coarse grid step, octaves
    flags: tuple[str, ...]
    points: Mapping[float, tuple[float, int]] = dataclasses.field(default_factory=dict)  # x -> (mean, runs), every lr
    shut: tuple[float, ...] = ()  # x of tried lrs where a run did not train (they close their side)


def default_picks(runs: pd.DataFrame) -> dict[Hashable, float]:
    """Each cell's pick by `stats.picks`' rule (lowest mean ok loss; a diverged run rules its lr out), lrs ascending."""
    out = {}
    for cell, mine in runs.groupby("cell", sort=False):
        lrs = sorted(mine["lr"].astype(float).unique())
        trials = [Trial((("cell", cell),), (("lr", float(r["lr"])),), str(r["status"]), float(r["loss"]))
                  for r in mine.to_dict("records")]
        rows = pick_rows(trials, [(("cell", cell),)], [(("lr", lr),) for lr in lrs], {"lr": lrs})
        out.update({cell: float(row.setting[0][1]) for row in picked_rows(rows).values()})
    return out


def _window(cell: Hashable, mine: pd.DataFrame, pick: float, step: float | None) -> tuple[_Window | None, NoiseSums]:
    """The cell's window (None with fewer than 3 ok lrs) and its replicate sums: this side of its cliff."""
    cut = beyond(mine["x"].to_numpy(float), cliff_edge(zip(mine["x"], mine["capped"], mine["status"] == TRAINED)))
    kept = mine[(mine["status"] == TRAINED) & ~cut]
    groups = kept.groupby("x")["capped"]
    means, counts = groups.mean(), groups.count()
    sums = replicate_sums({x: g.to_numpy(float) for x, g in groups})
    if len(means) < 3:
        return None, sums
    if step is None:
        sampled = np.sort(mine.loc[mine["status"] != SAYS_NOTHING, "x"].unique())
        step = float(np.max(np.diff(sampled)))
    centre = float(means.idxmin())
    xs = means.index.to_numpy(float)
    inside = window(xs, centre, step)
    near = np.abs(mine["x"] - centre) <= step + TOLERANCE
    failed = ~mine["status"].isin([TRAINED, SAYS_NOTHING])
    flags = [EDGE] * (centre in (xs.min(), xs.max())) + [CLIFF] * bool(cut.any()) + [DIVERGED] * bool((failed & near).any())
    points = {float(x): (float(m), int(n)) for x, m, n in zip(xs, means, counts)}
    win = _Window(cell, pick, xs[inside] - centre, means.to_numpy(float)[inside], counts.to_numpy(float)[inside],
                  centre, step, tuple(flags), points, tuple(float(x) for x in mine.loc[failed, "x"].unique()))
    return win, sums


def fit_curves(runs: pd.DataFrame, step: float | None = None, ceiling: float = math.inf,
               picks: Mapping[Hashable, float] | None = None, replicates: pd.DataFrame | None = None,
               level: float = LEVEL, asymmetry: float = ASYMMETRY) -> LrCurves:
    """Every cell's fit (`stats.lr_model`'s curve). `runs`: the selection runs, columns cell, lr, loss, status (ok |
    diverged | collapsed | failed ...); `replicates` (same columns): the cell's other runs (the estimation runs, at
    its pick and at earlier picks), points of its curve like every run; the default pick is read from `runs`."""
    prepare = lambda f: f.assign(x=np.log2(f["lr"].astype(float)),  # noqa: E731
                                 capped=np.minimum(f["loss"].astype(float), ceiling))
    runs = prepare(runs)
    picks = {**default_picks(runs[(runs["status"] != TRAINED) | np.isfinite(runs["capped"])]), **(picks or {})}
    if replicates is not None and len(replicates):
        runs = pd.concat([runs, prepare(replicates[list(replicates.columns.intersection(runs.columns))])],
                         ignore_index=True)
    runs = runs[(runs["status"] != TRAINED) | np.isfinite(runs["capped"])]
    sums, windows, done = {}, [], {}
    for cell, mine in runs.groupby("cell", sort=False):
        win, sums[cell] = _window(cell, mine, picks.get(cell, math.nan), step)
        if win is None:
            done[cell] = CurveFit(cell, picks.get(cell, math.nan), *[math.nan] * 8, 0,
                                  int((mine["status"] == TRAINED).sum()), math.nan, math.nan, math.nan, (FEW,))
        else:
            windows.append(win)
    pool = sum(sums.values(), NoiseSums())
    for w in windows:
        sd, df, pooled = noise_of(sums[w.cell], pool)
        low, high = closed_sides(w.points, w.centre, sd, df, w.shut)
        fit = _fit(w, sd, df, pooled, (low - w.centre, high - w.centre), level, asymmetry)
        misfit = lack_of_fit(w, sd, df)
        if misfit:
            fit = dataclasses.replace(fit, flags=(*fit.flags, MISFIT))
        if (misfit or not math.isfinite(fit.loss_left_ci_high)) and math.isfinite(w.pick):  # the tried lrs' bound
            x_pick = math.log2(w.pick)
            high = max(tried_bound(_every_run(runs[runs["cell"] == w.cell]), x_pick, sd, df, level),
                       gap_bound(w.points, x_pick, w.shut, sd, df, level))
            if misfit and math.isfinite(fit.loss_left_ci_high):
                high = max(high, fit.loss_left_ci_high)  # the larger: the curve's shape is in doubt there
            if math.isfinite(high):
                fit = dataclasses.replace(fit, loss_left_ci_high=high, flags=(*fit.flags, TRIED))
        done[w.cell] = fit
    return LrCurves(tuple(done[c] for c in dict.fromkeys(runs["cell"])), Noise(pool.sd, pool.df))


def _every_run(mine: pd.DataFrame) -> pd.DataFrame:
    """One cell's runs that trained on this side of its cliff (selection and estimation runs alike)."""
    edge = cliff_edge(zip(mine["x"], mine["capped"], mine["status"] == TRAINED))
    kept = mine.loc[mine["status"] == TRAINED, ["x", "capped"]]
    return kept[~beyond(kept["x"].to_numpy(float), edge)]


def tried_bound(ok: pd.DataFrame, x_pick: float, sd: float, df: int, level: float = LEVEL) -> float:
    """The loss the pick may leave against the best lr tried: the largest simultaneous one-sided upper bound (at
    (1 + level) / 2 in all, Bonferroni over the other lrs) of the pick's mean minus another lr's mean; `ok`: the
    cell's trained runs (x = log2 lr, capped loss). inf without noise or without runs at the pick."""
    if not (sd > 0 and df > 0):
        return math.inf
    g = ok.groupby(np.round(ok["x"].to_numpy(float) / TOLERANCE) * TOLERANCE)["capped"]
    means, counts = g.mean(), g.count()
    at = np.abs(means.index.to_numpy(float) - x_pick) <= TOLERANCE
    if not at.any() or len(means) < 2:
        return math.inf
    m0, n0 = float(means[at].iloc[0]), int(counts[at].iloc[0])
    others, n = means[~at].to_numpy(float), counts[~at].to_numpy(float)
    q = float(stats.t.ppf(1 - (1 - level) / 2 / len(others), df))
    return float(max(0.0, np.max(m0 - others + q * sd * np.sqrt(1 / n + 1 / n0))))


def lack_of_fit(win: _Window, sd: float, df: float, level: float = MISFIT_LEVEL) -> bool:
    """Whether the window's plain parabola misses its points by more than the cell's replicate noise explains (the
    lack-of-fit F test, (RSS / (points - 3)) / sd^2 on (points - 3, df) degrees of freedom, at `level`): a wall or a
    bend the parabola near the optimum does not have. Never with 3 points or without noise."""
    extra = len(win.z) - 3
    if extra < 1 or not (sd > 0 and df > 0):
        return False
    _, rss = parabola(win.z, win.y, win.w)
    return bool(stats.f.sf(rss / extra / sd ** 2, extra, df) < level)


def gap_bound(points: Mapping[float, tuple[float, int]], x_pick: float, shut: Sequence[float], sd: float, df: float,
              level: float = LEVEL) -> float:
    """What the pick may leave against an untried lr between it and the nearest lr where a run did not train, with
    no trained lr between them (a cliff next to the pick): by the curve's convexity near its optimum, the curve
    there lies above the line through the pick with the slope of the secant from the pick's neighbour on the
    other side, so it is at most that slope (its one-sided (1 + level) / 2 upper end) times the gap; 0 where no
    failure is next to the pick, inf where the pick has no trained neighbour on the other side. `points`: x ->
    (mean, runs) on the trained side."""
    at = [x for x in points if abs(x - x_pick) <= TOLERANCE]
    if not at or not (sd > 0 and df > 0):
        return 0.0 if not shut else math.inf
    m0, n0 = points[at[0]]
    q = float(stats.t.ppf(0.5 + level / 2, df))
    worst = 0.0
    for s in (-1, 1):
        fails = [x for x in shut if (x - x_pick) * s > TOLERANCE]
        if not fails:
            continue
        edge = min(fails, key=lambda x: abs(x - x_pick))
        if any(0 < (x - x_pick) * s < (edge - x_pick) * s - TOLERANCE for x in points):
            continue  # a trained lr lies between: the tried lrs speak for that side
        other = [x for x in points if (x - x_pick) * -s > TOLERANCE]
        if not other:
            return math.inf
        xn = min(other, key=lambda x: abs(x - x_pick))
        mn, nn = points[xn]
        drop = mn - m0 + q * sd * math.sqrt(1 / nn + 1 / n0)  # how far the neighbour may lie above the pick
        worst = max(worst, max(drop, 0.0) / abs(x_pick - xn) * abs(edge - x_pick))
    return worst


def _fit(win: _Window, sd: float, df: int, pooled: bool, sides: tuple[float, float], level: float,
         asymmetry: float) -> CurveFit:
    """One cell's CurveFit from its window, its noise (SD, df) and its optimum's confinement `sides` (log2 lr
    minus the centre; +/-inf: open)."""
    flags, s2, nan = list(win.flags) + ([POOLED] if pooled else []), sd ** 2, math.nan
    crit = float(stats.t.ppf(0.5 + level / 2, df)) ** 2 if df > 0 else nan
    (m0, b, c), _ = parabola(win.z, win.y, win.w)
    lo, hi = float(win.z.min()), float(win.z.max())
    window = (2 ** (win.centre + lo), 2 ** (win.centre + hi))
    if not math.isfinite(s2):
        flags.append(NO_NOISE)
    z_opt, bend, m, curvature = (-b / (2 * c), 0.0, m0 - b * b / (4 * c), c) if c > 0 else (nan, nan, nan, nan)
    zp = math.log2(win.pick) - win.centre if win.pick > 0 else nan
    opt_ci, left_bounds, scan, reach = (nan, nan), (nan, nan), None, REACH * win.step
    z_lo = sides[0] if math.isfinite(sides[0]) else lo - reach  # a confined side ends the search at its lr
    z_hi = sides[1] if math.isfinite(sides[1]) else hi + reach
    if c > 0 and math.isfinite(s2) and z_lo <= z_opt <= z_hi:  # beyond: no CIs (flagged below)
        z0 = np.linspace(z_lo, z_hi, round((z_hi - z_lo) / Z_STEP) + 1)
        bends = np.linspace(-3 * asymmetry, 3 * asymmetry, A_POINTS) if asymmetry > 0 else np.zeros(1)
        scan = Scan(win.z, win.y, win.w, s2, asymmetry, z0, bends, zp)
        floor, z_opt, bend = scan.best((z_opt, 0.0) if len(win.z) == 3 or not asymmetry > 0 else None)
        _, m, curvature = scan.at(z_opt, bend)
        opt_ci = interval(scan.free().min(axis=1) - floor <= crit * s2, z0, z_opt)
        shut = [not math.isfinite(e) and math.isfinite(side) for e, side in zip(opt_ci, sides)]
        opt_ci = tuple(side if cut else e for e, side, cut in zip(opt_ci, sides, shut))
        flags += [CONFINED] if any(shut) else []
    if not curvature > 0:
        flags.append(NOT_CONVEX)
        return CurveFit(win.cell, win.pick, *[nan] * 8, len(win.z), int(win.w.sum()), *window, nan, tuple(flags),
                        noise_sd=sd, noise_df=df)
    if not lo - 1e-9 <= z_opt <= hi + 1e-9:
        flags.append(OUTSIDE)
    if math.isfinite(s2) and not all(map(math.isfinite, opt_ci)):
        flags.append(UNBOUNDED)
    left = nan
    if not lo - 1e-9 <= zp <= hi + 1e-9:
        flags.append(PICK_OUTSIDE)
    else:
        d = zp - z_opt
        left = curvature * d * d * math.exp(bend * d)
        if scan is not None:
            left_bounds = left_ci(scan, zp, left, floor, crit * s2, UNBOUNDED not in flags)
    with np.errstate(over="ignore"):  # an optimum's CI end far beyond the search is an lr of inf
        opt = [float(np.exp2(win.centre + z)) for z in (z_opt, *opt_ci)]
    return CurveFit(win.cell, win.pick, *opt, curvature, m, left, *left_bounds, len(win.z), int(win.w.sum()), *window,
                    bend, tuple(flags), noise_sd=sd, noise_df=df)


# -- the profile likelihood: the scan over (optimum, bend) and the CIs it gives ------------------------------------

def shape(z: np.ndarray, z0: np.ndarray, a: np.ndarray) -> np.ndarray:
    """d^2 exp(a d), d = z - z0, for every z0, a and z: shape (len(z0), len(a), len(z))."""
    d = z[None, None, :] - z0[:, None, None]
    return d * d * np.exp(a[None, :, None] * d)


class Scan:
    """One window's penalised fits on a grid of (optimum z0, bend a), (m, c) solved exactly at each, kept as sums."""

    def __init__(self, z: np.ndarray, y: np.ndarray, w: np.ndarray, s2: float, prior: float, z0: np.ndarray,
                 a: np.ndarray, zp: float) -> None:
        self.z, self.y, self.w, self.s2, self.prior, self.z0, self.a = z, y, w, s2, prior, z0, a
        self.spp, self.spy, self.syy = self._sums(z0, a)
        self.penalty = self._penalty(a)[None, :]
        self.at_pick = shape(np.array([zp]), z0, a)[..., 0] if math.isfinite(zp) else None

    def _sums(self, z0: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        phi, total = shape(self.z, z0, a), self.w.sum()
        yc = self.y - self.w @ self.y / total
        pc = phi - (phi @ self.w / total)[..., None]
        return (pc * pc) @ self.w, (pc * yc) @ self.w, float(self.w @ (yc * yc))

    def _penalty(self, a: np.ndarray) -> np.ndarray:
        return self.s2 * (a / self.prior) ** 2 if self.prior else np.zeros_like(a)

    @staticmethod
    def _rss(c: np.ndarray, spp: np.ndarray, spy: np.ndarray, syy: float) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):
            rss = syy - 2 * c * spy + c * c * spp
        return np.where(np.isfinite(rss), rss, np.inf)

    def free(self) -> np.ndarray:
        """Penalised RSS at each (z0, a) with m and c >= 0 least squares."""
        c = np.maximum(self.spy / np.where(self.spp > 0, self.spp, 1.0), 0.0)
        return self._rss(c, self.spp, self.spy, self.syy) + self.penalty

    def with_left(self, left: float) -> np.ndarray:
        """Penalised RSS at each (z0, a) with c set so that the pick lies `left` above the minimum."""
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(self.at_pick > 1e-12, left / self.at_pick, np.inf)
        return self._rss(c, self.spp, self.spy, self.syy) + self.penalty

    def at(self, z0: float, a: float) -> tuple[float, float, float]:
        """(penalised RSS, m, c) of the best fit with the optimum at z0 and bend a."""
        d = self.z - z0
        phi, w, total = d * d * np.exp(a * d), self.w, self.w.sum()
        pc, yc = phi - phi @ w / total, self.y - self.y @ w / total
        spp, spy = float(w @ (pc * pc)), float(w @ (pc * yc))
        c = max(spy / spp, 0.0) if spp > 0 else 0.0
        rss = float(w @ (yc * yc)) - 2 * c * spy + c * c * spp
        return rss + (self.s2 * (a / self.prior) ** 2 if self.prior else 0.0), float((self.y - c * phi) @ w / total), c

    def best(self, exact: tuple[float, float] | None = None) -> tuple[float, float, float]:
        """(penalised RSS, z*, a) of the best fit: the grid's best, polished (`exact`: a known (z*, a), as the
        parabola is through 3 points, or without a bend)."""
        if exact is not None:
            return self.at(*exact)[0], exact[0], exact[1]
        grid = self.free()
        i, j = np.unravel_index(np.argmin(grid), grid.shape)
        res = optimize.minimize(lambda p: self.at(p[0], p[1])[0], [self.z0[i], self.a[j]], method="Nelder-Mead",
                                options={"xatol": 1e-5, "fatol": 1e-12})
        return (float(res.fun), float(res.x[0]), float(res.x[1])) if res.fun <= grid[i, j] else \
            (float(grid[i, j]), float(self.z0[i]), float(self.a[j]))


def interval(inside: np.ndarray, grid: np.ndarray, at: float) -> tuple[float, float]:
    """The run of True in `inside` around `at` on `grid`, each end halfway to its first False (inf past the grid)."""
    i = int(np.argmin(np.abs(grid - at)))
    lo = hi = i
    while lo > 0 and inside[lo - 1]:
        lo -= 1
    while hi < len(grid) - 1 and inside[hi + 1]:
        hi += 1
    low = -math.inf if lo == 0 else (grid[lo] + grid[lo - 1]) / 2
    high = math.inf if hi == len(grid) - 1 else (grid[hi] + grid[hi + 1]) / 2
    return low, high


def left_ci(scan: Scan, zp: float, left: float, floor: float, bound: float, bounded: bool) -> tuple[float, float]:
    """The loss left's profile CI: {L0 >= 0: (best penalised RSS with L = L0) - floor <= bound}."""
    def excess(L0: float) -> float:
        return float(scan.with_left(L0).min()) - floor - bound

    lower = 0.0
    spp, spy, syy = scan._sums(np.array([zp]), scan.a)  # L = 0: the minimum at the pick
    c = np.maximum(spy / np.where(spp > 0, spp, 1.0), 0.0)
    at_pick = float((scan._rss(c, spp, spy, syy) + scan.penalty).min()) - floor - bound
    if at_pick > 0 and left > 0 and excess(left * 1e-9) > 0 and excess(left) <= 0:
        lower = optimize.brentq(excess, left * 1e-9, left, xtol=1e-6)
    if not bounded:
        return lower, math.inf
    inside, top = left, max(2 * left, 1e-5)
    for _ in range(40):
        if excess(top) > 0:
            return lower, optimize.brentq(excess, inside, top, xtol=1e-6) if excess(inside) <= 0 else inside
        inside, top = top, top * 2
    return lower, math.inf
