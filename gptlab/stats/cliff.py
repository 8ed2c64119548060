"""The stability cliff: which learning rates of a cell lie beyond it, and so stay out of every pick, fit and noise estimate.

One rule, used by the refining tuner (`stats.refine`), the grid pick (`stats.picks`), the lr curves
(`stats.lr_curves`) and every noise estimate built on them. Per cell, from its runs (x = log2(lr),
the loss, whether the run trained):

- A run trained when its status is `ok` (`TRAINED`); `failed` runs (a crash: they say nothing about
  the lr) are left out before this rule; every other status (`diverged`, `collapsed`, `unstable`:
  `gptlab.statuses`) is a run that did not train.
- The reference is the lowest mean loss of the trained runs (per lr). An lr above it is beyond the
  cliff when a run there did not train, or when one of its trained runs lies above that lowest mean
  by more than `RISE` x the lowest mean x max(d, 1)^2, d the distance in octaves. Every higher lr
  is beyond too (the edge of stability is crossed once). Below the lowest mean nothing is a cliff
  (a run too slow to learn at a tiny lr is a failure there, not an edge of stability).
- When the lowest mean's own lr had a run that did not train, that lr is the cliff: the reference
  moves to the lowest mean below it, and so on.

Why `RISE = 0.10` (unit-free: nats and bits alike, relative to the loss level): smooth loss-vs-lr
curves rise c d^2 with c = 0.013-0.05 nats per octave^2 at losses near 1.7 (0.8-3% of the level per
octave^2, docs/STATISTICS.md), NoPE's curve in study 8 0.006-0.06 within an octave of a 2.0 minimum
(at most 3%), and a bend of +0.3 per octave adds at most 35% at one octave, 80% at two. 10% per
octave^2 (floored at one octave, so that noise at a half-step is never a cliff) is three times the
steepest of them; SwiGLU's cliff in study 8 (1.6850 at 8e-3, 2.4315 at 1.13e-2: +44% in half an
octave) is four times the threshold. What the rule buys and costs in simulated studies with and
without cliffs is in docs/STATISTICS.md ("Stability cliffs, picks on points that trained, closed curves").

Which runs trained is each run's own status, judged from its own curve (`gptlab.statuses.judge`): no rule
here compares one run's loss with its siblings' at the same setting.
"""
from __future__ import annotations

import math
from typing import Iterable

from gptlab.statuses import FAILED, OK

TRAINED = OK  # the one status of a run that trained (`gptlab.statuses` owns the names)
SAYS_NOTHING = FAILED  # a crashed run: no evidence about its lr, left out before the rule
RISE = 0.10  # a jump above the lowest mean beyond this share of it per octave^2 (floored at one octave) is a cliff
TOLERANCE = 1e-4  # octaves: lrs written to 6 significant digits (1.41421e-3) are this close to the lattice's


def trained(status: str) -> bool:
    """Whether a run with this status trained (its loss is a number the statistics may use)."""
    return status == TRAINED


def cliff_edge(runs: Iterable[tuple[float, float, bool]]) -> float:
    """The lowest x (log2 lr) beyond the cliff, inf when none: runs as (x, loss, trained) of one cell."""
    by_x: dict[float, list[tuple[float, bool]]] = {}
    for x, loss, ok in runs:
        by_x.setdefault(float(x), []).append((float(loss), bool(ok) and math.isfinite(loss)))
    xs = sorted(by_x)
    edge = math.inf
    while True:
        clean = {x: [y for y, ok in by_x[x] if ok] for x in xs if x < edge - TOLERANCE}
        means = {x: sum(v) / len(v) for x, v in clean.items() if v}
        if not means:
            return edge
        best = min(sorted(means), key=lambda x: means[x])
        if not all(ok for _, ok in by_x[best]):  # a run failed at the lowest mean: the cliff starts there
            edge = best
            continue
        for x in xs:
            if x <= best + TOLERANCE or x >= edge - TOLERANCE:
                continue
            rise = max((y for y, ok in by_x[x] if ok), default=math.inf) - means[best]
            if not all(ok for _, ok in by_x[x]) or rise > RISE * abs(means[best]) * max(x - best, 1.0) ** 2:
                return x
        return edge


def beyond(x: float, edge: float) -> bool:
    """Whether log2 lr `x` lies beyond the cliff that starts at `edge` (`cliff_edge`'s answer)."""
    return x >= edge - TOLERANCE
