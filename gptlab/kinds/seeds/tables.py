"""The rounds of an adaptive sweep as the report shows them (`AdaptiveView`): every called effect's half-width.

The sweep decides on the widest 95% half-width among the called effects (`stats.adaptive_seeds.called_rows`) of the
runs with seeds 0..n-1, with the first round's error (`stein`), from summary.csv's rows (`stages.widest_in_summary`)
and records it in rounds.csv (written by the sweep, `stages`, read by the kind's load step, `load`); both that and
this take the runs that count and their outcome from the one rule (`gptlab.stats.outcome`). The report shows
rounds.csv as its table (`tables/rounds.csv`), each called effect's half-width at every seed count as its figure
(`half_width_curve`) and each effect's outcome (`tables/precision.csv`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from gptlab.kinds.seeds.load import rounds
from gptlab.kinds.seeds.stages import KEY
from gptlab.report.fmt import round_frame
from gptlab.report.load import Results
from gptlab.report.tables.analyses import analyse_runs
from gptlab.stats.adaptive_seeds import SeedRule, called_rows
from gptlab.stats.arms import ARM


def _called(res: Results, rule: SeedRule, n_seeds: int) -> pd.DataFrame:
    """The called effects' half-widths with seeds 0..n_seeds-1 (the margin changes no half-width)."""
    runs = res.counted
    runs = runs[res.first_seeds(runs, n_seeds)]
    analysis = analyse_runs(res, runs, res.outcome,
                            endpoint=rule.precision_for == "interactions")  # main/per-cell effects need no more
    if analysis is None:
        return pd.DataFrame(columns=["effect", "half_width"])
    return called_rows(analysis, rule, res.label, res.scale)


def half_width_curve(res: Results) -> pd.DataFrame:
    """Every called effect's half-width at each seed count from min to the seeds trained.

    Columns effect, seeds, half_width, target. Seeds beyond round 1 change the estimate and shrink
    the half-width by sqrt(min / n); the variance stays round 1's (that is what keeps CIs exact).
    """
    rule = res.spec.kinds.get(KEY)
    if rule is None or res.runs.empty:
        return pd.DataFrame(columns=["effect", "seeds", "half_width", "target"])
    arms = res.runs if not res.arms else res.runs[res.runs[ARM] != res.baseline[ARM]]  # a baseline's extra seeds
    top = int(arms["seed"].max()) + 1
    frames = []
    for n in range(rule.min, top + 1):
        rows = _called(res, rule, n)
        frames.append(rows.assign(seeds=n, target=rule.precision))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return out[["effect", "seeds", "half_width", "target"]]


def effect_outcomes(res: Results, curve: pd.DataFrame) -> pd.DataFrame:
    """Per called effect (of `half_width_curve`): its final half-width, and whether it reached the target or max."""
    rule = res.spec.kinds.get(KEY)
    if curve.empty or rule is None:
        return pd.DataFrame(columns=["effect", "seeds", "half_width", "target", "outcome"])
    last = curve[curve["seeds"] == curve["seeds"].max()].copy()
    last["outcome"] = ["reached the target" if w <= rule.precision + 1e-12
                       else ("hit max" if s >= rule.max else "not reached (the sweep is not finished)")
                       for w, s in zip(last["half_width"], last["seeds"])]
    return last.reset_index(drop=True)


@dataclass(frozen=True)
class AdaptiveView:
    """What the report shows of an adaptive sweep."""

    rule: SeedRule
    rounds: pd.DataFrame  # rounds.csv as the sweep wrote it
    outcomes: pd.DataFrame  # per called effect: seeds, half_width, target, outcome
    curve: pd.DataFrame  # per called effect and seed count: half_width (the figure)


def adaptive_view(res: Results) -> AdaptiveView | None:
    """The adaptive section's data, or None for a sweep with a fixed seed list."""
    rule = res.spec.kinds.get(KEY)
    if rule is None:
        return None
    curve = half_width_curve(res)
    return AdaptiveView(rule=rule, rounds=round_frame(rounds(res)), outcomes=round_frame(effect_outcomes(res, curve)),
                        curve=curve)
