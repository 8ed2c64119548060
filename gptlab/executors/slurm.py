"""The SLURM cluster of the dask backend: `executor.cluster: {type: slurm, ...}`, validated, started and released.

A dask-jobqueue `SLURMCluster` is started for a stage's runs and released at its end.

Each SLURM job runs one dask worker with one task slot, so a job trains one run at a time on its
`cores` (the run's torch threads) within its `memory`. The number of jobs is adaptive: between
`min_jobs` and `max_jobs` (default: 0 and the stage's run count), or exactly `jobs`. Adaptive
scaling is also what replaces a job that ended early (walltime, preemption, `scancel`): dask's
adaptive loop submits a new one once the lost worker is forgotten, while a fixed `scale()` would
not, and a sweep whose jobs had all ended would wait forever. The run the lost job was training
is retried by the dask backend's `on_worker_lost` rule, from its checkpoint when `shared_dir` is set.

Jobs end with the sweep: `slurm_client` closes the cluster (its `scancel`s) on the way out, at the
end, on an error, and on Ctrl-C or SIGTERM (which the sweep's CLI turns into KeyboardInterrupt).
A driver killed outright cannot do that; its workers then lose their scheduler and close, which
ends their jobs, and a job that starts only afterwards gives up after `DEATH_TIMEOUT_S`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from functools import partial
from typing import Any, Iterator, Mapping

from gptlab.errors import GptlabError, closest, key_error, shown, unknown_key
from gptlab.fields import setting

_fail = partial(key_error, section="executor.cluster")  # this section's bad values: `executor.cluster.KEY: MESSAGE`

log = logging.getLogger("gptlab.executors.slurm")

CLUSTER_TYPES = ("slurm",)
SBATCH_TIMEOUT_S = 30  # `sbatch --test-only` answers at once when the controller is up
DEATH_TIMEOUT_S = 60  # a worker that cannot reach its scheduler (the sweep) this long exits, ending its job
MAX_JOBS = 10_000  # as executor.n_jobs: a sweep has at most 10,000 runs
MAX_CORES = 4_096
# dask-jobqueue's and sbatch's names for our keys, for a helpful unknown-key message.
OTHER_NAMES = {"queue": "partition", "project": "account", "time": "walltime", "mem": "memory", "cpus": "cores",
               "cpus_per_task": "cores", "n_workers": "jobs", "minimum_jobs": "min_jobs", "maximum_jobs": "max_jobs",
               "job_extra": "job_extra_directives", "env_extra": "job_script_prologue"}
MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|[KMGT]i?B)\s*$", re.IGNORECASE)  # as dask's parse_bytes reads them
UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
WALLTIME = re.compile(r"^(\d+-\d{1,2}(:\d{2}){0,2}|\d+(:\d{2}){0,2})$")  # sbatch --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S


def walltime_seconds(text: str) -> int:
    """Seconds of an sbatch --time that WALLTIME matched; 0 where a field is out of range (seconds past 59, minutes
    past 59 after an hour, hours past 23 after a day count) or the time is zero (which SLURM reads as no limit)."""
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if days:  # D-H, D-H:M, D-H:M:S
        h, m, sec = (parts + [0, 0])[:3]
        in_range = h <= 23 and m <= 59 and sec <= 59
    elif len(parts) == 3:  # H:M:S
        h, m, sec = parts
        in_range = m <= 59 and sec <= 59
    else:  # M or M:S
        h, m, sec = 0, parts[0], (parts + [0])[1]
        in_range = sec <= 59
    return int(days or 0) * 86400 + h * 3600 + m * 60 + sec if in_range else 0



@dataclass(frozen=True)
class SlurmConfig:
    """A SLURM cluster of dask workers, one job per worker (the sweep YAML's `executor.cluster:`)."""

    type: str = setting("slurm", "the kind of cluster: slurm")
    partition: str | None = setting(None, "the SLURM partition (sbatch -p); the cluster's default when unset")
    account: str | None = setting(None, "the account charged (sbatch -A)")
    cores: int = setting(1, "CPU cores per job (sbatch --cpus-per-task): the torch threads of its run")
    memory: str = setting("4GB", "memory per job (sbatch --mem), e.g. 4GB or 16GiB; a run over it loses its worker")
    walltime: str = setting("01:00:00", "time limit per job (sbatch -t: MM, HH:MM:SS or D-HH:MM:SS)")
    jobs: int | None = setting(None, "exactly this many jobs at once (instead of min_jobs/max_jobs)")
    min_jobs: int | None = setting(None, "adaptive: at least this many jobs (default 0)")
    max_jobs: int | None = setting(None, "adaptive: at most this many jobs (default: the stage's run count)")
    job_extra_directives: tuple[str, ...] = setting((), "extra sbatch options, one per #SBATCH line, e.g. --gres=gpu:1")
    job_script_prologue: tuple[str, ...] = setting((), "shell lines run before the worker starts, e.g. module load ...")
    python: str | None = setting(None, "the workers' Python (default: this one, sys.executable)")
    local_directory: str | None = setting(None, "a worker's scratch folder on its node (default: dask's)")
    log_directory: str | None = setting(None, "where the jobs' stdout/stderr go (default: sbatch's, slurm-JOBID.out)")
    interface: str | None = setting(None, "the network interface workers and scheduler talk on, e.g. ib0")
    job_name: str = setting("gptlab", "the jobs' name in squeue (sbatch -J)")
    patience: str = setting("01:00:00", "how long runs may wait with no job started before the sweep stops, "
                            "naming squeue (a SLURM time, as walltime)")

    @classmethod
    def from_mapping(cls, raw: Any) -> "SlurmConfig":
        """Validate `executor.cluster:`, naming the `executor.cluster.KEY` of every problem."""
        if not isinstance(raw, Mapping):
            raise GptlabError(f"executor.cluster: must be a mapping such as {{type: slurm, cores: 4, memory: 16GB}}, "
                              f"got {shown(raw)}")
        names = [f.name for f in dataclasses.fields(cls)]
        for key in raw:
            if key not in names:
                hint = f" (SLURM's {OTHER_NAMES[key]!r} here)" if key in OTHER_NAMES else None
                raise unknown_key(key, names, "executor.cluster", hint=hint)
        if "type" not in raw:
            raise _fail("type", f"missing; valid: {', '.join(CLUSTER_TYPES)}")
        values = dict(raw)
        for key in ("job_extra_directives", "job_script_prologue"):
            if key in values:
                value = values[key]
                if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                    raise _fail(key, f"must be a list of non-empty strings, got {shown(value)}")
                values[key] = tuple(value)
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if self.type not in CLUSTER_TYPES:
            raise _fail("type", f"unknown cluster type {shown(self.type)}{closest(str(self.type), CLUSTER_TYPES)}; "
                        f"valid: {', '.join(CLUSTER_TYPES)}")
        for key in ("partition", "account", "python", "local_directory", "log_directory", "interface", "job_name"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, str) or not value.strip() or "\n" in value):
                raise _fail(key, f"must be a non-empty string on one line, got {shown(value)}")
        for key in ("partition", "account", "interface", "job_name"):  # they end up as sbatch arguments
            if getattr(self, key) is not None and re.search(r"\s", getattr(self, key)):
                raise _fail(key, f"must not contain spaces, got {shown(getattr(self, key))}")
        if not _count(self.cores, 1) or self.cores > MAX_CORES:
            raise _fail("cores", f"must be a positive integer of at most {MAX_CORES:,}, got {shown(self.cores)}")
        if not isinstance(self.memory, str) or not MEMORY.match(self.memory):
            raise _fail("memory", f"must be an amount with its unit such as 4GB, 500MB or 16GiB, got {shown(self.memory)}")
        for key in ("walltime", "patience"):
            value = getattr(self, key)
            if isinstance(value, int):  # YAML reads an unquoted 12:00:00 as 43200 (base 60)
                raise _fail(key, f"must be a quoted SLURM time such as '12:00:00' (YAML reads 12:00:00 "
                            f"unquoted as a number), got {shown(value)}")
            if not isinstance(value, str) or not WALLTIME.match(value) or not walltime_seconds(value):
                raise _fail(key, f"must be a SLURM time such as '30' (minutes), '02:00:00' or '1-12:00:00' "
                            f"(above zero; minutes and seconds 0-59 after an hour), got {shown(value)}")
        for key, least in (("jobs", 1), ("min_jobs", 0), ("max_jobs", 1)):
            value = getattr(self, key)
            if value is not None and (not _count(value, least) or value > MAX_JOBS):
                kind = "a positive integer" if least else "a non-negative integer"
                raise _fail(key, f"must be {kind} of at most {MAX_JOBS:,}, got {shown(value)}")
        if self.jobs is not None and (self.min_jobs is not None or self.max_jobs is not None):
            which = "min_jobs" if self.min_jobs is not None else "max_jobs"
            raise _fail("jobs", f"gives a fixed number of jobs, {which} an adaptive one; keep one of them")
        if self.min_jobs is not None and self.max_jobs is not None and self.min_jobs > self.max_jobs:
            raise _fail("min_jobs", f"{self.min_jobs} is more than max_jobs {self.max_jobs}")
        for key in ("job_extra_directives", "job_script_prologue"):
            if any("\n" in line for line in getattr(self, key)):
                raise _fail(key, "one line per entry (a newline would end the #SBATCH header)")
        for line in self.job_extra_directives:
            if not line.startswith("-"):
                raise _fail("job_extra_directives", f"each entry is an sbatch option such as --gres=gpu:1 "
                            f"(without '#SBATCH'), got {shown(line)}")

    def to_dict(self) -> dict[str, Any]:
        """As recorded in results/NAME/sweep.yaml (unset keys left out, lists as lists)."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if v is not None and v != ()}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    def job_bounds(self, n_runs: int) -> tuple[int, int]:
        """(fewest, most) jobs for a stage of `n_runs` runs: never more jobs than runs."""
        if self.jobs is not None:
            low = high = self.jobs
        else:
            low, high = self.min_jobs or 0, self.max_jobs or n_runs
        high = max(1, min(high, n_runs))
        return min(low, high), high

    def memory_bytes(self) -> int:
        number, unit = MEMORY.match(self.memory).groups()  # type: ignore[union-attr]  (validated)
        return int(float(number) * UNITS[unit.lower()])

    def describe(self, threads: int, n_runs: int | None = None, run_bytes: int = 0) -> str:
        """The plan line: the jobs for a stage of `n_runs` runs (None: not known yet, --dry-run), and a
        warning when a run's estimated peak memory (`run_bytes`) is over a job's."""
        low, high = self.job_bounds(n_runs) if n_runs is not None else (self.min_jobs or 0, self.max_jobs)
        if self.jobs is not None:
            jobs = f"{high if n_runs is not None else self.jobs} job(s)"
        else:
            jobs = f"adaptive, {low} to {high} job(s)" if high else f"adaptive, {low} job(s) up to one per run"
        where = f"partition {self.partition}" if self.partition else "the default partition"
        line = (f"plan: SLURM jobs on {where} ({jobs}), each {self.cores} core(s), {self.memory}, "
                f"walltime {self.walltime}; one run per job at a time, {threads} thread(s) per run; "
                f"stops if no job has started for {self.patience}")
        if run_bytes > self.memory_bytes():  # the estimate is an upper bound: a warning, not a refusal
            line += (f"; warning: a run may need ~{run_bytes / 2**30:.1f} GiB, more than executor.cluster.memory "
                     f"{self.memory} (a worker over it is lost)")
        return line


def _count(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def check_slurm() -> None:
    """Refuse, in one line and before anything is written, a machine that cannot submit SLURM jobs."""
    if shutil.which("sbatch") is None:
        raise GptlabError("executor.cluster type slurm needs `sbatch` on PATH, and it is not there: run the sweep on "
                          "a SLURM login node (for a local test cluster: .ci/slurm_up.sh)")
    try:
        import_jobqueue()
        import distributed  # noqa: F401
    except ImportError:
        raise GptlabError("executor.cluster type slurm needs dask-jobqueue: pip install -e \".[distributed]\"") from None


def import_jobqueue() -> Any:
    """Import dask_jobqueue keeping the SIGINT handler in place: its first import replaces it with `sys.exit()`
    (dask_jobqueue/runner.py), which would turn Ctrl-C into a silent exit 0 instead of the sweep's resume line."""
    handler = signal.getsignal(signal.SIGINT)
    import dask_jobqueue

    if handler is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)
    return dask_jobqueue


