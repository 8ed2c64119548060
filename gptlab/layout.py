"""The results layout (DESIGN.md): the file names of `results/NAME/`, owned here and nowhere else.

A run's own folder, `results/NAME/runs/RUN_ID/`, is `gptlab.run.rundir.RunDir`'s.
"""
from __future__ import annotations

from pathlib import Path

SWEEP_YAML = "sweep.yaml"  # the spec as resolved, written before any run
SUMMARY_CSV = "summary.csv"  # one row per run, rebuilt from the runs' summary.json
SAMPLES_JSON = "samples.json"  # text samples kept by the report
ROUNDS_CSV = "rounds.csv"  # one row per round of an adaptive sweep
TUNING_CSV = "tuning.csv"  # a tuned sweep's selection: per cell and setting, the loss and the pick
DISCUSSION_MD = "discussion.md"  # written by a person, read by the report
RUNS = "runs"  # the folder of run directories


def run_path(results_dir: str | Path, run_id: str) -> Path:
    """`results/NAME/runs/RUN_ID`."""
    return Path(results_dir) / RUNS / str(run_id)
