"""Effects per scale level: does a call made at one scale hold at another, or on another text?

A sweep's `scale:` names grid keys (training length, width, tokenizer, the corpus) whose levels are scales, not
treatments. For each scale factor S and each of its levels, the runs at that level (every other
scale factor at its baseline) are analysed on their own with the report's model over the
scientific factors alone: each scientific factor's main effect (averaged over the other
scientific factors, a full factorial within the slice) with its 95% CI and call, each slice its
own Holm family and, in a tuned sweep, its own check against the slice's picks (whether a call holds,
changes or reverses across S's levels is said by `sentences`). Nothing here reports S's own effect: a
longer run having a lower loss, or Austen being easier than Shakespeare, is not a finding.

Whether an effect changes between S's levels is its own test (`effect_changes_by_scale`):
- along a scale of one text in a grid (training length, width): paired by seed (`stats.scale_change`),
  since a seed's runs share their initialisation and batches at every level (and, under wsd with shared
  trunks, their stable phase), so two levels' CIs must not be compared as if independent;
- across texts (`data.dataset` or `data.path` a scale factor), and in an arms design at any scale (the
  baseline's extra seeds have no partner): unpaired (`stats.transfer`), from the two slices' own effects,
  whose CIs count the seeds and each text's blocks; each change checked against both slices' picks.
Effects across texts are in bits per character (`load`): a nat of one text is not a nat of another.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd

from gptlab.report.fmt import round_frame
from gptlab.report.load import Results
from gptlab.report.tables.analyses import analyse_runs
from gptlab.run.corpora import CORPUS_KEYS
from gptlab.stats.calls import BETTER, EQUIVALENT, WORSE
from gptlab.stats.effects import TUNING_COLS, Analysis
from gptlab.stats.robustness import DEPENDS, tuning_word
from gptlab.stats.robustness import check as tuning_check
from gptlab.stats.scale_change import CHANGE_COLS, effect_changes
from gptlab.stats.transfer import CHANGES, HOLDS, PAIRED, REVERSES, UNPAIRED, UnpairedChange, transfer_calls, unpaired_change

SCALE_COLS = ["factor", "level", "baseline", "scale_factor", "scale_level", "estimate", "ci_low", "ci_high",
              "p_adjusted", "call", "n_runs"]


def scientific_view(res: Results) -> Results:
    """`res` with only its scientific factors (the cells of one scale slice)."""
    sci = res.scientific
    return dataclasses.replace(res, factors=sci, levels={f: res.levels[f] for f in sci},
                               baseline={f: res.baseline[f] for f in sci},
                               cells=res.cells[sci].drop_duplicates().reset_index(drop=True))


def effects_by_scale(res: Results, margin: float,
                     loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None = None) -> pd.DataFrame:
    """One row per scientific factor level x scale factor x scale level (see the module docstring).

    `loss_left` (a tuned sweep's per-cell loss left, (estimate, upper end, df), keys in `res.factors` order): each
    slice's calls are checked against its own cells' picks, and the rows gain the tuning columns."""
    rows = []
    for s, level, part, analysis in slices(res, margin, loss_left):
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


def slices(res: Results, margin: float, loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None
            ) -> Iterator[tuple[str, str, pd.DataFrame, Analysis]]:
    """(scale factor, level, the slice's ok runs, their analysis) for every slice with an estimable effect."""
    if not res.scale or not res.scientific:
        return
    view = scientific_view(res)
    ok = res.runs[res.runs["ok"] & res.runs[res.outcome].notna()]
    for s in res.scale:
        at_baseline = _at_baseline_of_others(res, ok, s)
        for level in res.levels[s]:
            part = at_baseline[at_baseline[s] == level]
            left = _slice_loss_left(res, loss_left, s, level)
            analysis = analyse_runs(view, part, res.outcome, margin, endpoint=False, blocks=True,
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


def _at_baseline_of_others(res: Results, runs: pd.DataFrame, s: str) -> pd.DataFrame:
    """`runs` with every scale factor other than `s` at its baseline level."""
    keep = pd.Series(True, index=runs.index)
    for other in res.scale:
        if other != s:
            keep &= runs[other] == res.baseline[other]
    return runs[keep]


def unpaired_scale(res: Results, s: str) -> bool:
    """Whether changes along scale factor `s` are unpaired: it changes the text, or the design is arms."""
    return s in CORPUS_KEYS or bool(res.arms)


def effect_changes_by_scale(res: Results, margin: float,
                            loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None = None) -> pd.DataFrame:
    """Per scientific effect and scale factor S: its change from S's first level to each other level, paired by
    seed or unpaired (`unpaired_scale`; the `pairing` column says which), with Holm across each S's rows and a
    call (see the module docstring)."""
    if not res.scale or not res.scientific:
        return pd.DataFrame(columns=CHANGE_COLS)
    view = scientific_view(res)
    cells = list(view.cells[res.scientific].itertuples(index=False, name=None))
    paired = [s for s in res.scale if not unpaired_scale(res, s)]
    frames = [effect_changes(_at_baseline_of_others(res, res.runs, s), res.scientific, s, res.outcome, res.levels,
                             res.baseline, margin, cells=cells).assign(pairing=PAIRED) for s in paired]
    if len(paired) < len(res.scale):
        frames.append(_unpaired_changes(res, margin, loss_left))
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=CHANGE_COLS)
    out = pd.concat(frames, ignore_index=True)
    order = {s: i for i, s in enumerate(res.scale)}  # the scale factors in the sweep's order
    out = out.sort_values("scale_factor", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)
    if not (out["pairing"] != PAIRED).any():  # one text, a grid: the table as before (every row paired by seed)
        out = out.drop(columns=["pairing"])
    return round_frame(out)


TRANSFER_COLS = ["pairing", "df", *TUNING_COLS[:2]]  # effect_changes.csv's columns beside CHANGE_COLS when unpaired


def _unpaired_changes(res: Results, margin: float,
                      loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None) -> pd.DataFrame:
    """The unpaired changes (`stats.transfer`) of every unpaired scale factor, Holm within each factor."""
    by_slice: dict[str, dict[str, Analysis]] = {}
    seeds: dict[tuple[str, str], pd.DataFrame] = {}
    for s, level, part, analysis in slices(res, margin, loss_left):
        if unpaired_scale(res, s):
            by_slice.setdefault(s, {})[level] = analysis
            seeds[(s, level)] = part
    frames = []
    for s, analyses in by_slice.items():
        reference = res.levels[s][0]
        if reference not in analyses:
            continue
        ref = _effects(analyses[reference], seeds[(s, reference)])
        pairs = [(level, key, ref[key], row) for level in res.levels[s][1:] if level in analyses
                 for key, row in _effects(analyses[level], seeds[(s, level)]).items() if key in ref]
        if not pairs:
            continue
        a, b = [p[2] for p in pairs], [p[3] for p in pairs]
        ch = unpaired_change(*(np.array([x[k] for x in a], float) for k in ("estimate", "se", "df")),
                             *(np.array([x[k] for x in b], float) for k in ("estimate", "se", "df")))
        p_adj, verdicts = transfer_calls(ch, [x["call"] for x in a], [x["call"] for x in b], margin)
        rows = []
        for i, (level, (factor, lv), x, y) in enumerate(pairs):
            verdict, tuning = verdicts[i], ""
            if loss_left is not None:
                verdict, tuning = _check_change(ch, i, p_adj[i], verdict, x, y, analyses[reference],
                                                analyses[level], margin)
            rows.append({"factor": factor, "level": lv, "baseline": res.baseline[factor], "scale_factor": s,
                         "scale_level": level, "reference_level": reference, "effect_at_reference": x["estimate"],
                         "effect_at_level": y["estimate"], "change": ch.change[i], "ci_low": ch.ci_low[i],
                         "ci_high": ch.ci_high[i], "p_value": ch.p_value[i], "p_adjusted": p_adj[i],
                         "n_seeds": min(x["n_seeds"], y["n_seeds"]), "call": verdict, "pairing": UNPAIRED,
                         "df": ch.df[i], "tuning": tuning, "call_at_picks": verdicts[i]})
        frames.append(pd.DataFrame(rows, columns=CHANGE_COLS + TRANSFER_COLS))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CHANGE_COLS + TRANSFER_COLS)


def _effects(a: Analysis, part: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """Each main effect of one slice's analysis: estimate, se, df, call, its contrast, and the seeds of its level."""
    out = {}
    for r, t, c in zip(a.main.to_dict("records"), a.tests.get("main", []), a.contrasts.get("main", [])):
        n_seeds = int(part.loc[part[r["factor"]] == r["level"], "seed"].nunique())
        out[(r["factor"], r["level"])] = {"estimate": t.estimate, "se": t.se, "df": t.df, "call": r["call"],
                                          "contrast": c, "n_seeds": n_seeds}
    return out


def _check_change(ch: UnpairedChange, i: int, p_adjusted: float, verdict: str, x: dict[str, Any], y: dict[str, Any],
                  ref: Analysis, level: Analysis, margin: float) -> tuple[str, str]:
    """The change's verdict against both slices' picks (`stats.robustness`): a contrast over the two slices' cells,
    the level's weights minus the reference's. Returns (verdict, tuning)."""
    as_call = {CHANGES: BETTER if ch.change[i] < 0 else WORSE, REVERSES: BETTER if ch.change[i] < 0 else WORSE,
               HOLDS: EQUIVALENT}.get(verdict, verdict)
    if x["contrast"] is None or y["contrast"] is None or ref.loss_left is None or level.loss_left is None:
        return verdict, ""
    weights = np.concatenate([-np.asarray(x["contrast"], float), np.asarray(y["contrast"], float)])
    bounds = np.concatenate([ref.loss_left, level.loss_left])
    check = tuning_check(float(ch.change[i]), float(ch.se[i]), float(ch.df[i]), float(ch.p_value[i]), float(p_adjusted),
                         (float(ch.ci90_low[i]), float(ch.ci90_high[i])), as_call, weights, bounds, margin)
    word = tuning_word(check, as_call)
    return (DEPENDS if word == DEPENDS else verdict), word
