"""Simulated re-tunes at one length with a planted lr optimum: the false `moves` and the power of `worth_lr.retune_check`.

Owns `RetuneWorld` (the planted lr curve, how far its optimum sits from the pick, the noise), `verdict_rates`
(the share of each verdict over simulated re-tunes) and `WORLDS`, the rows of benchmarks/worth_lr_calibration.py;
tests/stats/test_worth.py runs a small version.

The planted curve is the lab's (docs/STATISTICS.md, the lr curves): loss(f) = 1.8 + c d^2 exp(a d),
d = log2(f) - shift, the optimum `shift` octaves from the pick (f = 1). Each factor tried (0.5, 1, 2) is one
run with noise N(0, sd^2), sd the selection noise of one run's loss; the check is told the true sd, or
(`sd_df`) an estimate of it on that many df, as a study's pooled selection noise is. A `moves` verdict at
shift 0 is false; at |shift| = 1 it is the power.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gptlab.stats.worth_lr import VERDICTS, retune_check


@dataclass(frozen=True)
class RetuneWorld:
    """One row of the calibration."""
    shift: float = 0.0  # octaves from the pick to the true optimum at this length
    curvature: float = 0.025  # c: nats one octave from the optimum (the lab's 0.013-0.05)
    bend: float = -0.3  # a: steeper below the optimum (the lab's -0.31 to +0.30)
    sd: float = 0.0127  # one run's selection noise (study 8's pooled, refine's rule)
    sd_df: float | None = None  # the check gets the sd estimated on this many df; None: the true sd
    factors: tuple = (0.5, 1.0, 2.0)


def verdict_rates(w: RetuneWorld, trials: int, rng_seed: int = 0) -> dict[str, float]:
    """The share of each verdict of `VERDICTS` over `trials` simulated re-tunes of `w`."""
    rng = np.random.default_rng(rng_seed)
    f = np.array(w.factors, float)
    d = np.log2(f) - w.shift
    truth = 1.8 + w.curvature * d ** 2 * np.exp(w.bend * d)
    counts = dict.fromkeys(VERDICTS, 0)
    for _ in range(trials):
        y = truth + rng.normal(0, w.sd, len(f))
        sd = w.sd if w.sd_df is None else w.sd * np.sqrt(rng.chisquare(w.sd_df) / w.sd_df)
        counts[retune_check(np.full(len(f), 1000.0), f, y, float(sd))[0].verdict] += 1
    return {v: counts[v] / trials for v in VERDICTS}


WORLDS = {  # name -> world: benchmarks/worth_lr_calibration.py's rows (each at shift 0, +-0.5 and +-1 octave)
    "c 0.025, sd 0.0127 (study 8's noise)": RetuneWorld(),
    "c 0.013, sd 0.0127": RetuneWorld(curvature=0.013),
    "c 0.05, sd 0.0127": RetuneWorld(curvature=0.05),
    "c 0.025, sd 0.006 (the runs' own)": RetuneWorld(sd=0.006),
    "c 0.025, sd 0.0127 estimated on 22 df": RetuneWorld(sd_df=22),
    "c 0.025, a parabola (no bend)": RetuneWorld(bend=0.0),
}
