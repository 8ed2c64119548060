"""Effects per scale level: the slices of a design with scale factors, each analysed on its own.

A sweep's `scale:` names grid keys (training length, width, tokenizer, the corpus) whose levels are scales, not
treatments. For each scale factor S and each of its levels, the runs at that level (every other
scale factor at its baseline) are analysed on their own with the report's model over the
scientific factors alone: each scientific factor's main effect (averaged over the other
scientific factors, a full factorial within the slice) with its 95% CI and call, each slice its
own Holm family and, in a tuned sweep, its own check against the slice's picks (whether a call holds,
changes or reverses across S's levels is said by `sentences`). Nothing here reports S's own effect: a
longer run having a lower loss, or Austen being easier than Shakespeare, is not a finding.

The slices (`slices`, `effects_by_scale`) are the report's own: an arms sweep's table takes its arms per scale
level from them, and what would decide an effect reads each slice's error. Whether an effect changes between S's
levels is the `scale:` kind's test (`gptlab.kinds.scale.tables`), paired by seed along one text in a grid and
unpaired across texts and in an arms design (`unpaired_scale`). Effects across texts are in bits per character
(`load`): a nat of one text is not a nat of another.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator, Mapping

import pandas as pd

from gptlab.report.fmt import round_frame
from gptlab.report.load import Results
from gptlab.report.tables.analyses import analyse_runs
from gptlab.run.corpora import CORPUS_KEYS
from gptlab.stats.effects import TUNING_COLS, Analysis

SCALE_COLS = ["factor", "level", "baseline", "scale_factor", "scale_level", "estimate", "ci_low", "ci_high",
              "p_adjusted", "call", "n_runs"]


def scientific_view(res: Results) -> Results:
    """`res` with only its scientific factors (the cells of one scale slice)."""
    sci = res.scientific
    return dataclasses.replace(res, factors=sci, levels={f: res.levels[f] for f in sci},
                               baseline={f: res.baseline[f] for f in sci},
                               cells=res.cells[sci].drop_duplicates().reset_index(drop=True))


def effects_by_scale(res: Results, loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None = None) -> pd.DataFrame:
    """One row per scientific factor level x scale factor x scale level (see the module docstring).

    `loss_left` (a tuned sweep's per-cell loss left, (estimate, upper end, df), keys in `res.factors` order): each
    slice's calls are checked against its own cells' picks, and the rows gain the tuning columns."""
    rows = []
    for s, level, part, analysis in slices(res, loss_left):
        for r in analysis.main.to_dict("records"):
            rows.append({"factor": r["factor"], "level": r["level"], "baseline": r["baseline"],
                         "scale_factor": s, "scale_level": level, "estimate": r["estimate"],
                         "ci_low": r["ci_low"], "ci_high": r["ci_high"], "p_adjusted": r["p_adjusted"],
                         "call": r["call"], "n_runs": len(part),
                         **{k: r[k] for k in (*ARMS_EXTRA, *TUNING_COLS) if k in r}})
    extra = [c for c in (*(ARMS_EXTRA if res.arms else ()), *TUNING_COLS) if any(c in r for r in rows)]
    after_call = SCALE_COLS.index("call") + 1  # as in the effect tables: the text's share and the check follow the call
    return round_frame(pd.DataFrame(rows, columns=SCALE_COLS[:after_call] + extra + SCALE_COLS[after_call:]))


# arms.csv's columns from a slice
ARMS_EXTRA = ("ci95", "ci90_low", "ci90_high", "p_value", "text_share", "df", "variance", "mde80")


def slices(res: Results, loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None
           ) -> Iterator[tuple[str, str, pd.DataFrame, Analysis]]:
    """(scale factor, level, the slice's runs that count, their analysis) for every slice with an estimable effect."""
    if not res.scale or not res.scientific:
        return
    view = scientific_view(res)
    ok = res.counted
    for s in res.scale:
        at_baseline = at_baseline_of_others(res, ok, s)
        for level in res.levels[s]:
            part = at_baseline[at_baseline[s] == level]
            left = _slice_loss_left(res, loss_left, s, level)
            analysis = analyse_runs(view, part, res.outcome, endpoint=False, blocks=True,
                                    loss_left=left) if len(part) else None
            if analysis is not None:
                yield s, level, part, analysis


def _slice_loss_left(res: Results, loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None, s: str,
                     level: str) -> dict[tuple[str, ...], tuple[float, ...]] | None:
    """The losses left of one slice's cells (S at `level`, every other scale factor at its baseline), keyed by the
    scientific factors' levels."""
    if loss_left is None:
        return None
    at = {f: (level if f == s else res.baseline[f]) for f in res.scale}
    keep = [i for i, f in enumerate(res.factors) if f not in res.scale]
    return {tuple(cell[i] for i in keep): v for cell, v in loss_left.items()
            if all(cell[res.factors.index(f)] == lv for f, lv in at.items())}


def at_baseline_of_others(res: Results, runs: pd.DataFrame, s: str) -> pd.DataFrame:
    """`runs` with every scale factor other than `s` at its baseline level."""
    keep = pd.Series(True, index=runs.index)
    for other in res.scale:
        if other != s:
            keep &= runs[other] == res.baseline[other]
    return runs[keep]


def unpaired_scale(res: Results, s: str) -> bool:
    """Whether changes along scale factor `s` are unpaired: it changes the text, or the design is arms."""
    return s in CORPUS_KEYS or bool(res.arms)
