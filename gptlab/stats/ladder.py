"""Does it hold at scale? An arm's effect against log compute over a ladder's rungs: its trend, its call, the
agreement of the arms' ranking between rungs, and what the rungs below predict for the next one.

Numbers only (no files, no sentences); the simulation that calibrates every interval here is
`calibration.ladder_sim` (`benchmarks/ladder_calibration.py` prints it, docs/STATISTICS.md states it).

Each rung k of a ladder trains every arm, tuned at that rung, and measures each arm's effect against the
baseline, e_k, with its standard error s_k and df (the report's own estimate at that rung: its seeds and its
text's blocks). The rungs are independent studies (no run is shared), so the e_k are independent.

- **The trend** (`fit_trend`): e = a + b x, x = log2(C / C_0) (C: training FLOPs, 6 x parameters x
  tokens; a unit of x is a doubling of compute), by weighted least squares with weights 1 / s_k^2 (a
  meta-regression with known variances). Var(b) = 1 / sum w (x - x_w)^2, inflated by the residual
  dispersion phi where K > 2 rungs let the arms miss their lines by more than their SEs say (a bend, or
  what the SEs do not count: each rung's own tuning, epochs and code move its effects off the curve). phi
  is the arms' together (`pooled_dispersion`: max(1, sum of their chi^2 / sum of their K - 2)): one arm's
  K - 2 residual df (1 at 3 rungs) estimate it too poorly, and in simulated ladders whose rungs scatter
  off the curve the pooled phi keeps the slope's CI covering, where each arm's own did not (docs/
  STATISTICS.md). The 95% CI is a t interval on df = min over rungs of their own df, never extrapolated:
  the fit speaks for the compute range of the rungs alone.
- **The call on the slope** (`trend_call`), relative to the effect's own direction (its sign at the
  centre of the rungs): `grows` (the effect's magnitude rises with compute: the slope's 95% CI
  excludes 0 on the effect's side), `shrinks` (excludes 0 on the other side), `holds` (the slope's 90%
  CI lies inside +/- `margin` per doubling: TOST), else `inconclusive`, never read as `holds`.
- **The ranking's agreement** (`rank_agreement`): Kendall's tau (tau-a: a tie counts 0) between the
  arms' effects at two rungs, with a 95% interval from a parametric bootstrap that redraws every arm's effect from
  N(e, s^2) at both rungs (the interval says how well the estimates can agree, not only how well they
  do).
- **Predictions** (`predict`): for rung k from the rungs below it, with at least two of them: the
  trend's line at x_k, with a prediction interval for what rung k will *measure*: Var = Var(a + b x_k)
  + phi s_k^2, where s_k is not known before rung k trains and is taken as the SE of the rung just below
  (it trains the same seeds; the largest SE below, tried first, made the intervals cover 0.99 in study
  10's geometry, above the goal of 90-97%), and phi is the rungs below's dispersion; t on the same df. With
  one rung below nothing is predicted (a line needs two points; persistence would be a guess); with two,
  phi is 1 (no residual to estimate it from), so a scatter of the rungs off the curve is not counted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from scipy import stats as st

from gptlab.stats.calls import ALPHA, INCONCLUSIVE

GROWS, SHRINKS, HOLDS = "grows", "shrinks", "holds"  # and INCONCLUSIVE, the call's own word (`calls`)
TREND_CALLS = (GROWS, SHRINKS, HOLDS, INCONCLUSIVE)
BOOTSTRAP_DRAWS = 4000  # parametric draws behind the ranking's interval


def compute_doublings(flops: Sequence[float]) -> np.ndarray:
    """x = log2(C / C_0): each rung's training compute in doublings above the smallest rung's."""
    c = np.asarray(flops, float)
    if c.size == 0 or not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise ValueError(f"training FLOPs must be positive and finite, got {list(c)}")
    return np.log2(c / c.min())


@dataclass(frozen=True)
class Trend:
    """One arm's effect against compute: e = intercept + slope x (x in doublings of compute)."""

    intercept: float  # the fitted effect at x = 0 (the smallest rung's compute)
    slope: float  # the change of the effect per doubling of compute
    slope_se: float  # its standard error (dispersion-inflated where the rungs miss the line)
    slope_low: float  # its 95% CI
    slope_high: float
    slope90_low: float  # its 90% CI (the `holds` test)
    slope90_high: float
    df: float  # the t quantiles' degrees of freedom
    dispersion: float  # phi: the arms' `pooled_dispersion` where given, else this arm's max(1, chi^2 / (K - 2))
    centre: float  # the weighted mean x: where the effect's direction is read
    cov: tuple[float, float, float]  # Var(a), Cov(a, b), Var(b), inflated as slope_se
    rungs: int  # rungs in the fit

    def at(self, x: float) -> float:
        """The line at x (meant inside the rungs' range)."""
        return self.intercept + self.slope * x

    def se_at(self, x: float) -> float:
        """The standard error of the line at x."""
        va, cab, vb = self.cov
        return math.sqrt(max(va + 2 * x * cab + x * x * vb, 0.0))


