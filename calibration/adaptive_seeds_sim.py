"""Simulated adaptive sweeps with no real effect: the check that a seed rule keeps its CIs exact.

Owns the null simulation behind `benchmarks/adaptive_null.py` and `tests/stats/test_adaptive_seeds.py`. Each
simulated sweep is a 2^k factorial (2 to 16 cells) whose runs are
    y[cell, seed] = b[seed] + e,   e ~ N(0, sigma^2),   b[seed] ~ N(0, seed_sd^2)
(every effect is zero; a seed shifts every cell alike, as the lab's shared batch order does).
Each sweep is analysed with the report's model, y ~ 0 + C(cell) + C(seed), in closed form (the
balanced design makes every main-effect contrast c have variance sigma^2 * sum(c^2) / n), so tens
of thousands of sweeps take seconds. `tests/stats/test_adaptive_seeds.py` checks the closed form against
`models.fit_cells` on the same data. Two rules are compared:

- `stein`: the lab's rule (`precision.SeedRule.seeds_needed` on round 1's widest half-width; the
  final CI uses round 1's variance and df);
- `naive`: add one seed at a time until the half-width, re-estimated from all seeds so far, is
  <= precision (or max), and use that last variance. It stops when the variance is by chance small.
- `report`: what the report does since issue 54: Stein's rule sets N; a sweep that stopped below the
  maximum keeps round 1's variance, one that reached the maximum uses the variance of all its seeds
  (its seed count no longer depended on the noise).

A false call is a 95% CI that excludes zero (a `better` or `worse` call on a one-test family).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from gptlab.stats.adaptive_seeds import SeedRule

RULES = ("stein", "naive", "report")


@dataclass(frozen=True)
class NullResult:
    """False calls of one rule on one design, over `sweeps` simulated null sweeps."""

    rule: str
    cells: int
    min_seeds: int
    sweeps: int
    false_first: int  # sweeps whose first main effect was called (independent across sweeps)
    false_any: int  # sweeps with at least one main effect called (unadjusted)
    effects_called: int  # main effects called, over all effects of all sweeps
    effects: int  # main effects tested
    mean_seeds: float  # average seed count the rule chose
    at_max: float  # share of sweeps that stopped at max

    @property
    def rate(self) -> float:
        return self.false_first / self.sweeps

    @property
    def mc_se(self) -> float:
        """Monte-Carlo standard error of `rate` around 5%."""
        return math.sqrt(0.05 * 0.95 / self.sweeps)


def main_effect_contrasts(n_factors: int) -> np.ndarray:
    """(factors, cells) effect-coded main-effect contrasts of a 2^k factorial (high half minus low half)."""
    cells = np.array(np.meshgrid(*[[0, 1]] * n_factors, indexing="ij")).reshape(n_factors, -1)
    return np.where(cells == 1, 1.0, -1.0) / (cells.shape[1] / 2)


def _pure_error(y: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """s^2 and df of y ~ C(cell) + C(seed) on the first n seeds; y: (sweeps, cells, seeds)."""
    z = y[:, :, :n]
    resid = z - z.mean(axis=2, keepdims=True) - z.mean(axis=1, keepdims=True) + z.mean(axis=(1, 2), keepdims=True)
    df = (z.shape[1] - 1) * (n - 1)
    return (resid ** 2).sum(axis=(1, 2)) / df, df


def simulate_null(n_factors: int, rule: SeedRule, sweeps: int, rng: np.random.Generator, which: str = "stein",
                  sigma: float = 1.0, seed_sd: float = 0.5) -> NullResult:
    """`sweeps` null sweeps of a 2^n_factors factorial under rule `which` ("stein" or "naive")."""
    if which not in RULES:
        raise ValueError(f"which must be one of {RULES}, got {which!r}")
    C = main_effect_contrasts(n_factors)  # (F, K)
    K, k = C.shape[1], float((C[0] ** 2).sum())
    y = rng.normal(0.0, sigma, (sweeps, K, rule.max)) + rng.normal(0.0, seed_sd, (sweeps, 1, rule.max))
    means = np.cumsum(y, axis=2) / np.arange(1, rule.max + 1)  # (S, K, n): cell means of the first n seeds
    if which in ("stein", "report"):
        s2, df0 = _pure_error(y, rule.min)
        t0 = st.t.ppf(0.975, df0)
        widest = t0 * np.sqrt(s2 * k / rule.min)
        n = rule.seeds_needed(widest)
        se = np.sqrt(s2 * k / n)
        t = np.full(sweeps, t0)
        if which == "report":  # at the maximum: every seed's variance and df
            s2_all, df_all = _pure_error(y, rule.max)
            at_max = n == rule.max
            se = np.where(at_max, np.sqrt(s2_all * k / rule.max), se)
            t = np.where(at_max, st.t.ppf(0.975, df_all), t)
    else:
        n = np.full(sweeps, rule.max)
        se = np.zeros(sweeps)
        t = np.zeros(sweeps)
        done = np.zeros(sweeps, bool)
        for m in range(rule.min, rule.max + 1):
            s2, df = _pure_error(y, m)
            tm = st.t.ppf(0.975, df)
            width = tm * np.sqrt(s2 * k / m)
            stop = ~done & ((width <= rule.precision) | (m == rule.max))
            n[stop], se[stop], t[stop] = m, np.sqrt(s2[stop] * k / m), tm
            done |= stop
    final = means[np.arange(sweeps), :, n - 1]  # (S, K)
    est = final @ C.T  # (S, F)
    called = np.abs(est) > (t * se)[:, None]
    return NullResult(which, K, rule.min, sweeps, int(called[:, 0].sum()), int(called.any(axis=1).sum()),
                      int(called.sum()), int(called.size), float(n.mean()), float((n == rule.max).mean()))


def precision_for_seeds(n_factors: int, min_seeds: int, target_seeds: float, sigma: float = 1.0) -> float:
    """A precision at which round 1's typical noise asks for about `target_seeds` seeds."""
    K = 2 ** n_factors
    k = 4.0 / K
    df0 = (K - 1) * (min_seeds - 1)
    return float(st.t.ppf(0.975, df0) * sigma * math.sqrt(k / target_seeds))