def cluster_options(config: SlurmConfig) -> dict[str, Any]:
    """SLURMCluster's arguments: one worker process with one task slot per job, on `cores` booked cores."""
    return {
        "cores": 1, "processes": 1,  # one task slot: a job trains one run at a time...
        "job_cpu": config.cores,  # ...on all of its cores (the run's torch threads)
        "memory": config.memory, "walltime": config.walltime, "queue": config.partition, "account": config.account,
        "job_extra_directives": list(config.job_extra_directives),
        "job_script_prologue": list(config.job_script_prologue),
        "python": config.python or sys.executable, "local_directory": config.local_directory,
        "log_directory": config.log_directory, "interface": config.interface, "job_name": config.job_name,
        "death_timeout": DEATH_TIMEOUT_S,
        "scheduler_options": {"dashboard_address": ":0"},  # a free port: a login node's 8787 is often taken
    }


@contextlib.contextmanager
def slurm_client(config: SlurmConfig, n_runs: int) -> Iterator[tuple[Any, list[str]]]:
    """(a `distributed.Client` of a new SLURMCluster sized for `n_runs`, what sbatch said of each submission it
    refused since); the jobs are cancelled on the way out."""
    check_slurm()
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    refusals: list[str] = []
    with quiet_loggers("distributed", "dask_jobqueue"), _without_refusal_tracebacks():
        cluster = SLURMCluster(**cluster_options(config), job_cls=_recording_job_class(refusals))
        try:
            check_submission(cluster.job_script())
            low, high = config.job_bounds(n_runs)
            cluster.adapt(minimum_jobs=low, maximum_jobs=high)
            log.debug("SLURM job script:\n%s", cluster.job_script())
            client = Client(cluster)
            try:
                yield client, refusals
            finally:
                client.close()
        finally:
            cluster.close()  # scancel every job it submitted


