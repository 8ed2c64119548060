"""The report's load step for adaptive seeds: results/NAME/rounds.csv, the rounds the sweep has run so far.

Written by the sweep's planner (`stages.AdaptiveSeeds`); read here, the kind's one module that reads files. A
file without the round columns, or none at all (a sweep stopped in round 1), reads as no round.
"""
from __future__ import annotations

import pandas as pd

from gptlab.kinds.seeds.stages import KEY
from gptlab.report.load import Results, read_text
from gptlab.stats.adaptive_seeds import ROUND_COLS


def read_rounds(res: Results) -> pd.DataFrame:
    """results/NAME/rounds.csv, or an empty frame when the sweep has none."""
    path = res.results_dir.rounds_csv
    if not path.is_file():
        return pd.DataFrame(columns=ROUND_COLS)
    read_text(path)  # a binary file is one line of error, not a parser traceback
    frame = pd.read_csv(path)
    return frame if set(ROUND_COLS) <= set(frame.columns) else pd.DataFrame(columns=ROUND_COLS)


def rounds(res: Results) -> pd.DataFrame:
    """The rounds the load step read (none for results read without the kind)."""
    frame = res.kinds.get(KEY)
    return frame if frame is not None else pd.DataFrame(columns=ROUND_COLS)
