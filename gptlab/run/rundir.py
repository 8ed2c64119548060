"""The run-directory protocol: what lives in `results/NAME/runs/RUN_ID/` and how it is written.

`RunDir` is the one owner of a run folder's file names, of the config check that keeps two
configs out of one folder, of checkpoints, metric rows, the summary (read under today's status
rule: `gptlab.run.reclassify`, as a `RunSummary`: the one place summary.json's keys become typed
fields), the failure record, the in-flight marker and the live progress file (`place.json` is
`gptlab.run.summary_csv`'s). Which statuses count as finished is `gptlab.statuses`'. Every file goes
through `gptlab.runio`'s atomic write. The files themselves are described in docs/CONTRACTS.md.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import socket
import time
import traceback
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator, Mapping

from gptlab.errors import GptlabError, first_line
from gptlab.run.config import RunConfig, resolve_run_config
from gptlab.runio import (
    atomic_write,
    atomic_write_text,
    read_csv_rows,
    read_json,
    read_mapping,
    read_number_rows,
    read_yaml,
    write_csv,
    write_json,
    write_yaml,
)
from gptlab.statuses import FAILED, FINISHED, STATUSES

METRIC_COLUMNS = ["step", "train_loss", "val_loss", "lr", "grad_norm", "tokens", "elapsed_s"]
TEST_BLOCK_COLUMNS = ["block", "chars", "tokens", "loss"]  # test_blocks.csv: loss in nats/token


class CorruptCheckpoint(GptlabError):
    """A checkpoint file that exists but cannot be loaded (truncated, overwritten): the message names it."""


@dataclass(frozen=True)
class RunSummary:
    """summary.json as the lab reads it: the keys its modules read, typed (None: not in the file), the others in `extra`;
    read from the file by `from_mapping` alone (`RunDir.summary`). `to_dict` gives the file's mapping back, in order."""

    run_id: str | None = None
    seed: int | None = None
    status: str | None = None  # one of `gptlab.statuses.STATUSES`
    error: str | None = None  # why it failed, diverged or was judged collapsed or unstable
    best_val_loss: float | None = None  # the run's metrics, as summary.csv's row holds them (`summary_csv`)
    best_step: int | None = None
    best_val_bpc: float | None = None
    best_test_loss: float | None = None
    best_test_bpc: float | None = None
    final_val_loss: float | None = None
    final_train_loss: float | None = None
    params: int | None = None
    params_non_embedding: int | None = None
    tokens_per_sec: float | None = None
    wall_s: float | None = None
    started_at: str | None = None  # when the run first started training (UTC, ISO 8601)
    compile_s: float | None = None
    peak_rss_mb: float | None = None
    peak_gpu_mb: float | None = None
    diverged_step: int | None = None
    val_bpc_factor: float | None = None  # val_loss (nats/token) x this = bits/char
    unigram_val_loss: float | None = None  # the report's ceiling, per token
    reclassified: bool | None = None  # judged again under today's status rule (`gptlab.run.reclassify`)
    environment: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # the file's other keys (config, population, ...)
    order: tuple[str, ...] = ()  # the file's keys, in its order

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RunSummary:
        return cls(**{k: v for k, v in data.items() if k in TYPED}, extra={k: v for k, v in data.items() if k not in TYPED},
                   order=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) if k in TYPED else self.extra[k] for k in self.order}


TYPED = frozenset(f.name for f in fields(RunSummary)) - {"extra", "order"}  # the keys a RunSummary types


