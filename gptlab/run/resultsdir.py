"""`ResultsDir`, the results-folder protocol: the file names of `results/NAME/`, its runs and finished runs.

The partner of `gptlab.run.rundir.RunDir`, which owns one run's folder, `results/NAME/runs/RUN_ID/`:
this module owns every other name in `results/NAME/` (the layout of docs/RESULTS.md and docs/CONTRACTS.md)
and nothing else does. The sweep, the executors' collection, the report and `gptlab.sample` reach a
file there through a `ResultsDir`, never by joining names to a bare path. Reading nothing on
construction, it is as cheap as the path it wraps.

It is also the one reader of `step_times.csv` (`ResultsDir.step_times`), which the sweep writes
(`gptlab.kinds.worth.step_times`) and reads back to keep it, and the report, `gptlab.load` and the TensorBoard export
read: one check of it for all, so that a damaged or foreign file is "not measured" everywhere, never data.
"""
from __future__ import annotations

import csv
import io
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Sequence

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
PREDICTIONS_CSV = "predictions.csv"  # a ladder's: what the rungs below predict for each rung, written before it trains
RUNG = "rung"  # summary.csv's column of a ladder's rung (`gptlab.kinds.ladder`), by which a rung's runs are read
RUNGS = "rungs"  # a ladder's folder of rung folders: rungs/RUNG/ holds that rung's tuning.csv, refine.csv, rounds.csv,
# step_times.csv
DISCUSSION_MD = "discussion.md"  # written by a person, read by the report
RUNS = "runs"  # the folder of run directories
LOCK = ".lock"  # the OS lock a sweep holds while it writes here (gptlab.sweep.lock)
LOCK_HOLDER = ".lock.json"  # who holds that lock, for the message a second sweep gets
GPU_SLOTS = ".gpu_slots"  # lock files of the GPU slots the local workers share (executor.runs_per_gpu)
STEP_TIME_COLUMNS = ("round", "seconds_per_step", "machine")  # step_times.csv's, after the timed cell's factors
MAX_SECONDS_PER_STEP = 1e6  # 11 days a step: beyond it a value is no timing (1e308 made a step cost of inf)

log = logging.getLogger("gptlab.run.resultsdir")


@dataclass(frozen=True)
class ResultsDir:
    """One sweep's results folder, `results/NAME/`: every path in it comes from here.

    Built from a `str`, a `Path` or another `ResultsDir`; it is path-like (`os.fspath`, `Path(...)`),
    so functions that take a path take it too, and `str()` of it is the folder, for messages.
    """

    path: Path
    rung: str = ""  # a ladder's rung: its own files (tuning.csv, refine.csv, rounds.csv) in rungs/RUNG/, its runs here

    def __post_init__(self) -> None:
        if isinstance(self.path, ResultsDir):  # another's rung is kept unless one is named
            object.__setattr__(self, "rung", self.rung or self.path.rung)
        object.__setattr__(self, "path", Path(self.path))  # frozen: the one write, normalising the argument

    def at_rung(self, name: str) -> ResultsDir:
        """The folder as one rung of a ladder sees it: the same runs, its own tuning, refine, rounds and step-times
        files."""
        return ResultsDir(self.path, rung=name)

    @property
    def own(self) -> Path:
        """Where the folder's per-rung files go: the folder itself, or a ladder rung's `rungs/RUNG/` (the atomic
        writes make it)."""
        return self.path / RUNGS / self.rung if self.rung else self.path

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
        return self.own / ROUNDS_CSV

    @property
    def tuning_csv(self) -> Path:
        return self.own / TUNING_CSV

    @property
    def refine_csv(self) -> Path:
        return self.own / REFINE_CSV

    @property
    def predictions_csv(self) -> Path:
        return self.path / PREDICTIONS_CSV

    def rung_dirs(self) -> list[ResultsDir]:
        """A ladder's rung folders on disk, by name (none for any other sweep)."""
        folder = self.path / RUNGS
        return [self.at_rung(p.name) for p in sorted(folder.iterdir()) if p.is_dir()] if folder.is_dir() else []

    @property
    def step_times_csv(self) -> Path:
        return self.own / STEP_TIMES_CSV  # a ladder's rungs each time their own steps

    def step_times(self, factors: Sequence[str]) -> list[dict[str, Any]] | None:
        """The rows of step_times.csv, `round` an int and `seconds_per_step` a float (the factors and `machine`
        as text); None where there is none, or one that is damaged or another sweep's (`step_time_rows`' check,
        logged in one line): such a file is never read as timings."""
        path = self.step_times_csv
        if not path.is_file():
            return None
        try:
            return step_time_rows(path.read_bytes(), factors)
        except (OSError, ValueError) as err:
            log.warning("%s: %s; read as not measured (a sweep times the steps again)", path, err)
            return None

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
        removed = remove_temp_files(self.path, (SWEEP_YAML, SUMMARY_CSV, ROUNDS_CSV, TUNING_CSV, REFINE_CSV,
                                                PREDICTIONS_CSV))
        removed += sum(remove_temp_files(rung.own, (ROUNDS_CSV, TUNING_CSV, REFINE_CSV)) for rung in self.rung_dirs())
        return removed + sum(remove_temp_files(self.run(run_id).path, (RunDir.PLACE,)) for run_id in self.run_ids())

    @classmethod
    def holding(cls, run_dir: str | os.PathLike[str]) -> ResultsDir | None:
        """The results folder a run folder sits in (`NAME/runs/RUN_ID` -> `NAME`), None for a folder elsewhere."""
        path = Path(run_dir)
        return cls(path.parent.parent) if path.parent.name == RUNS else None


