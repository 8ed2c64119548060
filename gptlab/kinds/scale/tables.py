"""The numbers of `scale:`: every scientific effect at each scale level, and whether it changes between levels.

`ScaleView` is the report's `ReportTables.kinds["scale"]`: `tables/effects_by_scale.csv` (the report's slices,
`gptlab.report.tables.scale.effects_by_scale`: each slice its own model, Holm family and, in a tuned sweep, its own
check against the slice's picks; an arms sweep's table takes its rows, `per_level`) and `tables/effect_changes.csv`.
Whether an effect changes between S's levels is its own test (`effect_changes_by_scale`):
- along a scale of one text in a grid (training length, width): paired by seed (`stats.scale_change`),
  since a seed's runs share their initialisation and batches at every level (and, under wsd with shared
  trunks, their stable phase), so two levels' CIs must not be compared as if independent;
- across texts (`data.dataset` or `data.path` a scale factor), and in an arms design at any scale (the
  baseline's extra seeds have no partner): unpaired (`stats.transfer`), from the two slices' own effects,
  whose CIs count the seeds and each text's blocks; each change checked against both slices' picks.
An arms sweep's scorecard gets each claim's `transfer` from the changes (`with_transfer`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from gptlab.report.fmt import round_frame
from gptlab.report.load import Results
from gptlab.report.tables.scale import at_baseline_of_others, effects_by_scale, scientific_view, slices, unpaired_scale
from gptlab.stats.arms import ARM
from gptlab.stats.calls import BETTER, EQUIVALENT, WORSE
from gptlab.stats.effects import TUNING_COLS, Analysis
from gptlab.stats.robustness import DEPENDS, tuning_word
from gptlab.stats.robustness import check as tuning_check
from gptlab.stats.scale_change import CHANGE_COLS, effect_changes
from gptlab.stats.transfer import CHANGES, HOLDS, PAIRED, REVERSES, UNPAIRED, UnpairedChange, transfer_calls, unpaired_change


@dataclass(frozen=True)
class ScaleView:
    """The numbers of a sweep with `scale:`."""

    by_scale: pd.DataFrame  # effects_by_scale.csv: each scientific effect at each level of each scale factor
    changes: pd.DataFrame  # effect_changes.csv: each effect's change between scale levels (no rows: none)
    has_scale: bool  # whether the results have a scale factor (then both tables are written, where they have rows)


def scale_view(res: Results, loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None) -> ScaleView:
    """The effects by scale and their changes, called at `res.margin`, each call checked against the picks' `loss_left`
    where tuned."""
    return ScaleView(by_scale=effects_by_scale(res, loss_left),
                     changes=effect_changes_by_scale(res, loss_left), has_scale=bool(res.scale))


def with_transfer(res: Results, card: pd.DataFrame, changes: pd.DataFrame) -> pd.DataFrame:
    """An arms sweep's scorecard with each row at a scale level other than the reference given its `transfer`: does
    the arm's effect hold there (effect_changes.csv's call, `stats.transfer`)."""
    if not res.scale or not len(changes):
        return card
    call = {(r["level"], r["scale_factor"], str(r["scale_level"])): r["call"]
            for r in changes.to_dict("records") if r["factor"] == ARM}
    card = card.copy()
    card["transfer"] = [call.get((r["arm"], r["scale_factor"], str(r["scale_level"])), "")
                        for r in card.to_dict("records")]
    return card


def effect_changes_by_scale(res: Results,
                            loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None = None) -> pd.DataFrame:
    """Per scientific effect and scale factor S: its change from S's first level to each other level, paired by
    seed or unpaired (`unpaired_scale`; the `pairing` column says which), with Holm across each S's rows and a
    call (see the module docstring)."""
    if not res.scale or not res.scientific:
        return pd.DataFrame(columns=CHANGE_COLS)
    view = scientific_view(res)
    cells = list(view.cells[res.scientific].itertuples(index=False, name=None))
    paired = [s for s in res.scale if not unpaired_scale(res, s)]
    frames = [effect_changes(at_baseline_of_others(res, res.runs, s), res.scientific, s, res.outcome, res.levels,
                             res.baseline, res.margin, cells=cells).assign(pairing=PAIRED) for s in paired]
    if len(paired) < len(res.scale):
        frames.append(_unpaired_changes(res, loss_left))
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


def _unpaired_changes(res: Results, loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None) -> pd.DataFrame:
    """The unpaired changes (`stats.transfer`) of every unpaired scale factor, Holm within each factor."""
    by_slice: dict[str, dict[str, Analysis]] = {}
    seeds: dict[tuple[str, str], pd.DataFrame] = {}
    for s, level, part, analysis in slices(res, loss_left):
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
        p_adj, verdicts = transfer_calls(ch, [x["call"] for x in a], [x["call"] for x in b], res.margin)
        rows = []
        for i, (level, (factor, lv), x, y) in enumerate(pairs):
            verdict, tuning = verdicts[i], ""
            if loss_left is not None:
                verdict, tuning = _check_change(res, ch, i, p_adj[i], verdict, x, y, analyses[reference],
                                                analyses[level])
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


def _check_change(res: Results, ch: UnpairedChange, i: int, p_adjusted: float, verdict: str, x: dict[str, Any],
                  y: dict[str, Any], ref: Analysis, level: Analysis) -> tuple[str, str]:
    """The change's verdict against both slices' picks (`stats.robustness`): a contrast over the two slices' cells,
    the level's weights minus the reference's. Returns (verdict, tuning)."""
    as_call = {CHANGES: BETTER if ch.change[i] < 0 else WORSE, REVERSES: BETTER if ch.change[i] < 0 else WORSE,
               HOLDS: EQUIVALENT}.get(verdict, verdict)
    if x["contrast"] is None or y["contrast"] is None or ref.loss_left is None or level.loss_left is None:
        return verdict, ""
    weights = np.concatenate([-np.asarray(x["contrast"], float), np.asarray(y["contrast"], float)])
    bounds = np.concatenate([ref.loss_left, level.loss_left])
    check = tuning_check(float(ch.change[i]), float(ch.se[i]), float(ch.df[i]), float(ch.p_value[i]), float(p_adjusted),
                         (float(ch.ci90_low[i]), float(ch.ci90_high[i])), as_call, weights, bounds, res.margin)
    word = tuning_word(check, as_call)
    return (DEPENDS if word == DEPENDS else verdict), word
