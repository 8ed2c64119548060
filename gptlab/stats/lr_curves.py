"""Each cell's loss against log2(lr) near its lowest point: fitted optimum, curvature and the loss its pick leaves, with 95% CIs.

The fit, per cell, from its selection runs (lr, loss, status; `fit_curves`):

- x = log2(lr). Diverged and failed runs are left out; an ok run's loss is capped at `ceiling` (the
  validation unigram loss, as the report's LR sensitivity caps it). Each lr with ok runs is one
  point: the mean of its runs, weighted by their number.
- The window: the lowest mean and every point within one coarse grid `step` (octaves) of it on
  each side, `step` being the spacing of `tune.space` (default: the widest gap between the cell's
  sampled lrs). On a factor-2 grid that is the lowest point and its two neighbours, the fewest a
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
  `stats.tuning_sim` states curvatures; the fitted minimum is m.

The noise (`Noise`): one SD of a selection run's loss, pooled over the cells with its degrees of
freedom: replicate runs at one lr (every cell x lr with two or more ok runs, and the `replicates`
given, e.g. the estimation runs at each pick: n - 1 df each) plus each plain parabola's residual
(window lrs - 3 df). With no degrees of freedom (one seed, 3-point windows, no replicates) there is
no noise estimate: no CIs, flag `no_noise_estimate`; the point estimates stand.

The CIs are profile-likelihood intervals of that penalised fit, with the pooled SD s and t
quantiles on its df: every value whose best fit constrained to it is within t^2 s^2 of the best fit.
(x*, a) are scanned on a grid, (m, c) solved exactly at each.

- The optimum: the piece around the estimate of that set of x*, searched up to half a coarse step
  (`REACH`) beyond the window; a side that reaches that is unbounded (lr 0 or inf), flag `ci_unbounded`
  (an estimate beyond it gets no CIs). For a parabola (a = 0) it is Fieller's interval, exact under
  normal noise. Coverage by simulation: `stats.lr_curve_sim`, docs/STATISTICS.md.
- The loss the pick leaves on the table, L = c (x_pick - x*)^2 exp(a (x_pick - x*)) = the curve at
  the pick minus its minimum: every L0 >= 0 for which the best fit with L = L0 (c = L0 / that
  shape) is within the bound. Its upper end is inf when the optimum's CI is unbounded.

Flags: `edge` (the lowest mean is the cell's smallest or largest ok lr: the window is one-sided),
`diverged_nearby` (a run within one step of the lowest point diverged and is left out),
`too_few_points` (fewer than 3 ok lrs: no fit), `not_convex` (the parabola's c <= 0: no optimum),
`optimum_outside_window` (the optimum beyond the window's lrs: an extrapolation), `ci_unbounded`,
`pick_outside_window` (no loss left reported), `no_noise_estimate`. Numbers only: no files, no sentences.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Mapping

import numpy as np
import pandas as pd
from scipy import optimize, stats

from gptlab.stats.picks import Trial, pick_rows, picks as picked_rows
from gptlab.statuses import FAILED_TO_TRAIN, FINISHED

LEVEL = 0.95
ASYMMETRY = 0.25  # prior SD of the bend a (per octave)
REACH = 0.5  # how far beyond the window's lrs (in coarse steps) the optimum's CI may reach before it is unbounded
Z_STEP, A_POINTS = 0.01, 41  # the scan: x* every 0.01 octave, a at 41 values over +/- 3 prior SDs
LR_CURVE_COLS = ["pick_lr", "optimum_lr", "optimum_lr_low", "optimum_lr_high", "curvature", "bend", "min_loss",
                 "loss_left", "loss_left_ci_low", "loss_left_ci_high", "n_points", "n_runs", "window_lr_low", "window_lr_high",
                 "noise_sd", "noise_df", "flags"]
EDGE, DIVERGED, FEW, NOT_CONVEX, OUTSIDE, UNBOUNDED, PICK_OUTSIDE, NO_NOISE = (
    "edge", "diverged_nearby", "too_few_points", "not_convex", "optimum_outside_window", "ci_unbounded",
    "pick_outside_window", "no_noise_estimate")


@dataclass(frozen=True)
class Noise:
    """The pooled SD of one selection run's loss, and where its degrees of freedom come from."""

    sd: float  # pooled SD (loss units); NaN without degrees of freedom
    df: int  # its degrees of freedom, df_replicates + df_residual
    df_replicates: int  # from runs repeated at one lr of one cell (n - 1 each)
    df_residual: int  # from the parabolas' residuals (window lrs - 3 each)


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
    noise: Noise  # the pooled selection noise

    def frame(self) -> pd.DataFrame:
        """One row per cell: `cell`, then LR_CURVE_COLS (flags joined by '; ')."""
        rows = [{"cell": f.cell, **{k: getattr(f, k) for k in LR_CURVE_COLS[:-3]}, "noise_sd": self.noise.sd,
                 "noise_df": self.noise.df, "flags": "; ".join(f.flags)} for f in self.fits]
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