def step_time_rows(raw: bytes, factors: Sequence[str]) -> list[dict[str, Any]]:
    """step_times.csv's rows, typed; ValueError (what is wrong, in a few words) for a file that is not whole.

    A cell's round timed twice (every row twice: a file appended to itself) would count as two rounds and narrow
    the step cost's CI; a time not in (0, MAX_SECONDS_PER_STEP] would make a cost of 0 or inf."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    if not text.strip() or reader.fieldnames is None:
        raise ValueError("empty")
    missing = [c for c in (*factors, *STEP_TIME_COLUMNS[:2]) if c not in reader.fieldnames]
    if missing:
        raise ValueError(f"no {missing[0]} column (columns: {', '.join(reader.fieldnames)})")
    rows, seen = [], set()
    for row in reader:
        line = reader.line_num
        typed = _step_time_row(row, factors, line)
        key = (*(typed[f] for f in factors), typed["round"])
        if key in seen:
            cell = ", ".join(f"{f}={typed[f]}" for f in factors)
            raise ValueError(f"line {line}: round {typed['round']} of {cell or 'the cell'} twice")
        seen.add(key)
        rows.append(typed)
    if not rows:
        raise ValueError("no rows")
    return rows


def _step_time_row(row: dict[Any, Any], factors: Sequence[str], line: int) -> dict[str, Any]:
    """One row of step_times.csv typed, or the ValueError naming its line and the value that is wrong."""
    if None in row:
        raise ValueError(f"line {line}: more values than columns")
    for column in (*factors, *STEP_TIME_COLUMNS[:2]):
        if row[column] is None:
            raise ValueError(f"line {line}: no {column}")
    text, seconds = row["round"], row["seconds_per_step"]
    if not text.strip().isdecimal():
        raise ValueError(f"line {line}: round {text!r} is not a round number (0, 1, ...)")
    try:
        value = float(seconds)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS_PER_STEP):
        raise ValueError(f"line {line}: seconds_per_step {seconds!r} is not a time per step "
                         f"(seconds above 0, at most {MAX_SECONDS_PER_STEP:g})")
    return {**{f: row[f] for f in factors}, "round": int(text), "seconds_per_step": value,
            "machine": row.get("machine") or ""}
