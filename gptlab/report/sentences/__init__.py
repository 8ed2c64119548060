"""The report's sentences step: every sentence of a report, written once from its tables: `write(res, tables) -> Sentences`.

Owns the step between the numbers (`tables.ReportTables`) and the document: the verdicts of every
main effect and interaction (`verdicts`), the summary's called effects, changes along training,
notes and warnings on the design and model (`notes`), the sentences of arms sweeps, of the tuning check of every
call and of a sweep that tuned nothing (`sweeps`), and those about the sweep as a whole: its header, best cell,
counts of calls and failed runs (`overview`). A kind of sweep's are its `sentences` hook's (`Sentences.kinds`, by
its key); it adds to the summary's warnings, the error model's and the header's words and the scorecard's lines
through its hooks (`gptlab.report.kinds`). The document places these sentences; it writes none about the results.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import pandas as pd

from gptlab.report.kinds import report_kinds
from gptlab.report.load import Results
from gptlab.report.sentences import notes, overview, sweeps, to_decide, verdicts
from gptlab.report.tables import ReportTables
from gptlab.stats.arms import ARM


@dataclass(frozen=True)
class Sentences:
    """The sentences of one report, each list in the order the report shows it."""

    main: list[str]  # one verdict per row of `tables.main` (main_effects.csv's `verdict`)
    interactions: list[str]  # one verdict per row of `tables.interactions` (interactions.csv's `verdict`)
    called: list[str]  # the summary: effects called better or worse, largest first
    trajectory: list[str]  # effects whose call or size changes along training
    sensitivity: list[str]  # what counting diverged runs at the ceiling changes, or why it was not done
    notes: list[str]  # the design and model
    warnings: list[str]  # the design and model, then each kind's (its `warnings` hook: the tuned picks on the edge)
    schedule: list[str]  # `train.max_iters` as a factor also changes the schedule
    error_model: str = ""  # the method's sentence on which error the CIs count: seeds, or seeds and text blocks
    tuning_checks: tuple[str, ...] = ()  # a tuned sweep's summary: per effect, whether its call survives the picks
    arms: tuple[str, ...] = ()  # an arms sweep: one verdict per row of `tables.arms` (arms.csv's `verdict`)
    scorecard: tuple[str, ...] = ()  # an arms sweep: one line per row of `tables.scorecard`
    scorecard_legend: str = ""  # an arms sweep: the words of the scorecard's call and verdict columns, defined
    arms_legend: str = ""  # an arms sweep: the words of the arms table's call column, defined
    calls_legend: str = ""  # a tuned sweep: the words the summary's calls table adds to each call, defined
    untuned: str = ""  # a sweep without tune: the one setting of each nuisance key it trained at
    header: tuple[str, ...] = ()  # the header's lines: the sweep's command, factors, seeds, text, unit, runs, compute
    lead: str = ""  # the line under the title: what every effect is, and where the provenance is
    best: tuple[str, ...] = ()  # the summary's best cell and baseline cell
    call_counts: tuple[str, ...] = ()  # the summary: how many of each call among interactions, higher-order, simple
    failures: str = ""  # how many runs did not finish ok, or that all did
    divergence: str = ""  # how high a divergence rate a cell without a diverged run can still have ("" if none)
    no_divergence: str = ""  # the Divergence section's one sentence when no run diverged, collapsed or crashed
    allocation: str = ""  # an arms sweep: the seeds of the baseline and of the other arms ("" for a grid)
    to_decide: tuple[str, ...] = ()  # per row of `tables.to_decide`: what would decide that inconclusive effect
    to_decide_summary: str = ""  # the summary's one line on them when there are many ("" otherwise)
    stability: tuple[str, ...] = ()  # where runs did not train (diverged or collapsed), and runs reclassified on read
    kinds: Mapping[str, Any] = field(default_factory=dict)  # each kind's sentences (its `sentences` hook's), by its key

    @property
    def verdicts(self) -> dict[str, list[str]]:
        """The `verdict` column of each table that has one, by file name (`ReportTables.files`)."""
        decide = {"to_decide": list(self.to_decide)} if self.to_decide else {}
        if self.arms:  # arms.csv replaces main effects and interactions; scorecard.csv has its own verdict column
            return {"arms": list(self.arms), **decide}
        return {"main_effects": self.main, "interactions": self.interactions, **decide}


def write(res: Results, tables: ReportTables) -> Sentences:
    """Every sentence of the report of `res`, from its `tables`."""
    main = [verdicts.main(r, res, tables.simple) for r in tables.main.to_dict("records")]
    interactions = [verdicts.interaction(r, res) for r in tables.interactions.to_dict("records")]
    design_notes, warnings = notes.design_notes(res, tables.effects)
    edge = [w for _, kind in report_kinds(res.spec) for w in kind.warnings(res, tables)]
    return Sentences(
        main=main,
        interactions=interactions,
        called=verdicts.called(tables, res, {"main_effects": main, "interactions": interactions}),
        trajectory=verdicts.trajectories(tables.by_step, res, _summary_calls(tables)),
        sensitivity=notes.sensitivity(res, tables.sensitivity),
        notes=design_notes,
        warnings=warnings + edge,
        schedule=notes.schedule_note(res),
        error_model=notes.error_model(res, tables.effects),
        tuning_checks=tuple(_tuning_checks(res, tables)),
        arms=tuple(verdicts.arm(r, res) for r in tables.arms.to_dict("records")),
        scorecard=tuple(_scorecard_lines(res, tables)),
        untuned=sweeps.untuned_note(res),
        scorecard_legend=sweeps.legend(tables.scorecard, res),
        arms_legend=sweeps.legend(tables.arms, res),
        calls_legend=sweeps.legend(
            tables.arms if len(tables.arms.columns) else pd.concat([tables.main, tables.interactions]),
            res,
            only=sweeps.TUNING_WORDS,
        ),
        header=tuple(overview.header(res)),
        lead=overview.lead(res),
        best=tuple(overview.best_and_baseline(res, tables.cells)),
        call_counts=tuple(overview.call_counts(tables)),
        failures=overview.failures(res, tables.failures),
        divergence=notes.divergence_caveat(tables.divergence),
        no_divergence=notes.no_divergence(tables.divergence),
        allocation=sweeps.allocation(res) if res.arms else "",
        to_decide=tuple(to_decide.sentences(tables.to_decide, res)),
        to_decide_summary=to_decide.summary(tables.to_decide, res),
        stability=tuple(notes.stability(res, tables.stability)),
        kinds={key: kind.sentences(res, tables) for key, kind in report_kinds(res.spec)},
    )


def _scorecard_lines(res: Results, tables: ReportTables) -> list[str]:
    """One line per row of an arms sweep's scorecard, as each kind words them (its `scorecard_lines` hook)."""
    lines = sweeps.scorecard_lines(tables.scorecard, res.unit)
    for _, kind in report_kinds(res.spec):
        lines = kind.scorecard_lines(res, tables, lines)
    return lines


