"""Does an effect change with a scale factor? Paired-by-seed CIs for the change between two scale levels.

Owns `effect_changes`: for each scientific factor's main effect (level - baseline, averaged over the
other scientific factors' cells as `design.Design.interaction` defines it; a design with excluded
cells gets the treatment-coded effect at the other factors' baselines, as `effects` does) and each
scale level other than the reference (the scale factor's first level), the change
effect(level) - effect(reference) with its CI, p-value (Holm across the table) and call. Also
`paired_change` (the interval, on arrays); the simulation that checks it is `calibration.scale_change_sim`.

The seed is the unit of replication: runs of one seed share initialisation and batch order at every
scale level (and under shared wsd trunks, a shorter run's stable phase is the longer run's), so
effects at two levels are not independent and comparing their two CIs is the wrong test. Model:
for seed s, scale level k and cell c, y[s,k,c] = mu[k,c] + a[s,k] + b[s,k,c] + e[s,k,c], where
a (seed offset) and b (seed x cell effect) may be correlated in any way across cells and levels
and e is run noise. The change is the contrast D = c'(y[s,k,.] - y[s,ref,.]) per seed; the
only assumption is that the D of different seeds are independent draws from one normal law, so
the t interval on their mean (n_seeds - 1 df) is exact, whatever the correlation across levels. A
seed counts only with an ok run in every cell at both levels (the same seeds give the effects at
both levels, so change = effect_at_level - effect_at_reference exactly).

Calls (ALPHA as in `calls`): `changes` when the Holm-adjusted p < alpha (the sign of `change` says
which way: negative = the level's loss falls relative to its baseline from the reference scale to
this one); `no change within margin` when the (1 - 2 alpha) CI lies inside +/- margin (TOST);
otherwise `inconclusive` (always, with one seed: no CI).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as st

from gptlab.errors import GptlabError, closest
from gptlab.stats import calls
from gptlab.stats.calls import INCONCLUSIVE
from gptlab.stats.design import Design, design_cells, estimability
from gptlab.statuses import OK

CHANGES, NO_CHANGE = "changes", "no change within margin"  # and INCONCLUSIVE, the call's own word (`calls`)
CHANGE_CALLS = (CHANGES, NO_CHANGE, INCONCLUSIVE)
CHANGE_COLS = ["factor", "level", "baseline", "scale_factor", "scale_level", "reference_level",
               "effect_at_reference", "effect_at_level", "change", "ci_low", "ci_high", "p_value",
               "p_adjusted", "n_seeds", "call"]


@dataclass(frozen=True)
class ChangeTests:
    """Changes and their intervals, arrays of one shape (the inputs' shape without the seed axis)."""

    effect_at_reference: np.ndarray
    effect_at_level: np.ndarray
    change: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    ci90_low: np.ndarray  # the (1 - 2 alpha) CI of the TOST
    ci90_high: np.ndarray
    p_value: np.ndarray
    n_seeds: np.ndarray


def paired_change(at_reference: np.ndarray, at_level: np.ndarray, alpha: float = calls.ALPHA,
                  paired: bool = True) -> ChangeTests:
    """CIs of mean(at_level) - mean(at_reference); seeds on the last axis, in the same order in both.

    A seed with NaN in either array is left out of both. `paired` False ignores the pairing (Welch's
    interval for two independent samples): the comparison the paired interval is checked against.
    """
    ref, lvl = np.broadcast_arrays(np.asarray(at_reference, float), np.asarray(at_level, float))
    both = np.isfinite(ref) & np.isfinite(lvl)
    ref, lvl = np.where(both, ref, np.nan), np.where(both, lvl, np.nan)
    n = both.sum(axis=-1)
    with np.errstate(all="ignore"):  # n = 0 or 1 give NaN, as they should
        def mean_var(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            m = np.nansum(x, axis=-1) / n
            return m, np.nansum((x - m[..., None]) ** 2, axis=-1) / (n - 1)

        m_ref, v_ref = mean_var(ref)
        m_lvl, v_lvl = mean_var(lvl)
        change = m_lvl - m_ref
        if paired:
            se, df = np.sqrt(mean_var(lvl - ref)[1] / n), n - 1.0
        else:
            a, b = v_lvl / n, v_ref / n
            se = np.sqrt(a + b)
            df = np.where(se > 0, (a + b) ** 2 / (a ** 2 / (n - 1) + b ** 2 / (n - 1)), n - 1.0)
        df = np.where(n >= 2, df, np.nan)
        q95, q90 = st.t.ppf(1 - alpha / 2, df), st.t.ppf(1 - alpha, df)
        p = np.where(se > 0, 2 * st.t.sf(np.abs(change / se), df), np.where(change == 0, 1.0, 0.0))
        p = np.where(np.isfinite(se), p, np.nan)
    return ChangeTests(m_ref, m_lvl, change, change - q95 * se, change + q95 * se, change - q90 * se,
                       change + q90 * se, p, n)


def change_table(values: np.ndarray, contrasts: np.ndarray, margin: float, alpha: float = calls.ALPHA
                 ) -> tuple[ChangeTests, np.ndarray, np.ndarray]:
    """Every change of one or many datasets: (tests, p_adjusted, calls), each of shape (D, K - 1, R); the call of
    each change as the module docstring says (NaN p or CI: inconclusive).

    `values`: (D, K, S, C) losses of D datasets x K scale levels (0: the reference) x S seeds x C cells,
    NaN where a seed has no ok run; `contrasts`: (R, C), one effect per row. Holm runs over the
    (K - 1) x R changes of each dataset.
    """
    values = np.asarray(values, float)
    complete = np.isfinite(values).all(axis=-1)  # (D, K, S): the seed has every cell at that level
    with np.errstate(invalid="ignore"):
        effects = np.einsum("dksc,rc->dkrs", np.nan_to_num(values), np.asarray(contrasts, float))
    effects = np.where(complete[:, :, None, :], effects, np.nan)
    ref = np.where(complete[:, 1:, None, :], effects[:, :1], np.nan)  # the seeds complete at both levels
    tests = paired_change(ref, effects[:, 1:], alpha)
    p_adj = np.stack([calls.holm(p.ravel()).reshape(p.shape) for p in tests.p_value])
    with np.errstate(invalid="ignore"):
        inside = (-margin < np.asarray(tests.ci90_low)) & (np.asarray(tests.ci90_high) < margin)
        call = np.where(p_adj < alpha, CHANGES, np.where(inside, NO_CHANGE, INCONCLUSIVE))
    return tests, p_adj, call


def _check(runs: pd.DataFrame, factors: Sequence[str], scale: str, outcome: str,
           levels: Mapping[str, Sequence[Any]], baseline: Mapping[str, Any], alpha: float) -> None:
    for name in [*factors, scale, outcome, "seed"]:
        if name not in runs.columns:
            raise GptlabError(f"runs: no column {name!r}{closest(name, runs.columns)}; "
                              f"columns are {', '.join(map(str, runs.columns))}")
    if scale in factors:
        raise GptlabError(f"scale: {scale!r} is also a scientific factor; a scale factor's own effect is not a change")
    for f in [*factors, scale]:
        if not levels.get(f):
            raise GptlabError(f"levels: no levels for {f!r}; give every factor and the scale factor its grid levels")
    for f in factors:
        if baseline.get(f) not in levels[f]:
            raise GptlabError(f"baseline: {f!r} must be one of its levels {list(levels[f])}, got {baseline.get(f)!r}")
    if not 0 < alpha < 0.5:
        raise GptlabError(f"alpha: must be between 0 and 0.5 (e.g. 0.05), got {alpha!r}")


def _values(runs: pd.DataFrame, factors: Sequence[str], scale: str, outcome: str, scale_levels: Sequence[Any],
            design: Design) -> tuple[np.ndarray, list[Any]]:
    """(1, K, S, C) losses of the ok runs; a run outside the design or the scale levels is left out."""
    ok = runs[runs[OK].astype(bool)] if OK in runs.columns else runs  # `ok`: the column named after the status
    ok = ok[np.isfinite(pd.to_numeric(ok[outcome], errors="coerce").astype(float))]
    seeds = sorted(ok["seed"].unique().tolist())
    seed_at, level_at = {s: i for i, s in enumerate(seeds)}, {lv: i for i, lv in enumerate(scale_levels)}
    values = np.full((1, len(scale_levels), len(seeds), len(design.cells)), np.nan)
    for seed, level, cell, y in zip(ok["seed"], ok[scale], ok[list(factors)].itertuples(index=False, name=None),
                                    ok[outcome].astype(float)):
        k, c = level_at.get(level), design.index(cell)
        if k is None or c is None:
            continue
        if not np.isnan(values[0, k, seed_at[seed], c]):
            raise GptlabError(f"runs: seed {seed} has two ok runs in cell {cell} at {scale}={level}; "
                              f"pass one scale slice (every other scale factor at one level)")
        values[0, k, seed_at[seed], c] = y
    return values, seeds


def effect_changes(runs: pd.DataFrame, factors: Sequence[str], scale: str, outcome: str,
                   levels: Mapping[str, Sequence[Any]], baseline: Mapping[str, Any], margin: float,
                   alpha: float = calls.ALPHA, cells: Sequence[tuple] | None = None) -> pd.DataFrame:
    """One row per scientific main effect x scale level other than the reference (columns CHANGE_COLS).

    `runs`: one row per run with the `factors` and `scale` columns (level labels as in `levels`),
    `seed`, `outcome` and, if present, `ok` (only ok runs with a finite outcome count); at most one
    ok run per seed, cell and scale level (other scale factors held at one level by the caller).
    `levels` gives every factor's levels and the scale's, in grid order (the first scale level is
    the reference); `cells`: the design's cells (level tuples in `factors` order), default the full
    grid. A main effect the cells cannot estimate has no row. Unrounded numbers.
    """
    _check(runs, factors, scale, outcome, levels, baseline, alpha)
    margin = calls.check_margin(margin, "margin")
    grid = {f: tuple(levels[f]) for f in factors}
    design = Design(tuple(factors), grid, {f: baseline[f] for f in factors},
                    tuple(tuple(c) for c in (design_cells(grid) if cells is None else cells)))
    if design.full_factorial:
        terms = {t: design.interaction(t) for t in design.terms(1)}
    else:
        est = estimability(design).contrasts
        terms = {t: est[t] for t in design.terms(1) if t in est}
    scale_levels = list(levels[scale])
    if not terms or len(scale_levels) < 2:
        return pd.DataFrame(columns=CHANGE_COLS)
    values, _ = _values(runs, factors, scale, outcome, scale_levels, design)
    tests, p_adj, call = change_table(values, np.stack(list(terms.values())), margin, alpha)
    rows = []
    for k, level in enumerate(scale_levels[1:]):
        for r, ((f, lv),) in enumerate(terms):
            def at(a: np.ndarray) -> float:
                return float(a[0, k, r])
            rows.append({"factor": f, "level": lv, "baseline": baseline[f], "scale_factor": scale,
                         "scale_level": level, "reference_level": scale_levels[0],
                         "effect_at_reference": at(tests.effect_at_reference),
                         "effect_at_level": at(tests.effect_at_level), "change": at(tests.change),
                         "ci_low": at(tests.ci_low), "ci_high": at(tests.ci_high), "p_value": at(tests.p_value),
                         "p_adjusted": at(p_adj), "n_seeds": int(tests.n_seeds[0, k, r]), "call": str(call[0, k, r])})
    order = {t: i for i, t in enumerate(terms)}  # factor by factor, then scale level, as effects_by_scale
    rows.sort(key=lambda row: (order[((row["factor"], row["level"]),)], scale_levels.index(row["scale_level"])))
    return pd.DataFrame(rows, columns=CHANGE_COLS)
