"""Simulated ladders with planted trends in log compute: the check of `gptlab.stats.ladder`'s intervals and calls.

Owns `LadderWorld`, `simulate_ladder` and `LADDER_WORLDS` (benchmarks/ladder_calibration.py prints the table;
tests/stats/test_ladder.py runs small versions). A world is K rungs at x = 0, 2, 4, ... doublings of compute
(16x over 3 rungs, the shipped study's span) and a set of arms, each with a true effect e(x) = a + b x + c x^2
(c = 0: a trend linear in log compute; c != 0: one that bends). Each rung measures every arm's effect as
N(e(x_k), s_k^2) with s_k the world's SE (the same at every rung, or growing with x where the upper rungs
train fewer seeds) and `df` degrees of freedom, the SE itself estimated on them (a scaled chi-square), so
the intervals pay for not knowing it, as the report's do; where the world has `scatter`, each rung's true effect
also moves off the arm's curve by its own N(0, scatter^2), drawn anew for every ladder, which no SE counts (what
a rung's own tuning, epochs or code could add). Scored against the truth:

- the slope's 95% CI covers b (linear worlds; a bent world has no one slope);
- the prediction of the top rung from the rungs below covers what the top rung measures (the interval is
  for a measurement, so that is its truth), and so does that of the third rung from the two below it (the
  first rung a ladder predicts);
- a call on the slope is false when it says `grows` or `shrinks` and b = 0, or the other way round, or
  `holds` while |b| >= the margin; power is the share of arms with |b| >= the margin called in b's direction;
- the ranking's interval covers Kendall's tau of the true effects at the two rungs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gptlab.stats.calls import INCONCLUSIVE
from gptlab.stats.ladder import (
    GROWS,
    HOLDS,
    SHRINKS,
    covered,
    fit_trend,
    kendall_tau,
    pooled_dispersion,
    predict,
    rank_agreement,
    trend_call,
)

MARGIN = 0.01  # per doubling of compute: the `holds` test's margin in these worlds
STUDY_10_DOUBLINGS = (0.0, 1.755, 3.0, 4.170)  # log2 of ablations/ladder.yaml's rungs' FLOPs over the smallest's


@dataclass(frozen=True)
class LadderWorld:
    """K rungs, arms with planted effects a + b x + c x^2 (x: doublings above the smallest rung)."""

    rungs: int = 3
    spacing: float = 2.0  # doublings between rungs (3 rungs: 16x)
    intercepts: tuple[float, ...] = (0.03, -0.03, 0.10, 0.0, -0.09, 0.01)  # a per arm: study 8's sizes
    slopes: tuple[float, ...] = (0.0, 0.0, -0.02, 0.0, -0.015, 0.003)  # b per arm (per doubling)
    bend: float = 0.0  # c, the same for every arm with a slope (0: linear)
    se: float = 0.008  # each rung's SE of an effect
    se_growth: float = 0.0  # the SE grows by this factor per doubling (upper rungs train fewer seeds)
    df: float = 8.0  # each rung estimate's degrees of freedom
    doublings: tuple[float, ...] = ()  # the rungs' x where they are not evenly spaced (then `rungs` and `spacing` unused)
    scatter: float = 0.0  # SD of each rung's own offset from the arm's curve, which no SE counts (0: none)

    @property
    def x(self) -> np.ndarray:
        return np.asarray(self.doublings, float) if self.doublings else np.arange(self.rungs) * self.spacing

    def truth(self) -> np.ndarray:
        """(arms, rungs): the true effects."""
        a, b = np.asarray(self.intercepts)[:, None], np.asarray(self.slopes)[:, None]
        c = np.where(np.asarray(self.slopes)[:, None] != 0, self.bend, 0.0)
        return a + b * self.x + c * self.x ** 2

    def ses(self) -> np.ndarray:
        return self.se * (1 + self.se_growth) ** self.x


@dataclass(frozen=True)
class LadderScores:
    """Shares over simulated arms (and ladders, for the ranking)."""

    slope_covered: float  # linear worlds; NaN where the world bends
    prediction_covered: float  # the top rung's, from every rung below
    third_covered: float  # the third rung's, from the two below it
    false_calls: float
    power: float
    holds_false: float  # `holds` said with |b| >= the margin
    tau_covered: float
    arms: int


def _measure(world: LadderWorld, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One ladder's measured effects and their estimated SEs, (arms, rungs) each."""
    truth, s = world.truth(), world.ses()
    if world.scatter > 0:  # drawn only then: a world without scatter keeps its random stream
        truth = truth + rng.standard_normal(truth.shape) * world.scatter
    est = truth + rng.standard_normal(truth.shape) * s
    s_hat = s * np.sqrt(rng.chisquare(world.df, truth.shape) / world.df)
    return est, s_hat


