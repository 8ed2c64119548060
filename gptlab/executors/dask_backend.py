"""The dask backend: the runs of a sweep as tasks on a `dask.distributed` cluster.

This module owns everything between a sweep's task list and a dask scheduler: connecting (or
starting a `LocalCluster` for `scheduler: local`), one task per run, shipping each run's small
files back to the driver, and what happens when a worker is lost. Training itself is the shared
worker-side task `gptlab.executors.worker.execute_run`, exactly as in the local backend.

Why `distributed.Client` and not joblib's `Parallel(backend="dask")`: joblib treats the runs as
one batch. The first task that raises, including the `KilledWorker` dask raises once a task has
outlived its scheduler's `allowed-failures`, aborts the whole `Parallel` call and every run in
flight. It offers no way to tell a lost worker from a run's own error, to resubmit one run, or
to fail one run and carry on. `Client.submit` with `as_completed` gives a future per run: each
outcome is handled on its own, and `--fail-fast` is a plain `cancel`.

Results: a task returns the run's `RunResult` plus the text of its run files
(`RunDir.SHIPPED`: config, metrics, log, the error of a failed run, summary). The
driver writes them atomically into `results/NAME/runs/RUN_ID/`, `summary.json` last, so reports
and resume cannot tell which backend trained a run. Checkpoints (`*.pt`) never travel. A worker
trains in `executor.shared_dir/NAME/runs/RUN_ID` when a shared directory is given: an
interrupted run resumes from its checkpoint there, and when that directory *is* the results
directory nothing is copied at all. Without `shared_dir` a worker trains in a scratch directory
under its local directory, deleted afterwards, so an interrupted run starts again from scratch.

Lost workers: a run counts its starts in the scheduler's task metadata, which dask drops with
the task. When the scheduler reschedules a run whose worker died (killed, out of memory,
disconnected), the new attempt sees the earlier start. With `on_worker_lost: fail` it records
the run as failed without training. With `retry`, the default, it trains once more, and a second
loss fails it. Counting starts, not the scheduler's own tally, matters: dask also blames a run
that merely sat queued on the lost worker. A scheduler configured to give up sooner than that
raises `KilledWorker`, and the driver then applies the same rule by resubmitting the run.

Each run is submitted as `pickle.loads(bytes)` (see `_CallOnLoad`). The scheduler unpickles the
task graphs it receives, and this way it only ever sees the standard library, so a plain
`dask scheduler` needs neither gptlab nor torch installed.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import pickle
import shutil
import tempfile
import time
import uuid
import warnings
from concurrent.futures import CancelledError
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from gptlab.errors import GptlabError
from gptlab.executors import scheduler
from gptlab.executors.base import BACKENDS, ExecutorConfig, OnResult, Resources, RunResult, Task
from gptlab.executors.populations import population_size
from gptlab.executors.slurm import patience_message, quiet_loggers, refusal_message, slurm_client, walltime_seconds
from gptlab.executors.worker import execute_run, failed_result, with_run_dir
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir
from gptlab.runio import atomic_write_text
from gptlab.statuses import FAILED

log = logging.getLogger("gptlab.executors.dask")

STARTS = "gptlab-starts"  # task-metadata field counting how often a task began on some worker
MAX_RESUBMITS = 3  # KilledWorker resubmissions per run, for workers that die before a run even starts
POLL_S = 0.5  # how often a SLURM sweep looks for a finished run or a started job
KEY_PREFIX = "train_run"  # the dashboard groups every run's task under this name


@dataclass
class _Job:
    """One run as the driver tracks it across resubmissions."""

    task: Task  # the sweep's task; task.run_dir is the driver's results folder
    worker_dir: str | None  # where the worker trains; None: a scratch folder on the worker
    lost_before: int = 0  # workers lost by earlier submissions of this run while it trained
    resubmits: int = 0  # times the driver submitted it again after a KilledWorker


def worker_lost_message(losses: int) -> str:
    times = "once" if losses == 1 else f"{losses} times"
    return f"the dask worker was lost while training this run ({times}: killed, out of memory or disconnected)"


class _CallOnLoad:
    """Pickles as the call `func(*args)`, so that unpickling it on a worker runs it.

    Recent schedulers unpickle the task graph they receive. Submitted as `pickle.loads(bytes)`,
    a run is opaque to the scheduler, which therefore needs neither gptlab nor torch.
    """

    def __init__(self, func: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return self.func, self.args


# -- worker side ---------------------------------------------------------------------------------
def _count_start() -> int:
    """Record one more start of the current task on the scheduler; return the count so far."""
    from distributed import get_client, get_worker

    key = get_worker().get_current_task()
    client = get_client()
    starts = int(client.get_metadata([key, STARTS], 0)) + 1
    client.set_metadata([key, STARTS], starts)
    return starts


def train_on_worker(task: Task, worker_dir: str | None, allowed_losses: int, lost_before: int) -> dict[str, Any]:
    """Worker side: train one run (or record that its worker was lost too often); return its files."""
    from distributed import get_worker

    losses = lost_before + _count_start() - 1
    scratch = None if worker_dir else tempfile.mkdtemp(prefix=f"{task.run_id}.", dir=get_worker().local_directory)
    local = with_run_dir(task, worker_dir or scratch)
    folder = RunDir(local.run_dir)
    try:
        folder.path.mkdir(parents=True, exist_ok=True)
        if losses > allowed_losses:
            result = failed_result(local, worker_lost_message(losses))
        else:
            folder.clear_failure()  # a failed run sent again (--rerun-failed) trains again
            result = execute_run(local)
        return {"result": result, "files": shipped_files(folder, failed=result.status == FAILED)}
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def shipped_files(folder: RunDir, failed: bool) -> dict[str, str]:
    """The text of the small files a worker sends back (`RunDir.SHIPPED`; error.txt only for a failed run)."""
    return {name: (folder / name).read_text(encoding="utf-8") for name in RunDir.SHIPPED
            if (folder / name).is_file() and (failed or name != RunDir.ERROR)}


# -- driver side ---------------------------------------------------------------------------------
@contextlib.contextmanager
def connect(executor: ExecutorConfig, plan: Resources, n_runs: int = 1) -> Iterator[tuple[Any, bool, list[str]]]:
    """Yield (client, is_local, refusals): a Client of the scheduler, of a LocalCluster for 'local', or of a
    SLURM cluster started for `n_runs` runs (and released on the way out), whose submissions sbatch refused
    say so in `refusals` (empty elsewhere)."""
    scheduler.check_scheduler(executor)
    if executor.cluster is not None:
        with slurm_client(executor.cluster, n_runs) as (client, refusals):
            yield client, False, refusals
        return
    from distributed import Client, LocalCluster

    address = str(executor.scheduler)
    if address == "local":
        with quiet_loggers("distributed"):  # its INFO lines (each worker, each connection) would bury the progress
            with warnings.catch_warnings():
                # Another cluster (a second sweep's) holding the dashboard's usual port: distributed takes another and
                # says so in a Python warning of several lines; the sweep's plan line prints the address it got.
                warnings.filterwarnings("ignore", message=r"Port \d+ is already in use", category=UserWarning)
                cluster = LocalCluster(n_workers=plan.workers, threads_per_worker=1, processes=True, host="127.0.0.1")
            client = Client(cluster)
            try:
                yield client, True, []
            finally:
                client.close()
                cluster.close()
        return
    try:
        client = Client(address, timeout=scheduler.CONNECT_TIMEOUT_S)
    except Exception as err:
        raise GptlabError(f"cannot connect to the dask scheduler at {address}: {err}") from None
    try:
        yield client, False, []
    finally:
        client.close()


def run_threads(executor: ExecutorConfig, plan: Resources, local: bool) -> int:
    """Torch threads per run: executor.threads; else the local plan on 'local', a SLURM job's
    cores on a cluster, else 1.

    A worker runs as many runs at once as its `--nthreads`, so each of its thread slots is one
    core for one run. One thread is also what makes a run's CPU losses the same wherever it trains.
    """
    if isinstance(executor.threads, int):
        return executor.threads
    if executor.cluster is not None:
        return executor.cluster.cores  # a job's worker has one task slot and all of the job's cores
    return plan.threads if local else 1


def _where(executor: ExecutorConfig) -> str:
    if executor.cluster is not None:
        return "the SLURM cluster's scheduler"
    return "the local dask cluster" if executor.scheduler == "local" else f"the dask scheduler at {executor.scheduler}"


def _describe(client: Any, executor: ExecutorConfig, plan: Resources, threads: int, n_runs: int) -> str:
    if executor.cluster is not None:  # no worker yet: its jobs are only just submitted
        return f"{executor.cluster.describe(threads, n_runs, plan.run_bytes)}; dashboard {client.dashboard_link}"
    workers = client.nthreads()  # {worker address: its thread slots}
    slots = sum(workers.values())
    return (f"plan: {len(workers)} worker(s) with {slots} task slot(s) on {_where(executor)}, "
            f"{threads} thread(s) per run; dashboard {client.dashboard_link}")


def _deliver(job: _Job, payload: dict[str, Any]) -> RunResult:
    """Write a finished run's files into the driver's run folder (unless it trained there)."""
    target = RunDir(job.task.run_dir)
    result: RunResult = payload["result"]
    if job.worker_dir and Path(job.worker_dir) == target.path:
        return result
    files = payload["files"]
    for name, text in files.items():
        if name != RunDir.SUMMARY:
            atomic_write_text(target / name, text)
    # Leftovers of an earlier attempt in this folder would contradict the run just received.
    target.clear_stale(keep_error=RunDir.ERROR in files)
    if RunDir.SUMMARY in files:
        atomic_write_text(target / RunDir.SUMMARY, files[RunDir.SUMMARY])
    else:
        target.write_summary(result.summary.to_dict())
    return result


def _completed(pending: Any, client: Any, executor: ExecutorConfig, refusals: Sequence[str] = ()) -> Iterator[Any]:
    """`pending`'s futures as they finish. On a SLURM cluster, a submission sbatch refused stops the sweep with
    sbatch's words, and runs that have waited `patience` with no worker at all (no job started: a queue, a
    hold, a reservation) stop it with a line naming squeue."""
    if executor.cluster is None:
        yield from pending
        return
    patience, since = walltime_seconds(executor.cluster.patience), time.monotonic()
    while not pending.is_empty():
        if refusals:
            raise GptlabError(refusal_message(executor.cluster, refusals[0]))
        if pending.has_ready():
            yield next(pending)
            continue
        if client.nthreads():
            since = time.monotonic()  # a worker is up: the patience counts from when none is
        elif time.monotonic() - since > patience:
            raise GptlabError(patience_message(executor.cluster))
        time.sleep(POLL_S)


@BACKENDS.register("dask")
class DaskBackend:
    """Tasks on a dask.distributed cluster (`executor.scheduler`), or a local one for 'local'."""

    def __init__(self, config: ExecutorConfig) -> None:
        self.config = config

    def check(self) -> None:
        scheduler.check_scheduler(self.config)  # an unreachable scheduler fails before anything is written

    def describe(self, plan: Resources, dry_run: bool = False) -> str | None:
        """For a dry run, what the scheduler reports now; before training, None (logged once connected)."""
        if not dry_run:
            return None
        if self.config.cluster is not None:
            return self.config.cluster.describe(run_threads(self.config, plan, False), run_bytes=plan.run_bytes)
        address = str(self.config.scheduler)
        if address == "local":
            threads = run_threads(self.config, plan, True)
            return (f"plan: a local dask cluster of {plan.workers} worker(s), {threads} thread(s) per run "
                    f"({plan.reason})")
        scheduler.check_scheduler(self.config)
        workers = scheduler.probe(address, scheduler.CONNECT_TIMEOUT_S).get("workers") or {}
        slots = sum(int(w.get("nthreads", 0)) for w in workers.values() if isinstance(w, dict))
        return (f"plan: dask scheduler {address} with {len(workers)} worker(s) and {slots} task slot(s) now, "
                f"{run_threads(self.config, plan, False)} thread(s) per run")

    def run(self, tasks: Sequence[Task], plan: Resources, on_result: OnResult, fail_fast: bool = False) -> None:
        if tasks and population_size(self.config, plan.device) > 1:
            log.warning("executor.population: the dask backend trains every run alone (populations: loky only)")
        run_dask(tasks, plan, self.config, on_result, fail_fast)


def run_dask(tasks: Sequence[Task], plan: Resources, executor: ExecutorConfig, on_result: OnResult,
             fail_fast: bool = False) -> None:
    """Train `tasks` on a dask cluster, calling `on_result` once per finished run."""
    if not tasks:
        return
    from distributed import KilledWorker, as_completed

    allowed = 1 if executor.on_worker_lost == "retry" else 0
    shared_root = Path(executor.shared_dir).expanduser().resolve() if executor.shared_dir else None
    with connect(executor, plan, len(tasks)) as (client, local, refusals):
        threads = run_threads(executor, plan, local)
        log.info("%s", _describe(client, executor, plan, threads, len(tasks)))
        if not client.nthreads() and executor.cluster is None:
            log.warning("the scheduler at %s has no workers yet; runs wait until one joins", executor.scheduler)
        jobs: dict[Any, tuple[Any, _Job]] = {}  # task key -> (future, job), while the run is out
        pending = as_completed()

        def submit(job: _Job) -> None:
            task = dataclasses.replace(job.task, threads=threads, gpus=0)  # a worker trains on the device it sees
            key = f"{KEY_PREFIX}-{uuid.uuid4().hex[:8]}-{task.run_id}"
            call = _CallOnLoad(train_on_worker, (task, job.worker_dir, allowed, job.lost_before))
            future = client.submit(pickle.loads, pickle.dumps(call, protocol=5), key=key)
            jobs[future.key] = (future, job)
            pending.add(future)

        for task in tasks:
            results = ResultsDir.holding(task.run_dir)  # the shared copy of results/NAME: shared_dir/NAME
            worker_dir = str(ResultsDir(shared_root / results.name).run(task.run_id).path) \
                if shared_root and results is not None else None
            submit(_Job(task, worker_dir))
        try:
            for future in _completed(pending, client, executor, refusals):
                _, job = jobs.pop(future.key)
                try:
                    result = _deliver(job, future.result())
                except KilledWorker:  # the scheduler gave up before the run's own count did
                    # Only starts count: the scheduler also blames runs merely queued on a lost worker.
                    losses = job.lost_before + int(client.get_metadata([future.key, STARTS], 0))
                    if losses <= allowed and job.resubmits < MAX_RESUBMITS:
                        log.warning("worker lost while training %s; retrying it", job.task.run_id)
                        submit(_Job(job.task, job.worker_dir, losses, job.resubmits + 1))
                        continue
                    result = failed_result(job.task, worker_lost_message(max(losses, 1)))
                except (CancelledError, asyncio.CancelledError) as err:  # the scheduler went away, or a cancel
                    raise GptlabError(f"{_where(executor)} dropped run {job.task.run_id} "
                                      f"({getattr(err, 'reason', 'cancelled')}); finished runs are kept, "
                                      "rerun the same command to train the rest") from None
                except Exception as err:  # e.g. gptlab not importable on the worker
                    result = failed_result(job.task, err)
                finally:
                    future.release()
                on_result(result)
                if fail_fast and result.status == FAILED:
                    log.info("--fail-fast: stopping at the first failed run")
                    return
        finally:
            if jobs:  # --fail-fast, Ctrl-C or a lost scheduler: the scheduler drops what is left
                client.cancel([future for future, _ in jobs.values()])
