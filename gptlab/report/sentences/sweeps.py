"""The report's sentences about the kinds of sweep only some are: effects by scale, tuned settings, arms.

Owns whether a call holds, changes or reverses with a scale factor (`scale_verdicts`), and a tuned sweep's
sentences: where a study at one fixed setting would have answered otherwise (`tuning_changes`), whether each
call survives the picks' loss left on the table (`tuning_checks`) and the picks on the edge of the tuned space
(`tuning_warnings`), what was tuned on how many runs (`tuned_design`, `tuned_extra`), the sensitivity's
cap and the lr curves' noise; an arms sweep's scorecard lines (`scorecard_lines`) and seeds per arm
(`allocation`), and the fixed nuisance settings of a sweep that tuned nothing (`untuned_note`).
"""
from __future__ import annotations

import math
from typing import Callable, Mapping

import pandas as pd

from gptlab.report.fmt import fmt_loss
from gptlab.report.kinds import report_kinds
from gptlab.report.load import Results
from gptlab.report.sentences.verdicts import AT_PICKS, call_phrase
from gptlab.stats.arms import ARM
from gptlab.stats.calls import ALPHA, BETTER, DECISIVE, EQUIVALENT, INCONCLUSIVE, WORSE
from gptlab.stats.robustness import DEPENDS, NOT_CHECKED, ROBUST
from gptlab.stats.scorecard import AT_PICKS as VERDICT_AT_PICKS


def tuning_checks(tables: Mapping[str, pd.DataFrame], label: Callable[[dict], str]) -> list[str]:
    """Per main effect and interaction (and called simple effect) of a tuned sweep: does its call survive the loss
    each cell's pick may leave on the table (`stats.robustness`)? Empty when the calls were not checked."""
    out = []
    for name, table in tables.items():
        if "tuning" not in table:
            continue
        for r in table.to_dict("records"):
            at = r.get("call_at_picks") or "no call"
            if name == "simple" and at not in DECISIVE:
                continue
            if r["tuning"] == ROBUST:
                out.append(f"{label(r)}: {at} at the picks, and still {at} with each cell's loss left on the table "
                           "taken against it: robust to the tuning.")
            elif r["tuning"] == NOT_CHECKED:
                out.append(f"{label(r)}: {at} at the picks, not checked against the tuning: a cell that could "
                           "overturn it has no loss-against-lr curve to bound the loss its pick may leave "
                           "(`tables/lr_curves.csv`), so the call holds at the picks only.")
            elif r["tuning"]:
                out.append(f"{label(r)}: {at} at the picks, but it depends on the pick of {r['tuning_cell']}: "
                           "with the loss that pick may leave on the table taken against it, the call does not hold.")
            elif at in DECISIVE:
                out.append(f"{label(r)}: {at} at the picks, not checked: a cell it uses has no bound on the loss its "
                           "pick may leave on the table, so the tuning check cannot certify the call.")
            else:
                out.append(f"{label(r)}: {at} at the picks: nothing the tuning could overturn.")
    return out


def _nan(x: object) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


NUISANCE = ("train.lr", "train.min_lr", "train.warmup_iters", "train.weight_decay", "train.beta2")  # tuned elsewhere


def untuned_note(res: Results) -> str:
    """A sweep whose kinds chose no nuisance setting per cell (no `tune:`: `ReportKind.tunes`): the one setting of each
    nuisance key every cell trained at, and what that means."""
    if any(kind.tunes(res) for _, kind in report_kinds(res.spec)) or not res.factors:
        return ""
    settings = []
    for key in (k for k in NUISANCE if k not in res.factors):
        value = res.fixed(key)
        settings.append(f"`{key}` = {value:g}" if isinstance(value, (int, float)) else f"`{key}` = {value}")
    if not settings:
        return ""
    return (f"Untuned: every cell trained at one setting of each nuisance key ({', '.join(settings)}). An effect "
            "here measures how well each choice suits that setting, not each choice at its own best setting; a "
            "`tune:` section tunes them per cell (see the scorecard study, `reports/scorecard`).")


