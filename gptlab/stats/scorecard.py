"""The scorecard's verdict: an arm's tuned effect against the claim of the paper that introduced it.

A claim has a direction, the arm against the baseline as the paper states it: `better` (lower
loss), `worse` or `same`. Claims about speed, memory or length extrapolation (`about`) are not
claims about the loss at the training length that the lab measures: they are `not tested here`.
Otherwise the verdict reads the tuned effect's call (`calls`), after the tuning check
(`robustness`: a call that depends on the picks shows nothing):

- `holds`: the lab calls what the paper claims (better or worse as claimed; equivalent for `same`);
- `opposite`: the lab calls the other direction (for `same`: any difference called);
- `no difference`: the paper claims a gain or a loss, and the lab's 90% CI lies within the
  equivalence margin: any gain larger than the margin is excluded;
- `not shown`: everything else (the CI spans zero and a margin-sized effect, or the call depends
  on the picks).
"""
from __future__ import annotations

DIRECTIONS = ("better", "worse", "same")  # the arm against the baseline, as the paper claims it
ABOUT = ("quality", "speed", "memory", "length")  # what a claim is about; only quality is scored on the loss
VERDICTS = ("holds", "opposite", "no difference", "not shown", "not tested here", "no claim recorded")
NOT_TESTED = {
    "speed": "a claim about running time: the lab's losses do not measure it, and timings on a shared 2-core CPU "
             "are not the paper's hardware",
    "memory": "a claim about memory: the lab does not measure it",
    "length": "a claim about sequences longer than the training context: every run here is scored at its "
              "training length",
}


def verdict(direction: str | None, about: str, call: str) -> str:
    """The verdict for a claim (`direction` None: no claim recorded) given the effect's call after the tuning check."""
    if direction is None:
        return "no claim recorded"
    if about != "quality":
        return "not tested here"
    if direction == "same":
        return {"equivalent": "holds", "better": "opposite", "worse": "opposite"}.get(call, "not shown")
    if call == direction:
        return "holds"
    if call in ("better", "worse"):
        return "opposite"
    return "no difference" if call == "equivalent" else "not shown"
