"""The plan: how many runs train at once, with how many threads, from the machine and `executor:`.

What `executor:` asks of this machine is checked here, not in `ExecutorConfig.validate`, which
judges the YAML alone (and so never imports this module back).
"""
from __future__ import annotations

import os

from gptlab.errors import GptlabError
from gptlab.executors.base import ExecutorConfig, Resources
from gptlab.executors.populations import batched_members
from gptlab.run.config import RunConfig

# Resident memory of a worker beyond its model and its corpus: the Python interpreter and torch.
WORKER_BASE_BYTES = 600 * 2**20


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def estimate_run_bytes(config: RunConfig, vocab_size: int = 256, corpus_bytes: int = 0, members: int = 1) -> int:
    """Rough peak memory of one training run, or of a population of `members` such runs, in bytes (an upper
    estimate, fp32 throughout).

    Weights, gradients and two Adam moments (16 bytes per parameter); activations kept for the
    backward pass at the training batch (Korthikanti et al. 2022, ~34 C + 5 n_head T values per
    token and layer) plus the logits; the evaluation batch's logits; position tables; the loss
    buffers; the worker process itself; and the run's copy of its corpus (`corpus_bytes`, from
    `gptlab.run.textscan.TextScan.corpus_bytes`: a 300 MB corpus takes about 3.5 GB). A population
    (`executor.population`) holds each member's weights, gradients, moments, activations and loss buffers, and
    the worker, the corpus, the tables and the evaluation batch once (its members are evaluated one by one).
    """
    m, t = config.model, config.train
    C, L, T, H, V = m.n_embd, m.n_layer, m.block_size, m.n_head, vocab_size
    B, E = t.batch_size, t.eval_batch_size
    params = 12 * L * C * C + 2 * V * C + T * C
    training = 16 * params
    activations = 4 * B * T * (L * (34 * C + 5 * H * T) + 3 * V)
    evaluation = 4 * E * T * (3 * V + 2 * C + H * T)
    tables = 4 * (T * C + H * T * T)  # sinusoidal / rotary tables, an ALiBi bias
    loss_buffers = 8 * min(t.log_interval, t.eval_interval, t.max_iters)
    return WORKER_BASE_BYTES + members * (training + activations + loss_buffers) + evaluation + tables + corpus_bytes


def plan_resources(n_runs: int, executor: ExecutorConfig, device: str, run_bytes: int) -> Resources:
    """Choose workers x threads so that cores (or GPUs) are busy without oversubscription; `run_bytes` is a
    worker's largest unit (`sweep.preflight.check_memory`: a population's where `executor.population` batches runs)."""
    import psutil

    cores = available_cores()
    n_jobs, threads = executor.n_jobs, executor.threads
    if executor.backend == "loky" and isinstance(threads, int) and threads > cores:
        raise GptlabError(f"executor.threads: {threads} threads per run, but this machine has {cores} core(s); "
                          f"use at most {cores}, or auto")
    memory_cap = max(1, int(0.8 * psutil.virtual_memory().available // max(run_bytes, 1)))
    if device == "cuda":
        import torch

        gpus = torch.cuda.device_count()
        slots = gpus * executor.runs_per_gpu
        workers = slots if n_jobs == "auto" else min(int(n_jobs), slots)
        reason = f"{executor.runs_per_gpu} run(s) per GPU"
    else:
        gpus = 0
        # Small models scale poorly across threads; one run per core keeps every core busy.
        workers = cores if n_jobs == "auto" else int(n_jobs)
        reason = f"{cores} core(s)"
    workers = max(1, min(workers, n_runs))
    members = batched_members(executor, device)
    if workers > memory_cap:
        unit = "run(s)" if members == 1 else f"population(s) of up to {members} runs"
        reason += f"; memory allows {memory_cap} {unit} of ~{run_bytes / 2**30:.1f} GiB"
        workers = memory_cap
    per_run = max(1, cores // workers) if threads == "auto" else int(threads)
    return Resources(workers, per_run, device, gpus, reason, run_bytes, members)
