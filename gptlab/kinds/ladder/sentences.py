"""The words of a ladder's section: each arm's effect across the rungs and its trend, the ranking's agreement, each
arm's pick per rung, and how the predictions fared; every number from the rounded tables (`LadderView.files`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from gptlab.kinds.ladder.measure import EFFECT
from gptlab.kinds.ladder.tables import LadderView
from gptlab.report.fmt import fmt_value
from gptlab.stats.ladder import GROWS, HOLDS, SHRINKS

TREND_WORDS = {GROWS: "grows with compute", SHRINKS: "shrinks with compute",
               HOLDS: "holds with compute (its slope's 90% CI inside +/- {margin} per doubling)"}
RATIO_WORDS = {GROWS: "moves further from 1 with compute", SHRINKS: "moves toward 1 with compute",
               HOLDS: TREND_WORDS[HOLDS]}  # a ratio's trend, on its log: its distance from 1 grows or shrinks


@dataclass(frozen=True)
class LadderWords:
    """The section's sentences."""

    arms: tuple[str, ...]  # one per arm (and quantity: its effect, its worth): its value at each rung, its trend
    ranks: tuple[str, ...]  # one per pair of rungs: Kendall's tau with its interval
    predictions: tuple[str, ...]  # how many intervals covered, and which did not
    picks: tuple[str, ...]  # one per arm: its pick at each rung


def _v(column: str, value: Any) -> str:
    return fmt_value(column, value)


def _trend(t: pd.Series, what: str, margin: str, ratio: bool = False) -> str:
    said = (RATIO_WORDS if ratio else TREND_WORDS).get(
        t["trend"], "is inconclusive in compute (neither a change nor a hold is shown)")
    return (f" Its {what} {said.format(margin=margin)}: slope {_v('slope', t['slope'])} per doubling of compute (95% "
            f"CI {_v('slope_low', t['slope_low'])} to {_v('slope_high', t['slope_high'])}, {int(t['rungs'])} rungs), "
            "within the rungs' compute only.")


def arm_lines(view: LadderView, files: dict[str, pd.DataFrame]) -> list[str]:
    """One line per arm and quantity: its value at each rung, then its trend. A ratio (worth, in the baseline's
    steps) is given as measured, and its trend's slope is of its natural log."""
    rungs, trends = files["rung_effects"], files["trends"].set_index(["arm", "quantity"])
    lines = []
    for (arm, quantity), part in rungs.groupby(["arm", "quantity"], sort=False):
        ratio = bool(part["ratio"].iloc[0])
        at = "; ".join(f"{r.rung} {_v('estimate', r.estimate)} ({_v('ci_low', r.ci_low)} to {_v('ci_high', r.ci_high)}"
                       + ("" if ratio else f", {r.call or 'no call'}") + ")" for r in part.itertuples())
        if quantity == EFFECT:
            line = f"arm={arm} against the baseline, {view.unit}: {at}."
            what, margin = "effect", f"{view.margin:g}"
        else:
            line = f"arm={arm}'s {quantity}{' (a multiple of the baseline' + chr(39) + 's steps)' if ratio else ''}: {at}."
            what = quantity
            margin = f"log(1 + {view.ratio_margin:g})" if ratio else f"{view.margin:g}"
        if (arm, quantity) in trends.index:
            line += _trend(trends.loc[(arm, quantity)], what + (" (slope: of its natural log)" if ratio else ""),
                           margin, ratio)
        lines.append(line)
    return lines


def rank_lines(files: dict[str, pd.DataFrame]) -> list[str]:
    return [f"The arms' ranking, {r.rung_a} against {r.rung_b}: Kendall's tau {_v('tau', r.tau)} (95% interval "
            f"{_v('tau_low', r.tau_low)} to {_v('tau_high', r.tau_high)}, {int(r.arms)} arms; 1 is the same order)."
            for r in files["rank_agreement"].itertuples()]


def prediction_lines(files: dict[str, pd.DataFrame]) -> list[str]:
    table = files["predictions"]
    judged = table[table["covered"].isin(["yes", "no"])]
    if table.empty:
        return ["No rung was predicted: a prediction needs two rungs below it."]
    lines = []
    for rung, part in judged.groupby("rung", sort=False):
        hit = int((part["covered"] == "yes").sum())
        missed = ", ".join(f"arm={r.arm}{'' if r.quantity == EFFECT else ' ' + r.quantity} (predicted "
                           f"{_v('predicted', r.predicted)}, {_v('pred_low', r.pred_low)} to "
                           f"{_v('pred_high', r.pred_high)}; measured {_v('measured', r.measured)})"
                           for r in part.itertuples() if r.covered == "no")
        after = part["started_after"].iloc[0]
        what = "effect" if set(part["quantity"]) <= {EFFECT} else "value (each arm's effect and its worth)"
        lines.append(f"Rung {rung}: {hit} of {len(part)} prediction intervals (95%) covered the measured {what}"
                     + (f"; missed: {missed}" if missed else "") + f". Written {part['written_at'].iloc[0]}; "
                     f"{after} of the rung's runs started after it.")
    waiting = sorted(set(table["rung"]) - set(judged["rung"]))
    if waiting:
        lines.append(f"Predicted, not yet measured: rung {', '.join(waiting)}.")
    return lines


def pick_lines(files: dict[str, pd.DataFrame]) -> list[str]:
    picks = files["lr_by_rung"]
    return [f"arm={arm}: " + " -> ".join(f"{r.pick} ({r.rung})" for r in part.itertuples())
            for arm, part in picks.groupby("arm", sort=False)]


def ladder_words(res: Any, view: LadderView) -> LadderWords:
    files = view.files()
    return LadderWords(arms=tuple(arm_lines(view, files)), ranks=tuple(rank_lines(files)),
                       predictions=tuple(prediction_lines(files)), picks=tuple(pick_lines(files)))
