"""Reporting: turn a sweep's results directory into reports/NAME/ (report.md, report.html, figures, tables).

Public API: `write_report(results_dir, reports_dir=None) -> Path`, `default_reports_dir`,
`load_results`, `Results`, `ReportError`. CLI: `python -m gptlab.report results/NAME [--out DIR]`.
Modules: `load` (reading results), `stats` (tables, models, verdicts), `figures` (seaborn PNGs),
`samples` (text from checkpoints), `document` (content), `render` (Markdown/HTML, atomic writes),
`fmt` (number precision), `synthetic` (fake results for tests and benchmarks).
"""
from __future__ import annotations

import logging
from pathlib import Path

from gptlab.report.load import ReportError, Results, load_results

__all__ = ["write_report", "default_reports_dir", "load_results", "Results", "ReportError"]
log = logging.getLogger(__name__)


def default_reports_dir(results_dir: Path | str) -> Path:
    """results/NAME -> reports/NAME next to the results/ folder."""
    path = Path(results_dir).resolve()
    return path.parent.parent / "reports" / path.name


def write_report(results_dir: Path | str, reports_dir: Path | str | None = None) -> Path:
    """Regenerate the report of `results_dir` (from its files alone) and return the report dir.

    Every file is written atomically; figures and tables of an older report that no longer apply
    are removed. Raises `ReportError` when `results_dir` is not a sweep's results directory.
    """
    from gptlab.report import document, figures, samples, stats
    from gptlab.report.render import atomic_write, to_html, to_markdown

    res = load_results(results_dir)
    out = Path(reports_dir) if reports_dir is not None else default_reports_dir(results_dir)
    cells, levels, eff = stats.cell_table(res), stats.level_table(res), stats.effects(res)
    failures = stats.failure_table(res)
    figs = figures.make_figures(res, levels)
    blocks = document.build(res, cells, levels, eff, failures, figs, samples.samples(res))
    tables = {"cells": cells, "levels": levels, "main_effects": eff.main,
              "interactions": eff.interactions, "failures": failures}
    for name, df in tables.items():
        atomic_write(out / "tables" / f"{name}.csv", df.to_csv(index=False))
    for name, png in figs.items():
        atomic_write(out / "figures" / name, png)
    for folder, keep in (("tables", {f"{n}.csv" for n in tables}), ("figures", set(figs))):
        for stale in (out / folder).glob("*.csv" if folder == "tables" else "*.png"):
            if stale.name not in keep:
                stale.unlink()
    atomic_write(out / "report.md", to_markdown(blocks))
    atomic_write(out / "report.html", to_html(blocks, f"Ablation report: {res.name}"))
    log.info("report written to %s", out)
    return out
