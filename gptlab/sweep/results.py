"""The results layout of a sweep (DESIGN.md) and `summary.csv`, rebuilt from the run directories.

`summary.csv` is never updated incrementally: it is rewritten from the runs' `summary.json`
files, so it cannot drift out of step with them, whatever interrupted the sweep.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from gptlab.layout import SUMMARY_CSV, run_path
from gptlab.run.rundir import RunDir
from gptlab.runio import write_csv
from gptlab.sweep.spec import Run, SweepSpec

METRIC_FIELDS = ["status", "best_val_loss", "best_step", "final_val_loss", "final_train_loss", "params",
                 "params_non_embedding", "tokens_per_sec", "wall_s", "error", "best_val_bpc"]


def run_dir(results_dir: Path, run: Run) -> RunDir:
    return RunDir(run_path(results_dir, run.run_id))


def summary_columns(spec: SweepSpec) -> list[str]:
    return ["run_id", "seed", *spec.grid, *METRIC_FIELDS]


def summary_rows(spec: SweepSpec, results_dir: Path, runs: list[Run] | None = None) -> list[dict[str, Any]]:
    """One row per run of `runs` (default: the spec's) that has a summary.json, in grid order."""
    rows = []
    for run in spec.runs if runs is None else runs:
        folder = run_dir(results_dir, run)
        if not (folder / RunDir.SUMMARY).exists():
            continue
        summary = folder.summary() or {"status": "failed", "error": f"unreadable {folder / RunDir.SUMMARY}"}
        rows.append({"run_id": run.run_id, "seed": run.seed, **run.factors,
                     **{k: summary.get(k) for k in METRIC_FIELDS}})
    return rows


def write_summary(spec: SweepSpec, results_dir: Path, runs: list[Run] | None = None) -> list[dict[str, Any]]:
    rows = summary_rows(spec, results_dir, runs)
    write_csv(results_dir / SUMMARY_CSV, rows, summary_columns(spec))
    return rows
