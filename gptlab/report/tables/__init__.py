"""The report's tables step: every number of one report, computed once: `compute_tables(res) -> ReportTables`.

Owns which tables a report has and in what order (`reports/NAME/tables/NAME.csv`), so that the
report (`write_report`) and the notebook API (`gptlab.load`) can never disagree about them, and
which effects count as called (`ReportTables.called`, the one filter of the summary's table and
its sentences). A kind of sweep's numbers are its `tables` hook's (`ReportTables.kinds`, by its key) and its
files its `files` hook's, after the report's own; an arms sweep's scorecard takes each kind's columns through
its `scorecard` hook (`gptlab.report.kinds`). Numbers only: the sentences come after, from this bundle
(`sentences`), and so do the figures and the document.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from gptlab.errors import GptlabError
from gptlab.report.fmt import round_frame
from gptlab.report.kinds import report_kinds
from gptlab.report.load import Results
from gptlab.report.tables import analyses
from gptlab.report.tables.arms import arms_table, scorecard_table
from gptlab.report.tables.scale import effects_by_scale
from gptlab.report.tables.stability import stability_table
from gptlab.report.tables.to_decide import to_decide_table
from gptlab.stats.calls import DIRECTIONAL
from gptlab.stats.effects import INT_COLS, MAIN_COLS, Analysis

ALWAYS = ("main_effects", "interactions", "failures")  # tables the report writes even when they have no rows
COUNT_COLS = ["n_ok", "n_ok_baseline", "n_diverged", "n_failed"]  # run counts the main-effects table adds
# The effect tables after the main effects, in the report's order: (file name, the Analysis field).
OTHER_EFFECTS = (("interactions", "interactions"), ("higher_order", "higher"), ("aliases", "aliases"),
                 ("cells_vs_baseline", "cells_vs_baseline"))
LABEL_COLUMNS = {"higher_order": "term", "aliases": "aliased", "cells_vs_baseline": "cell"}  # what names a row


@dataclass(frozen=True)
class ReportTables:
    """The numbers of one report: the effects of the outcome, the run tables, and the views only some sweeps have."""

    cells: pd.DataFrame  # one row per cell (analyses.cell_table)
    levels: pd.DataFrame  # one row per factor level (analyses.level_table)
    failures: pd.DataFrame  # runs that did not finish ok (analyses.failure_table)
    effects: Analysis | None  # the outcome's effects (ok runs), every table rounded once; None without any
    main: pd.DataFrame  # effects.main's rows of the scientific factors, with each level's run counts
    by_step: pd.DataFrame  # effects at every evaluated step
    level_curves: pd.DataFrame  # marginal mean val loss per level per step
    pair_means: pd.DataFrame  # marginal means of every pair of levels (full factorials)
    divergence: pd.DataFrame  # rate per cell of runs that failed to train (diverged or collapsed)
    sensitivity: pd.DataFrame  # effects again with runs that failed to train at the ceiling loss
    arms: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # an arms sweep: each arm vs the baseline
    scorecard: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # an arms sweep: claims and verdicts
    to_decide: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # inconclusive effects: what would decide
    stability: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # runs trained/collapsed/... per setting
    # each cell's loss its tuned setting may leave on the table, (estimate, upper end of its 95% CI, df), keys the cells'
    # levels in `res.factors` order, which every call was checked against (`stats.robustness`); None: nothing tuned
    loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None = None
    kinds: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # each kind's numbers (its `tables` hook's), by its key
    kind_files: Mapping[str, pd.DataFrame] = dataclasses.field(default_factory=dict)  # the kinds' tables/NAME.csv, by NAME

    def _effects(self, name: str, empty: Sequence[str] = ()) -> pd.DataFrame:
        return getattr(self.effects, name) if self.effects is not None else pd.DataFrame(columns=list(empty))

    @property
    def interactions(self) -> pd.DataFrame:
        return self._effects("interactions", INT_COLS)

    @property
    def higher(self) -> pd.DataFrame:
        return self._effects("higher")

    @property
    def simple(self) -> pd.DataFrame:
        return self._effects("simple")

    @property
    def simple_apart(self) -> bool:
        """Whether the simple effects say more than the main effects: a sweep of one factor has no other factor to
        hold at a level, and its one simple effect per level is its main effect (then not shown twice)."""
        simple = self.simple
        return bool(len(simple)) and "at" in simple and bool((simple["at"].fillna("").astype(str) != "").any())

    @property
    def cells_vs_baseline(self) -> pd.DataFrame:
        return self._effects("cells_vs_baseline")

    @property
    def aliases(self) -> pd.DataFrame:
        return self._effects("aliases")

    @property
    def factorial(self) -> bool:
        """Whether the effects come from a full factorial (averaged effects) rather than the cells that have data."""
        return self.effects is not None and self.effects.design.full_factorial

    def called(self) -> list[tuple[str, int, dict[str, Any]]]:
        """(table, row position, row) of every effect called better or worse, main effects first, then
        `OTHER_EFFECTS` in order. A cell that differs from the baseline in one factor is left out: it is
        the same contrast as a main-effects row."""
        out = [("main_effects", i, r) for i, r in enumerate(self.main.to_dict("records")) if r["call"] in DIRECTIONAL]
        for table, field in OTHER_EFFECTS:
            rows = getattr(self, field)
            out += [(table, i, r) for i, r in enumerate(rows.to_dict("records") if len(rows) else [])
                    if r["call"] in DIRECTIONAL and not (table == "cells_vs_baseline" and r["changes"] == 1)]
        return out

    def files(self, verdicts: Mapping[str, Sequence[str]]) -> dict[str, pd.DataFrame]:
        """The tables the report writes, by file name (`tables/NAME.csv`), in the report's order.

        `verdicts` (file name -> one sentence per row) become each named table's last column, `verdict`.
        """
        effects = {"main_effects": self.main, "interactions": self.interactions, "higher_order": self.higher,
                   "simple_effects": self.simple}
        if len(self.arms.columns):  # a design of arms has no main effects or interactions: each arm vs the baseline
            effects = {"arms": self.arms, "scorecard": self.scorecard}
        every = {"cells": self.cells, "levels": self.levels, **effects,
                 "cells_vs_baseline": self.cells_vs_baseline, "aliases": self.aliases,
                 "effects_by_step": self.by_step, "divergence": self.divergence, "sensitivity": self.sensitivity,
                 "failures": self.failures, "stability": self.stability,
                 **({"to_decide": self.to_decide} if len(self.to_decide) else {}), **self.kind_files}
        every |= {name: every[name].assign(verdict=list(text)) for name, text in verdicts.items() if name in every}
        always = ALWAYS if not len(self.arms.columns) else ("arms", "scorecard", "failures")
        return {name: df for name, df in every.items() if len(df.columns) and (len(df) or name in always)}


def _rounded(a: Analysis) -> Analysis:
    """`a` with every table rounded to the report's precision (the fit and the design as they are)."""
    return dataclasses.replace(a, **{f: round_frame(getattr(a, f)) for f in
                                     ("main", "interactions", "higher", "simple", "cells_vs_baseline", "aliases")})


