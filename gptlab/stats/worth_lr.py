"""Does the baseline's lr optimum move with length: the re-tune's verdict per length, and the multipliers it implies.

At a few lengths (the shortest and the longest) the baseline also trains at lr = pick * f for a few factors
f around its pick (e.g. 0.5, 1, 2), one selection seed each. Per length, `retune_check` gives:

- the best factor tried, and the gap: the pick's loss (f = 1) minus the best tried's (>= 0);
- whether the gap is beyond noise: gap > z sqrt(2) sd, sd the study's selection noise of one run's loss
  (the caller's), z = Phi^-1(1 - (1 - level) / (n - 1)) for n factors with a loss: a one-sided test of
  the pick against each other factor, Bonferroni over the n - 1 (z = 1.96 at three factors and 95%);
- the optimum of the parabola in log2(f) through the losses (least squares beyond three), when it is convex
  and its vertex lies within the factors tried (else None: it would extrapolate);
- a verdict: `moves` (the gap is beyond noise), `stays` (the pick is the best tried), `unclear` (another
  factor is lowest within noise, or the pick or every other factor has no loss: a run that did not learn
  is passed as NaN and left out of the numbers).

`retuned_curve` moves the curve's runs at those lengths down by their gaps (the baseline at the best lr
tried: 0 where the pick was best) and adds each shift's variance, 2 sd^2, as known (infinite df) variance of
that length's mean; `step_multiplier` on it says whether an arm's multiplier would move. The gap is the
minimum of noisy runs, so the what-if leans towards a move; calibration/worth_lr_sim.py measures the verdicts'
false `moves` and their power (docs/STATISTICS.md "What each choice is worth").
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as st

from gptlab.stats.worth import ArmLoss, BaselineCurve, Worth, step_multiplier

VERDICTS = ("stays", "moves", "unclear")
_SAME = 1e-9  # relative tolerance when matching factors and lengths written as floats


@dataclass(frozen=True)
class Retune:
    """One length's re-tune: the factors with a loss, the best, the pick's gap to it and the verdict."""
    steps: float
    factors: tuple[float, ...]  # increasing, those whose run learned
    losses: tuple[float, ...]
    best_factor: float  # NaN when unclear for want of losses
    gap: float  # the pick's loss minus the best tried's (>= 0); NaN without the pick's loss
    threshold: float  # z sqrt(2) noise_sd: the gap beyond it is beyond noise
    beyond_noise: bool
    optimum: float | None  # the log2 parabola's vertex as a factor of the pick (convex, within the factors)
    verdict: str  # one of VERDICTS
    noise_sd: float


def _parabola_optimum(x: np.ndarray, y: np.ndarray) -> float | None:
    """The vertex of the least-squares parabola through (x, y), as 2^x, when convex and within x's range."""
    if len(x) < 3:
        return None
    a, b, _ = np.polyfit(x, y, 2)
    if not a > 0:
        return None
    vertex = -b / (2 * a)
    return float(2 ** vertex) if x[0] <= vertex <= x[-1] else None


def retune_check(steps: np.ndarray, factors: np.ndarray, losses: np.ndarray, noise_sd: float,
                 level: float = 0.95) -> tuple[Retune, ...]:
    """Per length (sorted), the re-tune's verdict from runs at (steps, lr factor of the pick, loss).

    Each length needs the pick (factor 1) among its runs and one run per factor; NaN losses are runs that
    did not learn.
    """
    steps, factors, losses = (np.asarray(v, float) for v in (steps, factors, losses))
    if not (steps.shape == factors.shape == losses.shape) or steps.ndim != 1:
        raise ValueError(f"worth: steps {steps.shape}, factors {factors.shape}, losses {losses.shape} "
                         "must be equal 1-d")
    if not (math.isfinite(noise_sd) and noise_sd > 0) or np.any(factors <= 0) or np.any(steps <= 0):
        raise ValueError("worth: the re-tune needs a positive noise SD, positive lr factors and steps")
    out = []
    for n in np.unique(steps):
        at = steps == n
        f, y = factors[at], losses[at]
        if not np.any(np.isclose(f, 1.0, rtol=_SAME)):
            raise ValueError(f"worth: the re-tune at {n:g} steps lacks the pick (lr factor 1)")
        if len(np.unique(f)) != len(f):
            raise ValueError(f"worth: the re-tune at {n:g} steps has a factor twice (one seed per factor)")
        order = np.argsort(f)
        f, y = f[order], y[order]
        pick = float(y[np.isclose(f, 1.0, rtol=_SAME)][0])
        ok = np.isfinite(y)
        f, y = f[ok], y[ok]
        z = float(st.norm.ppf(1 - (1 - level) / max(len(f) - 1, 1)))
        threshold = z * math.sqrt(2.0) * noise_sd
        if not math.isfinite(pick) or len(f) < 2:
            out.append(Retune(float(n), tuple(f), tuple(y), math.nan, math.nan, threshold, False, None,
                              "unclear", float(noise_sd)))
            continue
        best = int(np.argmin(y))
        gap = pick - float(y[best])
        beyond = gap > threshold
        verdict = "moves" if beyond else "stays" if math.isclose(f[best], 1.0, rel_tol=_SAME) else "unclear"
        out.append(Retune(float(n), tuple(float(v) for v in f), tuple(float(v) for v in y), float(f[best]), gap,
                          threshold, bool(beyond), _parabola_optimum(np.log2(f), y), verdict, float(noise_sd)))
    return tuple(out)


def retuned_curve(curve: BaselineCurve, retunes: tuple[Retune, ...]) -> BaselineCurve:
    """The curve with each re-tuned length's runs moved down by its gap (the best lr tried), its variance added."""
    losses = curve.losses.copy()
    blocks = None if curve.blocks is None else curve.blocks.copy()
    extra = np.zeros(len(curve.steps)) if curve.extra_var is None else curve.extra_var.copy()
    for r in retunes:
        k = np.flatnonzero(np.isclose(curve.steps, r.steps, rtol=_SAME))
        if len(k) == 0:
            raise ValueError(f"worth: the re-tune's {r.steps:g} steps are not among the curve's {curve.steps.tolist()}")
        if not (math.isfinite(r.gap) and r.gap > 0):
            continue
        losses[:, k[0]] -= r.gap
        if blocks is not None:
            blocks[:, k[0], :] -= r.gap
        extra[k[0]] += 2 * r.noise_sd ** 2
    return replace(curve, losses=losses, blocks=blocks, extra_var=extra)


def retuned_multiplier(curve: BaselineCurve, study_steps: float, arm: ArmLoss, retunes: tuple[Retune, ...],
                       level: float = 0.95, anchor: ArmLoss | None = None) -> Worth:
    """The arm's step multiplier against the re-tuned curve (`retuned_curve`): does it move?"""
    return step_multiplier(retuned_curve(curve, retunes), study_steps, arm, level, anchor)
