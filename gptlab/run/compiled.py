"""torch.compile for training steps: whether a run compiles, in which mode (CUDA graphs), and once per architecture.

A scorecard-sized step is a few GFLOP: on a GPU its time is kernel launches and Python (issue 43). Two
levers, both owned here:

- **CUDA graphs** (`train.cuda_graphs`): the compiled step captured once and replayed, one launch for the
  whole graph (`torch.compile(mode="reduce-overhead")`, PyTorch's documented mode for small batches). A
  training step's shapes are static (batch x block, every step), so one capture serves the run. Off by
  default until measured on a GPU (docs/GPU.md); CUDA only.
- **One compile per architecture per process.** Dynamo keys a compiled `forward` by its code and guards
  (shapes, dtypes, the module's structure and constants), not by the module instance: a worker's next run of
  the same architecture reuses the graph its first run compiled (`benchmarks/compile_reuse.py`, CPU, torch 2.13:
  22 s for the first run's compile, 0.00 s for the next run of that architecture). What would break the reuse
  is dynamo's limit of 8 compiled variants of one function: a worker training more architectures than that
  would run the rest eager, and the scorecard has 11. `RECOMPILE_LIMIT` raises it for the process.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, TypeVar

import torch

from gptlab.run.config import TrainConfig

log = logging.getLogger("gptlab.train")

RECOMPILE_LIMIT = 64  # compiled variants of one function per process (dynamo's default: 8): architectures per worker
BACKEND = "inductor"  # torch.compile's backend; the tests trace with a cheaper one on CPU (inductor's C++ build is slow)
GRAPHS = "reduce-overhead"  # the torch.compile mode that captures CUDA graphs

F = TypeVar("F", bound=Callable[..., Any])


def compile_mode(train: TrainConfig, device: torch.device) -> str | None:
    """How a run's training step is compiled: None (eager), "default", or `GRAPHS` (CUDA graphs on CUDA).

    `train.compile` unset compiles on CUDA only; `train.cuda_graphs` (validated to go with compile and a CUDA or
    auto device) captures graphs where the device is CUDA, and is dropped with a log line where `auto` chose another.
    """
    use_compile = train.compile if train.compile is not None else device.type == "cuda"
    if train.cuda_graphs and device.type != "cuda":  # said whether or not the step compiles (`compile` unset: eager)
        log.info("train.cuda_graphs: the device is %s, not CUDA; %s", device, "compiling without CUDA graphs" if use_compile
                 else "training without CUDA graphs (and eager: train.compile is unset, which compiles on CUDA only)")
    if not use_compile:
        return None
    return GRAPHS if train.cuda_graphs and device.type == "cuda" else "default"


def compiled(fn: F, mode: str = "default") -> F:
    """`fn` (a module or a function) through torch.compile in `mode`, with this process's recompile limit raised."""
    limit = torch._dynamo.config
    limit.recompile_limit = max(limit.recompile_limit, RECOMPILE_LIMIT)
    return torch.compile(fn, backend=BACKEND, **({} if mode == "default" else {"mode": mode}))
