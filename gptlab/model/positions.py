"""Axis `model.position`: how the model learns where each token sits.

An entry is an `nn.Module` class built from the `ModelConfig` with three hooks, all optional:
- `embed(x)`: absolute schemes add to the (B, T, C) token embeddings before the first block;
- `rotate(q, k)`: schemes acting on queries and keys inside attention (rotary);
- `attn_bias(T, device, dtype)`: an additive (nh, T, T) attention bias (ALiBi), or None.
The attention layer calls the last two, so schemes inside attention need no builder change.

Parameters: learned block_size x n_embd; sinusoidal, none, rotary and alibi none at all (their
tables are non-persistent buffers rebuilt from the config).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from gptlab.model.shape import ModelShape
from gptlab.registry import Registry

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

    def __init__(self, cfg: ModelShape) -> None:
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

    def __init__(self, cfg: ModelShape) -> None:
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


@POSITIONS.register("none")
class NoPosition(PositionEncoding):
    """NoPE: no position information, zero parameters (Haviv et al. 2022; Kazemnejad et al. 2023).

    The causal mask alone lets a decoder infer position (a token at t attends over t + 1
    tokens), which is why this can still learn; it is the control for every other entry.
    """

    def __init__(self, cfg: ModelShape) -> None:
        super().__init__()


@POSITIONS.register("rotary")
class RotaryPosition(PositionEncoding):
    """RoPE (Su et al. 2021): queries and keys rotated by position inside attention, zero parameters.

    Channel pair i of a head is rotated by angle t * theta_i, theta_i = 10000^(-2i/hs), so the
    score q_t . k_s depends on t - s only. Pairs are (i, i + hs/2) ("rotate half", as in
    GPT-NeoX and LLaMA) rather than the paper's adjacent (2i, 2i + 1): the two are the same
    model up to a fixed permutation of the q and k channels, which the learned c_attn absorbs,
    and contiguous halves need no strided indexing. With an odd head size the last channel is
    left unrotated (like GPT-NeoX's partial rotary), so every n_embd / n_head shape works.
    """

    def __init__(self, cfg: ModelShape) -> None:
        super().__init__()
        head_size = cfg.n_embd // cfg.n_head
        self.half = head_size // 2
        rotated = 2 * self.half  # hs, or hs - 1 when odd
        inv_freq = 10000.0 ** (-torch.arange(0, rotated, 2, dtype=torch.float32) / rotated)  # (hs/2,) theta_i
        angles = torch.arange(cfg.block_size, dtype=torch.float32).unsqueeze(1) * inv_freq  # (T, hs/2)
        # persistent=False: derived from the config, so never in a checkpoint.
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def _rotate(self, x: torch.Tensor) -> torch.Tensor:
        T, h = x.size(-2), self.half
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)  # (T, hs/2), broadcast over B, nh
        x1, x2, rest = x[..., :h], x[..., h : 2 * h], x[..., 2 * h :]  # (B, nh, T, hs/2) twice, (B, nh, T, hs % 2)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest), dim=-1)  # (B, nh, T, hs)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._rotate(q), self._rotate(k)


def alibi_slopes(n_head: int) -> list[float]:
    """ALiBi head slopes as in Press et al. 2022 and their reference code.

    For n a power of 2: the geometric sequence 2^(-8/n), 2^(-16/n), ..., 2^(-8). Otherwise: the
    slopes for the closest lower power of 2, m, followed by the first n - m of every other slope
    for 2m heads, starting with its first (2^(-4/m), 2^(-12/m), ...): they fall between the others.
    """

    def power_of_2(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    m = 2 ** math.floor(math.log2(n_head))
    return power_of_2(m) + power_of_2(2 * m)[0::2][: n_head - m]


@POSITIONS.register("alibi")
class ALiBiPosition(PositionEncoding):
    """ALiBi (Press et al. 2022): per-head bias -slope * (i - j) on attention scores, zero parameters.

    The (nh, block_size, block_size) bias is built once as a buffer (every layer and every step
    reads the same one; 64 MiB at 16 heads and block_size 1024) and sliced to the sequence
    length. Entries above the diagonal are 0: the attention layer adds the causal mask.
    F.scaled_dot_product_attention adds the bias to the already scaled scores q.k / sqrt(hs),
    as the paper's fairseq code does.
    """

    def __init__(self, cfg: ModelShape) -> None:
        super().__init__()
        slopes = torch.tensor(alibi_slopes(cfg.n_head))  # (nh,)
        pos = torch.arange(cfg.block_size)
        distance = (pos.unsqueeze(1) - pos.unsqueeze(0)).clamp(min=0).float()  # (T, T): i - j below the diagonal
        self.register_buffer("bias", -slopes.view(-1, 1, 1) * distance, persistent=False)  # (nh, T, T)

    def attn_bias(self, T: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        return self.bias[:, :T, :T].to(device=device, dtype=dtype)  # (nh, T, T)
