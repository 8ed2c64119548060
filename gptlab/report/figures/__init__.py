"""The report's figures step: every figure a report gets, one field each of a `Figures` bundle (`report_figures`).

Owns which figures a report has and their file names (`Figures`: one field per figure, the file
`figures/FIELD.png`, named in `Figures.of` alone; a kind of sweep's, by its `figures` hook, in `Figures.kinds`).
`run_figures` draws the figures of the runs, `effect_figures` those of the effects, and `figstyle` holds what they
share (a kind's figures too). Every figure is drawn from the report's tables
(`tables.ReportTables`) and its runs, after the sentences and before the document.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping

from gptlab.report.figures import effect_figures
from gptlab.report.figures.run_figures import (
    forest_rows,
    level_effects,
    throughput,
    val_curves,
)
from gptlab.report.kinds import report_kinds
from gptlab.report.load import Results
from gptlab.report.tables import ReportTables


@dataclass(frozen=True)
class Png:
    """One figure of a report: its file name under figures/ and its PNG bytes."""

    file: str
    data: bytes


@dataclass(frozen=True)
class Figures:
    """Every figure a report may have, in the report's order; None where this report has none."""

    val_curves: Png | None = None  # validation loss along training, per cell or per level
    level_effects: Png | None = None  # best val loss per level of each factor
    forest: Png | None = None  # every effect (an arms sweep: every arm) with its 95% CI
    interactions: Png | None = None  # interaction plots (not for arms)
    simple_effects: Png | None = None  # each level against its baseline at every combination of the others (not arms)
    effects_by_step: Png | None = None  # effects along training
    throughput: Png | None = None  # tokens per second per cell
    kinds: Mapping[str, Mapping[str, Png]] = field(default_factory=dict)  # each kind's figures by name, by its key

    @classmethod
    def of(cls, **pngs: bytes | None) -> Figures:
        """The bundle of these PNGs, by field; the one place a figure's file name is made (`FIELD.png`)."""
        return cls(**{name: png_file(name, png) for name, png in pngs.items() if png is not None})

    def adding(self, **pngs: bytes | None) -> Figures:
        """This bundle with more figures (a None PNG adds nothing)."""
        return dataclasses.replace(self, **Figures.of(**pngs).present())

    def present(self) -> dict[str, Png]:
        """The figures of the report's own fields it has, by field, in the report's order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "kinds" and getattr(self, f.name) is not None}

    def files(self) -> dict[str, bytes]:
        """figures/NAME -> PNG bytes of every figure the report has, in the report's order: its own, then each kind's."""
        pngs = [*self.present().values(), *(png for own in self.kinds.values() for png in own.values())]
        return {png.file: png.data for png in pngs}


def png_file(name: str, png: bytes) -> Png:
    """A figure named `name` (its file: `NAME.png`)."""
    return Png(file=f"{name}.png", data=png)


def make_figures(res: Results, tables: ReportTables) -> Figures:
    """The figures every sweep may get (curves, levels, effects, throughput)."""
    arms = bool(len(tables.arms.columns))  # a design of arms: no interactions, no simple effects
    return Figures.of(
        val_curves=val_curves(res, tables.level_curves), level_effects=level_effects(res, tables.levels),
        forest=effect_figures.forest(forest_rows(tables, res), res),
        interactions=None if arms else effect_figures.interaction_plots(tables.pair_means, res),
        simple_effects=effect_figures.simple_effects(tables.simple, tables.main, res)
        if tables.simple_apart and not arms else None,  # one factor: they are its main effects
        effects_by_step=effect_figures.effects_by_step(tables.by_step, res), throughput=throughput(res))


def report_figures(res: Results, tables: ReportTables) -> Figures:
    """Every figure of the report of `res`: `make_figures`', then each kind's by its `figures` hook."""
    kinds = {key: {name: png_file(name, png) for name, png in kind.figures(res, tables).items() if png is not None}
             for key, kind in report_kinds(res.spec)}
    return dataclasses.replace(make_figures(res, tables), kinds={key: own for key, own in kinds.items() if own})
