"""Simulated training curves with a known truth, for the calibration of the status rule (`gptlab.statuses.judge`).

Owns `KINDS` (what a run did, and the status a right rule gives it), `curve` (one run's metrics rows of
training loss) and `confusion` (the rule's statuses against the truth over many curves). The curves are
in nats on a character-level text like Tiny Shakespeare: a run starts at the uniform loss ln(65) = 4.17,
the unigram plateau sits at `UNIGRAM` = 3.31 (the training split's own frequencies); each row is the mean
of a log interval's step losses, with Gaussian or heavy-tailed (Student t, 3 df) noise of SD 0.003 to
0.03 a row (the shipped runs: 0.004 to 0.02). Kinds, each drawn over curve lengths of 8 to 80 rows:

- `healthy`: a power-law descent from the start to 1.45-2.3 (ok).
- `slow start`: sits on the unigram plateau for the first 10-40% of the rows, then descends (ok).
- `still learning`: a short run that ends 1-6% below the unigram loss while still falling (ok: the smoke
  sweep of issue 54, which a 5% margin called `collapsed`).
- `lagging`: drops to 2.6-2.9, then descends slowly to its end (ok: study 8's SwiGLU seed 2 at 8e-3).
- `spike`: a jump of 0.1-0.6 for a few rows, back on its curve before the last quarter (ok).
- `stuck`: drops from the start to the plateau (`PLATEAU`, 0.25% either side) and stays there (collapsed).
- `collapse late`: learns to 2.2-2.6, then jumps back onto the plateau in its first 60% and stays (collapsed).
- `blow-up`: learns, then in its first 40-80% jumps 0.08-0.8 above its curve and stays there,
  descending at a third of its rate or not at all (unstable).
"""
from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from gptlab.statuses import COLLAPSED, OK, UNSTABLE, judge

UNIGRAM = 3.31  # the unigram loss of the training split (nats/char): the plateau of a run that learned only frequencies
START = math.log(65)  # the loss of an untrained model over 65 characters
PLATEAU = 0.0025  # a stuck run's level, relative to UNIGRAM, is drawn within this (the shipped ones: -0.22% to +0.14%)


@dataclass(frozen=True)
class Kind:
    """One kind of run: its name, the status a right rule gives it, and how its noise-free curve is drawn."""

    name: str
    truth: str
    draw: Callable[[np.random.Generator, np.ndarray], np.ndarray]  # (rng, t in (0, 1]) -> the curve


def _descent(t: np.ndarray, end: float, rate: float) -> np.ndarray:
    """From START at t=0 to `end` at t=1: a power law whose first rows fall fastest."""
    shape = (1 + rate * t) ** -0.7
    low = (1 + rate) ** -0.7
    return end + (START - end) * (shape - low) / (1 - low)


def _healthy(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    return _descent(t, rng.uniform(1.45, 2.3), rng.uniform(20, 200))


def _slow_start(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    t0 = rng.uniform(0.1, 0.4)
    late = _descent(np.clip((t - t0) / (1 - t0), 0, 1), rng.uniform(1.6, 2.4), rng.uniform(20, 100))
    early = UNIGRAM + (START - UNIGRAM) * np.exp(-t / 0.02)
    return np.where(t < t0, early, np.minimum(late, UNIGRAM))


def _still_learning(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    end = UNIGRAM * (1 - rng.uniform(0.01, 0.06))
    return UNIGRAM + (START - UNIGRAM) * np.exp(-t / 0.1) - (UNIGRAM - end) * t ** rng.uniform(0.8, 1.5)


def _lagging(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    knee = rng.uniform(2.6, 2.9)
    return knee + (START - knee) * np.exp(-t / 0.03) - rng.uniform(0.15, 0.35) * t


def _spike(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    base = _healthy(rng, t)
    at, width = rng.uniform(0.2, 0.6), rng.uniform(0.03, 0.12)
    return base + rng.uniform(0.1, 0.6) * np.exp(-np.clip(t - at, 0, None) / width) * (t >= at)


def _stuck(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    level = UNIGRAM * (1 + rng.uniform(-PLATEAU, PLATEAU))
    return level + (START - level) * np.exp(-t / rng.uniform(0.01, 0.05))


def _collapse_late(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    at = rng.uniform(0.15, 0.6)
    level = UNIGRAM * (1 + rng.uniform(-PLATEAU, PLATEAU))
    return np.where(t < at, _descent(t, rng.uniform(2.2, 2.6), rng.uniform(20, 100)), level)


def _blow_up(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    base = _healthy(rng, t)
    at = rng.uniform(0.4, 0.8)
    i = int(np.searchsorted(t, at))
    after = base[min(i, len(t) - 1)] + rng.uniform(0.08, 0.8) + (base - base[min(i, len(t) - 1)]) * rng.uniform(0, 1 / 3)
    return np.where(t < at, base, after)


KINDS = (Kind("healthy", OK, _healthy), Kind("slow start", OK, _slow_start),
         Kind("still learning", OK, _still_learning), Kind("lagging", OK, _lagging), Kind("spike", OK, _spike),
         Kind("stuck", COLLAPSED, _stuck), Kind("collapse late", COLLAPSED, _collapse_late),
         Kind("blow-up", UNSTABLE, _blow_up))
LENGTHS = (8, 12, 20, 40, 80)  # metrics rows a run has (the shipped runs: 10 and 40)


def curve(kind: Kind, rng: np.random.Generator, rows: int | None = None, sd: float | None = None) -> np.ndarray:
    """One run of `kind`: its training loss at each of `rows` metrics rows (drawn from LENGTHS when None), with noise
    of SD `sd` a row (drawn log-uniform over 0.003-0.03 when None), Gaussian or, one run in three, Student t (3 df)."""
    n = int(rows if rows is not None else rng.choice(LENGTHS))
    sd = float(sd if sd is not None else math.exp(rng.uniform(math.log(0.003), math.log(0.03))))
    t = np.arange(1, n + 1) / n
    heavy = rng.random() < 1 / 3
    noise = rng.standard_t(3, n) / math.sqrt(3) if heavy else rng.standard_normal(n)
    return kind.draw(rng, t) + sd * noise


def confusion(runs: int = 2000, seed: int = 0, rows: int | None = None,
              kinds: Sequence[Kind] = KINDS) -> dict[str, collections.Counter]:
    """Per kind, how many of `runs` simulated curves `judge` gives each status (the same draws for a given seed)."""
    rng = np.random.default_rng(seed)
    table: dict[str, collections.Counter] = {}
    for kind in kinds:
        table[kind.name] = collections.Counter(judge(curve(kind, rng, rows).tolist(), UNIGRAM).status
                                               for _ in range(runs))
    return table
