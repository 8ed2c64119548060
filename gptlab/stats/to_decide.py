"""What would decide an effect: the seeds, and the test text, that give its 95% CI a half-width of the margin.

A contrast's variance has two parts (`text_share`): the seeds' (each part of it scales as 1/runs) and the
text's (it scales as 1/test characters and no number of seeds shrinks it). Given them as `ErrorParts`:

    half-width(n, g) = t_0.975(df) sqrt( sum_j v_j s_j / m_j(n) + T / g )

n: seeds per arm (or cell); m_j(n) = round(n r_j) the runs part j then averages (r_j 1 for an arm or a cell,
sqrt(k) for the baseline of k arms: the design's own rule, `arms.baseline_ratio`); s_j its runs now; g: the
test text as a multiple of today's; df: Satterthwaite's over the seed variance estimate(s), whose df grow
with the runs (none for Stein's round-1 variance), and the text's (fixed: the split keeps its
`TEST_BLOCKS` blocks, each larger). `seeds_needed` is the smallest n >= 2 with half-width <= margin.
As n grows the half-width falls to the text's alone, t(df_text) sqrt(T / g): where that is >= margin no n
reaches it (None). The test split that would is then named by one rule, `TEXT_BUDGET`: the split at
which the text alone takes half the margin's variance (twice the least text that could work at all,
which would need infinitely many seeds). Splitting the budget equally leaves the seeds the other half,
about twice the seeds that a CI without any text error would need; the least split is given beside it.
The split is rounded up to a whole `FRACTION_STEP` and capped at `MAX_TEST_FRACTION` (none is named where
even that cannot work), and its seeds are counted at the split named.

Assumed: the text's arm x block variance per character stays what today's split shows (the longer split
reaches further back into the corpus), and the seed variances stay what these runs show.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from gptlab.stats.calls import ALPHA
from gptlab.stats.models import FIXED_DF, OWN, CellFit, t_quantile
from gptlab.stats.text_share import TextError

TEXT_BUDGET = 0.5  # the recommended split gives the text this share of the margin's variance (see the docstring)
FRACTION_STEP = 0.01  # a recommended test split is rounded up to a whole percent of the text
MAX_SEEDS = 10_000  # the search stops here (as many seeds as a sweep may have): beyond, "no practical number"
MAX_TEST_FRACTION = 0.5  # no split is recommended that leaves less than half the text to train and validate on


@dataclass(frozen=True)
class SeedPart:
    """One part of a contrast's seed variance: the runs of one arm or cell (or, with a seed block, all of them)."""
    variance: float  # its variance of the contrast now (e.g. s_arm^2 / n_arm)
    seeds: int  # the runs it averages now
    ratio: float = 1.0  # the runs it gets per seed of an arm (or cell) as the design adds them
    df: float = math.nan  # the df of its own variance estimate (Welch); NaN: the parts share `ErrorParts.df`
    df_per_seed: float = 1.0  # the df its own estimate gains per run added

    def runs_at(self, n: int) -> int:
        return _runs(n, self.ratio)


def _runs(n: int, ratio: float) -> int:
    """The runs a cell with `ratio` runs per arm seed has at n seeds per arm (`arms.baseline_seed_count`'s rounding)."""
    return max(1, round(n * ratio))


@dataclass(frozen=True)
class ErrorParts:
    """A contrast's variance as the design's seeds and its test text make it (see the module docstring)."""
    parts: tuple[SeedPart, ...]
    seeds: int  # seeds per arm (or cell) now: the design's n
    df: float = math.nan  # df of the parts' shared variance estimate now (NaN: each part its own, Welch)
    df_per_seed: float = 0.0  # df the shared estimate gains per seed added to every arm or cell (0: Stein's)
    text_var: float = 0.0  # the text's variance of the contrast at today's test split
    text_df: float = math.inf
    df_ratios: tuple[float, ...] = ()  # no seed block: every cell's runs per arm seed; the shared df then gain
    # exactly the runs the design adds (`df_per_seed` is used when empty)

    @property
    def shared(self) -> bool:
        return not math.isnan(self.df)

    def shared_df(self, n: int) -> float:
        """The shared estimate's df with n seeds per arm (or cell)."""
        if self.df_ratios:
            return self.df + sum(_runs(n, r) - _runs(self.seeds, r) for r in self.df_ratios)
        return self.df + self.df_per_seed * (n - self.seeds)


@dataclass(frozen=True)
class Decision:
    """What would give one effect a 95% CI of +/- margin (NaN fractions: no test split needed or known)."""
    half_width: float  # the 95% half-width now, from these parts at today's seeds and split
    seeds: int  # seeds per arm (or cell) now
    seeds_needed: int | None  # at today's split; None: no number of seeds (up to MAX_SEEDS) reaches the margin
    text_half_width: float  # the text's part alone: the half-width with unlimited seeds at today's split
    test_fraction: float  # today's split (NaN: unknown)
    test_fraction_min: float = math.nan  # the least split at which the text alone is +/- margin
    test_fraction_needed: float = math.nan  # the recommended split (TEXT_BUDGET), rounded up to FRACTION_STEP
    seeds_at_fraction: int | None = None  # seeds per arm that reach the margin at the recommended split


def _t(df: float) -> float:
    return t_quantile(1 - ALPHA / 2, df if df < 1e12 else 1e12)


