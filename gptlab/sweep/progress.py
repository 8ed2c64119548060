"""What the console shows while a sweep trains: every run in flight, live, and each run as it ends.

Workers write each run's step and loss to its `progress.json` (at most every 2 s, see
`gptlab.run.runner`); a thread here reads the runs in flight every `every_s` seconds. On a
terminal, rich draws a live table (run, step, loss, ETA) under the lines of finished runs; in a
log file or a pipe, one plain line per run in flight is printed every `every_s` seconds instead,
so a long sweep shows it is alive from its first minute.
"""
from __future__ import annotations

import collections
import math
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, TextIO

from gptlab.executors.base import RunResult
from gptlab.run.resultsdir import ResultsDir
from gptlab.statuses import COLLAPSED, DIVERGED, FAILED, UNSTABLE
from gptlab.sweep.reuse import run_label
from gptlab.sweep.runs import Run

LIVE_EVERY_S = 10.0  # seconds between two looks at the runs in flight


def clock(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@dataclass(frozen=True)
class InFlight:
    """One run being trained, as its last progress record describes it."""

    label: str  # cell and seed
    step: int
    max_iters: int
    train_loss: float | None
    seconds: float  # training + evaluation seconds so far

    @property
    def fraction(self) -> float:
        return min(1.0, self.step / max(1, self.max_iters))

    @property
    def eta(self) -> float | None:
        return self.seconds / self.step * (self.max_iters - self.step) if self.step else None

    def line(self) -> str:
        loss = "-" if self.train_loss is None else f"{self.train_loss:.4f}"
        return (f"  running {self.label}: step {self.step}/{self.max_iters} ({100 * self.fraction:.0f}%), "
                f"train loss {loss}, ETA {clock(self.eta)}")


class Progress:
    """Live progress of one sweep; use as a context manager around the backend's run."""

    def __init__(self, runs: Sequence[Run], todo: Sequence[Run], results_dir: ResultsDir | Path, workers: int,
                 stream: TextIO, every_s: float | None = None, live: bool | None = None, stage: str = "") -> None:
        self.stage = f"{stage}: " if stage else ""  # e.g. "round 2 of 2" in an adaptive sweep
        self.runs, self.workers, self.stream = list(runs), max(1, workers), stream
        self.results_dir = ResultsDir(results_dir)
        self.labels = {r.run_id: f"{run_label(r.run_id)} seed {r.seed}" for r in runs}  # cell, setting, length
        self.open = {r.run_id: r for r in todo}  # runs of this session not finished yet
        self.total, self.done = len(self.runs), len(self.runs) - len(todo)
        self.every_s = LIVE_EVERY_S if every_s is None else every_s
        self.seconds: list[float] = []  # wall seconds of the runs finished in this session
        self.statuses: collections.Counter[str] = collections.Counter()  # of the runs finished in this session
        self.start = time.perf_counter()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        use_live = stream.isatty() if live is None else live
        self.live = self._rich_live() if use_live else None

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> "Progress":
        if self.live is not None:
            self.live.start()
        self.thread = threading.Thread(target=self._watch, name="gptlab-progress", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        if self.live is not None:
            self.live.update(self._table([]), refresh=True)
            self.live.stop()

    # -- events ------------------------------------------------------------------------------
    def finished(self, result: RunResult) -> None:
        """One line for a run that ended (ok, collapsed, unstable, diverged or failed), with the sweep's ETA."""
        with self.lock:
            self.open.pop(result.run_id, None)
            self.done += 1
            self.statuses[result.status] += 1
            if math.isfinite(result.seconds):
                self.seconds.append(result.seconds)
            best = result.summary.best_val_loss
            loss = f"best val {best:.4f}" if isinstance(best, float) else "no val loss"
            took = f"{result.seconds:.1f} s" if math.isfinite(result.seconds) else "-"
            filled = round(20 * self.done / self.total)
            line = (
                f"{self.stage}[{self.done:>{len(str(self.total))}}/{self.total}] "
                f"{self.labels.get(result.run_id, result.run_id)}: "
                f"{result.status}, {loss}, {took}  |{'#' * filled}{'.' * (20 - filled)}| "
                f"elapsed {clock(self._elapsed())}, ETA {clock(self._eta(self._in_flight()))}{self.tally()}"
            )
            self._print(line)
            if self.live is not None:
                self.live.update(self._table(self._in_flight()), refresh=True)

    # -- the watcher thread ------------------------------------------------------------------
    def _watch(self) -> None:
        while not self.stop.wait(self.every_s):
            with self.lock:
                flying = self._in_flight()
                if self.live is not None:
                    self.live.update(self._table(flying), refresh=True)
                elif flying:
                    lines = [f.line() for f in flying]
                    lines.append(f"  sweep: {self.stage}{self.done}/{self.total} runs finished{self.tally()}, "
                                 f"{len(flying)} in flight, elapsed {clock(self._elapsed())}, ETA {clock(self._eta(flying))}")
                    self._print("\n".join(lines))

    def _in_flight(self) -> list[InFlight]:
        flying = []
        for run_id, run in list(self.open.items()):
            folder = self.results_dir.run(run_id)
            record = folder.progress() if folder.is_running() else None
            if not record or not isinstance(record.get("step"), int):
                continue
            loss = record.get("train_loss")
            flying.append(InFlight(self.labels[run_id], record["step"], int(record.get("max_iters") or 0),
                                   loss if isinstance(loss, float) else None,
                                   float(record.get("train_s") or 0) + float(record.get("eval_s") or 0)))
        return flying

    def tally(self) -> str:
        """', 3 collapsed, 1 diverged' for the runs of this session that did not train (counted apart: they are
        results, not errors), then the failed ones; '' while every run finished ok."""
        parts = [f"{self.statuses[s]} {s}" for s in (COLLAPSED, UNSTABLE, DIVERGED, FAILED) if self.statuses[s]]
        return "".join(f", {p}" for p in parts)

    def _elapsed(self) -> float:
        return time.perf_counter() - self.start

    def _eta(self, flying: list[InFlight]) -> float | None:
        """Seconds until the sweep ends: the work left in run-lengths, spread over the workers."""
        if self.seconds:
            per_run = statistics.fmean(self.seconds)
        else:
            lengths = [f.seconds / f.fraction for f in flying if f.fraction > 0]
            if not lengths:
                return None
            per_run = statistics.fmean(lengths)
        waiting = len(self.open) - len(flying)
        left = waiting + sum(1 - f.fraction for f in flying)
        return left * per_run / self.workers

    # -- output ------------------------------------------------------------------------------
    def _print(self, text: str) -> None:
        if self.live is not None:
            self.live.console.print(text, highlight=False, markup=False, soft_wrap=True)
        else:
            print(text, file=self.stream, flush=True)

    def _rich_live(self) -> Any:
        from rich.console import Console
        from rich.live import Live

        return Live(self._table([]), console=Console(file=self.stream), auto_refresh=False,
                    transient=True, redirect_stdout=False, redirect_stderr=False)

    def _table(self, flying: list[InFlight]) -> Any:
        """The live view: the sweep's line, then one row per run in flight."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None)
        for column in ("run", "step", "train loss", "ETA"):
            table.add_column(column, justify="left" if column == "run" else "right")
        for f in flying:
            table.add_row(f.label, f"{f.step}/{f.max_iters}", "-" if f.train_loss is None else f"{f.train_loss:.4f}",
                          clock(f.eta))
        header = (f"{self.stage}{self.done}/{self.total} runs finished{self.tally()}, {len(flying)} in flight, "
                  f"elapsed {clock(self._elapsed())}, ETA {clock(self._eta(flying))}")
        return Group(Text(header, style="bold"), table)
