"""The `loky` backend: runs in joblib/loky worker processes on this machine.

It survives workers that die (killed, out of memory): the runs that were in flight are retried
one at a time, and only a run whose worker dies while it trains alone is marked failed.

Stopping is the driver's job. Workers ignore SIGINT and SIGHUP, which a terminal sends to the
whole process group: the driver, stopped by them, kills its workers at once (a worker that
caught them too would race it, and print its own traceback). A worker whose driver is gone stops
on its own, busy or idle (`gptlab.executors.worker.DriverWatch`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import queue
import signal
from typing import Any, Iterator, Sequence

from gptlab.executors.base import BACKENDS, ExecutorConfig, OnResult, Resources, RunResult, Task
from gptlab.executors.populations import Unit, execute_group, group_tasks, population_note, population_size
from gptlab.executors.worker import WORKER_DIED, driver_identity, failed_result, watch_driver
from gptlab.run.rundir import RunDir
from gptlab.statuses import FAILED

log = logging.getLogger("gptlab.executors.local")


def _worker_died_errors() -> tuple[type[BaseException], ...]:
    from concurrent.futures.process import BrokenProcessPool

    from joblib.externals.loky.process_executor import TerminatedWorkerError

    return (TerminatedWorkerError, BrokenProcessPool)


def thread_env(threads: int) -> dict[str, str]:
    """Thread caps for OpenMP/BLAS (and rayon: the BPE trainer of `tokenizers`) inside a worker, set before
    torch is imported there."""
    return {name: str(threads) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                            "RAYON_NUM_THREADS")}


def init_worker(driver: tuple[int, float]) -> None:
    """A worker's initializer: Ctrl-C and a closed terminal stop the driver, which stops its
    workers. The worker watches its driver from its start, so that an idle one does not outlive it either."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    watch_driver(driver)


@contextlib.contextmanager
def _terminal_signals_blocked() -> Iterator[None]:
    """Hold SIGINT and SIGHUP back from this thread while loky starts its processes and threads.

    What starts meanwhile inherits the mask: loky's resource trackers (which would die of a
    closed terminal's SIGHUP, print tracebacks and leak semaphores), its manager thread (and so
    the workers it restarts) and the workers. A signal that arrives meanwhile is delivered when
    the block ends, not lost.
    """
    held = {signal.SIGINT, signal.SIGHUP}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


# loky's resource tracker, a child of the driver, cleans up the semaphores of a driver killed outright (SIGKILL,
# the OOM killer) and then warns of them on the terminal, after the shell prompt: nothing is left for the user to do.
QUIET_TRACKER = "ignore::UserWarning:joblib.externals.loky.backend.resource_tracker"


def _quiet_resource_tracker() -> None:
    """Have the resource tracker loky starts next keep its leaked-semaphore warning to itself (its environment
    is this process's, read when it starts)."""
    current = os.environ.get("PYTHONWARNINGS", "")
    if QUIET_TRACKER not in current.split(","):
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [current, QUIET_TRACKER]))


def _parallel(units: Sequence[Unit], workers: int, threads: int) -> Iterator[RunResult]:
    """Results of the runs of `units` (a lone run, or a population: `populations.group_tasks`) as they finish,
    each unit trained in a loky worker process.

    joblib's `Parallel` runs a single job in the calling process; the loky executor it is built on
    always uses worker processes, so a run that crashes its process never takes the sweep with it.
    """
    from concurrent.futures import as_completed

    from joblib.externals.loky import get_reusable_executor

    driver = driver_identity()  # each worker stops its run once this process is gone
    _quiet_resource_tracker()
    with _terminal_signals_blocked():
        executor = get_reusable_executor(max_workers=workers, env=thread_env(threads), reuse=True,
                                         initializer=init_worker, initargs=(driver,))
        futures = [executor.submit(execute_group, tuple(dataclasses.replace(task, driver=driver) for task in unit))
                   for unit in units]
    try:
        for future in as_completed(futures):
            yield from future.result()
    except BaseException:  # a dead worker, Ctrl-C, --fail-fast: stop everything still in flight
        _stop(executor)
        raise


def _stop(executor: Any) -> None:
    """Kill the workers of a loky executor at once and fail the futures it had not started.

    Two races in loky's manager thread (joblib 1.6) made Ctrl-C print a traceback, both avoided
    here. No `future.cancel()` first: loky fails every pending future itself, and one already
    cancelled made the thread die of InvalidStateError before it killed the workers (which then
    trained on). The ids of the queued runs are dropped first: loky fails their futures but keeps
    their ids, and the thread then died of a KeyError. Waiting (a SIGKILL and a join) leaves
    nothing for the interpreter's exit to join.
    """
    work_ids = getattr(executor, "_work_ids", None)  # private: skipped if a later loky renames it
    if work_ids is not None:
        with contextlib.suppress(queue.Empty):
            while True:
                work_ids.get_nowait()
    executor.shutdown(wait=True, kill_workers=True)


def release_workers() -> None:
    """Stop the worker processes loky keeps for the next stage (or the next sweep of this process).

    Called by `python -m gptlab.sweep` once the sweep is over: left to the interpreter's exit, loky's
    non-daemon manager thread held the finished process for about 3 s more. A caller of `main()` in
    its own process (a notebook, the tests) keeps them, for its next sweep.
    """
    from joblib.externals.loky import reusable_executor

    executor = getattr(reusable_executor, "_executor", None)  # private: None if a later loky renames it
    if executor is not None:
        _stop(executor)


class FailFast(Exception):
    """Raised inside the result loop to stop the executor at the first failed run."""


@BACKENDS.register("loky")
class LocalBackend:
    """Worker processes on this machine (joblib's loky), one run (or one population: `executor.population`) per
    worker."""

    def __init__(self, config: ExecutorConfig) -> None:
        self.config = config

    def check(self) -> None:
        """Nothing to check: this machine is always there."""

    def describe(self, plan: Resources, dry_run: bool = False) -> str | None:
        note = population_note(self.config, plan.device)
        return plan.describe() + (f"\n{note}" if note else "")

    def run(self, tasks: Sequence[Task], plan: Resources, on_result: OnResult, fail_fast: bool = False) -> None:
        died = _worker_died_errors()
        queue = list(tasks)
        size, auto = population_size(self.config, plan.device), self.config.population == "auto"
        while queue:
            for task in queue:
                RunDir(task.run_dir).clear_running()
            done: set[str] = set()
            try:
                units = group_tasks(queue, size, auto)
                for result in _parallel(units, min(plan.workers, len(units)), plan.threads):
                    done.add(result.run_id)
                    on_result(result)
                    if fail_fast and result.status == FAILED:
                        raise FailFast(result.run_id)
                return
            except FailFast:
                return
            except died as err:
                left = [t for t in queue if t.run_id not in done]
                suspects = [t for t in left if RunDir(t.run_dir).is_running()]
                log.warning("a worker died (%s); retrying the %d run(s) that were in flight, one at a time",
                            type(err).__name__, len(suspects))
                for task in suspects:
                    RunDir(task.run_dir).clear_running()
                    result = _run_alone(task, plan.threads, died)
                    on_result(result)
                    if fail_fast and result.status == FAILED:
                        return
                queue = [t for t in left if t not in suspects]


def _run_alone(task: Task, threads: int, died: tuple[type[BaseException], ...]) -> RunResult:
    """Retry one suspect in a worker of its own: if that worker dies too, the run is the cause."""
    try:
        return next(iter(_parallel([(task,)], 1, threads)))
    except died:
        return failed_result(task, WORKER_DIED)
