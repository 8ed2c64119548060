"""The sentences of a `worth:` study: each arm in the baseline's steps and wall time, how, where the times were taken.

Owns the words of the report's worth section (`section`), from the rounded tables of `tables.WorthView`
(`WorthWords`, the report's `Sentences.kinds["worth"]`): one line per arm (per scale level) saying no more than its
CI (an open end is "beyond"/"below" a length trained, a censored arm only its bound, a CI that holds 1x says no
gain is shown), the curve and the schedule it was trained with (the confound when the arms trained with another),
the how the step times were taken (side by side, after the runs), and the re-tune of the baseline at the end
lengths. The curve is said on the seeds that counted (those with every length); where there is none, or no lengths
at all, one sentence says why (a length not trained yet: rerun; too few seeds ok; the baseline's runs all failed).
And the kind's words of an arms sweep's scorecard lines (`scorecard_lines`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gptlab.kinds.worth.load import loaded
from gptlab.kinds.worth.spec import KEY
from gptlab.kinds.worth.tables import WorthView
from gptlab.report.fmt import fmt_loss, fmt_times
from gptlab.report.load import Results
from gptlab.run.schedules import WSD
from gptlab.stats.arms import ARM


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _flag(value: Any) -> bool:
    """A flag of the table (True, or "True" once read back)."""
    return value is True or str(value) == "True"


def _at(res: Results, r: dict) -> str:
    return f" ({res.label(r['scale_factor'], r['scale_level'])})" if r.get("scale_factor") else ""


def holds_one(low: float, high: float, low_open: bool, high_open: bool) -> bool:
    """Whether a multiplier's CI (open ends extended) holds 1x."""
    return (low_open or low <= 1) and (high_open or high >= 1)


def arm_line(r: dict, res: Results) -> str:
    """One arm at one scale level: its step multiplier, its step cost and its wall-time multiplier."""
    who = f"{r['arm']}{_at(res, r)}"
    if r["censored"] == "above":
        line = (f"{who}: the baseline does not reach its loss within {_num(r['highest']):g}x its steps, the "
                f"longest length trained: the baseline needs {r['worth']} its steps (not extrapolated)")
        low = _num(r["multiplier_low"])
        line += f"; the 95% CI starts at {fmt_times(low)}x" if math.isfinite(low) and low < _num(r["highest"]) else ""
    elif r["censored"] == "below":
        line = (f"{who}: worse than the baseline at {_num(r['lowest']):g}x its steps, the shortest length "
                f"trained: {r['worth']} (not extrapolated)")
    elif r["worth"]:
        line = f"{who}: the baseline needs {r['worth']} its steps to match it (95% CI)"
        if holds_one(_num(r["multiplier_low"]), _num(r["multiplier_high"]), _flag(r["low_open"]),
                     _flag(r["high_open"])):
            line += "; the CI holds 1x: no gain or loss in steps is shown"
    else:
        return f"{who}: no multiplier ({r['note'] or 'no runs'})"
    cost = _num(r.get("step_cost"))
    if math.isfinite(cost):
        low, high = _num(r["step_cost_low"]), _num(r["step_cost_high"])
        line += (f". Its steps take {fmt_times(cost)}x ({fmt_times(low)}-{fmt_times(high)}) the baseline's time"
                 + (" (the CI holds 1x: no difference in speed is shown)" if low <= 1 <= high else ""))
        if r["wall_worth"]:
            line += f"; in wall time the baseline needs {r['wall_worth']} its time"
    return line + "."


def _times(factor: float) -> str:
    return f"{factor:g}x"


def _coverage(view: WorthView, level: str) -> list[dict]:
    cov = view.coverage
    return cov[cov["scale_level"].astype(str) == str(level)].to_dict("records")


def not_trained(rows: list[dict]) -> str | None:
    """The lengths some of whose seeds have no run yet (a stopped sweep), in words; None when every one has."""
    short = [r for r in rows if r["trained"] < r["seeds"]]
    if not short:
        return None
    return ("not every length is trained yet (" + ", ".join(
        f"{_times(r['length'])} on " + (f"{int(r['trained'])} of {int(r['seeds'])} seeds" if r["trained"] else "none")
        for r in short) + "): rerun the sweep to finish it")


def unfitted(view: WorthView, level: str) -> str:
    """Why a level's curve could not be fitted, in words: a length not trained yet (rerun), too few seeds ok at every
    length, or, failing those, the fit's own note."""
    rows = _coverage(view, level)
    if rows and int(rows[0]["seeds"]) < 2:
        return (f"{int(rows[0]['seeds'])} of the baseline's estimation seeds finished ok at the study's length, and its "
                "lengths train on those: a curve needs 2")
    short = not_trained(rows)
    if short:
        return short
    failed = [r for r in rows if r["ok"] < r["seeds"]]
    if failed:
        return ("fewer than 2 of the baseline's seeds finished ok at every length ("
                + ", ".join(f"{_times(r['length'])}: {int(r['ok'])} of {int(r['seeds'])} seeds ok" for r in failed) + ")")
    table = view.table
    mine = table[table["scale_level"].astype(str) == str(level)] if "scale_level" in table else table
    return next((str(n) for n in mine["note"] if isinstance(n, str) and n), "no runs")