class SubmissionRefused(RuntimeError):
    """sbatch refused a job of a running sweep (a queue limit reached since `--test-only` passed, say)."""


def _recording_job_class(refusals: list[str]) -> type:
    """dask-jobqueue's SLURMJob, appending what sbatch says to `refusals` when it refuses a submission: the
    adaptive loop would only log it (a traceback), and the sweep would wait for a job that never comes."""
    from dask_jobqueue.slurm import SLURMJob
    from distributed.core import Status

    class RecordingSLURMJob(SLURMJob):
        async def _submit_job(self, script_filename: str) -> str:
            try:
                return await super()._submit_job(script_filename)
            except RuntimeError as err:  # dask-jobqueue's: exit code, command, stdout and stderr
                said = str(err).partition("stderr:")[2].strip() or str(err).strip()
                refusals.append(" / ".join(line.strip() for line in said.splitlines() if line.strip()))
                self.status = Status.failed  # else closing the cluster asserts that no job is left "created"
                raise SubmissionRefused(refusals[-1]) from None
    return RecordingSLURMJob


class _DropRefusals(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], SubmissionRefused))


@contextlib.contextmanager
def _without_refusal_tracebacks() -> Iterator[None]:
    """The adaptive loop logs a refused submission with its traceback; the sweep says it in one line instead."""
    loggers = [logging.getLogger(name) for name in ("tornado.application", "asyncio", "distributed.deploy.spec",
                                                        "distributed.deploy.adaptive_core")]
    drop = _DropRefusals()
    for logger in loggers:
        logger.addFilter(drop)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(drop)