def compute_tables(res: Results) -> ReportTables:
    """Every table of the report of `res`, with calls at its equivalence margin (`res.margin`): the effects, each kind's
    numbers (which an arms sweep's table and scorecard then take, through the kinds' hooks), the files."""
    early = {key: kind.before_effects(res) for key, kind in report_kinds(res.spec)}  # first: each call is
    left = next((bound for key, kind in report_kinds(res.spec)  # checked against the picks' loss left on the table
                 if (bound := kind.loss_left(res, early[key])) is not None), None)
    a = analyses.analyse_runs(res, res.counted, res.outcome, blocks=True,  # the text's error too, where runs have blocks
                              loss_left=left)
    effects = _rounded(a) if a is not None else None
    main = pd.DataFrame(columns=MAIN_COLS + COUNT_COLS)
    if effects is not None:  # a scale factor's own effect (a longer run's lower loss) is not a finding: see by_scale
        main = round_frame(analyses.with_counts(res, effects.main))
        main = main[~main["factor"].isin(res.scale)].reset_index(drop=True)
    interactions = effects.interactions if effects is not None else pd.DataFrame(columns=INT_COLS)
    by_step, level_curves = analyses.by_step(res)
    tables = with_kind_numbers(res, ReportTables(
        cells=analyses.cell_table(res), levels=analyses.level_table(res),
        failures=analyses.failure_table(res), effects=effects, main=main, by_step=by_step, level_curves=level_curves,
        pair_means=analyses.pair_means(res, a), divergence=analyses.divergence_table(res),
        sensitivity=analyses.sensitivity(res, a), stability=stability_table(res), loss_left=left, kinds=early))
    arms = arms_table(res, main, per_level(res, tables), picks(res, tables)) if res.arms else pd.DataFrame()
    tables = dataclasses.replace(tables, arms=arms, to_decide=to_decide_table(
        res, a, main, interactions, arms, lambda cell: at_picks(res, tables, cell)))
    card = scorecard_table(res, arms) if res.arms else pd.DataFrame()
    for _, kind in report_kinds(res.spec):
        card = kind.scorecard(res, tables, card)
    return with_kind_files(res, dataclasses.replace(tables, scorecard=card))


def with_kind_numbers(res: Results, tables: ReportTables) -> ReportTables:
    """`tables` with each kind's numbers (its `tables` hook, in the sweep's order: each sees the ones before)."""
    for key, kind in report_kinds(res.spec):
        tables = dataclasses.replace(tables, kinds={**tables.kinds, key: kind.tables(res, tables)})
    return tables


def per_level(res: Results, tables: ReportTables) -> pd.DataFrame:
    """The effects at each level of the scale factors, which an arms sweep's table takes per level: the kind's that
    made them (its `per_level` hook: `scale:`'s effects_by_scale.csv), else the report's own slices."""
    made = next((rows for _, kind in report_kinds(res.spec) if (rows := kind.per_level(res, tables)) is not None), None)
    return made if made is not None else effects_by_scale(res, tables.loss_left)


def picks(res: Results, tables: ReportTables) -> Mapping[tuple[str, ...], str]:
    """Each estimation cell's setting as text, by its levels, from the kind that chose them (its `picks` hook:
    `tune:`'s), which an arms sweep's table shows as `pick`; none where no kind did."""
    return next((chosen for _, kind in report_kinds(res.spec) if (chosen := kind.picks(res, tables)) is not None), {})


def at_picks(res: Results, tables: ReportTables, cell: str) -> dict[str, Any]:
    """What would decide an effect whose call depends on the picks, from its tuning `cell`: each kind's (its
    `to_decide` hook: `tune:`'s lr curve of the cell)."""
    return {k: v for _, kind in report_kinds(res.spec) for k, v in kind.to_decide(res, tables, cell).items()}


def with_kind_files(res: Results, tables: ReportTables) -> ReportTables:
    """`tables` with each kind's files (its `files` hook); a kind's file named like the report's or another's is
    refused."""
    for key, kind in report_kinds(res.spec):
        files = dict(kind.files(tables))
        clash = sorted(set(files) & ({*tables.files({})} | set(tables.kind_files)))
        if clash:
            raise GptlabError(f"report kind {key!r}: its table(s) {', '.join(clash)} are already the report's; name "
                              "them otherwise")
        tables = dataclasses.replace(tables, kind_files={**tables.kind_files, **files})
    return tables