def _levels(view: WorthView) -> tuple[list[str], list[str]]:
    """(every scale level of worth.csv, those whose curve could not be fitted); one level "" without a scale."""
    table = view.table
    levels = list(dict.fromkeys(table["scale_level"].astype(str))) if "scale_level" in table else [""]
    fitted = table[table["curve_seeds"].astype(float) > 0]
    have = set(fitted["scale_level"].astype(str)) if "scale_level" in table else ({""} if len(fitted) else set())
    return levels, [lv for lv in levels if lv not in have]


def curve_note(view: WorthView, res: Results) -> str:
    """How the curve was trained and fitted (on the seeds that counted: those with every length), and what the
    multiplier compares (the schedule's confound named); a level whose curve could not be fitted says why instead."""
    table = view.table
    levels, missing = _levels(view)
    at = {lv: res.label(view.scale_factor, lv) if lv else "" for lv in levels}
    if len(missing) == len(levels):
        return " ".join(f"The curve{f' ({at[lv]})' if at[lv] else ''}: none could be fitted, so no arm has a "
                        f"multiplier: {unfitted(view, lv)}." for lv in missing)
    fitted = table[table["curve_seeds"].astype(float) > 0]
    first = fitted.iloc[0]
    steps, lengths = int(first["study_steps"]), first["lengths"]
    seeds = sorted({int(n) for n in fitted["curve_seeds"]})
    text = (f"The curve: the baseline at its picked lr, trained with warmup-stable-decay (each length fully decayed, "
            f"from shared trunks) to {lengths}x the study's {steps} steps on {', '.join(map(str, seeds))} seeds, its "
            f"{res.outcome_label} ({res.unit}) against log2 steps through a monotone cubic (PCHIP) of the per-length "
            "means. An arm's multiplier is the baseline's steps that match the arm's loss at the study's length over "
            "that length (above 1: the arm is worth more steps); its 95% CI inverts a test over the seeds"
            + (", the text blocks" if view.text else " (not the text: runs without test blocks)")
            + " and the curve's own error, and an arm outside the lengths trained is only bounded, never "
            "extrapolated (docs/STATISTICS.md, \"What each choice is worth\").")
    text += "".join(f" At {at[lv]} no curve could be fitted: {unfitted(view, lv)}." for lv in missing)
    for lv in (lv for lv in levels if lv not in missing):  # fitted on the seeds with every length so far
        short = not_trained(_coverage(view, lv))
        text += f" {short[0].upper()}{short[1:]}{f' at {at[lv]}' if at[lv] else ''}." if short else ""
    if view.schedule == WSD:
        return text + (" The arms trained with the same schedule at the study's length (the baseline's estimation "
                       "runs are the curve's 1x points), so the decay matches and the multiplier compares "
                       "architectures.")
    return text + (f" The confound: the arms trained with the study's {view.schedule} schedule, the curve with "
                   "warmup-stable-decay. Each arm's effect over the baseline's own estimation runs (the anchor, same "
                   f"{view.schedule} schedule) is placed on the curve's shape: the curve at the study's length plus "
                   "the effect. This assumes the schedule shifts the loss at each length but not its fall with "
                   "length (Hagele et al. 2024: a wsd cooldown matches cosine at each length); where it does not, "
                   "the multiplier carries the difference.")


def machine_note(times: pd.DataFrame) -> str:
    """Where and how the step times were measured (`times`: step_times.csv, never a host name), or that they were not."""
    if not len(times):
        return ("Times: not measured. The arms' steps are timed side by side once every run has finished "
                "(`step_times.csv`); this sweep has none, so no step cost, wall-time multiplier or speed verdict. "
                "The runs' own wall times are not compared: they were trained at different times and loads.")
    machines = ", ".join(dict.fromkeys(str(m) for m in times.get("machine", pd.Series(dtype=str)).dropna())) \
        or "an unrecorded machine"
    rounds = times["round"].nunique() if "round" in times else 0
    rounds_text = f"{rounds} round" + ("" if rounds == 1 else "s")
    return (f"Times: each arm's training step (at its pick, on stand-in data of the text's vocabulary) timed after the "
            f"runs, in one process, alternated with every other arm's over {rounds_text}, on {machines} "
            "(`step_times.csv`); an arm's step cost is the geometric mean of its per-round ratios to the baseline, with a "
            "95% CI over the rounds (paired: what a round does to every arm cancels). The runs' own wall times "
            "are not compared: a study's runs are trained hours or days apart, on a machine whose speed and load "
            "change. A ratio holds for this machine, not for the papers' hardware.")


VERDICT_WORDS = {"stays": "its optimum stays at the pick",
                 "moves": "its optimum moves: the pick's loss is beyond noise above the best tried",
                 "unclear": "unclear: another factor is lowest, within noise of the pick"}


