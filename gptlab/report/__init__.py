"""Reporting: turn a sweep's results directory into reports/NAME/ (report.md, report.html, figures, tables).

Public API: `write_report(results_dir, reports_dir=None, *, margin=None) -> Path`, `default_reports_dir`,
`load_results`, `Results`, `ReportError`. CLI: `python -m gptlab.report results/NAME [--out DIR] [--margin NATS]`.
The equivalence margin is resolved once, by the load step, into `Results` (`Results.margin`), where every step reads it.
A report flows one way, each step from the ones before it, each in its folder: `load` (results/NAME/
into `Results`, and the text samples: the one step that reads files) -> `tables` (every number, one
`ReportTables` bundle, from `analyses`, `scale`, `arms` and the others over `gptlab.stats`) -> `sentences` (every
sentence about the results) -> `figures` (one `Figures` bundle) -> `document` (the blocks in order, with `sections`
and `quotes`) -> `document.render` (Markdown, HTML and every file of reports/NAME/). `fmt` holds the number
precision, `study` the notebook API over the same bundles, `export` the TensorBoard export. Each kind of sweep
(`gptlab/kinds/`, a plugin's) takes part in every step through its hooks (`kinds`: `REPORT_KINDS`), its numbers,
sentences and figures in the bundles' `kinds` mappings.
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


def write_report(results_dir: Path | str, reports_dir: Path | str | None = None, *,
                 margin: float | str | None = None) -> Path:
    """Regenerate the report of `results_dir` (from its files alone) and return the report dir.

    Load (the results and the text samples), then the numbers, the sentences, the figures and the document,
    then render it (`render.write`: atomic writes; files the previous generation wrote and this one does not
    are removed; texts drawn from checkpoints are kept in the report's own samples.json, never in
    `results_dir`). `margin` (nats/char; a number or its text, `--margin`'s) overrides the sweep's
    `report.equivalence_margin` (default 0.01): the load step resolves it (`load_results`).
    Raises `ReportError` (or `GptlabError` for a bad margin) before writing anything when the input is invalid.
    """
    from gptlab.report import document, figures, sentences
    from gptlab.report.document import render
    from gptlab.report.kinds import kind_sections
    from gptlab.report.load import samples
    from gptlab.report.tables import compute_tables

    res = load_results(results_dir, margin)  # a bad margin is refused before any checkpoint is sampled
    out = Path(reports_dir) if reports_dir is not None else default_reports_dir(results_dir)
    texts = samples.gather(res, out)
    tables = compute_tables(res)
    words = sentences.write(res, tables)
    figs = figures.report_figures(res, tables)
    files, images = tables.files(words.verdicts), figs.files()
    kinds = kind_sections(res, tables, words, figs, {**files, **images})
    blocks = document.build(res, tables, words, figs, texts.shown, kinds)
    cache = texts.cache_text()
    for kind in kinds:
        files, images = {**files, **kind.tables}, {**images, **kind.figures}
    render.write(out, f"Ablation report: {res.name}", blocks, files, images,
                 {samples.SAMPLES_JSON: cache} if cache is not None else {})
    log.info("report written to %s", out)
    return out