class RunDir:
    """One run's folder; every read and write of its files goes through here."""

    CONFIG = "config.yaml"  # the resolved run config
    METRICS = "metrics.csv"  # one row per log interval and per evaluation
    SUMMARY = "summary.json"  # written last: its presence with a FINISHED status means done
    LOG = "train.log"  # the run's log records
    ERROR = "error.txt"  # the traceback of a failed run
    LAST = "ckpt_last.pt"  # the checkpoint a killed run resumes from
    BEST = "ckpt_best.pt"  # the checkpoint with the best validation loss
    RUNNING = "running.json"  # present while a worker trains the run (who and since when)
    PROGRESS = "progress.json"  # step, loss and time of a run in flight, for the live display
    LOCK = ".lock"  # held by the process training the run
    SAMPLE = "sample.txt"  # text sampled from the best checkpoint at the end of training
    TEST_BLOCKS = "test_blocks.csv"  # per-block test losses at the best checkpoint (runs with a test split)
    BRANCHES = "branches.json"  # a shared trunk's branch points: [{step, run_id, config}] (gptlab.run.branching)
    TRUNK = "trunk.json"  # a branch's origin, {run_id, step, shared_s}: its state until `step` is that trunk's
    PLACE = "place.json"  # the run's row of summary.csv but its metrics (gptlab.run.summary_csv), by the sweep
    # The small files a remote worker ships back; summary.json is last, the driver's "finished" mark.
    SHIPPED = (CONFIG, METRICS, LOG, ERROR, SAMPLE, TEST_BLOCKS, SUMMARY)

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # -- state -------------------------------------------------------------------------------
    def summary(self) -> RunSummary | None:
        """The run's summary.json, or None when there is none (or it cannot be read).

        A summary that names another run (its `run_id` is not this folder's name: files copied or moved by
        hand) is not this run's result: it reads as a failed run saying so, never as the other run's numbers.
        One judged by an earlier status rule is judged again from its curve (`gptlab.run.reclassify`)."""
        if (summary := read_mapping(self / self.SUMMARY)) is None:
            return None
        if (other := summary.get("run_id")) not in (None, self.path.name):
            return RunSummary.from_mapping({"run_id": self.path.name, "status": FAILED, "error": f"{self.path} holds "
                                            f"the results of run {other!r}, not its own; delete the folder (or put "
                                            "that run's files back in their own) and rerun"})
        from gptlab.run.reclassify import needs_rule, reclassified  # an earlier rule's: judged again (nothing written)

        if needs_rule(summary):
            summary = reclassified(summary, self / self.CONFIG, self.metric_rows())
        return RunSummary.from_mapping(summary)

    def state(self) -> str:
        """ok | diverged | collapsed | unstable | failed (finished with that status), partial (has a checkpoint), pending."""
        if (self / self.SUMMARY).exists():
            summary = self.summary()
            status = summary.status if summary else None
            return status if status in STATUSES else FAILED
        return "partial" if (self / self.LAST).exists() else "pending"

    def finished_summary(self) -> RunSummary | None:
        """The summary of a finished run (ok, diverged, collapsed or unstable), else None."""
        summary = self.summary()
        return summary if summary and summary.status in FINISHED else None

    # -- config ------------------------------------------------------------------------------
    def claim(self, config: RunConfig) -> None:
        """Record `config` as this folder's run; refuse a folder that holds another config."""
        self.path.mkdir(parents=True, exist_ok=True)
        path = self / self.CONFIG
        if path.exists() and not _same_config(read_yaml(path), config):
            raise GptlabError(f"{self.path} holds a run with a different config; use another directory")
        write_yaml(path, config.to_dict())

    def holds(self, config: Any) -> bool:
        """Whether this folder records `config` (a `RunConfig`, or another file's record: a checkpoint's) as its run
        (its config.yaml; a folder without one records none)."""
        try:
            recorded = read_yaml(self / self.CONFIG)
        except Exception:  # missing, unreadable, not UTF-8 or not YAML: it records no config
            return False
        return _same_config(recorded, config)

    # -- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, state: dict[str, Any], *, best: bool = False) -> None:
        """Save `state` as the last checkpoint, and as the best one too when `best`."""
        import torch

        if best:
            atomic_write(self / self.BEST, lambda f: torch.save(state, f))
        atomic_write(self / self.LAST, lambda f: torch.save(state, f))

    def load_checkpoint(self, which: str = "last", map_location: Any = "cpu") -> dict[str, Any] | None:
        """The `last` or `best` checkpoint (tensors only, `weights_only=True`), or None if absent."""
        import torch

        path = self / (self.LAST if which == "last" else self.BEST)
        if not path.exists():
            return None
        try:
            return torch.load(path, map_location=map_location, weights_only=True)
        except Exception as err:  # a truncated or overwritten file: torch raises zipfile, pickle, EOF and runtime errors
            empty = path.stat().st_size == 0  # what a kill or a power cut may leave: torch's EOFError says nothing
            detail = "an empty file" if empty else f"{type(err).__name__}: {first_line(err, 120)}"
            raise CorruptCheckpoint(f"{path} cannot be read ({detail}); "
                                    "it is damaged (a full disk or a kill mid-write?)") from None

    # -- shared trunks (gptlab.run.branching) -----------------------------------------------
    def write_branches(self, branches: list[dict[str, Any]]) -> None:
        """Record the runs this one (a shared trunk) hands its state to, each at its branch point."""
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(self / self.BRANCHES, branches)

    def branches(self) -> list[dict[str, Any]]:
        """The branch points recorded by `write_branches` (none for a run that is no trunk)."""
        try:
            data = read_json(self / self.BRANCHES)
        except (OSError, ValueError):
            return []
        return data if isinstance(data, list) else []

    def branched_from(self) -> dict[str, Any] | None:
        """The trunk and step this run's state came from, or None for a run trained from step 0."""
        return read_mapping(self / self.TRUNK)

    def start_branch(self, config: RunConfig, origin: dict[str, Any], rows: list[dict[str, Any]],
                     state: dict[str, Any], best: dict[str, Any] | None) -> None:
        """Leave in this folder what a run of `config` killed at `state`'s step would have left.

        The last checkpoint goes last: until it lands, the folder is still pending (a kill before
        that leaves nothing a run would resume from, and the trunk writes it all again).
        """
        import torch

        self.claim(config)
        write_json(self / self.TRUNK, origin)
        self.write_metrics(rows)
        if best is not None:
            atomic_write(self / self.BEST, lambda f: torch.save(best, f))
        else:  # no evaluation before the branch point: nor may an earlier attempt's best be taken for one
            (self / self.BEST).unlink(missing_ok=True)
        atomic_write(self / self.LAST, lambda f: torch.save(state, f))

    # -- metrics, summary, failure -----------------------------------------------------------
    def write_metrics(self, rows: list[dict[str, Any]]) -> None:
        write_csv(self / self.METRICS, rows, METRIC_COLUMNS)

    def metric_rows(self) -> tuple[dict[str, float], ...] | None:
        """metrics.csv's rows as numbers (a value that is missing or not a number: NaN), None when it cannot be read;
        cached by the file's size and modification time (planners read every run's summary each round)."""
        try:
            st = (self / self.METRICS).stat()
        except OSError:
            return None
        return _metric_rows(str(self / self.METRICS), (st.st_size, st.st_mtime_ns))

    def resume_step(self) -> int:
        """The step a partial run resumes from: its last evaluated row (every evaluation is a checkpoint), 0 without
        one (read from metrics.csv: no checkpoint is loaded)."""
        rows = self.metric_rows() or ()
        steps = [r["step"] for r in rows if math.isfinite(r["val_loss"]) and math.isfinite(r["step"])]
        return int(max(steps, default=0))

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Write summary.json: `summary` is the file's mapping (`RunSummary.to_dict()` for one read back)."""
        write_json(self / self.SUMMARY, summary)

    def write_test_blocks(self, blocks: list[dict[str, Any]]) -> None:
        """The test split's per-block losses at the best checkpoint (`gptlab.run.evaluation.test_blocks`)."""
        write_csv(self / self.TEST_BLOCKS, blocks, TEST_BLOCK_COLUMNS)

    def test_blocks(self) -> list[dict[str, str]]:
        """The rows of `test_blocks.csv` as text (none for a run without a test split, or from before blocks)."""
        return read_csv_rows(self / self.TEST_BLOCKS)

    def record_failure(self, run_id: str, config: dict[str, Any], error: BaseException | str) -> dict[str, Any]:
        """Record a run that raised: `error.txt` holds the traceback, `summary.json` says failed."""
        self.path.mkdir(parents=True, exist_ok=True)
        if isinstance(error, BaseException):
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            line = first_line(error, empty="")
            message = f"{type(error).__name__}: {line}" if line else type(error).__name__
        else:
            text = message = error
        atomic_write_text(self / self.ERROR, text)
        summary = {"run_id": run_id, "seed": config.get("seed"), "status": FAILED, "error": message,
                   "log": str(self / self.ERROR), "config": config}
        self.write_summary(summary)
        return summary

    def clear_failure(self) -> bool:
        """Forget a failed outcome so the run trains again (from its checkpoint if it has one)."""
        summary = self.summary()
        if (self / self.SUMMARY).exists() and (summary is None or summary.status not in FINISHED):
            (self / self.SUMMARY).unlink()
            (self / self.ERROR).unlink(missing_ok=True)
            return True
        return False

    def clear_stale(self, keep_error: bool) -> None:
        """Remove what an earlier attempt left that would contradict a result just received."""
        stale = [self / self.RUNNING, self / self.PROGRESS, *self.path.glob("ckpt_*.pt")]
        if not keep_error:
            stale.append(self / self.ERROR)
        for path in stale:
            path.unlink(missing_ok=True)

    # -- a run in flight ---------------------------------------------------------------------
    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold this run's folder lock (an OS lock: released when its process dies, however it dies)."""
        from filelock import FileLock

        self.path.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self / self.LOCK)):
            yield

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Mark the run as in flight (process, host, start) while the block runs."""
        self.path.mkdir(parents=True, exist_ok=True)
        marker = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        atomic_write_text(self / self.RUNNING, json.dumps(marker))
        try:
            yield
        finally:
            self.clear_running()

    def is_running(self) -> bool:
        return (self / self.RUNNING).exists()

    def clear_running(self) -> None:
        (self / self.RUNNING).unlink(missing_ok=True)
        (self / self.PROGRESS).unlink(missing_ok=True)

    def write_progress(self, progress: dict[str, Any]) -> None:
        write_json(self / self.PROGRESS, progress)

    def progress(self) -> dict[str, Any] | None:
        """The last progress record of a run in flight, or None."""
        return read_mapping(self / self.PROGRESS)


@functools.lru_cache(maxsize=4096)
def _metric_rows(path: str, stamp: tuple[int, int]) -> tuple[dict[str, float], ...] | None:
    """One metrics.csv read (`RunDir.metric_rows`); `stamp` (size, mtime) keys the cache to the file's version."""
    return read_number_rows(path, METRIC_COLUMNS)


def _same_config(recorded: Any, config: Any) -> bool:
    """Whether a folder's recorded config is `config` (a `RunConfig`, or another file's record), once settings added
    since either was written take their defaults: a run killed before an upgrade (no `data.test_fraction` in its
    config.yaml) resumes rather than being refused. Only what was read from a file is resolved."""
    settings = config.to_dict() if isinstance(config, RunConfig) else config
    if recorded == settings:
        return True
    try:  # a RunConfig resolves to itself
        return resolve_run_config(recorded).to_dict() == resolve_run_config(config).to_dict()
    except GptlabError:  # not a run config at all: another folder's file
        return False
