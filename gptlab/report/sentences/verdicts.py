"""The report's sentences about effects: one verdict per row, the summary's called effects, changes along training.

Owns the wording that turns a rounded table row into a verdict. Every sentence follows the row's
`call` (see `gptlab.stats.calls`): a difference is claimed only for `better`/`worse`, "no difference" only
for `equivalent` (TOST within the margin), and everything else is said to be inconclusive.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import pandas as pd

from gptlab.report.fmt import fmt_loss, fmt_p
from gptlab.report.load import Results
from gptlab.report.tables import LABEL_COLUMNS, ReportTables
from gptlab.stats.arms import ARM
from gptlab.stats.calls import ALPHA, DECISIVE, DIRECTIONAL, EQUIVALENT, INCONCLUSIVE
from gptlab.stats.robustness import DEPENDS, NOT_CHECKED, ROBUST
from gptlab.statuses import COLLAPSED, DIVERGED, FAILED, FAILED_TO_TRAIN, UNSTABLE

MAX_SENTENCES = 15  # called effects given a sentence in the summary; the tables hold the rest


def absent(x: object) -> bool:
    """Whether a table value is missing (None, NaN, or pandas' NA of an integer column)."""
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


UNADJUSTED = "unadjusted"  # said after every 95% CI next to a Holm call: the CI is the effect's own, the call the family's


def _ci(r: dict, level: int = 95) -> str:
    """'95% CI lo to hi, unadjusted' (the 95% CI is the effect's own; its call is Holm-adjusted), or '90% CI lo to hi'
    (the TOST interval of an equivalence call, which no family adjusts); signed as the tables are (level minus
    baseline: negative = lower loss)."""
    lo, hi = (r["ci_low"], r["ci_high"]) if level == 95 else (r["ci90_low"], r["ci90_high"])
    return f"{level}% CI {fmt_loss(lo)} to {fmt_loss(hi)}" + (f", {UNADJUSTED}" if level == 95 else "")


def _decided(r: dict, what: str, res: Results) -> str:
    """Shared tail of a verdict for the four calls (`what` names the difference an inconclusive one lacks), and for
    a tuned sweep's call that does not survive the loss its cells' picks leave on the table (`stats.robustness`);
    in `res.unit`, equivalence within `res.margin`."""
    margin, unit = res.margin, res.unit
    if r["call"] == DEPENDS:
        at_picks = _decided({**r, "call": r["call_at_picks"]}, what, res)
        return (f"{DEPENDS}: at the picks {r['call_at_picks']} {at_picks.removeprefix(r['call_at_picks'])}"
                f", but the loss the pick of {r['tuning_cell']} may leave on the table (tables/lr_curves.csv) could move "
                f"it by {_shift(r['tuning_shift'], unit)} against that call{_tuning_p(r)}").replace("  ", " ")
    unchecked = (", at the picks only: not checked against the tuning (a cell it uses has no loss-against-lr curve "
                 "to bound the loss its pick may leave)") if r.get("tuning") == NOT_CHECKED else ""
    if r["call"] in DIRECTIONAL:
        return (f"(estimate {fmt_loss(r['estimate'])} {unit}, {_ci(r)}; Holm-adjusted p "
                f"{fmt_p(r['p_adjusted'])}){unchecked}")
    if r["call"] == EQUIVALENT:
        return (f"{EQUIVALENT} within +/-{margin:g} {unit} (estimate {fmt_loss(r['estimate'])}, {_ci(r, 90)})"
                f"{unchecked}")
    return (f"{INCONCLUSIVE} (estimate {fmt_loss(r['estimate'])}, {_ci(r)}{_holm(r)}): neither {what} nor "
            f"equivalence within +/-{margin:g} is shown")


def _holm(r: dict) -> str:
    """'; Holm-adjusted p = 0.31' beside an inconclusive call's unadjusted CI, and where that CI excludes zero, why
    the call is not a difference all the same."""
    p = r.get("p_adjusted")
    if absent(p):
        return ""
    excludes = not absent(r["ci_low"]) and (r["ci_low"] > 0 or r["ci_high"] < 0)
    return f"; Holm-adjusted p {fmt_p(p)}" + (": the CI excludes zero only before the Holm "
                                              "adjustment for the other tests of its family" if excludes and p >= ALPHA else "")


def _tuning_p(r: dict) -> str:
    """The test at the optima's p (`stats.robustness`), where it was tested."""
    p = r.get("tuning_p")
    return f" (the effect at the optima, its uncertainty included: Holm-adjusted p {fmt_p(p)})" \
        if p is not None and not math.isnan(p) and p < 1 else ""


def _shift(x: float, unit: str) -> str:
    return ("an amount it cannot bound (the lrs tried do not pin down that arm's best lr: the CI of the best lr runs "
            "past them)" if math.isinf(x) else f"up to {fmt_loss(x)} {unit}")


AT_PICKS = "at the picks"  # with the tuning check's ROBUST, DEPENDS and NOT_CHECKED, the words `call_phrase` adds to a call


def call_phrase(r: Mapping[str, Any]) -> str:
    """A row's call with its direction kept through the tuning check: 'worse at the picks, depends on the picks',
    'better, robust', 'worse at the picks, not checked' (a pick's loss left has no bound), or the call itself."""
    call = r.get("call") if isinstance(r.get("call"), str) and r.get("call") else "no call"
    at = r.get("call_at_picks") if isinstance(r.get("call_at_picks"), str) else ""
    if call == DEPENDS and at:
        return f"{at} {AT_PICKS}, {DEPENDS}"
    if r.get("tuning") == ROBUST:
        return f"{call}, {ROBUST}"
    if at and call in DECISIVE:  # tuned, and the check had no bound to test against
        return f"{call} {AT_PICKS}, {NOT_CHECKED}"
    return call


def with_call_phrases(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with its `call` column in words (`call_phrase`), for the page; tables/*.csv keep the calls."""
    if "call" not in table or not len(table):
        return table
    return table.assign(call=[call_phrase(r) for r in table.to_dict("records")])


def _counts(r: dict, res: Results) -> str:
    out = ""
    for lvl in (r["level"], r["baseline"]):
        runs = res.runs[res.runs[r["factor"]] == lvl]
        status = runs["status"]
        for s, n in ((DIVERGED, (status == DIVERGED).sum()), ("were stuck", (status == COLLAPSED).sum()),
                     ("blew up", (status == UNSTABLE).sum()), (FAILED, (~runs["ok"] & ~status.isin(FAILED_TO_TRAIN)).sum())):
            if n:
                out += f"; {n} of {len(runs)} {res.label(r['factor'], lvl)} runs {s}"
    return out


def _spread(r: dict, simple: pd.DataFrame | None) -> str:
    """'; its simple effects range from ... (6 worse, 1 better, 1 inconclusive)' when their calls disagree."""
    if simple is None or not len(simple) or not r["kind"].startswith("averaged"):
        return ""
    rows = simple[(simple["factor"] == r["factor"]) & (simple["level"] == r["level"])]
    calls_ = rows["call"].fillna("").replace("", "no call")
    if len(set(calls_) & set(DIRECTIONAL)) == 0 or set(calls_) == {r["call"]}:
        return ""
    counts = ", ".join(f"{n} {c}" for c, n in calls_.value_counts().items())
    return (f"; its simple effects range from {fmt_loss(rows['estimate'].min())} to {fmt_loss(rows['estimate'].max())}"
            f" ({counts}): see Simple effects")


def main(r: dict, res: Results, simple: pd.DataFrame | None = None) -> str:
    """Verdict of one main-effects row (rounded); `simple` adds the spread of its simple effects."""
    a, b = res.label(r["factor"], r["level"]), res.label(r["factor"], r["baseline"])
    where = "" if r["kind"].startswith("averaged") else " at the baseline of the other factors"
    if absent(r["estimate"]):
        return f"{a} vs {b}: {r['alias'] or 'not estimable'}" + _counts(r, res)
    if absent(r["p_value"]):
        return f"{a} vs {b}{where}: {fmt_loss(r['estimate'])} {res.unit}, no error estimate (no call)" + _counts(r, res)
    if r["call"] in DIRECTIONAL:
        text = f"{a} is {r['call']} than {b}{where} " + _decided(r, "a difference", res)
    elif r["call"] == DEPENDS and r["call_at_picks"] in DIRECTIONAL:
        text = f"{a} vs {b}{where}: " + _decided(r, "a difference", res)
    else:
        text = f"{a} vs {b}{where}: " + _decided(r, "a difference", res)
    return text + _spread(r, simple) + _counts(r, res)


def arm(r: dict, res: Results) -> str:
    """Verdict of one row of arms.csv (an arm against the baseline, at a scale level where the sweep has one)."""
    at = f" at {res.label(r['scale_factor'], r['scale_level'])}" if r.get("scale_factor") else ""
    row = {"kind": "averaged", "alias": "", "p_value": r.get("p_adjusted"), **r, "factor": ARM, "level": r[ARM]}
    return main(row, res).replace(f" vs {res.label(ARM, r['baseline'])}", f" vs {res.label(ARM, r['baseline'])}"
                                  f"{at}", 1) + failure_cost(r, res)


def failure_cost(r: dict, res: Results) -> str:
    """'; 1 of 5 runs at its pick failed to train ...' for an arms.csv row with failures at its pick, else ''."""
    failed, n_ok = r.get("n_diverged"), r.get("n_ok")
    if absent(failed) or absent(n_ok) or not int(failed):
        return ""
    return (f"; {int(failed)} of {int(failed) + int(n_ok)} runs at its pick failed to train (failure rate 95% CI "
            f"{r['failure_rate_low']:.2f} to {r['failure_rate_high']:.2f}); counting every run (a failed one at its "
            f"own loss, a diverged one at the unigram loss) its effect is {fmt_loss(r['estimate_all_runs'])} {res.unit} "
            f"(95% CI {fmt_loss(r['ci_low_all_runs'])} to {fmt_loss(r['ci_high_all_runs'])}, with what the failure "
            "rates' intervals allow)")


def interaction(r: dict, res: Results) -> str:
    """Verdict of one two-way interaction row (rounded)."""
    pair = f"{res.label(r['factor_a'], r['level_a'])} x {res.label(r['factor_b'], r['level_b'])}"
    if absent(r["estimate"]):
        return f"{pair}: not estimable: {r['alias'] or 'a cell it needs has no data'}"
    if absent(r["p_value"]):
        return f"{pair}: interaction {fmt_loss(r['estimate'])} {res.unit}, no error estimate (no call)"
    if r["call"] in DIRECTIONAL:
        return (f"{pair}: not additive; together they are {r['call']} than the sum of their separate effects "
                + _decided(r, "", res))
    return f"{pair}: " + ("additive, " if r["call"] == EQUIVALENT else "") + \
        _decided(r, "an interaction", res)


def quoted(r: dict, form: str = "full") -> str:
    """A table row as a discussion quotes it (`quotes`): '-0.0630 (95% CI -0.0710 to -0.0550, better)'.

    Effects carry their sign (+ included); a cell or level row gives its mean loss and 95% CI. `form`
    "estimate" gives the number alone.
    """
    if "estimate" in r:
        def num(x: float) -> str:
            return f"{'+' if x > 0 else ''}{fmt_loss(x)}"
        est, lo, hi, call = num(r["estimate"]), r.get("ci_low"), r.get("ci_high"), call_phrase(r)
    else:  # cells (mean +/- half-width) and levels (mean, CI): losses, no sign
        num = fmt_loss
        est, half = num(r["best_val_loss"]), r.get("best_val_loss_ci95")
        lo, hi = (r["best_val_loss"] - half, r["best_val_loss"] + half) if "ci_low" not in r else (r["ci_low"],
                                                                                                   r["ci_high"])
        call = f"{r['n_seeds']} seeds" if "n_seeds" in r else f"{r['n_ok']} runs"
    if form == "estimate":
        return est
    if absent(lo) or absent(hi):
        return f"{est} (no error estimate, {call})"
    return f"{est} (95% CI {num(lo)} to {num(hi)}, {call})"


# What a called row of each effect table after the interactions is (`ReportTables.called`).
KINDS = {"higher_order": "interaction of {order} factors", "aliases": "aliased sum",
         "cells_vs_baseline": "cell against the baseline cell"}


def called(tables: ReportTables, res: Results, verdicts: dict[str, Sequence[str]]) -> list[str]:
    """Sentences for every effect called better or worse, largest first (at most MAX_SENTENCES).

    A main effect or an interaction says its own verdict (`verdicts`: table -> one per row)."""
    items: list[tuple[float, str]] = []
    for table, i, r in tables.called():
        if table in verdicts:
            items.append((abs(r["estimate"]), verdicts[table][i]))
            continue
        items.append((abs(r["estimate"]), f"{r[LABEL_COLUMNS[table]]} ({KINDS[table].format(**r)}): {r['call']} "
                      + _decided(r, "", res)))
    items.sort(key=lambda x: -x[0])
    out = [text for _, text in items[:MAX_SENTENCES]]
    if len(items) > MAX_SENTENCES:
        out.append(f"... and {len(items) - MAX_SENTENCES} more effects called better or worse (see the tables).")
    return out


ALONE = "each step tested alone, not adjusted with the summary's tests"  # beside every call along training


def trajectories(by_step: pd.DataFrame, res: Results, summary: Mapping[tuple[str, str], str] | None = None) -> list[str]:
    """One sentence per effect whose call changes along training in a way that matters.

    Said when a called difference (better or worse) meets another decisive call along training
    (the other sign, or equivalent), or when a called difference is gone by the last evaluation.
    Moves between `equivalent` and `inconclusive` alone are not news. An effect called the same
    way at every step gets a sentence when its size changes by TREND_RATIO or more.
    Each step is its own Holm family (`tables.analyses.by_step`), smaller than the summary's: every sentence says
    so (`ALONE`), and where the summary (`summary`: (factor, level) -> its call; "cell" for a cell against the
    baseline cell) calls the effect otherwise than the last step does, it says that call too.
    """
    summary = summary or {}
    out = []
    for (factor, level), g in by_step.groupby(["factor", "level"], sort=False):
        g = g.sort_values("step")
        calls_ = list(g["call"].fillna(""))
        decisive = [c for c in calls_ if c in DECISIVE]
        differ = [c for c in decisive if c != EQUIVALENT]
        lost = bool(differ) and calls_[-1] != differ[-1]  # a difference that is gone by the end
        name = level if factor == "cell" else res.label(factor, level)
        final = summary.get((factor, level))
        also = f"; the summary, Holm-adjusted over all its tests, calls it {final}" \
            if isinstance(final, str) and final and final != calls_[-1] else ""
        if not (len(set(decisive)) > 1 and differ) and not lost:
            trend = _trend(g, calls_)
            if trend:
                out.append(f"{name} ({ALONE}): {trend}{also}.")
            continue
        segments: list[list] = []
        for step, c, est in zip(g["step"], calls_, g["estimate"]):
            if segments and segments[-1][0] == c:
                segments[-1][2], segments[-1][4] = step, est
            else:
                segments.append([c or "no call", step, step, est, est])
        parts = [f"{c} at step{'s' if a != b else ''} {a}{'-' + str(b) if a != b else ''} "
                 f"({fmt_loss(e0)}{' to ' + fmt_loss(e1) if a != b else ''})" for c, a, b, e0, e1 in segments]
        flips = set(DIRECTIONAL) <= set(decisive)
        out.append(f"{name}: {'changes sign' if flips else 'changes call'} along training ({ALONE}): "
                   + ", ".join(parts) + f"{also}.")
    return out


TREND_RATIO = 1.5  # a called effect whose size changes by this factor along training gets a sentence


def _trend(g: pd.DataFrame, calls_: list[str]) -> str:
    """'grows from -0.0279 at step 250 to -0.0626 at step 2000' for an effect called the same way throughout."""
    called = [(s, e) for s, c, e in zip(g["step"], calls_, g["estimate"]) if c in DIRECTIONAL]
    if len(called) < 2 or len(set(calls_)) != 1:
        return ""
    (s0, e0), (s1, e1) = called[0], called[-1]
    ratio = abs(e1) / abs(e0) if e0 else math.inf
    if 1 / TREND_RATIO < ratio < TREND_RATIO:
        return ""
    word = "grows" if ratio > 1 else "shrinks"
    return f"{calls_[0]} throughout; the effect {word} from {fmt_loss(e0)} at step {s0} to {fmt_loss(e1)} at step {s1}"