def _usable(x: Sequence[float], effect: Sequence[float], se: Sequence[float],
            df: Sequence[float] | None = None) -> tuple[np.ndarray, ...]:
    """The rungs with a finite x, effect, positive SE (and df), as arrays."""
    arrays = [np.asarray(v, float) for v in (x, effect, se, df if df is not None else np.ones(len(x)))]
    ok = np.logical_and.reduce([np.isfinite(a) for a in arrays]) & (arrays[2] > 0) & (arrays[3] > 0)
    return tuple(a[ok] for a in arrays)


def _line(x: np.ndarray, e: np.ndarray, s: np.ndarray) -> tuple[float, float, float, float, float, float]:
    """(intercept, slope, chi^2, x_w, S_xx, sum w) of the weighted least-squares line, weights 1 / s^2."""
    w = 1 / s ** 2
    xw = float(np.sum(w * x) / np.sum(w))
    sxx = float(np.sum(w * (x - xw) ** 2))
    slope = float(np.sum(w * (x - xw) * e) / sxx)
    intercept = float(np.sum(w * e) / np.sum(w)) - slope * xw
    return intercept, slope, float(np.sum(w * (e - intercept - slope * x) ** 2)), xw, sxx, float(np.sum(w))


def pooled_dispersion(arms: Iterable[tuple[Sequence[float], Sequence[float], Sequence[float]]]) -> float:
    """phi of the arms' lines together: max(1, the sum of each arm's chi^2 about its line over the sum of its
    K - 2), from each arm's (x, effect, se); 1 where no arm has more than two usable rungs."""
    chi2, spare = 0.0, 0
    for x, e, s in arms:
        x, e, s, _ = _usable(x, e, s)
        if len(x) > 2 and np.ptp(x) > 0:
            chi2 += _line(x, e, s)[2]
            spare += len(x) - 2
    return max(1.0, chi2 / spare) if spare else 1.0


def fit_trend(x: Sequence[float], effect: Sequence[float], se: Sequence[float], df: Sequence[float],
              dispersion: float | None = None) -> Trend:
    """The weighted least-squares line through the rungs' effects (see the module's docstring); at least 2 rungs
    with a positive SE each. `dispersion`: the arms' `pooled_dispersion` (None: this arm's own)."""
    x, e, s, d = _usable(x, effect, se, df)
    if len(x) < 2 or np.ptp(x) <= 0:
        raise ValueError("a trend needs at least two rungs of different compute with an effect and its SE each")
    intercept, slope, chi2, xw, sxx, sum_w = _line(x, e, s)
    if dispersion is None:
        dispersion = max(1.0, chi2 / (len(x) - 2)) if len(x) > 2 else 1.0
    vb = dispersion / sxx
    va = dispersion * (1 / sum_w + xw * xw / sxx)
    cab = -dispersion * xw / sxx
    dof = float(np.min(d))
    q95, q90 = (float(st.t.ppf(1 - a / 2, dof)) for a in (ALPHA, 2 * ALPHA))
    sb = math.sqrt(vb)
    return Trend(intercept, slope, sb, slope - q95 * sb, slope + q95 * sb, slope - q90 * sb, slope + q90 * sb, dof,
                 float(dispersion), xw, (float(va), float(cab), float(vb)), len(x))


