"""The report's load step for `tune:`: the cap of the selection runs' losses, the unigram loss of their validation split.

The selection chose each setting on validation, so the LR sensitivity and the lr curves cap every selection loss at
the unigram loss of the validation split (`gptlab.report.load.ceiling`), in bits per character where the report's
losses are. The kind's one module that reads files.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from gptlab.kinds.tune.spec import KEY
from gptlab.report.load import Results
from gptlab.report.load.ceiling import unigram_ceiling
from gptlab.stats.outcome import BITS_PER_CHAR, CHAR_BPC_FACTOR, NATS_PER_TOKEN


@dataclass(frozen=True)
class TuneLoaded:
    """What `tune:` reads beyond the report's `Results` (`Results.kinds["tune"]`)."""

    selection_ceiling: float = math.nan  # unigram loss of the selection runs' validation split (none: NaN)


def load(res: Results) -> TuneLoaded:
    """The selection runs' cap (NaN without selection runs)."""
    if not len(res.selection):
        return TuneLoaded()
    ceiling, _ = unigram_ceiling(res.results_dir, res.selection, per_token=res.unit == NATS_PER_TOKEN, split="val")
    return TuneLoaded(selection_ceiling=ceiling * CHAR_BPC_FACTOR if res.unit == BITS_PER_CHAR else ceiling)


def loaded(res: Results) -> TuneLoaded:
    """What the load step read for `tune:` (nothing, for results read without the kind)."""
    return res.kinds.get(KEY) or TuneLoaded()
