"""`ResultsDir`, the results-folder protocol: the file names of `results/NAME/`, its runs and finished runs.

The partner of `gptlab.run.rundir.RunDir`, which owns one run's folder, `results/NAME/runs/RUN_ID/`:
this module owns every other name in `results/NAME/` (the layout of docs/RESULTS.md and docs/CONTRACTS.md)
and nothing else does. The sweep, the executors' collection, the report and `gptlab.sample` reach a
file there through a `ResultsDir`, never by joining names to a bare path. Reading nothing on
construction, it is as cheap as the path it wraps.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Collection

from gptlab.run.rundir import RunDir
from gptlab.runio import read_json, remove_temp_files
from gptlab.statuses import FINISHED

SWEEP_YAML = "sweep.yaml"  # the spec as resolved, written before any run
SUMMARY_CSV = "summary.csv"  # one row per run, rebuilt from the runs' summary.json
SAMPLES_JSON = "samples.json"  # text samples kept by the report
ROUNDS_CSV = "rounds.csv"  # one row per round of an adaptive sweep
TUNING_CSV = "tuning.csv"  # a tuned sweep's selection: per cell and setting, the loss and the pick
REFINE_CSV = "refine.csv"  # a refining tuner's rounds: each cell's pick, its confidence and what it tried next
STEP_TIMES_CSV = "step_times.csv"  # a `worth:` sweep's arms, their training steps timed side by side after the runs
DISCUSSION_MD = "discussion.md"  # written by a person, read by the report
RUNS = "runs"  # the folder of run directories
LOCK = ".lock"  # the OS lock a sweep holds while it writes here (gptlab.sweep.lock)
LOCK_HOLDER = ".lock.json"  # who holds that lock, for the message a second sweep gets
GPU_SLOTS = ".gpu_slots"  # lock files of the GPU slots the local workers share (executor.runs_per_gpu)


@dataclass(frozen=True)
class ResultsDir:
    """One sweep's results folder, `results/NAME/`: every path in it comes from here.

    Built from a `str`, a `Path` or another `ResultsDir`; it is path-like (`os.fspath`, `Path(...)`),
    so functions that take a path take it too, and `str()` of it is the folder, for messages.
    """

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))  # frozen: the one write, normalising the argument

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    @property
    def name(self) -> str:
        """The folder's name (results/NAME -> NAME)."""
        return self.path.name

    # -- the folder's files ------------------------------------------------------------------
    @property
    def sweep_yaml(self) -> Path:
        return self.path / SWEEP_YAML

    @property
    def summary_csv(self) -> Path:
        return self.path / SUMMARY_CSV

    @property
    def samples_json(self) -> Path:
        return self.path / SAMPLES_JSON

    @property
    def rounds_csv(self) -> Path:
        return self.path / ROUNDS_CSV

    @property
    def tuning_csv(self) -> Path:
        return self.path / TUNING_CSV

    @property
    def refine_csv(self) -> Path:
        return self.path / REFINE_CSV

    @property
    def step_times_csv(self) -> Path:
        return self.path / STEP_TIMES_CSV

    @property
    def discussion_md(self) -> Path:
        return self.path / DISCUSSION_MD

    @property
    def lock(self) -> Path:
        return self.path / LOCK

    @property
    def lock_holder(self) -> Path:
        return self.path / LOCK_HOLDER

    def holder(self) -> str:
        """Who holds the folder's lock, from the note its holder wrote (`sweep.lock.SweepLock`), in words."""
        try:
            info = read_json(self.lock_holder)
            return f"process {info['pid']} on {info['host']} since {info['since']}: {info['command'] or 'a sweep'}"
        except (OSError, ValueError, KeyError, TypeError):
            return "a process that has not said who it is"

    @property
    def gpu_slots(self) -> Path:
        """`.gpu_slots/`: one lock file per GPU slot, taken by the worker training on it."""
        return self.path / GPU_SLOTS

    # -- its runs ----------------------------------------------------------------------------
    @property
    def runs_dir(self) -> Path:
        """`results/NAME/runs/`, the folder of run directories."""
        return self.path / RUNS

    def run(self, run_id: str) -> RunDir:
        """The folder of run `run_id`, `results/NAME/runs/RUN_ID` (it need not exist yet)."""
        return RunDir(self.runs_dir / str(run_id))

    def run_ids(self) -> list[str]:
        """The ids of the run folders on disk, in name order (none before the first run starts)."""
        if not self.runs_dir.is_dir():
            return []
        return sorted(p.name for p in self.runs_dir.iterdir() if p.is_dir())

    def finished_runs(self, skip: Collection[str] = ()) -> list[RunDir]:
        """The run folders holding a finished run (ok or diverged), in name order, except the ids in `skip`
        (whose summaries are not even read: a sweep of thousands skips its own runs cheaply)."""
        folders = [self.run(run_id) for run_id in self.run_ids() if run_id not in skip]
        return [folder for folder in folders if folder.state() in FINISHED]

    def remove_sweep_temp_files(self) -> int:
        """Delete what a sweep killed mid-write left of the files it writes (temp files of summary.csv,
        sweep.yaml, rounds.csv, tuning.csv, refine.csv and each run's place.json); how many. Only under
        the sweep's lock: another sweep's temp files would go too."""
        removed = remove_temp_files(self.path, (SWEEP_YAML, SUMMARY_CSV, ROUNDS_CSV, TUNING_CSV, REFINE_CSV))
        return removed + sum(remove_temp_files(self.run(run_id).path, (RunDir.PLACE,)) for run_id in self.run_ids())

    @classmethod
    def holding(cls, run_dir: str | os.PathLike[str]) -> ResultsDir | None:
        """The results folder a run folder sits in (`NAME/runs/RUN_ID` -> `NAME`), None for a folder elsewhere."""
        path = Path(run_dir)
        return cls(path.parent.parent) if path.parent.name == RUNS else None
