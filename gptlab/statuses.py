"""Run statuses: their names, which ones are finished results or failures to train, and the rule that judges a run.

The one owner of the status strings a summary.json (and summary.csv) can hold, imported by the run
floor (which writes them), the statistics (which keep failures out of every number) and the report.
It lives with the basics because the statistics may import nothing else of the lab.

- `ok`: the run finished, and its curve shows no failure (a run still descending at its end is `ok` at any
  loss: a short run is a measurement, not a failure).
- `diverged`: its training loss became non-finite (the loop stopped there).
- `collapsed`: stuck: the last half of its training no longer descends, and its training loss ends on the
  unigram plateau (the loss of a model that knows only the training split's token frequencies, on that
  split: `gptlab.run.data.unigram_loss(data, "train")`) or above.
- `unstable`: blew up: at its end its training loss lies above its own best by more than its own noise
  allows (it rose and did not come back).
- `failed`: the run raised (a crash says nothing about the setting; it may be rerun).

`judge` decides `collapsed` and `unstable` from the run's own metrics alone, the same rule for every arm:
nothing compares a run's loss with its siblings' or with a cut set beside the results. Its noise is the
run's own row-to-row noise of the training loss (`row_noise`); a rise, a fall or a distance from the
unigram loss is real when it exceeds `Z` standard errors of that noise. A curve of fewer than `MIN_ROWS`
training-loss rows is not judged (`ok`): too short to show a failure. The rule's calibration on simulated
curves and on every shipped run (its confusion table) is in docs/STATISTICS.md ("Which runs failed") and
`python benchmarks/failure_rule.py`.

`diverged`, `collapsed` and `unstable` are results, never trained again, and a failure of the setting
(`FAILED_TO_TRAIN`): no pick, fit or noise estimate takes their loss as a number; the report counts them.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

OK, DIVERGED, COLLAPSED, UNSTABLE, FAILED = "ok", "diverged", "collapsed", "unstable", "failed"
STATUSES = (OK, DIVERGED, COLLAPSED, UNSTABLE, FAILED)  # every status a summary.json can hold
FINISHED = (OK, DIVERGED, COLLAPSED, UNSTABLE)  # a result: its run is never trained again
FAILED_TO_TRAIN = (DIVERGED, COLLAPSED, UNSTABLE)  # finished, but the setting failed: counted, never averaged in
JUDGED = (OK, COLLAPSED, UNSTABLE)  # the statuses `judge` gives (a finite run's); a summary's is re-judged on read

# The rule's version, recorded in each summary (`status_rule`): a summary without it (or with an older one) was
# judged by an earlier rule and is judged again on read, from its metrics.csv (`gptlab.run.reclassify`).
STATUS_RULE = 2
# z for a one-sided call on the run's own noise: 1 in 740 for Gaussian noise. What it buys is measured in
# docs/STATISTICS.md: no false failure among the simulated healthy curves or the shipped runs that learned.
Z = 3.0
# The blow-up's z: its rise is measured from the lowest of many window means (a minimum over the curve), and
# row noise has heavier tails than Gaussian; at Z = 3 the simulated healthy curves of 40 rows read `unstable` 1 in
# 400, at 4 about 1 in 1,000 (docs/STATISTICS.md, "Which runs failed").
Z_RISE = 4.0
MIN_ROWS = 8  # training-loss rows a curve needs to be judged: 4 in the last half, 2 in each half of it
NOISE_ROWS = 10  # rows of the last half that estimate the noise alone
BLOWUP_WINDOW = 3  # the least rows of the window means compared for a blow-up (an eighth of the curve, if more)


@dataclass(frozen=True)
class Verdict:
    """A finite run's status under `judge`, and why (None when `ok`)."""

    status: str
    note: str | None = None


