"""The sentences of `scale:`: whether each effect's call holds, changes or reverses with scale, and how it changes.

`ScaleWords` is the report's `Sentences.kinds["scale"]`, from the kind's numbers (`tables.ScaleView`): one sentence
per scientific effect and scale factor (`scale_verdicts`), and one per row of effect_changes.csv
(`change_verdicts`: paired by seed, or unpaired across texts in words that say no more than its CI).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from gptlab.report.fmt import fmt_loss
from gptlab.report.load import Results
from gptlab.stats.calls import DIRECTIONAL, INCONCLUSIVE
from gptlab.stats.robustness import DEPENDS, ROBUST
from gptlab.stats.transfer import CHANGES, HOLDS, REVERSES, UNPAIRED


@dataclass(frozen=True)
class ScaleWords:
    """The sentences of a sweep with `scale:` (`Sentences.kinds["scale"]`)."""

    scale: list[str]  # per scientific effect and scale factor: the call holds, changes or reverses
    changes: list[str]  # per row of effect_changes.csv: how an effect changes from the first scale level to another


def scale_verdicts(table: pd.DataFrame, res: Results) -> list[str]:
    """One sentence per scientific effect and scale factor: holds, changes or reverses with scale."""
    out = []
    for (factor, level, s), part in table.groupby(["factor", "level", "scale_factor"], sort=False):
        versus = f"{res.label(factor, level)} vs {res.label(factor, part['baseline'].iloc[0])}"
        part = part[part["estimate"].notna()]
        if len(part) < 2:
            out.append(f"{versus}: estimable at {len(part)} level(s) of {res.short(s)}, so nothing to compare.")
            continue
        calls = [c if isinstance(c, str) and c else "no call" for c in part["call"]]
        decided = {c for c in calls if c in DIRECTIONAL}
        if decided == set(DIRECTIONAL):
            word = "reverses"
        elif len(set(calls)) == 1:
            word = "holds"
        else:
            word = "changes"
        at = "; ".join(f"{res.short(s)}={r['scale_level']}: {c} "
                       f"{fmt_loss(r['estimate'])} ({fmt_loss(r['ci_low'])} to {fmt_loss(r['ci_high'])})"
                       for c, r in zip(calls, part.to_dict("records")))
        out.append(f"{versus}: the call {word} with {res.short(s)} ({at}).")
    return out


def change_verdicts(table: pd.DataFrame, res: Results) -> list[str]:
    """One sentence per row of `effect_changes.csv`: the effect at both scale levels and its change, paired by seed
    (the same seeds at both levels) or unpaired (two texts: independent estimates, `stats.transfer`)."""
    out = []
    for r in table.to_dict("records"):
        versus = f"{res.label(r['factor'], r['level'])} vs {res.label(r['factor'], r['baseline'])}"
        s, ref, at = res.short(r["scale_factor"]), r["reference_level"], r["scale_level"]
        ci = ("no CI" if _nan(r["ci_low"]) else f"95% CI {fmt_loss(r['ci_low'])} to {fmt_loss(r['ci_high'])}, "
              "unadjusted")
        if r.get("pairing") == UNPAIRED:
            how = f"unpaired, {r['df']:.0f} df"
            call = TRANSFER_WORDS.get(r["call"], r["call"])
            if r.get("tuning") == ROBUST:
                call += ", robust to the picks"
        else:
            how, call = f"{int(r['n_seeds'])} paired seeds", r["call"]
        out.append(f"{versus}: {fmt_loss(r['effect_at_reference'])} at {s}={ref}, {fmt_loss(r['effect_at_level'])} at "
                   f"{s}={at}; change {fmt_loss(r['change'])} ({ci}, {how}): {call}.")
    return out


TRANSFER_WORDS = {  # an unpaired change's call, in words that say no more than its CI
    HOLDS: "holds (the same effect on both, within the margin)",
    CHANGES: "changes",
    REVERSES: "reverses (called in opposite directions on the two)",
    INCONCLUSIVE: "inconclusive (neither shown to change nor shown to be the same)",
    DEPENDS: "depends on the picks (the texts' loss left on the table could undo the call)",
}


def _nan(x: object) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))