def scorecard_lines(scorecard: pd.DataFrame, unit: str) -> list[str]:
    """One line per scorecard row: the claim's direction, the untuned and tuned effects, the call and the verdict."""
    out = []
    for r in scorecard.to_dict("records"):
        at = f" at {r['scale_factor']}={r['scale_level']}" if r.get("scale_factor") else ""
        tuned = ("no estimate" if _nan(r["estimate"]) else
                 f"tuned {fmt_loss(r['estimate'])}" + ("" if _nan(r["ci_low"]) else
                                                       f" (95% CI {fmt_loss(r['ci_low'])} to {fmt_loss(r['ci_high'])})"))
        untuned = f"; at {r['untuned_setting']} {fmt_loss(r['untuned_estimate'])}" \
            if r.get("untuned_setting") and not _nan(r["untuned_estimate"]) else ""
        claim = (f"{r['source']} claims {r['direction']}" + (f" ({r['about']})" if r["about"] not in ("", "quality")
                                                             else "")) if r["source"] else "no claim recorded"
        why = f": {r['reason']}" if r.get("reason") else ""
        out.append(f"{r['arm']}{at}: {claim}; {tuned} {unit}{untuned}, {call_phrase(r)} -> **{r['verdict']}**{why}.")
    return out


def _legend_terms(res: Results) -> dict[str, str]:
    """Every word a scorecard's or an arms table's call and verdict columns may hold, in plain words (the margin:
    `res.margin`)."""
    margin = res.margin
    tuned = "but only at the picks: the tuning check does not certify it, so an arm tuned better could undo it"
    agrees, opposite, nothing = VERDICT_AT_PICKS.values()
    return {
        BETTER: f"lower loss than the baseline (Holm-adjusted p < {ALPHA})",
        WORSE: f"higher loss than the baseline (Holm-adjusted p < {ALPHA})",
        EQUIVALENT: f"the 90% CI lies within +/-{margin:g}",
        INCONCLUSIVE: "neither a difference nor an equivalence is shown",
        AT_PICKS: "at each arm's own tuned setting (its pick, chosen on its selection runs)",
        ROBUST: "the call survives the loss each pick may leave on the table (the tuning check)",
        DEPENDS: "it does not survive that check: the call holds at the picks only",
        NOT_CHECKED: "the tuning check could not bound the loss a pick may leave, so the call is not certified",
        "holds": "the lab calls what the paper claims",
        "opposite": "the lab calls the other direction, or a difference where the paper claims none",
        "no difference": f"a gain or loss was claimed and the 90% CI lies within +/-{margin:g}: a larger one is "
                         "excluded",
        agrees: f"the lab calls what the paper claims, {tuned}",
        opposite: f"the lab calls the other direction, {tuned}",
        nothing: f"the 90% CI lies within +/-{margin:g}, {tuned}",
        "not shown": "inconclusive: the data neither support the claim nor exclude it (not 'no effect')",
        "not tested here": "a claim about speed, memory or longer contexts, which the lab does not measure",
        "no claim recorded": "no claim was recorded for the arm",
    }


TUNING_WORDS = (AT_PICKS, ROBUST, DEPENDS, NOT_CHECKED)  # what a tuned call's words add to the call


def legend(table: pd.DataFrame, res: Results, only: tuple[str, ...] | None = None) -> str:
    """One line under a table of calls (and verdicts): each word its `call` (as `call_phrase` words it) and `verdict`
    columns use, defined (`only`: those of these words alone); "" when there is none."""
    used: set[str] = set()
    for r in table.to_dict("records"):
        phrase = call_phrase(r) if "call" in r else ""
        used |= {part.removesuffix(f" {AT_PICKS}") for part in phrase.split(", ")} - {""}
        used |= {AT_PICKS} if AT_PICKS in phrase else set()
        used |= {r["verdict"]} if isinstance(r.get("verdict"), str) else set()
    terms = [(word, text) for word, text in _legend_terms(res).items() if word in used and word in (only or used)]
    return ("Legend: " + "; ".join(f"`{word}`: {text}" for word, text in terms) + ".") if terms else ""


def allocation(res: Results) -> str:
    """': here the baseline nanogpt has 9 seeds, each of the 10 other arms 3' (counted in the runs; "" for a grid)."""
    if ARM not in res.runs:
        return ""
    seeds = res.runs.groupby(ARM)["seed"].nunique()
    base = res.baseline.get(ARM)
    others = sorted(set(seeds.drop(base, errors="ignore")))
    if base not in seeds or not others:
        return ""
    arms = f"{others[0]}" if len(others) == 1 else f"{others[0]} to {others[-1]}"
    return f": here the baseline {base} has {seeds[base]} seeds, each of the {len(seeds) - 1} other arms {arms}"


