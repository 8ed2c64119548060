"""Reporting: turn a sweep's results directory into reports/NAME/ (report.md, report.html, figures, tables).

Public API: `write_report(results_dir, reports_dir=None, *, margin=None) -> Path`, `default_reports_dir`,
`load_results`, `Results`, `ReportError`. CLI: `python -m gptlab.report results/NAME [--out DIR]`.
Modules: `load` (reading results), `design` (cells and contrasts), `models` (the models, stated
once, and the error of a contrast), `calls` (Holm, TOST, margin), `effects` (every effect of one
outcome), `stats` (which runs, tables, along training, divergence), `verdicts` (sentences), `figures` (which figures, and the run figures),
`effect_figures` (forest, interactions, simple effects, along training), `figstyle` (shared look),
`samples` (text from checkpoints), `document` (content), `quotes` (row references in a discussion),
`render` (Markdown/HTML), `tuning` (a tuned sweep's "Tuned comparison"; `picks`, `tuning_figure`),
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


def resolve_margin(res: Results, margin: float | None) -> float:
    """The equivalence margin: `margin` if given, else sweep.yaml's report.equivalence_margin, else the default."""
    from gptlab.report.calls import DEFAULT_MARGIN, check_margin
    if margin is not None:
        return check_margin(margin, "--margin")
    section = res.spec.get("report") or {}
    if not isinstance(section, dict) or "equivalence_margin" not in section:
        return DEFAULT_MARGIN
    return check_margin(section["equivalence_margin"], f"{res.results_dir / 'sweep.yaml'}: report.equivalence_margin")


def write_report(results_dir: Path | str, reports_dir: Path | str | None = None, *,
                 margin: float | None = None) -> Path:
    """Regenerate the report of `results_dir` (from its files alone) and return the report dir.

    `margin` (nats/char) overrides the sweep's `report.equivalence_margin` (default 0.01). Every
    file is written atomically; files the previous generation wrote (its `.manifest.json`) that this
    one does not are removed, and nothing else in the folder is touched. Raises `ReportError` (or `GptlabError` for a bad margin) before writing anything when
    the input is invalid.
    """
    from gptlab.report import document, figures, samples, scale
    from gptlab.report.render import to_html, to_markdown
    from gptlab.report.tables import compute_tables
    from gptlab.runio import atomic_write_bytes, atomic_write_text

    res = load_results(results_dir)
    margin = resolve_margin(res, margin)
    out = Path(reports_dir) if reports_dir is not None else default_reports_dir(results_dir)
    bundle = compute_tables(res, margin)
    st, adaptive, by_scale, tuned = bundle.stats, bundle.adaptive, bundle.by_scale, bundle.tuned
    figs = figures.make_figures(res, bundle.levels, st)
    figs["precision.png"] = figures.precision_curves(adaptive.curve) if adaptive is not None else None
    figs["effects_by_scale.png"] = figures.effects_by_scale(by_scale, res) if len(by_scale) else None
    figs["isolation.png"] = tuned.figure if tuned is not None else None
    figs = {name: png for name, png in figs.items() if png is not None}
    tables = bundle.files
    blocks = document.build(res, bundle.cells, bundle.levels, st, bundle.failures, figs, samples.samples(res), adaptive,
                            (by_scale, scale.scale_verdicts(by_scale, res)), tables, tuned)
    for name, df in tables.items():
        atomic_write_text(out / "tables" / f"{name}.csv", df.to_csv(index=False))
    for name, png in figs.items():
        atomic_write_bytes(out / "figures" / name, png)
    atomic_write_text(out / "report.md", to_markdown(blocks))
    atomic_write_text(out / "report.html", to_html(blocks, f"Ablation report: {res.name}"))
    written = sorted([f"tables/{n}.csv" for n in tables] + [f"figures/{n}" for n in figs] + ["report.md", "report.html"])
    _replace_manifest(out, written)
    log.info("report written to %s", out)
    return out


MANIFEST = ".manifest.json"  # the files the last generation of a report wrote, relative to its folder


def _replace_manifest(out: Path, written: list[str]) -> None:
    """Remove what the previous generation wrote and this one did not; record this generation."""
    import json

    from gptlab.runio import atomic_write_text

    try:
        previous = json.loads((out / MANIFEST).read_text(encoding="utf-8")).get("files", [])
    except (OSError, ValueError, AttributeError):
        previous = []
    for name in previous:
        path = (out / str(name)).resolve()
        if name not in written and path.is_relative_to(out.resolve()) and path.is_file():
            path.unlink()
    atomic_write_text(out / MANIFEST, json.dumps({"files": written}, indent=1) + "\n")