def _summary_calls(tables: ReportTables) -> dict[tuple[str, str], str]:
    """The summary's call of each effect that `tables.by_step` follows: (factor, level) -> call, ("cell", cell) for a
    cell against the baseline cell."""
    calls = {(r["factor"], r["level"]): r["call"] for r in tables.main.to_dict("records")}
    cells = tables.cells_vs_baseline
    return calls | ({("cell", r["cell"]): r["call"] for r in cells.to_dict("records")} if len(cells) else {})


def _tuning_checks(res: Results, tables: ReportTables) -> list[str]:
    a = tables.effects
    if a is None or not a.tuned:
        return []

    def label(r: dict) -> str:
        if "factor_a" in r:
            return f"{res.label(r['factor_a'], r['level_a'])} x {res.label(r['factor_b'], r['level_b'])}"
        if "arm" in r:  # a row of tables/arms.csv: per scale level, if any
            at = f" at {res.label(r['scale_factor'], r['scale_level'])}" if r.get("scale_factor") else ""
            return f"{res.label(ARM, r['arm'])} vs {res.label(ARM, r['baseline'])}{at}"
        at = f" at {r['at']}" if r.get("at") else ""
        return f"{res.label(r['factor'], r['level'])} vs {res.label(r['factor'], r['baseline'])}{at}"
    if len(tables.arms.columns):  # a design of arms: each arm against the baseline, at each scale level, nothing else
        # not the main effects: with a scale factor (a second text) they average over its levels
        return sweeps.tuning_checks({"arms": tables.arms}, label)
    return sweeps.tuning_checks({"main": tables.main, "interactions": tables.interactions, "simple": a.simple}, label)