def _parabola(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
    """Weighted least-squares parabola through the points: (m0, b, c) of m0 + b z + c z^2, and its RSS."""
    X = np.column_stack([np.ones_like(z), z, z * z])
    coef = np.linalg.pinv((X.T * w) @ X) @ ((X.T * w) @ y)
    resid = y - X @ coef
    return coef, float(np.sum(w * resid * resid))


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


def _window(cell: Hashable, mine: pd.DataFrame, pick: float, step: float | None) -> tuple[_Window | None, float, int]:
    """The cell's window (None with fewer than 3 ok lrs), and its replicate sum of squares and df."""
    groups = mine[mine["status"] == "ok"].groupby("x")["capped"]
    means, counts = groups.mean(), groups.count()
    ss, df = float((groups.var(ddof=0) * counts).sum()), int((counts - 1).sum())
    if len(means) < 3:
        return None, ss, df
    if step is None:
        sampled = np.sort(mine.loc[mine["status"].isin(FINISHED), "x"].unique())
        step = float(np.max(np.diff(sampled)))
    centre = float(means.idxmin())
    xs = means.index.to_numpy(float)
    dist = np.abs(xs - centre)
    inside = dist <= step * (1 + 1e-9)
    for i in np.argsort(dist, kind="stable"):  # nearest first, the smaller lr first on a tie
        if inside.sum() >= 3:
            break
        inside[i] = True
    flags = [EDGE] if centre in (xs.min(), xs.max()) else []
    if ((mine["status"].isin(FAILED_TO_TRAIN)) & (np.abs(mine["x"] - centre) <= step * (1 + 1e-9))).any():
        flags.append(DIVERGED)
    return (_Window(cell, pick, xs[inside] - centre, means.to_numpy(float)[inside], counts.to_numpy(float)[inside],
                    centre, step, tuple(flags)), ss, df)


def _shape(z: np.ndarray, z0: np.ndarray, a: np.ndarray) -> np.ndarray:
    """d^2 exp(a d), d = z - z0, for every z0, a and z: shape (len(z0), len(a), len(z))."""
    d = z[None, None, :] - z0[:, None, None]
    return d * d * np.exp(a[None, :, None] * d)


class _Scan:
    """One window's penalised fits on a grid of (optimum z0, bend a), (m, c) solved exactly at each, kept as sums."""

    def __init__(self, z: np.ndarray, y: np.ndarray, w: np.ndarray, s2: float, prior: float, z0: np.ndarray,
                 a: np.ndarray, zp: float) -> None:
        self.z, self.y, self.w, self.s2, self.prior, self.z0, self.a = z, y, w, s2, prior, z0, a
        self.spp, self.spy, self.syy = self._sums(z0, a)
        self.penalty = self._penalty(a)[None, :]
        self.at_pick = _shape(np.array([zp]), z0, a)[..., 0] if math.isfinite(zp) else None

    def _sums(self, z0: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        phi, total = _shape(self.z, z0, a), self.w.sum()
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


def _interval(inside: np.ndarray, grid: np.ndarray, at: float) -> tuple[float, float]:
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


def _left_ci(scan: _Scan, zp: float, left: float, floor: float, bound: float, bounded: bool) -> tuple[float, float]:
    """The loss left's profile CI: {L0 >= 0: (best penalised RSS with L = L0) - floor <= bound}."""
    excess = lambda L0: float(scan.with_left(L0).min()) - floor - bound  # noqa: E731
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


def fit_curves(runs: pd.DataFrame, step: float | None = None, ceiling: float = math.inf,
               picks: Mapping[Hashable, float] | None = None, replicates: pd.DataFrame | None = None,
               level: float = LEVEL, asymmetry: float = ASYMMETRY) -> LrCurves:
    """Every cell's fit. `runs`: the selection runs, columns cell, lr, loss, status (ok | diverged | failed);
    `replicates` (same columns): more runs whose repeats at one lr only inform the noise (the estimation runs)."""
    runs = runs.assign(x=np.log2(runs["lr"].astype(float)), capped=np.minimum(runs["loss"].astype(float), ceiling))
    runs = runs[(runs["status"] != "ok") | np.isfinite(runs["capped"])]
    picks = {**default_picks(runs), **(picks or {})}
    ss, df_rep, df_res, windows, done = 0.0, 0, 0, [], {}
    for cell, mine in runs.groupby("cell", sort=False):
        win, s, d = _window(cell, mine, picks.get(cell, math.nan), step)
        ss, df_rep = ss + s, df_rep + d
        if win is None:
            done[cell] = CurveFit(cell, picks.get(cell, math.nan), *[math.nan] * 8, 0,
                                  int((mine["status"] == "ok").sum()), math.nan, math.nan, math.nan, (FEW,))
        else:
            windows.append(win)
            ss, df_res = ss + _parabola(win.z, win.y, win.w)[1], df_res + len(win.z) - 3
    if replicates is not None and len(replicates):
        ok = replicates[replicates["status"] == "ok"]
        ok = ok.assign(capped=np.minimum(ok["loss"].astype(float), ceiling))
        for _, g in ok[np.isfinite(ok["capped"])].groupby(["cell", "lr"], sort=False)["capped"]:
            ss, df_rep = ss + float(((g - g.mean()) ** 2).sum()), df_rep + len(g) - 1
    df = df_rep + df_res
    noise = Noise(math.sqrt(ss / df) if df > 0 else math.nan, df, df_rep, df_res)
    crit = float(stats.t.ppf(0.5 + level / 2, df)) ** 2 if df > 0 else math.nan
    done |= {w.cell: _fit(w, noise, crit, asymmetry) for w in windows}
    return LrCurves(tuple(done[c] for c in dict.fromkeys(runs["cell"])), noise)


def _fit(win: _Window, noise: Noise, crit: float, asymmetry: float) -> CurveFit:
    """One cell's CurveFit from its window and the pooled noise."""
    flags, s2, nan = list(win.flags), noise.sd ** 2, math.nan
    (m0, b, c), _ = _parabola(win.z, win.y, win.w)
    lo, hi = float(win.z.min()), float(win.z.max())
    window = (2 ** (win.centre + lo), 2 ** (win.centre + hi))
    if not math.isfinite(s2):
        flags.append(NO_NOISE)
    z_opt, bend, m, curvature = (-b / (2 * c), 0.0, m0 - b * b / (4 * c), c) if c > 0 else (nan, nan, nan, nan)
    zp = math.log2(win.pick) - win.centre if win.pick > 0 else nan
    opt_ci, left_ci, scan, reach = (nan, nan), (nan, nan), None, REACH * win.step
    if c > 0 and math.isfinite(s2) and lo - reach <= z_opt <= hi + reach:  # beyond: no CIs (flagged below)
        z0 = np.arange(lo - reach, hi + reach + Z_STEP / 2, Z_STEP)
        bends = np.linspace(-3 * asymmetry, 3 * asymmetry, A_POINTS) if asymmetry > 0 else np.zeros(1)
        scan = _Scan(win.z, win.y, win.w, s2, asymmetry, z0, bends, zp)
        floor, z_opt, bend = scan.best((z_opt, 0.0) if len(win.z) == 3 or not asymmetry > 0 else None)
        _, m, curvature = scan.at(z_opt, bend)
        opt_ci = _interval(scan.free().min(axis=1) - floor <= crit * s2, z0, z_opt)
    if not curvature > 0:
        flags.append(NOT_CONVEX)
        return CurveFit(win.cell, win.pick, *[nan] * 8, len(win.z), int(win.w.sum()), *window, nan, tuple(flags))
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
            left_ci = _left_ci(scan, zp, left, floor, crit * s2, UNBOUNDED not in flags)
    opt = [2 ** (win.centre + z) for z in (z_opt, *opt_ci)]
    return CurveFit(win.cell, win.pick, *opt, curvature, m, left, *left_ci, len(win.z), int(win.w.sum()), *window,
                    bend, tuple(flags))
