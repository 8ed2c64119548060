"""Executors: where and how many runs of a sweep train at once.

- `base`: what crosses the boundary (`Task`, `RunResult`, `ExecutorConfig`, `Resources`) and the
  `BACKENDS` registry with its `Backend` protocol;
- `plan`: workers x threads from the machine (cores, memory, GPUs) and `executor:`;
- `worker`: the worker-side task every backend runs, `execute_run(Task) -> RunResult`;
- `local` (`loky`: worker processes here) and `dask_backend` (`dask`: a dask.distributed cluster);
- `slurm`: `executor.cluster: {type: slurm}`, a dask-jobqueue SLURMCluster the dask backend starts and releases.

Both backends are imported here, explicitly, so registration is deterministic; neither imports
joblib or dask until it runs.
"""
from gptlab.executors import (
           dask_backend,  # noqa: F401  (registers dask)
           local,  # noqa: F401  (registers loky, the default, first)
)
from gptlab.executors.base import BACKENDS, Backend, ExecutorConfig, Resources, RunResult, Task
from gptlab.executors.plan import available_cores, estimate_run_bytes, plan_resources
from gptlab.executors.worker import WORKER_DIED, execute_run

__all__ = ["BACKENDS", "Backend", "ExecutorConfig", "Resources", "RunResult", "Task", "WORKER_DIED",
           "available_cores", "estimate_run_bytes", "execute_run", "plan_resources"]
