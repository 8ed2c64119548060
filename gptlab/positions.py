"""Axis `model.position`: how the model learns where each token sits.

An entry is an `nn.Module` class built from the `ModelConfig` with three hooks, all optional:
- `embed(x)`: absolute schemes add to the (B, T, C) token embeddings before the first block;
- `rotate(q, k)`: schemes acting on queries and keys inside attention (rotary);
- `attn_bias(T, device, dtype)`: an additive (nh, T, T) attention bias (ALiBi), or None.
The attention layer calls the last two, so schemes inside attention need no builder change.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn as nn

from gptlab.registry import Registry

if TYPE_CHECKING:
    from gptlab.model import ModelConfig

POSITIONS: Registry[type["PositionEncoding"]] = Registry("position", "position information scheme")

# Standard deviation of GPT-2's embedding init; the sinusoid table is scaled to match it.
EMBEDDING_INIT_STD = 0.02


class PositionEncoding(nn.Module):
    """Base class: every hook defaults to 'no position information here'."""

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return q, k

    def attn_bias(self, T: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor | None:
        return None


@POSITIONS.register("learned")
class LearnedPosition(PositionEncoding):
    """Learned absolute table of block_size x n_embd (GPT-2)."""

    def __init__(self, cfg: "ModelConfig") -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(cfg.block_size, cfg.n_embd))
        nn.init.normal_(self.weight, mean=0.0, std=EMBEDDING_INIT_STD)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        T = x.size(1)
        return x + self.weight[:T]  # (B, T, C) + (T, C)


@POSITIONS.register("sinusoidal")
class SinusoidalPosition(PositionEncoding):
    """Fixed sinusoids (Vaswani et al. 2017), a buffer with zero parameters, RMS-matched to wte init.

    Scale: raw sinusoids have per-element RMS 1/sqrt(2) (~0.71), 35x the 0.02 RMS of GPT-2's
    token embeddings at init, which would drown token identity in the residual stream. Vaswani
    et al. instead multiply token embeddings by sqrt(d_model); we keep the embeddings untouched
    (so tied/untied and learned/sinusoidal runs differ only in the position term) and scale the
    table to per-element RMS 0.02, exactly the scale of the learned table at init.
    """

    def __init__(self, cfg: "ModelConfig") -> None:
        super().__init__()
        pos = torch.arange(cfg.block_size, dtype=torch.float32).unsqueeze(1)  # (T, 1)
        inv_freq = torch.exp(torch.arange(0, cfg.n_embd, 2).float() * (-math.log(10000.0) / cfg.n_embd))
        table = torch.zeros(cfg.block_size, cfg.n_embd)
        table[:, 0::2] = torch.sin(pos * inv_freq)
        table[:, 1::2] = torch.cos(pos * inv_freq[: cfg.n_embd // 2])
        table *= EMBEDDING_INIT_STD / table.pow(2).mean().sqrt()
        # persistent=False: derived from the config, so it never needs to be in a checkpoint.
        self.register_buffer("table", table, persistent=False)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        T = x.size(1)
        return x + self.table[:T].to(x.dtype)  # (B, T, C) + (T, C)
