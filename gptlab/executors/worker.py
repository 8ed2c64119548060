"""The worker side, shared by every backend: one `Task` in, one `RunResult` out.

`execute_run` never raises for a run's own errors: they are recorded in its run directory as a
failed run, so one bad run never stops its siblings. It sets the worker process's settings
(threads, TF32), imports the sweep's plugins, and marks the run as in flight while it trains.

A worker dies with its driver. A task names the driver process (`Task.driver`: pid and creation
time, so a reused pid is not taken for it), and the worker watches it from a thread of its own
(`DriverWatch`, one per process, started by the first task or by the backend's initializer),
checking every `DRIVER_POLL_S` that it still lives. Once it is gone (SIGKILL, the OOM killer, a
`timeout`), a run in flight stops at its next step, raising `RunStopped` out of the loop, and
the process exits: every file a run wrote is whole (atomic writes), so a rerun resumes it from
its last checkpoint. A run that has not stopped `STOP_GRACE_S` later (a long evaluation, a
tokenizer being trained) is ended by `os._exit` all the same, which is as safe for the same
reason; an idle worker exits at once.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import math
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from gptlab.executors.base import RunResult, Task
from gptlab.run.resultsdir import GPU_SLOTS, ResultsDir
from gptlab.run.rundir import RunDir
from gptlab.run.trainer import TrainerCallback

log = logging.getLogger("gptlab.executors.worker")

WORKER_DIED = "worker process died while training (killed, or out of memory)"
DRIVER_POLL_S = 0.5  # how often a worker checks that its driver still lives
STOP_GRACE_S = 2.0  # how long a run may take to reach its next step before the worker exits anyway
ORPHAN_EXIT = 75  # exit status of a worker that stopped because its driver was gone (EX_TEMPFAIL: rerun)


class RunStopped(BaseException):
    """Raised at a step of a run whose driver is gone. Not an `Exception`: it is no failure of the
    run, and nothing on its way out (a plugin's `except Exception`) may record it as one."""


def driver_identity() -> tuple[int, float]:
    """This process as a worker's driver: its pid and creation time (a pid alone may be reused)."""
    import psutil

    return os.getpid(), psutil.Process().create_time()


class DriverWatch(TrainerCallback):
    """Ends this worker process once its driver is gone; as a `TrainerCallback`, it stops a run in
    flight at its next step first (see the module docstring). `start()` starts its thread."""

    def __init__(self, driver: tuple[int, float], poll_s: float = DRIVER_POLL_S, grace_s: float = STOP_GRACE_S,
                 exit: Callable[[int], Any] = os._exit) -> None:
        self.driver, self.poll_s, self.grace_s = driver, poll_s, grace_s
        self.exit = exit  # os._exit; a test's stand-in
        self.gone = threading.Event()  # set once the driver is gone: runs stop at their next step
        self._idle = threading.Event()  # set while no run trains here
        self._idle.set()
        self._runs: list[str] = []  # the runs training here now
        self._lock = threading.Lock()
        self._process = _find_process(*driver)
        self._thread = threading.Thread(target=self._watch, name=f"driver-watch-{driver[0]}", daemon=True)

    def start(self) -> "DriverWatch":
        self._thread.start()
        return self

    @contextlib.contextmanager
    def training(self, run_id: str) -> Iterator[None]:
        """Count `run_id` as in flight while the block runs: the process exits when it is done."""
        with self._lock:
            self._runs.append(run_id)
            self._idle.clear()
        try:
            yield
        finally:
            with self._lock:
                self._runs.remove(run_id)
                if not self._runs:
                    self._idle.set()

    def on_step(self, trainer: Any) -> None:
        if self.gone.is_set():
            raise RunStopped(f"driver process {self.driver[0]} is gone")

    def _watch(self) -> None:
        while _alive(self._process):
            time.sleep(self.poll_s)
        with self._lock:
            runs = ", ".join(self._runs)
        if runs:  # the run's train.log gets this line too
            log.warning("driver process %d is gone: stopping run %s (a rerun resumes it from its last checkpoint)",
                        self.driver[0], runs)
        self.gone.set()
        self._idle.wait(self.grace_s)  # the runs stop at their next step, or are ended mid-step
        self.exit(ORPHAN_EXIT)


_WATCHES: dict[tuple[int, float], DriverWatch] = {}
_WATCHES_LOCK = threading.Lock()


def watch_driver(driver: tuple[int, float]) -> DriverWatch:
    """This process's watch on `driver`, started by the first call (a task, or a worker initializer)."""
    with _WATCHES_LOCK:
        if driver not in _WATCHES:
            _WATCHES[driver] = DriverWatch(driver).start()
        return _WATCHES[driver]


def _find_process(pid: int, created: float) -> Any:
    """The psutil handle of the driver, or None when that process is already gone (or its pid reused)."""
    import psutil

    try:
        process = psutil.Process(pid)
        # psutil compares clock-independent start ticks from here on (is_running); this first check
        # is in wall-clock seconds, hence the slack (a clock step between driver and worker).
        return process if abs(process.create_time() - created) < 1.0 else None
    except psutil.Error:
        return None


def _alive(process: Any) -> bool:
    import psutil

    if process is None:
        return False
    try:
        # A SIGKILLed driver stays a zombie until its own parent reaps it: that is gone too.
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # denied: cannot tell, so keep training
        return True


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
    from gptlab.run.identity import check_run_identity
    from gptlab.run.runner import train_run

    folder = RunDir(task.run_dir)
    config = task.config
    started = time.perf_counter()
    watch = watch_driver(tuple(task.driver)) if task.driver else None
    callbacks = [watch] if watch else []
    try:
        with watch.training(task.run_id) if watch else contextlib.nullcontext(), folder.running():
            try:
                configure_process(task.threads)
                import_plugins(list(task.plugins), list(task.search_path))
                if not folder.finished_summary():  # a finished run is a result already: nothing is read again
                    check_run_identity(task.run_id, config, task.plugins)
                if task.gpus > 1:
                    with gpu_slot(_slots_dir(folder), task.gpus, task.runs_per_gpu) as gpu:
                        config = config.with_settings({"train.device": f"cuda:{gpu}"})
                        summary = train_run(config, folder.path, run_id=task.run_id, callbacks=callbacks)
                else:
                    summary = train_run(config, folder.path, run_id=task.run_id, callbacks=callbacks)
            except Exception as err:  # recorded, not raised: one bad run must not stop its siblings
                summary = folder.record_failure(task.run_id, task.config.to_dict(), err)
    except RunStopped:  # the driver is gone: nobody waits for a result; the run's lock and marker are released
        assert watch is not None  # only a watch raises it
        watch.exit(ORPHAN_EXIT)
        raise
    return RunResult(task.run_id, summary, time.perf_counter() - started)


def _slots_dir(folder: RunDir) -> Path:
    """Where the GPU slots of the run's sweep are: its results folder's, else (a run folder elsewhere) beside it."""
    results = ResultsDir.holding(folder.path)
    return results.gpu_slots if results is not None else folder.path.parent / GPU_SLOTS


def failed_result(task: Task, error: BaseException | str) -> RunResult:
    """Record `task` as failed without training it (its worker died, or never started it)."""
    folder = RunDir(task.run_dir)
    folder.clear_running()
    summary = folder.record_failure(task.run_id, task.config.to_dict(), error)
    return RunResult(task.run_id, summary, math.nan)


def with_run_dir(task: Task, run_dir: str) -> Task:
    """The same task, trained in another folder (a dask worker's scratch or shared folder)."""
    return dataclasses.replace(task, run_dir=run_dir)
