"""Executors: how many runs train at once, with how many threads, and where.

`plan_resources` turns the machine (cores, memory, GPUs) and `executor:` settings into a plan of
workers x threads. `execute_run` is the worker-side task shared by every backend: plain dict in,
plain dict out, every exception recorded in the run directory. Backends: `local` (joblib's loky
worker processes on this machine).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

log = logging.getLogger("gptlab.executors")

RUNNING_MARKER = "running.json"
WORKER_DIED = "worker process died while training (killed, or out of memory)"
# Resident memory of a worker beyond its model: the Python interpreter, torch and the dataset.
WORKER_BASE_BYTES = 600 * 2**20


@dataclass(frozen=True)
class Plan:
    """How a sweep uses the machine."""

    workers: int  # runs trained at once
    threads: int  # torch / OpenMP threads per run
    device: str  # cpu | cuda | mps
    gpus: int  # GPUs shared by the workers (0 on CPU)
    reason: str  # one line explaining the choice
    run_bytes: int = 0  # estimated peak memory of one run, which caps the number of workers

    def describe(self) -> str:
        where = f"{self.gpus} GPU(s)" if self.gpus else "CPU"
        return f"plan: {self.workers} worker(s) x {self.threads} thread(s) on {where} ({self.reason})"


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def estimate_run_bytes(config: dict[str, Any]) -> int:
    """Rough peak memory of one training run: weights, grads, two Adam moments, activations."""
    m, t = config["model"], config["train"]
    C, L, T, B = m["n_embd"], m["n_layer"], m["block_size"], max(t["batch_size"], t["eval_batch_size"])
    params = 12 * L * C * C + 2 * 256 * C + T * C
    activations = B * T * L * (34 * C + 5 * m["n_head"] * T) * 4  # Korthikanti et al. 2022, fp32
    return WORKER_BASE_BYTES + 16 * params + activations


def plan_resources(n_runs: int, executor: dict[str, Any], device: str, run_bytes: int) -> Plan:
    """Choose workers x threads so that cores (or GPUs) are busy without oversubscription."""
    import psutil

    cores = available_cores()
    n_jobs, threads = executor.get("n_jobs", "auto"), executor.get("threads", "auto")
    memory_cap = max(1, int(0.8 * psutil.virtual_memory().available // max(run_bytes, 1)))
    if device == "cuda":
        import torch

        gpus = torch.cuda.device_count()
        slots = gpus * executor.get("runs_per_gpu", 1)
        workers = slots if n_jobs == "auto" else min(n_jobs, slots)
        reason = f"{executor.get('runs_per_gpu', 1)} run(s) per GPU"
    else:
        gpus = 0
        # Small models scale poorly across threads; one run per core keeps every core busy.
        workers = cores if n_jobs == "auto" else n_jobs
        reason = f"{cores} core(s)"
    workers = max(1, min(workers, n_runs))
    if workers > memory_cap:
        reason += f"; memory allows {memory_cap} run(s) of ~{run_bytes / 2**30:.1f} GiB"
        workers = memory_cap
    if threads == "auto":
        threads = max(1, cores // workers)
    return Plan(workers, threads, device, gpus, reason, run_bytes)


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


def execute_run(task: dict[str, Any]) -> dict[str, Any]:
    """Worker side: train one run; never raises for a run's own errors (they go into its directory)."""
    from gptlab.plugins import import_plugins
    from gptlab.train import train_run, write_failure

    run_dir = Path(task["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    marker = run_dir / RUNNING_MARKER
    marker.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}))
    started = time.perf_counter()
    try:
        import torch

        torch.set_num_threads(task["threads"])
        import_plugins(task.get("plugins", []), task.get("search_path", []))
        config = task["config"]
        if task.get("gpus", 0) > 1:
            with gpu_slot(run_dir.parent.parent / ".gpu_slots", task["gpus"], task.get("runs_per_gpu", 1)) as gpu:
                config = {**config, "train": {**config["train"], "device": f"cuda:{gpu}"}}
                summary = train_run(config, run_dir, run_id=task["run_id"])
        else:
            summary = train_run(config, run_dir, run_id=task["run_id"])
    except Exception as err:  # recorded, not raised: one bad run must not stop its siblings
        summary = write_failure(run_dir, task["run_id"], task["config"], err)
    finally:
        marker.unlink(missing_ok=True)
    return {"run_id": task["run_id"], "summary": summary, "seconds": time.perf_counter() - started}