def trend_call(trend: Trend, margin: float) -> str:
    """`grows`, `shrinks`, `holds` or `inconclusive` (see the module's docstring); `margin` per doubling of compute."""
    side = math.copysign(1.0, trend.at(trend.centre)) if trend.at(trend.centre) != 0 else 0.0
    if trend.slope_low > 0 or trend.slope_high < 0:
        if side == 0:
            return INCONCLUSIVE
        return GROWS if math.copysign(1.0, trend.slope) == side else SHRINKS
    if -margin < trend.slope90_low and trend.slope90_high < margin:
        return HOLDS
    return INCONCLUSIVE


@dataclass(frozen=True)
class Prediction:
    """What the rungs below predict rung k will measure."""

    predicted: float  # the trend's line at x_k
    low: float  # the 95% prediction interval for the measured effect
    high: float
    se: float  # its standard error: the line's at x_k and the measurement's, combined
    df: float


def predict(x_below: Sequence[float], effect: Sequence[float], se: Sequence[float], df: Sequence[float],
            x_next: float, dispersion: float | None = None) -> Prediction | None:
    """The prediction for a rung at `x_next` from the rungs below (None with fewer than two usable rungs);
    `dispersion`: the arms' `pooled_dispersion` of the rungs below (None: this arm's own)."""
    try:
        trend = fit_trend(x_below, effect, se, df, dispersion)
    except ValueError:
        return None
    s = np.asarray(se, float)
    s_next = float(s[np.isfinite(s) & (s > 0)][-1])  # the rung just below's with an SE (the module's docstring)
    total = math.sqrt(trend.se_at(x_next) ** 2 + trend.dispersion * s_next ** 2)
    q = float(st.t.ppf(1 - ALPHA / 2, trend.df))
    centre = trend.at(x_next)
    return Prediction(centre, centre - q * total, centre + q * total, total, trend.df)


def covered(prediction: Prediction, measured: float) -> bool:
    """Whether the measured effect lies in the prediction interval."""
    return bool(prediction.low <= measured <= prediction.high)


@dataclass(frozen=True)
class RankAgreement:
    """Kendall's tau between the arms' effects at two rungs, with its 95% interval."""

    tau: float
    low: float
    high: float
    arms: int


def kendall_tau(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall's tau-a of the last axis of `a` against `b` (any leading axes: one tau per row; ties count 0)."""
    i, j = np.triu_indices(a.shape[-1], k=1)
    pairs = np.sign(a[..., i] - a[..., j]) * np.sign(b[..., i] - b[..., j])
    return pairs.mean(axis=-1)


def rank_agreement(effect_a: Sequence[float], se_a: Sequence[float], effect_b: Sequence[float],
                   se_b: Sequence[float], seed: int = 0) -> RankAgreement:
    """Kendall's tau of the arms' effects at two rungs and its parametric-bootstrap 95% interval (2 arms or more)."""
    ea, sa, eb, sb = (np.asarray(v, float) for v in (effect_a, se_a, effect_b, se_b))
    if len(ea) < 2 or len(ea) != len(eb):
        raise ValueError("a ranking's agreement needs the same two or more arms at both rungs")
    rng = np.random.default_rng([seed, len(ea)])
    da = ea + rng.standard_normal((BOOTSTRAP_DRAWS, len(ea))) * sa
    db = eb + rng.standard_normal((BOOTSTRAP_DRAWS, len(eb))) * sb
    low, high = np.quantile(kendall_tau(da, db), [ALPHA / 2, 1 - ALPHA / 2])
    return RankAgreement(float(kendall_tau(ea, eb)), float(low), float(high), len(ea))