def refusal_message(config: SlurmConfig, said: str) -> str:
    """What the sweep says when sbatch refused one of its jobs while it ran."""
    return (f"sbatch refused a job of this sweep: {said}; the jobs are cancelled, finished runs are kept; fix "
            "executor.cluster (or wait for the queue's limits) and rerun the same command to resume")


def check_submission(job_script: str) -> None:
    """Ask `sbatch --test-only` whether SLURM would take the job script (nothing is submitted): a bad
    partition, account or directive is one line quoting sbatch, before any job or run starts. Submitted
    for real, it would fail inside dask-jobqueue's adaptive loop as a traceback, then silence."""
    try:
        answer = subprocess.run(["sbatch", "--test-only"], input=job_script, capture_output=True, text=True,
                                timeout=SBATCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise GptlabError(f"sbatch did not answer within {SBATCH_TIMEOUT_S} s: is the SLURM controller up? "
                          "(sinfo says)") from None
    except OSError as exc:
        raise GptlabError(f"cannot run sbatch ({exc.strerror or exc})") from None
    if answer.returncode != 0:
        said = " / ".join(line.strip() for line in answer.stderr.splitlines() if line.strip()) or "no message"
        raise GptlabError(f"sbatch refuses the sweep's job (exit {answer.returncode}): {said}; check executor.cluster "
                          "(partition, account, memory, job_extra_directives)")


def patience_message(config: SlurmConfig) -> str:
    """What the sweep says when no job has started within `patience`."""
    return (f"no SLURM job of this sweep has started for {config.patience} (executor.cluster.patience): "
            f"`squeue -u $USER -n {config.job_name}` shows why they wait (its REASON column); the jobs are "
            "cancelled, finished runs are kept; rerun the same command to resume")


@contextlib.contextmanager
def quiet_loggers(*names: str) -> Iterator[None]:
    """Only warnings from these loggers meanwhile: the scheduler runs in this process, and its
    INFO lines (every worker, client and connection) would bury the sweep's progress."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
