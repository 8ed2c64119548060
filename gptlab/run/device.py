"""Where a run computes: the device, its autocast, and the process-wide settings of a worker.

`configure_process` is called by whoever starts a process that trains (the train CLI, an
executor's worker, the sweep's time estimate): threads and TF32 belong to the process, not to a run.
"""
from __future__ import annotations

import contextlib

import torch

from gptlab.errors import GptlabError


def resolve_device(name: str) -> torch.device:
    """`auto` picks cuda, then mps, then cpu."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise GptlabError(f"train.device must be auto, cpu, cuda, cuda:N or mps, got {name!r}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise GptlabError(f"train.device is {name!r} but CUDA is not available here; use auto or cpu")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise GptlabError(f"train.device is {name!r} but this machine has {count} GPU(s): cuda:0 to cuda:{count - 1}")
    if device.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise GptlabError(f"train.device is {name!r} but MPS (Apple GPUs) is not available here; use auto or cpu")
    return device


def autocast_for(device: torch.device, dtype: str) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA by default (matmuls in bf16, reductions and loss in fp32)."""
    use_bf16 = dtype == "bfloat16" or (dtype == "auto" and device.type == "cuda")
    if use_bf16:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def configure_process(threads: int | None = None) -> None:
    """Process-wide settings for training: torch's thread count, and TF32 for fp32 matmuls on CUDA.

    TF32 keeps 10 mantissa bits in the matmuls autocast leaves in fp32 (a ~2x speedup on Ampere
    and later); it changes nothing on CPU.
    """
    if threads:
        torch.set_num_threads(threads)
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
