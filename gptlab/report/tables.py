"""Every number of one report, computed once: `compute_tables(res, margin) -> ReportTables`.

Owns which tables a report has and in what order (`reports/NAME/tables/NAME.csv`), so that the
report (`write_report`) and the notebook API (`gptlab.load`) can never disagree about them. No
sentences, no figures, no files: those come after, from this bundle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from gptlab.report.load import Results

ALWAYS = ("main_effects", "interactions", "failures")  # tables the report writes even when they have no rows


@dataclass(frozen=True)
class ReportTables:
    """The numbers of one report: the statistics, and the views that only some sweeps have."""

    cells: pd.DataFrame  # one row per cell (stats.cell_table)
    levels: pd.DataFrame  # one row per factor level (stats.level_table)
    failures: pd.DataFrame  # runs that did not finish ok (stats.failure_table)
    stats: Any  # stats.Statistics: every effect table of the outcome, with calls
    adaptive: Any  # rounds.AdaptiveView of an adaptive sweep, else None
    by_scale: pd.DataFrame  # effects at each level of each scale factor (no rows without `scale:`)
    tuned: Any  # tuning.TuningView of a tuned sweep (picks, fixed-setting effects, LR sensitivity), else None
    has_scale: bool  # whether the sweep names scale factors (then effects_by_scale.csv is written, even empty)

    @property
    def files(self) -> dict[str, pd.DataFrame]:
        """The tables the report writes, by file name (`tables/NAME.csv`), in the report's order."""
        st = self.stats
        every = {"cells": self.cells, "levels": self.levels, "main_effects": st.main, "interactions": st.interactions,
                 "higher_order": st.higher, "simple_effects": st.simple, "cells_vs_baseline": st.cells_vs_baseline,
                 "aliases": st.aliases, "effects_by_step": st.by_step, "divergence": st.divergence,
                 "sensitivity": st.sensitivity, "failures": self.failures,
                 **({"rounds": self.adaptive.rounds, "precision": self.adaptive.outcomes}
                    if self.adaptive is not None else {}),
                 **({"effects_by_scale": self.by_scale} if self.has_scale else {}),
                 **(self.tuned.tables if self.tuned is not None else {})}
        return {name: df for name, df in every.items() if len(df.columns) and (len(df) or name in ALWAYS)}


def compute_tables(res: Results, margin: float) -> ReportTables:
    """Every table of the report of `res`, with calls at the equivalence `margin`."""
    from gptlab.report import rounds, scale, stats, tuning

    st = stats.compute(res, margin)
    tuned = tuning.tuning_view(res, st, margin)  # a tuned sweep's selection runs: picks, fixed against tuned
    if tuned is not None:
        st.warnings += tuned.warnings
    return ReportTables(stats.cell_table(res), stats.level_table(res), stats.failure_table(res), st,
                        rounds.adaptive_view(res), scale.effects_by_scale(res, margin), tuned, bool(res.scale))
