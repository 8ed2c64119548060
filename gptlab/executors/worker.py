"""The worker side, shared by every backend: one `Task` in, one `RunResult` out.

`execute_run` never raises for a run's own errors: they are recorded in its run directory as a
failed run, so one bad run never stops its siblings. It sets the worker process's settings
(threads, TF32), imports the sweep's plugins, and marks the run as in flight while it trains.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import math
import time
from pathlib import Path
from typing import Iterator

from gptlab.executors.base import RunResult, Task
from gptlab.run.rundir import RunDir

WORKER_DIED = "worker process died while training (killed, or out of memory)"


@contextlib.contextmanager
def gpu_slot(lock_dir: Path, gpus: int, runs_per_gpu: int) -> Iterator[int]:
    """Hold a lock file for one GPU slot and yield its GPU index (workers never share a slot)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    while True:
        for slot in range(gpus * runs_per_gpu):
            handle = open(lock_dir / f"slot{slot}.lock", "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            try:
                yield slot % gpus
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
            return
        time.sleep(0.5)


def execute_run(task: Task) -> RunResult:
    """Train one run in this process; a run's own exception becomes a failed result, not a raise."""
    from gptlab.plugins import import_plugins
    from gptlab.run.device import configure_process
    from gptlab.run.runner import train_run

    folder = RunDir(task.run_dir)
    config = dict(task.config)
    started = time.perf_counter()
    with folder.running():
        try:
            configure_process(task.threads)
            import_plugins(list(task.plugins), list(task.search_path))
            if task.gpus > 1:
                with gpu_slot(folder.path.parent.parent / ".gpu_slots", task.gpus, task.runs_per_gpu) as gpu:
                    config["train"] = {**config["train"], "device": f"cuda:{gpu}"}
                    summary = train_run(config, folder.path, run_id=task.run_id)
            else:
                summary = train_run(config, folder.path, run_id=task.run_id)
        except Exception as err:  # recorded, not raised: one bad run must not stop its siblings
            summary = folder.record_failure(task.run_id, dict(task.config), err)
    return RunResult(task.run_id, summary, time.perf_counter() - started)


def failed_result(task: Task, error: BaseException | str) -> RunResult:
    """Record `task` as failed without training it (its worker died, or never started it)."""
    folder = RunDir(task.run_dir)
    folder.clear_running()
    summary = folder.record_failure(task.run_id, dict(task.config), error)
    return RunResult(task.run_id, summary, math.nan)


def with_run_dir(task: Task, run_dir: str) -> Task:
    """The same task, trained in another folder (a dask worker's scratch or shared folder)."""
    return dataclasses.replace(task, run_dir=run_dir)
