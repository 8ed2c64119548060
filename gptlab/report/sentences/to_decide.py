"""The sentences on what would decide each inconclusive effect: seeds, and test text, for a CI of +/- the margin.

One sentence per row of `tables.to_decide` (to_decide.csv's `verdict`), and the summary's line: every
sentence when there are few, else one that counts them. Each sentence states the effect as its table
does (level minus baseline, signed), then one of: the seeds per arm (or cell) that would give a 95% CI
of +/- the margin at today's test split; that its CI already is that narrow; or that no number of seeds
reaches it with today's split (the text alone is wider), with the split that would and its seeds. An
effect that depends on the picks: the lr whose selection run would close its tuning cell's open curve,
or the loss left that more selection seeds next to the pick would narrow.
"""
from __future__ import annotations

import math

import pandas as pd

from gptlab.report.fmt import fmt_loss
from gptlab.report.load import Results
from gptlab.report.sentences.verdicts import UNADJUSTED
from gptlab.stats.robustness import DEPENDS
from gptlab.stats.to_decide import MAX_SEEDS, MAX_TEST_FRACTION, TEXT_BUDGET

MAX_LISTED = 6  # more inconclusive effects than this get one counting sentence in the summary (the table has all)


def _absent(x: object) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def _signed(x: float) -> str:
    return ("+" if x > 0 else "") + fmt_loss(x)


def _pct(f: float) -> str:
    return f"{f * 100:.3g}%"


def _seeds(n: object, base: object, per: str) -> str:
    """'14 seeds per arm and 44 for the baseline'."""
    return f"{int(n)} seeds per {per}" + ("" if _absent(base) else f" and {int(base)} for the baseline")


def _val_fraction(res: Results) -> float:
    return float(res.fixed("data.val_fraction"))


def depends_sentence(r: dict, res: Results) -> str:
    """What would decide an effect that depends on the picks: close its tuning cell's curve, or narrow its loss left."""
    head = (f"{r['effect']} depends on the picks ({_signed(r['estimate'])} {res.unit} at the picks, 95% CI "
            f"{_signed(r['ci_low'])} to {_signed(r['ci_high'])}, {UNADJUSTED}): ")
    cell = r["tuning_cell"] or "a cell"
    if r["open_side"]:
        below = r["open_side"] == "low"
        return head + (f"{cell}'s loss-against-lr curve is open on its {'low' if below else 'high'}-lr side (no lr "
                       f"{'below' if below else 'above'} its pick is clearly worse at its own noise), so the loss its "
                       f"pick may leave has no upper bound; a selection run at lr {r['try_lr']:g}, one step "
                       f"{'below' if below else 'above'} the lrs tried, landing clearly above its pick would close it")
    bound = "" if _absent(r["loss_left_high"]) else f" (up to {fmt_loss(r['loss_left_high'])} {res.unit}, 95%)"
    return head + (f"the loss {cell}'s pick may leave on the table{bound} is what keeps the call from holding; more "
                   "selection seeds at the lrs next to its pick would narrow that bound")


def sentence(r: dict, res: Results) -> str:
    """What would decide the effect of row `r` of to_decide.csv (inconclusive, or depending on the picks)."""
    if r.get("call") == DEPENDS:
        return depends_sentence(r, res)
    per, margin = ("arm" if res.arms else "cell"), res.margin
    unit = res.unit
    head = (f"{r['effect']} is inconclusive ({_signed(r['estimate'])} {unit}, 95% CI {_signed(r['ci_low'])} to "
            f"{_signed(r['ci_high'])}, {UNADJUSTED}): ")
    split = f" with this {_pct(r['test_fraction'])} test split" if not _absent(r["test_fraction"]) else ""
    if not _absent(r["seeds_needed"]):
        if r["seeds_needed"] <= r["seeds"]:
            return head + (f"its CI is already within +/-{margin:g} (+/-{fmt_loss(r['ci95'])} at {int(r['seeds'])} "
                           f"seeds per {per}), and that width does not decide it: more seeds would narrow it further")
        return head + (f"{_seeds(r['seeds_needed'], r['baseline_seeds_needed'], per)} would give +/-{margin:g}"
                       f"{split} (now {int(r['seeds'])}, +/-{fmt_loss(r['ci95'])})")
    text_wide = r["text_ci95"] >= margin
    text = f" (the text alone gives +/-{fmt_loss(r['text_ci95'])})" if r["text_ci95"] > 0 else ""
    out = head + (f"no number of seeds reaches +/-{margin:g}{split}{text}" if text_wide else
                  f"no practical number of seeds (more than {MAX_SEEDS:,} per {per}) reaches +/-{margin:g}{split}{text}")
    if _absent(r["test_fraction_needed"]):
        return out + ("" if _absent(r["test_fraction_min"]) else
                      f"; nor would any test split up to {_pct(MAX_TEST_FRACTION)} of the text (it would take "
                      f"{_pct(r['test_fraction_min'])})")
    need, least = r["test_fraction_needed"], r["test_fraction_min"]
    if _absent(r["seeds_at_test_fraction"]):
        return out + f"; a test split above {_pct(least)} would leave room for seeds"
    share = (f"the text there takes at most {TEXT_BUDGET:.0%} of the CI's variance; " if need < MAX_TEST_FRACTION
             else "")
    out += (f"; a {_pct(need)} test split (`data.test_fraction`) would, with "
            f"{_seeds(r['seeds_at_test_fraction'], r['baseline_seeds_at_test_fraction'], per)} ({share}no split "
            f"below {_pct(least)} reaches it with any number of seeds)")
    if need >= _val_fraction(res):
        out += (f"; the test split is carved from the held-out text, so `data.val_fraction` (now "
                f"{_val_fraction(res):g}) must exceed it")
    return out


def sentences(table: pd.DataFrame, res: Results) -> list[str]:
    """One sentence per row of to_decide.csv, in its order."""
    return [sentence(r, res) for r in table.to_dict("records")]


def summary(table: pd.DataFrame, res: Results) -> str:
    """The summary's one line when more than MAX_LISTED effects are inconclusive ("" otherwise; the effects that
    depend on the picks are not counted: each has its sentence)."""
    table = table[table["call"] != DEPENDS] if "call" in table else table  # said apart, in words
    if len(table) <= MAX_LISTED:
        return ""
    per = "arm" if res.arms else "cell"
    reach = table.dropna(subset=["seeds_needed"])
    never = table[table["seeds_needed"].isna()]
    split = f" with this {_pct(table['test_fraction'].iloc[0])} test split" if table["test_fraction"].notna().all() \
        else ""
    out = (f"{len(table)} effects are inconclusive. For {len(reach)} of them more seeds would give a 95% CI of "
           f"+/-{res.margin:g}{split}" + (f" (at most {int(reach['seeds_needed'].max())} seeds per {per})" if len(reach)
                                       else ""))
    if len(never):
        out += (f"; for {len(never)} no number of seeds does: the text alone is wider"
                + (f" (test splits of {_pct(never['test_fraction_needed'].min())} to "
                   f"{_pct(never['test_fraction_needed'].max())} would, with the seeds in the table)"
                   if never["test_fraction_needed"].notna().sum() > 1 else
                   f" (a {_pct(never['test_fraction_needed'].max())} test split would)"
                   if never["test_fraction_needed"].notna().any() else ""))
    return out + ". Table: `tables/to_decide.csv` (its `verdict` column says it for each)."
