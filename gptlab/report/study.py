"""`gptlab.load(results_dir)`: a sweep's results as pandas DataFrames, for notebooks.

Owns the public Python view of `results/NAME/`: `Study`, a frozen object holding the report's own
reading of the folder (`load.load_results`, the equivalence margin resolved in it), whose tables are computed
on first access by the code that writes the report (`tables.compute_tables`, and `sentences` for
the verdicts): nothing here estimates anything, so a notebook and `reports/NAME/tables/*.csv`
always agree. Loading is cheap
(summary.csv, the run summaries); the curves read every metrics.csv on first access (through the load
step's `runfiles.read_all_curves`), the effect
tables fit the report's models on first access. Nothing here writes a file.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from gptlab.report.load import Results
from gptlab.report.load.runfiles import read_all_curves

INTERNAL = ("loss_scale",)  # columns of `Results.runs` that only the loader needs
CALL_COLS = ["table", "effect", "baseline", "estimate", "ci_low", "ci_high", "p_adjusted", "call", "verdict"]


@dataclass(frozen=True, eq=False)
class Study:
    """One sweep's results: runs, curves and the report's tables, each a DataFrame computed on first access.

    Every loss is in `unit` (nats/char for a char tokenizer; bits/char when the sweep mixes
    tokenizers, as in the report). Tables are rounded to the report's precision, exactly as in
    `reports/NAME/tables/*.csv`. A property returns the same (cached) DataFrame each time: copy
    it before changing it.
    """

    results: Results  # the report's reading of results/NAME/ (levels typed to the grid, cells, units, the margin)

    @property
    def margin(self) -> float:
        """The equivalence margin of the calls: the sweep's report.equivalence_margin, or `gptlab.load`'s."""
        return self.results.margin

    @property
    def name(self) -> str:
        """The sweep's name (sweep.yaml's `name`)."""
        return self.results.name

    @property
    def results_dir(self) -> Path:
        """The folder this study was read from."""
        return self.results.results_dir.path

    @property
    def factors(self) -> list[str]:
        """The grid's keys, in grid order (the factor columns of `runs` and `curves`)."""
        return list(self.results.factors)

    @property
    def levels(self) -> dict[str, list[str]]:
        """Each factor's level labels in grid order (for a plot's `hue_order`)."""
        return {f: list(v) for f, v in self.results.levels.items()}

    @property
    def baseline(self) -> dict[str, str]:
        """The baseline level of each factor (what every effect is measured against)."""
        return dict(self.results.baseline)

    @property
    def unit(self) -> str:
        """The unit of every loss in the runs, the curves and the tables."""
        return self.results.unit

    @property
    def outcome(self) -> str:
        """The runs' column the effects are estimated on: `best_val_loss`, or `best_test_loss`."""
        return self.results.outcome

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per run of the study, summary.csv's rows in its order: its columns (factor levels as labels), plus
        `cell`, `ok`, `diverged_step` and `role` (`estimation`, `selection`, `worth`, `worth_tuning`, or a tuning
        method's own; `estimation` for every run of results from before roles).

        Only the estimation runs enter the effects (`runs[runs.role == "estimation"]`): a tuned sweep's selection
        runs chose the settings (`tables["tuning"]`), a `worth:` study's baseline lengths give `worth`."""
        runs = self.results.every_run
        return runs.drop(columns=[c for c in INTERNAL if c in runs]).copy()

    @cached_property
    def curves(self) -> pd.DataFrame:
        """Every run's metrics.csv in one long table, each role's (filter on `role` for the estimation runs' curves):
        run_id, cell, factors, seed, status, role, then step, train_loss, val_loss (empty between evaluations), lr,
        grad_norm, tokens, elapsed_s."""
        return read_all_curves(self.results)

    @cached_property
    def _bundle(self):  # tables.ReportTables: every table of the report, computed once by the report's own code
        from gptlab.report.tables import compute_tables
        return compute_tables(self.results)

    @cached_property
    def main_effects(self) -> pd.DataFrame:
        """Each level against its factor's baseline, with CI, Holm-adjusted p, `call` and `verdict` (no rows for
        an arms sweep: see `arms`)."""
        return self.tables.get("main_effects", pd.DataFrame(columns=["factor", "level", "baseline"]))

    @cached_property
    def interactions(self) -> pd.DataFrame:
        """Two-factor interactions, with CI, Holm-adjusted p, `call` and `verdict` (none for an arms sweep)."""
        return self.tables.get("interactions", pd.DataFrame(columns=["factor_a", "level_a", "factor_b", "level_b"]))

    @cached_property
    def arms(self) -> pd.DataFrame:
        """An arms sweep's arms against the baseline (`tables/arms.csv`); no rows for a grid."""
        return self.tables.get("arms", pd.DataFrame(columns=["arm", "baseline"]))

    @cached_property
    def scorecard(self) -> pd.DataFrame:
        """An arms sweep's claims beside the arms' effects, with the verdicts (`tables/scorecard.csv`)."""
        return self.tables.get("scorecard", pd.DataFrame(columns=["arm", "verdict"]))

    @cached_property
    def worth(self) -> pd.DataFrame:
        """A `worth:` study's arms in the baseline's training steps and wall time (`tables/worth.csv`: each arm's
        step multiplier with its 95% CI, censored beyond the lengths trained, its relative time per step and
        its wall-time multiplier); no rows without `worth:`."""
        return self.tables.get("worth", pd.DataFrame(columns=["arm", "baseline", "multiplier"]))

    @cached_property
    def worth_retune(self) -> pd.DataFrame:
        """A `worth:` study's re-tune: the baseline's best lr factor at the shortest and longest length
        (`tables/worth_retune.csv`); no rows without it."""
        return self.tables.get("worth_retune", pd.DataFrame(columns=["steps", "best_factor"]))

    @cached_property
    def effects_by_step(self) -> pd.DataFrame:
        """Main effects (or cells against the baseline) at every evaluated step, each step its own Holm family."""
        return self._bundle.by_step

    @cached_property
    def effects_by_scale(self) -> pd.DataFrame:
        """The scientific factors' effects at each level of each `scale:` factor (no rows without `scale:`)."""
        from gptlab.report.tables.scale import SCALE_COLS
        return self.tables.get("effects_by_scale", pd.DataFrame(columns=SCALE_COLS))

    @cached_property
    def calls(self) -> pd.DataFrame:
        """One row per main effect and interaction (an arms sweep: per arm): its `effect` (in the discussion's
        `key=level` row syntax), estimate, CI, Holm-adjusted p and call (better, worse, equivalent, inconclusive)."""
        rows = [{**r, "table": "main_effects", "effect": f"{r['factor']}={r['level']}",
                 "baseline": f"{r['factor']}={r['baseline']}"} for r in self.main_effects.to_dict("records")]
        rows += [{**r, "table": "arms", "effect": f"arm={r['arm']}", "baseline": f"arm={r['baseline']}"}
                 for r in self.arms.to_dict("records")]
        rows += [{**r, "table": "interactions", "baseline": "",
                  "effect": f"{r['factor_a']}={r['level_a']} x {r['factor_b']}={r['level_b']}"}
                 for r in self.interactions.to_dict("records")]
        return pd.DataFrame(rows, columns=CALL_COLS)

    @cached_property
    def tables(self) -> dict[str, pd.DataFrame]:
        """The report's tables by file name (`tables/NAME.csv`), the ones the report writes for this sweep."""
        from gptlab.report.sentences import write
        return self._bundle.files(write(self.results, self._bundle).verdicts)

    def __repr__(self) -> str:
        return (f"Study({self.name!r}: {len(self.results.every_run)} runs, {len(self.results.cells)} cells, "
                f"factors {self.factors}, from {str(self.results_dir)!r})")

