"""What crosses the boundary between the sweep and its executors, and the `BACKENDS` registry.

The sweep hands a backend a list of `Task`s and the `Resources` it may use, and gets one `RunResult` per run back;
`ExecutorConfig` is the YAML's `executor:` section, validated. A backend is a `BACKENDS` entry: a
factory taking the `ExecutorConfig` and returning an object with the `Backend` protocol.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Protocol, Sequence

from gptlab.errors import GptlabError, closest, key_error, shown, unknown_key
from gptlab.executors.slurm import SlurmConfig
from gptlab.fields import setting
from gptlab.registry import Registry
from gptlab.run.config import RunConfig
from gptlab.run.rundir import RunSummary
from gptlab.statuses import FAILED

_fail = partial(key_error, section="executor")  # this section's bad values: `executor.KEY: MESSAGE`


@dataclass(frozen=True)
class ExecutorConfig:
    """How and where the runs of a sweep train (the sweep YAML's `executor:` section)."""

    backend: str = setting("loky", "where runs train: loky (worker processes here) or dask (a dask.distributed cluster)")
    n_jobs: int | str = setting("auto", "runs trained at once: auto (one per core, or per GPU slot) or a positive integer")
    threads: int | str = setting("auto", "torch threads per run: auto (cores / runs at once) or a positive integer")
    runs_per_gpu: int = setting(1, "runs sharing one GPU at once")
    scheduler: str | None = setting(None, "dask: the scheduler address (tcp://HOST:PORT), or 'local' for a local cluster")
    shared_dir: str | None = setting(None, "dask: a folder every worker sees, where runs train (and resume) in place")
    on_worker_lost: str = setting("retry", "dask: retry (once) or fail a run whose worker was lost")
    cluster: SlurmConfig | None = setting(None, "dask: a cluster the sweep starts and releases, {type: slurm, ...}")
    population: int | str = setting("off", "loky: runs of one architecture trained as one batched model, at most this "
                                    "many (an integer), off, or auto (only where measured faster: not on CPU)")

    @classmethod
    def from_mapping(cls, raw: Any) -> "ExecutorConfig":
        """Validate a YAML mapping, naming the `executor.KEY` of every problem."""
        if not isinstance(raw, Mapping):
            raise GptlabError(f"executor: must be a mapping, got {shown(raw)}")
        names = [f.name for f in dataclasses.fields(cls)]
        for key in raw:
            if key not in names:
                raise unknown_key(key, names, "executor")
        cluster = raw.get("cluster")
        raw = {**raw, "cluster": SlurmConfig.from_mapping(cluster) if cluster is not None else None}
        if raw.get("population") is False:  # YAML 1.1 reads a bare `off` as false
            raw["population"] = "off"
        config = cls(**raw)
        config.validate()
        return config

    def validate(self) -> None:
        if not isinstance(self.backend, str) or self.backend not in BACKENDS:
            raise _fail("backend", f"unknown backend {shown(self.backend)}{closest(str(self.backend), BACKENDS.names())}; "
                        f"valid: {', '.join(BACKENDS.names())}")
        for key in ("n_jobs", "threads"):
            value = getattr(self, key)
            if value != "auto" and not _positive_int(value):
                raise _fail(key, f"must be 'auto' or a positive integer, got {shown(value)}")
        if self.population not in POPULATION_WORDS and not _positive_int(self.population):
            raise _fail("population", f"must be 'auto', 'off' or a positive integer (the most runs trained as one), "
                        f"got {shown(self.population)}")
        if not _positive_int(self.runs_per_gpu):
            raise _fail("runs_per_gpu", f"must be a positive integer, got {shown(self.runs_per_gpu)}")
        for key in ("scheduler", "shared_dir"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise _fail(key, f"must be a non-empty string, got {shown(value)}")
        if self.on_worker_lost not in ON_WORKER_LOST:
            raise _fail("on_worker_lost", f"must be one of {', '.join(ON_WORKER_LOST)}, got {shown(self.on_worker_lost)}")
        if self.cluster is not None and not isinstance(self.cluster, SlurmConfig):
            raise _fail("cluster", f"must be a mapping such as {{type: slurm}}, got {shown(self.cluster)}")
        if self.backend == "dask" and not self.scheduler and self.cluster is None:
            raise _fail("scheduler", "the dask backend needs a scheduler address (tcp://HOST:PORT) or 'local', "
                        "or executor.cluster: {type: slurm, ...}")
        for key in ("scheduler", "shared_dir", "cluster"):
            if self.backend != "dask" and getattr(self, key) is not None:
                raise _fail(key, f"only the dask backend uses it, and the backend is {self.backend!r}; "
                            "add executor.backend: dask (or --backend dask), or remove it")
        if self.shared_dir is not None and not os.path.isabs(os.path.expanduser(self.shared_dir)):
            raise _fail("shared_dir", f"must be an absolute path (every worker resolves it on its own machine), "
                        f"got {shown(self.shared_dir)}")
        if self.cluster is not None:
            self._validate_cluster(self.cluster)
        for key, limit in LIMITS.items():
            value = getattr(self, key)
            if key == "threads" and self.backend == "loky":
                continue  # the plan refuses more than this machine's cores (plan.plan_resources), with its count
            if isinstance(value, int) and value > limit:
                raise _fail(key, f"must be at most {limit:,}, got {shown(value)}: no machine or cluster comes near it")

    def _validate_cluster(self, cluster: SlurmConfig) -> None:
        if self.scheduler is not None:
            raise _fail("cluster", f"the sweep starts the cluster's own scheduler, so executor.scheduler "
                        f"{shown(self.scheduler)} contradicts it; remove one (or --scheduler)")
        if self.n_jobs != "auto":
            raise _fail("n_jobs", "with a cluster, its jobs are executor.cluster.jobs (or min_jobs/max_jobs); "
                        "remove n_jobs (or --jobs)")
        if isinstance(self.threads, int) and self.threads > cluster.cores:
            raise _fail("threads", f"{self.threads} threads per run, but each SLURM job has executor.cluster.cores "
                        f"{cluster.cores}; use at most {cluster.cores}, or auto")

    def to_dict(self) -> dict[str, Any]:
        """As recorded in results/NAME/sweep.yaml (unset optional keys left out)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}
        if self.population == "off":  # the default: sweep.yaml files written before the key stay as they were
            del out["population"]
        if self.cluster is not None:
            out["cluster"] = self.cluster.to_dict()
        return out


ON_WORKER_LOST = ("retry", "fail")
POPULATION_WORDS = ("auto", "off")  # executor.population's words; a number is the most members of one population
# Upper bounds of the counts above: beyond any machine or cluster, they stop an absurd number (a typo) early.
LIMITS = {
    "n_jobs": 10_000,  # runs at once: a sweep has at most 10,000 runs (sweep/spec.py MAX_RUNS)
    "threads": 4_096,  # threads per run: more cores than the largest machines have
    "runs_per_gpu": 256,  # runs sharing one GPU
    "population": 256,  # runs trained as one batched model
}



# `executor.population: auto` by device type: the most members per population where a population was measured
# faster than lone runs. Empty today: on CPU it is slower at the scorecard's size (docs/GPU.md: 0.79-0.95x), and
# no GPU has measured it yet; an entry goes here with its benchmark (benchmarks/README.md).
AUTO_SIZES: dict[str, int] = {}


def plans_members(executor: ExecutorConfig, config: RunConfig) -> bool:
    """Whether a sweep under `executor` plans `config` to train in a population (`RunConfig.population`, hashed into
    its id: a member's losses drift from its lone run's as training goes on, docs/GPU.md, so the two never share an
    id, a `--reuse` or a resume). A number above 1, or `auto` where `AUTO_SIZES` names the run's device, on the loky
    backend, for a config that may share one (`population_key`). Such a run may still train alone (no sibling left
    in its stage, a shared trunk, a population that failed as a whole): it keeps its id, apart from lone runs."""
    from gptlab.run.population import population_key

    if executor.backend != "loky" or executor.population == "off" or (executor.population == "auto" and not AUTO_SIZES):
        return False
    auto = executor.population == "auto"
    size = AUTO_SIZES.get(_device_type(config.train.device), 1) if auto else int(executor.population)
    return size > 1 and population_key(config, auto) is not None


def _device_type(name: str) -> str:
    from gptlab.run.device import resolve_device

    return resolve_device(name).type if name == "auto" else name.partition(":")[0]


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class Resources:
    """How a sweep uses the machine: runs at once, threads each, the device (what `plan_resources` chose)."""

    workers: int  # runs trained at once
    threads: int  # torch / OpenMP threads per run
    device: str  # cpu | cuda | mps
    gpus: int  # GPUs shared by the workers (0 on CPU)
    reason: str  # one line explaining the choice
    run_bytes: int = 0  # estimated peak memory of a worker's largest unit (a run, or a population), which caps the workers
    members: int = 1  # the most runs a worker trains as one population (`executor.population` here); run_bytes counts them

    def describe(self) -> str:
        where = f"{self.gpus} GPU(s)" if self.gpus else "CPU"
        return f"plan: {self.workers} worker(s) x {self.threads} thread(s) on {where} ({self.reason})"


@dataclass(frozen=True)
class Task:
    """One run as a worker receives it: everything it needs, nothing it must look up."""

    run_id: str  # the run's folder name and label
    config: RunConfig  # the resolved run config (frozen, pickled to the worker as is)
    run_dir: str  # absolute path of the run's folder as the driver sees it
    threads: int  # torch threads for this run
    plugins: tuple[str, ...] = ()  # plugin modules / .py paths to import before training
    search_path: tuple[str, ...] = ()  # folders added to sys.path for the plugins
    gpus: int = 0  # GPUs the workers share (a run takes a free slot among them); 0 on CPU
    runs_per_gpu: int = 1  # slots per GPU
    driver: tuple[int, float] | None = None  # (pid, creation time) of the sweep's process: the run stops once it is gone


@dataclass(frozen=True)
class RunResult:
    """What a backend reports for one run: its summary.json and the seconds it took here."""

    run_id: str
    summary: RunSummary  # the run's summary.json (a mapping, as a writer returns it, is taken as its `RunSummary`)
    seconds: float  # wall time of this attempt (NaN when the run never started)

    def __post_init__(self) -> None:
        if not isinstance(self.summary, RunSummary):  # frozen: the one write, normalising
            object.__setattr__(self, "summary", RunSummary.from_mapping(self.summary))

    @property
    def status(self) -> str:
        return str(self.summary.status or FAILED)


OnResult = Callable[[RunResult], None]


class Backend(Protocol):
    """What every `BACKENDS` entry builds from an `ExecutorConfig`."""

    def check(self) -> None:
        """Refuse, before anything is written, a backend that cannot run (e.g. no scheduler)."""

    def describe(self, plan: Resources, dry_run: bool = False) -> str | None:
        """The plan line to print (before training, or for `--dry-run`); None: it logs its own later."""

    def run(self, tasks: Sequence[Task], plan: Resources, on_result: OnResult, fail_fast: bool = False) -> None:
        """Train `tasks`, calling `on_result` once per run as it finishes (in the calling thread)."""


BackendFactory = Callable[[ExecutorConfig], Backend]
BACKENDS: Registry[BackendFactory] = Registry("backend", "where the runs of a sweep train")
