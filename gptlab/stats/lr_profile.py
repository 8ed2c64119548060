"""Profile likelihood of one cell's loss-against-lr curve: the scan over (optimum, bend) and the CIs it gives.

The curve m + c d^2 exp(a d), d = z - z0 (`stats.lr_curves` states the model and the fit): `Scan`
holds the penalised fits on a grid of (z0, a) with (m, c) solved exactly at each; `interval` reads
the optimum's CI off it, `left_ci` the loss-left's (every L0 >= 0 whose best fit with the pick L0
above the minimum is within the bound). Numbers only: no files, no sentences.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import optimize


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
