"""Run statuses: their names, which ones are finished results or failures to train, and the `collapsed` rule.

The one owner of the status strings a summary.json (and summary.csv) can hold, imported by the run
floor (which writes them), the statistics (which keep failures out of every number) and the report.
It lives with the basics because the statistics may import nothing else of the lab.

- `ok`: the run finished and learned.
- `diverged`: its training loss became non-finite (the loop stopped there).
- `collapsed`: it finished with finite losses but did not learn: its best validation loss does not
  beat the unigram loss of its own validation split (the cross-entropy of a model that knows only
  the training split's token frequencies, `gptlab.run.data.unigram_loss`) by `COLLAPSE_MARGIN`,
  relative to that unigram loss. A relative margin is unit-free: the same in nats or bits, per
  character or per BPE token. The margin's calibration on every shipped run is in docs/STATISTICS.md
  ("Runs that did not learn").
- `failed`: the run raised (a crash says nothing about the setting; it may be rerun).
- `unstable` is never written: the report and the adaptive seed rule give it, on read, to a run that
  learned but ended far above the other runs of its cell at the same setting (`gptlab.stats.cliff.unstable`:
  the edge of stability, crossed by this seed only).

`diverged` and `collapsed` are results, never trained again; they and `unstable` are a failure of the setting
(`FAILED_TO_TRAIN`): no pick, fit, noise estimate or effect takes their loss as a number.
"""
from __future__ import annotations

import math

OK, DIVERGED, COLLAPSED, FAILED = "ok", "diverged", "collapsed", "failed"
UNSTABLE = "unstable"  # given on read, never written: an `ok` run far above its cell's other runs (stats.cliff)
STATUSES = (OK, DIVERGED, COLLAPSED, FAILED)  # every status a summary.json can hold
FINISHED = (OK, DIVERGED, COLLAPSED)  # a result: its run is never trained again
FAILED_TO_TRAIN = (DIVERGED, COLLAPSED, UNSTABLE)  # finished, but the setting failed: counted, never averaged in

# A run must end at least 5% (relative) below its unigram loss to count as having learned. On the 718 shipped runs
# the runs that did not learn sit at a relative gap of -0.0006 to +0.0045, every run that learned at +0.209 or
# more (docs/STATISTICS.md): 5% is ten times the worst failure's gap and a quarter of the weakest learner's.
COLLAPSE_MARGIN = 0.05


def relative_gap(best_val_loss: float, unigram_loss: float) -> float:
    """(unigram - best) / unigram: how far below the unigram loss a run ended, as a fraction of it."""
    return (unigram_loss - best_val_loss) / unigram_loss


def is_collapsed(best_val_loss: float | None, unigram_loss: float | None, margin: float = COLLAPSE_MARGIN) -> bool:
    """Whether a finished run did not learn: its best validation loss is not `margin` (relative) below the unigram
    loss. False when either number is missing or not finite (nothing to judge; a non-finite run is `diverged`)."""
    if best_val_loss is None or unigram_loss is None:
        return False
    best, unigram = float(best_val_loss), float(unigram_loss)
    if not (math.isfinite(best) and math.isfinite(unigram) and unigram > 0):
        return False
    return relative_gap(best, unigram) < margin


def classify(status: str, best_val_loss: float | None, unigram_loss: float | None) -> str:
    """The status to record for a run the loop ended with `status`: `ok` becomes `collapsed` when the run did not
    learn; every other status is kept (a diverged run stays diverged, a failed one failed)."""
    return COLLAPSED if status == OK and is_collapsed(best_val_loss, unigram_loss) else status


def collapse_note(best_val_loss: float, unigram_loss: float) -> str:
    """Why a run is `collapsed`, for its summary's `error`."""
    gap = relative_gap(best_val_loss, unigram_loss)
    where = f"{gap:.2%} below it" if gap >= 0 else f"{-gap:.2%} above it"
    return (f"did not learn: best val loss {best_val_loss:.4f} does not beat the unigram loss {unigram_loss:.4f} "
            f"by {COLLAPSE_MARGIN:.0%} (it is {where})")
