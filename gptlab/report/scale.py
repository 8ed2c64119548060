"""Effects per scale level: does a call made at one scale hold at another?

A sweep's `scale:` names grid keys (training length, width, tokenizer) whose levels are scales, not
treatments. For each scale factor S and each of its levels, the runs at that level (every other
scale factor at its baseline) are analysed on their own with the report's model over the
scientific factors alone: each scientific factor's main effect (averaged over the other
scientific factors, a full factorial within the slice) with its 95% CI and call, each slice its
own Holm family (whether a call holds, changes or reverses across S's levels is said by
`sentences`). Nothing here reports S's own effect: a longer run having a lower loss is not a finding.
Whether an effect changes between S's levels is its own test (`effect_changes_by_scale`, from
`gptlab.stats.scale_change`): the change from S's first level to each other level, paired by seed,
since a seed's runs share their initialisation and batches at every level (and, under wsd with
shared trunks, their stable phase), so two levels' CIs must not be compared as if independent.
"""
from __future__ import annotations

import dataclasses

import pandas as pd

from gptlab.report.analyses import analyse_runs
from gptlab.report.fmt import round_frame
from gptlab.report.load import Results
from gptlab.stats.scale_change import CHANGE_COLS, effect_changes

SCALE_COLS = ["factor", "level", "baseline", "scale_factor", "scale_level", "estimate", "ci_low", "ci_high",
              "p_adjusted", "call", "n_runs"]


def scientific_view(res: Results) -> Results:
    """`res` with only its scientific factors (the cells of one scale slice)."""
    sci = res.scientific
    return dataclasses.replace(res, factors=sci, levels={f: res.levels[f] for f in sci},
                               baseline={f: res.baseline[f] for f in sci},
                               cells=res.cells[sci].drop_duplicates().reset_index(drop=True))


def effects_by_scale(res: Results, margin: float) -> pd.DataFrame:
    """One row per scientific factor level x scale factor x scale level (see the module docstring)."""
    if not res.scale or not res.scientific:
        return pd.DataFrame(columns=SCALE_COLS)
    view = scientific_view(res)
    ok = res.runs[res.runs["ok"] & res.runs[res.outcome].notna()]
    rows = []
    for s in res.scale:
        at_baseline = _at_baseline_of_others(res, ok, s)
        for level in res.levels[s]:
            part = at_baseline[at_baseline[s] == level]
            analysis = analyse_runs(view, part, res.outcome, margin, endpoint=False, blocks=True) if len(part) else None
            if analysis is None:
                continue
            for r in analysis.main.to_dict("records"):
                rows.append({"factor": r["factor"], "level": r["level"], "baseline": r["baseline"],
                             "scale_factor": s, "scale_level": level, "estimate": r["estimate"],
                             "ci_low": r["ci_low"], "ci_high": r["ci_high"], "p_adjusted": r["p_adjusted"],
                             "call": r["call"], "n_runs": len(part)})
    return round_frame(pd.DataFrame(rows, columns=SCALE_COLS))


def _at_baseline_of_others(res: Results, runs: pd.DataFrame, s: str) -> pd.DataFrame:
    """`runs` with every scale factor other than `s` at its baseline level."""
    keep = pd.Series(True, index=runs.index)
    for other in res.scale:
        if other != s:
            keep &= runs[other] == res.baseline[other]
    return runs[keep]


def effect_changes_by_scale(res: Results, margin: float) -> pd.DataFrame:
    """Per scientific effect and scale factor S: its change from S's first level to each other level, paired by
    seed, with a t interval over seeds, Holm across each S's rows, and a call (`stats.scale_change`)."""
    if not res.scale or not res.scientific:
        return pd.DataFrame(columns=CHANGE_COLS)
    view = scientific_view(res)
    cells = list(view.cells[res.scientific].itertuples(index=False, name=None))
    frames = [effect_changes(_at_baseline_of_others(res, res.runs, s), res.scientific, s, res.outcome, res.levels,
                             res.baseline, margin, cells=cells) for s in res.scale]
    frames = [f for f in frames if len(f)]
    return round_frame(pd.concat(frames, ignore_index=True)) if frames else pd.DataFrame(columns=CHANGE_COLS)
