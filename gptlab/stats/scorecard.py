"""The scorecard's verdict: an arm's tuned effect against the claim of the paper that introduced it.

A claim has a direction, the arm against the baseline as the paper states it: `better` (lower
loss), `worse` or `same`. Claims about speed, memory or length extrapolation (`about`) are not
claims about the loss at the training length that the lab measures: they are `not tested here`, except a
speed claim in a study that measured each arm's time per step (`worth:`): `speed_verdict` reads its CI.
Otherwise the verdict reads the tuned effect's call (`calls`) after the tuning check (`robustness`):

- `holds`: the lab calls what the paper claims (better or worse as claimed; equivalent for `same`);
- `opposite`: the lab calls the other direction (for `same`: any difference called);
- `no difference`: the paper claims a gain or a loss, and the lab's 90% CI lies within the
  equivalence margin: any gain larger than the margin is excluded;
- `agrees at the picks only` (and `opposite at the picks only`, `no difference at the picks only`):
  what the call at each arm's picked setting says of the claim, where the tuning check does not
  certify that call (it depends on the picks, or a pick's loss left could not be bounded): the data
  agree with the claim, but a better-tuned arm could undo it. Kept apart from `not shown`, which
  would hide the agreement;
- `not shown`: everything else (the CI spans zero and a margin-sized effect).
"""
from __future__ import annotations

import math

from gptlab.stats.calls import BETTER, DIRECTIONAL, EQUIVALENT, WORSE

DIRECTIONS = (*DIRECTIONAL, "same")  # the arm against the baseline, as the paper claims it
ABOUT = ("quality", "speed", "memory", "length")  # what a claim is about; only quality is scored on the loss
AT_PICKS = {"holds": "agrees at the picks only", "opposite": "opposite at the picks only",
            "no difference": "no difference at the picks only"}  # a verdict the tuning check does not certify
VERDICTS = ("holds", "opposite", "no difference", *AT_PICKS.values(), "not shown", "not tested here",
            "no claim recorded")
NOT_TESTED = {
    "speed": "a claim about running time: the lab's losses do not measure it, and timings on a shared 2-core CPU "
             "are not the paper's hardware",
    "memory": "a claim about memory: the lab does not measure it",
    "length": "a claim about sequences longer than the training context: every run here is scored at its "
              "training length",
}

MEASURED = {"speed": "from each arm's time per training step over the baseline's (`step_cost` in worth.csv, 95% CI): "
                     "wall times on the machine the report names, not the paper's hardware"}


def speed_verdict(direction: str, cost_low: float, cost_high: float) -> str:
    """The verdict on a speed claim from the 95% CI of the arm's time per step over the baseline's: `holds` when
    it lies on the claimed side of 1 (`better`: below, faster; `worse`: above), `opposite` on the other side,
    `not shown` where it holds 1 or is missing (no margin is set on time: `same` is never more than `not shown`)."""
    if not (math.isfinite(cost_low) and math.isfinite(cost_high)):
        return "not shown"
    side = BETTER if cost_high < 1 else WORSE if cost_low > 1 else ""
    if not side or direction == "same":
        return "opposite" if side and direction == "same" else "not shown"
    return "holds" if side == direction else "opposite"


def verdict(direction: str | None, about: str, call: str, at_picks: str | None = None) -> str:
    """The verdict for a claim (`direction` None: no claim recorded) given the effect's call after the tuning check.

    `at_picks`: the call at the picks where the tuning check did not certify it (`call` is then DEPENDS, or a call
    whose picks' loss left has no bound); None where it did, or where nothing was tuned."""
    if direction is None:
        return "no claim recorded"
    if about != "quality":
        return "not tested here"
    if at_picks is not None:
        read = _read(direction, at_picks)
        return AT_PICKS.get(read, read)
    return _read(direction, call)


def _read(direction: str, call: str) -> str:
    """The verdict of a call taken at its word."""
    if direction == "same":
        return {EQUIVALENT: "holds", BETTER: "opposite", WORSE: "opposite"}.get(call, "not shown")
    if call == direction:
        return "holds"
    if call in DIRECTIONAL:
        return "opposite"
    return "no difference" if call == EQUIVALENT else "not shown"
