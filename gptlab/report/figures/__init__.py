"""The report's figures step: which figures a report gets (`report_figures`), each drawn by the modules here.

`run_figures` draws the figures of the runs, `effect_figures` those of the effects, `tuning_figure`
the tuned sweep's isolation plot, and `figstyle` holds what they share. Every figure is drawn from
the report's tables (`tables.ReportTables`) and its runs, after the sentences and before the document.
"""
from __future__ import annotations

from gptlab.report.figures import effect_figures
from gptlab.report.figures.run_figures import (effects_by_scale, forest_rows, level_effects, precision_curves,
                                               throughput, val_curves)
from gptlab.report.figures.tuning_figure import isolation_plot
from gptlab.report.load import Results
from gptlab.report.tables import ReportTables


def make_figures(res: Results, tables: ReportTables) -> dict[str, bytes]:
    """The figures every sweep may get (curves, levels, effects, throughput): file name -> PNG bytes."""
    margin = tables.margin
    figs = {"val_curves.png": val_curves(res, tables.level_curves), "level_effects.png": level_effects(res, tables.levels),
            "forest.png": effect_figures.forest(forest_rows(tables, res), margin),
            **({} if len(tables.arms.columns) else {  # a design of arms has no interactions or simple effects
                "interactions.png": effect_figures.interaction_plots(tables.pair_means, res),
                "simple_effects.png": effect_figures.simple_effects(tables.simple, tables.main, res, margin)}),
            "effects_by_step.png": effect_figures.effects_by_step(tables.by_step, res, margin),
            "throughput.png": throughput(res)}
    return {name: png for name, png in figs.items() if png is not None}


def sweep_figures(res: Results, tables: ReportTables) -> dict[str, bytes]:
    """The figures of the kinds of sweep only some are: adaptive seeds, scale factors, tuned settings."""
    adaptive, tuned = tables.adaptive, tables.tuned
    figs = {"precision.png": precision_curves(adaptive.curve) if adaptive is not None else None,
            "effects_by_scale.png": effects_by_scale(tables.by_scale, res) if len(tables.by_scale) else None,
            "isolation.png": isolation_plot(res, tuned.table, tuned.keys, tuned.ceiling, tuned.curves)
            if tuned is not None and tuned.n_selection else None}
    return {name: png for name, png in figs.items() if png is not None}


def report_figures(res: Results, tables: ReportTables) -> dict[str, bytes]:
    """Every figure of the report of `res`, in the report's order: file name -> PNG bytes."""
    return {**make_figures(res, tables), **sweep_figures(res, tables)}