def _call_score(call: str, b: float) -> tuple[bool, bool]:
    """(false, powerful) for one arm's call against its planted slope."""
    if abs(b) < 1e-12:
        return call in (GROWS, SHRINKS), False
    if call == HOLDS:
        return abs(b) >= MARGIN, False
    return False, call != INCONCLUSIVE and abs(b) >= MARGIN


def simulate_ladder(world: LadderWorld, sims: int, seed: int = 0) -> LadderScores:
    """`sims` ladders of `world`, scored (see the module's docstring)."""
    rng = np.random.default_rng(seed)
    x, truth = world.x, world.truth()
    slope_hits, pred_hits, third_hits, false, power, holds_false, strong, tau_hits = [], [], [], [], [], [], 0, []
    for i in range(sims):
        est, s_hat = _measure(world, rng)
        df = np.full(len(x), world.df)
        arms = range(len(world.slopes))
        phi = pooled_dispersion((x, est[a], s_hat[a]) for a in arms)  # the arms' together, as the report's
        phi_below = pooled_dispersion((x[:-1], est[a, :-1], s_hat[a, :-1]) for a in arms)
        for arm, b in enumerate(world.slopes):
            trend = fit_trend(x, est[arm], s_hat[arm], df, phi)
            if world.bend == 0:
                slope_hits.append(trend.slope_low <= b <= trend.slope_high)
            p = predict(x[:-1], est[arm, :-1], s_hat[arm, :-1], df[:-1], float(x[-1]), phi_below)
            if p is not None:
                pred_hits.append(covered(p, float(est[arm, -1])))
            third = predict(x[:2], est[arm, :2], s_hat[arm, :2], df[:2], float(x[2])) if len(x) > 2 else None
            if third is not None:
                third_hits.append(covered(third, float(est[arm, 2])))
            call = trend_call(trend, MARGIN)
            wrong, hit = _call_score(call, b)
            false.append(wrong)
            holds_false.append(call == HOLDS and abs(b) >= MARGIN)
            if abs(b) >= MARGIN:
                strong += 1
                power.append(hit)
        true_tau = float(kendall_tau(truth[:, 0], truth[:, -1]))
        agreement = rank_agreement(est[:, 0], s_hat[:, 0], est[:, -1], s_hat[:, -1], seed=i)
        tau_hits.append(agreement.low <= true_tau <= agreement.high)
    mean = lambda v: float(np.mean(v)) if len(v) else float("nan")  # noqa: E731
    return LadderScores(mean(slope_hits), mean(pred_hits), mean(third_hits),
                        mean(false), mean(power), mean(holds_false), mean(tau_hits),
                        sims * len(world.slopes))


LADDER_WORLDS: dict[str, LadderWorld] = {
    "linear, 3 rungs (16x), SE 0.008": LadderWorld(),
    "linear, 4 rungs (64x), SE 0.008": LadderWorld(rungs=4),
    "linear, 3 rungs, SE growing 20% per doubling": LadderWorld(se_growth=0.2),
    "linear, 3 rungs, few df (4)": LadderWorld(df=4.0),
    "study 10's rungs (0, 1.76, 3.0, 4.17 doublings), SE 0.012 on 5 df": LadderWorld(
        rungs=4, doublings=STUDY_10_DOUBLINGS, se=0.012, df=5.0),
    "study 10's rungs, each rung off the curve by SD 0.02": LadderWorld(
        rungs=4, doublings=STUDY_10_DOUBLINGS, se=0.012, df=5.0, scatter=0.02),
    "study 10's rungs, each rung off the curve by SD 0.04": LadderWorld(
        rungs=4, doublings=STUDY_10_DOUBLINGS, se=0.012, df=5.0, scatter=0.04),
    "bending, c = +0.002 per doubling^2": LadderWorld(bend=0.002),
    "bending, c = -0.004 per doubling^2": LadderWorld(bend=-0.004),
}