def _end(r: dict, unit: str) -> str:
    """One length's re-tune in words."""
    best, gap = _num(r["best_factor"]), _num(r["gap"])
    head = f"at {_num(r['length']):g}x the best lr factor tried (of {r['factors']}) is "
    if not math.isfinite(best):
        return head + "unknown (the pick or every other factor has no loss)"
    line = head + f"{best:g}"
    if math.isfinite(gap) and gap > 0:
        line += f", {fmt_loss(gap)} {unit} below the pick (noise threshold {fmt_loss(_num(r['threshold']))})"
    return f"{line}: {VERDICT_WORDS.get(str(r['verdict']), str(r['verdict']))}"


def retune_lines(view: WorthView, res: Results) -> list[str]:
    """Per scale level: the baseline's best lr factor at the shortest and longest length, whether its optimum
    moves, and the multipliers with the re-tuned ends."""
    out = []
    retune, table = view.retune, view.table
    groups = retune.groupby("scale_level", sort=False) if "scale_level" in retune else [("", retune)]
    for level, mine in groups:
        rows = mine.to_dict("records")
        if not rows:
            continue
        at = f" ({res.label(view.scale_factor, level)})" if level != "" else ""
        line = (f"Re-tune{at}, the baseline on its tuning seed (one run per factor; noise: the SD of one estimation "
                f"run over seeds, {fmt_loss(_num(rows[0]['noise_sd']))} {res.unit}): "
                + "; ".join(_end(r, res.unit) for r in rows) + ".")
        arms = table[table["scale_level"].astype(str) == str(level)] if "scale_level" in table else table
        moved = [r for r in arms.to_dict("records") if r.get("retuned_worth")]
        if any(r["retuned_worth"] != r["worth"] for r in moved):
            line += (" With the curve's re-tuned lengths at the best lr tried, the baseline needs: "
                     + "; ".join(f"{r['arm']} {r['retuned_worth']} (at the pick {r['worth']})" for r in moved)
                     + " its steps.")
        elif moved:
            line += " With the curve's re-tuned lengths at the best lr tried, no multiplier changes at this precision."
        out.append(line)
    return out


def no_lengths(res: Results) -> str:
    """Why a `worth:` study has none of the baseline's lengths: its estimation runs all failed to train (the lengths
    start from them), or the sweep stopped before it came to them."""
    base = res.runs[res.runs[ARM] == res.baseline.get(ARM)] if ARM in res.runs else res.runs
    if len(base) and not base["ok"].any():
        return "No multiplier: no estimation run of the baseline finished ok, so the sweep trained none of its lengths."
    return ("No multiplier yet: the baseline's lengths are not trained (the sweep stopped before them): rerun the sweep "
            "to finish it.")


@dataclass(frozen=True)
class WorthWords:
    """The sentences of a `worth:` study (`Sentences.kinds["worth"]`)."""

    lines: tuple[str, ...] = ()  # one line per row of worth.csv (the arm in the baseline's steps)
    notes: tuple[str, ...] = ()  # how the curve was trained, the schedule, the machine (or why there is no curve)
    retune: tuple[str, ...] = ()  # per scale level, whether the baseline's lr optimum moves


def lines(view: WorthView | None, res: Results) -> WorthWords:
    """The study's sentences: one line per row of worth.csv, the notes on the curve and the machine, the re-tune's."""
    if view is None:
        asked = res.arms and res.spec is not None and res.spec.kinds.get(KEY) is not None
        return WorthWords(notes=(no_lengths(res),) if asked else ())
    rows = [arm_line(r, res) for r in view.table.to_dict("records")]
    return WorthWords(lines=tuple(rows), notes=(curve_note(view, res), machine_note(loaded(res).step_times)),
                      retune=tuple(retune_lines(view, res)))


def scorecard_lines(card: pd.DataFrame, lines: list[str], unit: str) -> list[str]:
    """The scorecard's lines (the report's `sweeps.scorecard_lines`) of a `worth:` study: a speed claim read on the
    arm's time per step, and every arm's worth in the baseline's steps after its effect."""
    if "worth" not in card.columns:
        return lines
    out = []
    for r, line in zip(card.to_dict("records"), lines):
        cost = _num(r.get("step_cost"))
        if r.get("about") == "speed" and math.isfinite(cost):
            at = f" at {r['scale_factor']}={r['scale_level']}" if r.get("scale_factor") else ""
            why = f": {r['reason']}" if r.get("reason") else ""
            line = (f"{r['arm']}{at}: {r['source']} claims {r['direction']} (speed); time per step "
                    f"{fmt_times(cost)}x ({fmt_times(_num(r['step_cost_low']))}-{fmt_times(_num(r['step_cost_high']))})"
                    f" the baseline's -> **{r['verdict']}**{why}.")
        elif r.get("worth"):
            line = f"{line[:-1]}; the baseline needs {r['worth']} its steps."
        out.append(line)
    return out