def half_width(p: ErrorParts, n: int, text_scale: float = 1.0) -> float:
    """The 95% half-width with n seeds per arm (or cell) and the test text `text_scale` times today's."""
    seed_vars, dfs = [], []
    for part in p.parts:
        m = part.runs_at(n)
        seed_vars.append(part.variance * part.seeds / m)
        dfs.append(part.df + part.df_per_seed * (m - part.seeds))
    text = p.text_var / text_scale
    seed = float(sum(seed_vars))
    if p.shared:
        df = p.shared_df(n)
        denom = seed ** 2 / df if df > 0 else math.inf
    else:
        denom = sum(v ** 2 / d if d > 0 else math.inf for v, d in zip(seed_vars, dfs) if v > 0)
    denom += text ** 2 / p.text_df if text > 0 else 0.0
    var = seed + text
    if not var > 0 or math.isinf(denom):
        return math.inf if math.isinf(denom) else 0.0
    return _t(var ** 2 / denom if denom > 0 else math.inf) * math.sqrt(var)


def text_half_width(p: ErrorParts, text_scale: float = 1.0) -> float:
    """The half-width the text alone leaves (the limit of `half_width` as the seeds grow without bound)."""
    return _t(p.text_df) * math.sqrt(p.text_var / text_scale) if p.text_var > 0 else 0.0


def seeds_needed(p: ErrorParts, margin: float, text_scale: float = 1.0) -> int | None:
    """The fewest seeds per arm (or cell), at least 2, whose 95% half-width is <= margin; None: none up to
    MAX_SEEDS (always None when the text alone is >= margin)."""
    if text_half_width(p, text_scale) >= margin:
        return None
    hi = 2
    while half_width(p, hi, text_scale) > margin:  # doubling, then bisection: the half-width falls with n
        if hi >= MAX_SEEDS:
            return None
        hi = min(2 * hi, MAX_SEEDS)
    lo = max(2, hi // 2)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if half_width(p, mid, text_scale) > margin else (lo, mid)
    return lo


def decide(p: ErrorParts, margin: float, test_fraction: float = math.nan) -> Decision:
    """Seeds needed at today's split and, where none reach the margin, the split that would (module docstring)."""
    need = seeds_needed(p, margin)
    out = Decision(half_width(p, p.seeds), p.seeds, need, text_half_width(p), test_fraction)
    if need is not None or not p.text_var > 0 or not test_fraction > 0:
        return out
    least = test_fraction * (text_half_width(p) / margin) ** 2  # text variance ~ 1 / test characters
    if least >= MAX_TEST_FRACTION:
        return dataclasses.replace(out, test_fraction_min=least)
    steps = math.ceil(least / TEXT_BUDGET / FRACTION_STEP - 1e-9)
    fraction = min(round(steps * FRACTION_STEP, 10), MAX_TEST_FRACTION)
    return Decision(out.half_width, p.seeds, None, out.text_half_width, test_fraction, least, fraction,
                    seeds_needed(p, margin, fraction / test_fraction))


def error_parts(fit: CellFit, c: np.ndarray | None, text: TextError | None, counts: np.ndarray,
                ratios: np.ndarray | None = None) -> ErrorParts | None:
    """The parts of contrast c's variance under `fit` (None without an error estimate).

    `counts`: each cell's runs; `ratios`: each cell's runs per seed of an arm as the design adds them (an arms
    design: the baseline's sqrt(k)); None: every cell alike. Without a seed block each cell of c is its own
    part (its variance, the diagonal of `fit.cov`; under `welch` its own df, counts - 1; under an arms design's
    `own` its own df, grown by the runs added, and under `stein own` round 1's, fixed); with one, the
    contrast's seed variance is one part on the model's df, as `models.fit_cells` counts them.
    """
    if c is None or not fit.has_error:
        return None
    seed = fit.test(c)
    if not seed.se > 0 or not seed.df > 0:
        return None
    counts = np.asarray(counts, int)
    ratios = np.ones(len(counts)) if ratios is None else np.asarray(ratios, float)
    text_var, text_df = text.variance_df(c) if text is not None else (0.0, math.inf)
    used = np.flatnonzero(np.abs(c) > 1e-12)
    if not used.size:
        return None
    n = max(1, int(counts[used][ratios[used] == ratios[used].min()].max()))  # an arm's (or cell's) seeds now
    if fit.kind in OWN:  # each cell its own variance on its own df: grown by its runs, or Stein's round 1's (fixed)
        dfs, borrowed = fit.cell_df, fit.borrowed
        parts = tuple(SeedPart(float(c[i] ** 2 * fit.cov[i, i]), int(counts[i]), float(ratios[i]), float(dfs[i]),
                               0.0 if fit.kind in FIXED_DF or borrowed[i] else float(dfs[i]) / max(int(counts[i]) - 1, 1))
                      for i in used)
        return ErrorParts(parts, n, text_var=text_var, text_df=text_df)
    if not fit.seed_block and fit.kind != "pooled":  # no seed block: the cell means are independent
        welch = fit.kind == "welch"
        parts = tuple(SeedPart(float(c[i] ** 2 * fit.cov[i, i]), int(counts[i]), float(ratios[i]),
                               float(counts[i] - 1) if welch else math.nan) for i in used)
        if welch:
            return ErrorParts(parts, n, text_var=text_var, text_df=text_df)
        if fit.kind == "stein":  # the first round's df, whatever the seeds
            return ErrorParts(parts, n, fit.df, 0.0, text_var, text_df)
        return ErrorParts(parts, n, fit.df, 0.0, text_var, text_df, tuple(float(r) for r in ratios))
    if fit.kind == "welch":  # with a seed block: the contrast's Welch df grow with the seeds
        part = SeedPart(seed.se ** 2, n, 1.0, seed.df, seed.df / max(n - 1, 1))
        return ErrorParts((part,), n, text_var=text_var, text_df=text_df)
    per_seed = 0.0 if fit.kind == "stein" else float(len(counts) - (1 if fit.seed_block else 0))
    return ErrorParts((SeedPart(seed.se ** 2, n),), n, seed.df, per_seed, text_var, text_df)