def row_noise(losses: Sequence[float]) -> float:
    """The run's own row-to-row noise (SD of one metrics row's training loss), from its last half (from all but its
    first row when that half is shorter than `NOISE_ROWS`: a median of a few differences is no estimate).

    Second differences cancel a curve's trend and slope (a row's loss is the mean of its steps'
    losses: rows are independent given the curve); their median absolute deviation (x 1.4826 / sqrt(6),
    the SD of a second difference of iid noise) ignores the one jump of a blow-up. Floored at 1e-9.
    """
    tail = list(losses[len(losses) // 2:])
    if len(tail) < NOISE_ROWS:
        tail = list(losses[1:])
    d2 = [tail[i + 1] - 2 * tail[i] + tail[i - 1] for i in range(1, len(tail) - 1)]
    if not d2:
        return 1e-9
    centre = statistics.median(d2)
    return max(1.4826 * statistics.median(abs(d - centre) for d in d2) / math.sqrt(6), 1e-9)


def still_descending(losses: Sequence[float], sigma: float) -> bool:
    """Whether the last half of the curve still falls: its first half's mean above its second half's by more
    than `Z` standard errors."""
    tail = list(losses[len(losses) // 2:])
    a, b = tail[: len(tail) // 2], tail[len(tail) // 2:]
    drop = statistics.fmean(a) - statistics.fmean(b)
    return drop > Z * sigma * math.sqrt(1 / len(a) + 1 / len(b))


def rise_above_best(losses: Sequence[float], sigma: float) -> tuple[float, float]:
    """(rise, allowed): how far the mean of the last window lies above the lowest window mean before it, and the
    rise `Z_RISE` standard errors of that difference allow (windows of `BLOWUP_WINDOW` rows, or an eighth of the curve)."""
    w = max(BLOWUP_WINDOW, len(losses) // 8)
    means = [statistics.fmean(losses[i:i + w]) for i in range(len(losses) - w + 1)]
    rise = means[-1] - min(means[:-1]) if len(means) > 1 else 0.0
    return rise, Z_RISE * sigma * math.sqrt(2 / w)


def judge(train: Sequence[float], unigram: float | None) -> Verdict:
    """The status of a run that finished with finite losses, from its own curve.

    `train`: its metrics rows' training losses in step order; `unigram`: the unigram loss of its training
    split in the same unit (`gptlab.run.data.unigram_loss(data, "train")`: the loss a model that learned only
    the token frequencies has on the text it trains on), None when unknown (then nothing is `collapsed`).
    Stuck comes first: a run that blew up onto the unigram plateau is `collapsed`.
    """
    train = [float(v) for v in train if v is not None and math.isfinite(float(v))]
    if len(train) < MIN_ROWS:
        return Verdict(OK)
    sigma = row_noise(train)
    tail = train[len(train) // 2:]
    level = statistics.fmean(tail[len(tail) // 2:])  # where the curve ends: the mean of its last quarter
    if (unigram is not None and math.isfinite(unigram) and not still_descending(train, sigma)
            and level >= unigram - Z * sigma):
        return Verdict(COLLAPSED, f"stuck on the unigram plateau: its last half no longer descends, and it ends at "
                                  f"{level:.4f} (training loss), within {Z:g} x its noise of {sigma:.4f} of the "
                                  f"unigram loss {unigram:.4f} or above")
    rise, allowed = rise_above_best(train, sigma)
    if rise > allowed:
        return Verdict(UNSTABLE, f"blew up: its training loss ends {rise:.4f} above its own best, more than the "
                                 f"{allowed:.4f} its noise ({sigma:.4f} a row) allows, and did not come back")
    return Verdict(OK)


def classify(status: str, train: Sequence[float], unigram: float | None) -> Verdict:
    """The verdict to record for a run the loop ended with `status`: an `ok` (or earlier judged) run is judged by
    its curve (`judge`); every other status is kept (a diverged run stays diverged, a failed one failed)."""
    return judge(train, unigram) if status in JUDGED else Verdict(status)
