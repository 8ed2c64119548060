"""Which runs and columns a sweep's `summary.csv` holds; `gptlab.run.summary_csv` owns the file and writes it.

`summary.csv` is never updated incrementally: it is rewritten from the runs' `summary.json`
files, so it cannot drift out of step with them, whatever interrupted the sweep. Each run's place
in the sweep goes to its `place.json` as well, so that a reader can rebuild the file from the
folders alone. Where the files are is `gptlab.run.resultsdir.ResultsDir`'s.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from gptlab.run import summary_csv
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir, RunSummary
from gptlab.run.summary_csv import METRIC_FIELDS, TEST_FIELDS
from gptlab.statuses import FAILED
from gptlab.sweep.kinds import kinds_of
from gptlab.sweep.runs import Run, SweepSpec, TunedRun


def run_dir(results_dir: ResultsDir | Path, run: Run) -> RunDir:
    """The folder of a sweep's run."""
    return ResultsDir(results_dir).run(run.run_id)


def has_test_split(spec: SweepSpec, runs: list[Run] | None = None) -> bool:
    """Whether any run of the sweep (or of `runs`, planned beyond it) holds out a test split (test_fraction > 0)."""
    return any(run.config.data.test_fraction > 0 for run in [*spec.runs, *(runs or [])])


def metric_fields(spec: SweepSpec, runs: list[Run] | None = None) -> list[str]:
    """The columns of summary.csv after the factors: the test columns last, when the sweep has a test split."""
    return METRIC_FIELDS + (TEST_FIELDS if has_test_split(spec, runs) else [])


def summary_columns(spec: SweepSpec, runs: list[Run] | None = None) -> list[str]:
    # `role` last: a plain sweep keeps the first release's columns in their places for readers by position
    added: list[str] = []  # each kind's, in order: a tuned sweep's tuned keys, `worth:`'s lengths
    for _, kind in kinds_of(spec):
        added += kind.columns(spec, added)
    return ["run_id", "seed", *spec.grid, *added, *metric_fields(spec, runs), "role"]


def write_summary(spec: SweepSpec, results_dir: ResultsDir | Path, runs: list[Run] | None = None) -> list[RunSummary]:
    """Rewrite summary.csv, and each run's place.json, for every run of `runs` (default: the spec's) that has a
    summary.json, in grid order (`gptlab.run.summary_csv.write_summary` writes them); its rows' summaries (each with
    its run's id), what the planners and the end of the sweep read."""
    results_dir, entries = ResultsDir(results_dir), []
    for run in spec.runs if runs is None else runs:
        folder = results_dir.run(run.run_id)
        if not (folder / RunDir.SUMMARY).exists():
            continue
        summary = folder.summary() or RunSummary(status=FAILED, error=f"unreadable {folder / RunDir.SUMMARY}")
        entries.append(({"run_id": run.run_id, "seed": run.seed, **run.factors,
                         **(run.columns if isinstance(run, TunedRun) else {}),  # a tuned sweep: its setting
                         **{k: v for _, kind in kinds_of(spec) for k, v in kind.row(spec, run).items()},
                         "role": run.role}, summary))  # only estimation runs enter the effects
    summary_csv.write_summary(results_dir, entries, summary_columns(spec, runs))
    return [dataclasses.replace(summary, run_id=place["run_id"]) for place, summary in entries]
