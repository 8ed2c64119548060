"""The local backend: runs in joblib/loky worker processes on this machine.

`run_local` survives workers that die (killed, out of memory): the runs that were in flight are
retried one at a time, and only a run whose worker dies while it trains alone is marked failed.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Callable, Iterator

from gptlab.executors import RUNNING_MARKER, WORKER_DIED, Plan, execute_run

log = logging.getLogger("gptlab.executors.local")


def _worker_died_errors() -> tuple[type[BaseException], ...]:
    from concurrent.futures.process import BrokenProcessPool

    from joblib.externals.loky.process_executor import TerminatedWorkerError

    return (TerminatedWorkerError, BrokenProcessPool)


def thread_env(threads: int) -> dict[str, str]:
    """Thread caps for OpenMP/BLAS inside a worker, set before torch is imported there."""
    return {name: str(threads) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def _parallel(tasks: list[dict[str, Any]], workers: int, threads: int) -> Iterator[dict[str, Any]]:
    """Results of `tasks` as they finish, each trained in a loky worker process.

    joblib's `Parallel` runs a single job in the calling process; the loky executor it is built on
    always uses worker processes, so a run that crashes its process never takes the sweep with it.
    """
    from concurrent.futures import as_completed

    from joblib.externals.loky import get_reusable_executor

    executor = get_reusable_executor(max_workers=workers, env=thread_env(threads), reuse=True)
    futures = [executor.submit(execute_run, task) for task in tasks]
    try:
        for future in as_completed(futures):
            yield future.result()
    except BaseException:  # a dead worker, Ctrl-C, --fail-fast: stop everything still in flight
        for future in futures:
            future.cancel()
        executor.shutdown(wait=False, kill_workers=True)
        raise


class FailFast(Exception):
    """Raised inside the result loop to stop the executor at the first failed run."""


def run_local(tasks: list[dict[str, Any]], plan: Plan, on_result: Callable[[dict[str, Any]], None],
              fail_fast: bool = False) -> None:
    """Train `tasks` on this machine in loky worker processes, calling `on_result` as each finishes."""
    died = _worker_died_errors()
    queue = list(tasks)
    while queue:
        for task in queue:
            (Path(task["run_dir"]) / RUNNING_MARKER).unlink(missing_ok=True)
        done: set[str] = set()
        try:
            for result in _parallel(queue, min(plan.workers, len(queue)), plan.threads):
                done.add(result["run_id"])
                on_result(result)
                if fail_fast and result["summary"]["status"] == "failed":
                    raise FailFast(result["run_id"])
            return
        except FailFast:
            return
        except died as err:
            left = [t for t in queue if t["run_id"] not in done]
            suspects = [t for t in left if (Path(t["run_dir"]) / RUNNING_MARKER).exists()]
            log.warning("a worker died (%s); retrying the %d run(s) that were in flight, one at a time",
                        type(err).__name__, len(suspects))
            for task in suspects:
                (Path(task["run_dir"]) / RUNNING_MARKER).unlink(missing_ok=True)
                result = _run_alone(task, plan.threads, died)
                on_result(result)
                if fail_fast and result["summary"]["status"] == "failed":
                    return
            queue = [t for t in left if t not in suspects]


def _run_alone(task: dict[str, Any], threads: int, died: tuple[type[BaseException], ...]) -> dict[str, Any]:
    """Retry one suspect in a worker of its own: if that worker dies too, the run is the cause."""
    from gptlab.train import write_failure

    try:
        return next(iter(_parallel([task], 1, threads)))
    except died:
        summary = write_failure(task["run_dir"], task["run_id"], task["config"], WORKER_DIED)
        return {"run_id": task["run_id"], "summary": summary, "seconds": math.nan}
