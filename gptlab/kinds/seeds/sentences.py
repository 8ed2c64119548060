"""The sentences of adaptive seeds: the stopping rule, and how many called effects reached the target half-width.

`AdaptiveWords` is the report's `Sentences.kinds["seeds"]`, from the kind's numbers (`tables.AdaptiveView`); the
kind's section places them (`section`).
"""
from __future__ import annotations

from dataclasses import dataclass

from gptlab.kinds.seeds.tables import AdaptiveView
from gptlab.stats.adaptive_seeds import SeedRule


@dataclass(frozen=True)
class AdaptiveWords:
    """The sentences of an adaptive sweep (`Sentences.kinds["seeds"]`)."""

    rule: str  # the stopping rule
    precision_reached: str  # how many called effects reached the target half-width ("" before any has an outcome)


def words(view: AdaptiveView) -> AdaptiveWords:
    """The sweep's sentences from its rounds."""
    return AdaptiveWords(rule=rule_sentence(view.rule), precision_reached=precision_reached(view))


def rule_sentence(rule: SeedRule) -> str:
    """The stopping rule in one sentence, for the report."""
    what = "every main effect (or cell against the baseline)" + (
        " and every two-way interaction" if rule.precision_for == "interactions" else "")
    chose = (f"Seeds were chosen by Stein's two-stage rule: round 1 trained {rule.min} seeds per cell; its pure-error "
             f"variance alone fixed the seed count N in [{rule.min}, {rule.max}] at which {what} reaches a 95% CI "
             f"half-width of {rule.precision:g}; all N seeds enter the estimates")
    return (chose + ", and every CI, p-value and call uses round 1's variance and degrees of freedom, which keeps "
            "them exact whatever N was chosen, the maximum included (reaching it was decided by round 1's noise too: "
            "docs/SEEDS_AND_TUNING.md). Stopping never looked at an estimate or a p-value.")


def precision_reached(view: AdaptiveView) -> str:
    """How many called effects of an adaptive sweep reached the target half-width ("" before any has an outcome)."""
    outcomes = view.outcomes
    if not len(outcomes):
        return ""
    reached = int((outcomes["outcome"] == "reached the target").sum())
    return (f"{reached} of {len(outcomes)} called effects reached the target half-width of "
            f"{view.rule.precision:g} at {int(outcomes['seeds'].max())} seeds per cell "
            f"(max {view.rule.max}).")
