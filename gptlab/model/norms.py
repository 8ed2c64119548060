"""Axis `model.norm_type`: what each normalisation layer computes (LayerNorm, RMSNorm).

Where the norms sit is the other axis, `model.norm` (`gptlab.model.placements`); every norm is
built here by `make_norm`, so the two axes combine freely.

Parameter count of one norm, with C = n_embd: layernorm C (2C with model.bias), rmsnorm C.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn

from gptlab.model.shape import ModelShape
from gptlab.registry import Registry

NormFactory = Callable[[ModelShape], nn.Module]

NORM_TYPES: Registry[NormFactory] = Registry("norm_type", "what each normalisation layer computes")


@NORM_TYPES.register("layernorm")
def layernorm(cfg: ModelShape) -> nn.Module:
    """LayerNorm (Ba et al. 2016): centre, then scale; C weights, plus C biases with model.bias."""
    return nn.LayerNorm(cfg.n_embd, bias=cfg.bias)


class RMSNorm(nn.RMSNorm):
    """nn.RMSNorm that normalises in its weight's dtype (float32 under autocast).

    CUDA autocast runs layer_norm in float32, but rms_norm is not on its float32 list: given a
    bf16 input (e.g. a sandwich branch's output) and a float32 weight it warns and falls back to
    a slower unfused path (seen with torch 2.13 on CPU), with less precision than LayerNorm in
    the same spot. Casting the input first avoids all three.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.to(self.weight.dtype))


@NORM_TYPES.register("rmsnorm")
def rmsnorm(cfg: ModelShape) -> nn.Module:
    """RMSNorm (Zhang & Sennrich 2019): x / RMS(x) times a gain, no centring; C weights, no bias.

    A gain only, whatever `model.bias` says, as in T5 (Raffel et al. 2020) and LLaMA (Touvron et
    al. 2023); eps 1e-6 as in LLaMA. Cheaper than LayerNorm: one statistic instead of two.
    """
    return RMSNorm(cfg.n_embd, eps=1e-6)


def make_norm(cfg: ModelShape) -> nn.Module:
    """The normalisation module itself (what it is, as opposed to where it goes)."""
    return NORM_TYPES.get(cfg.norm_type)(cfg)


def norm_at(cfg: ModelShape, used: bool) -> nn.Module:
    """A norm where the placement puts one, the identity (no parameters) elsewhere."""
    return make_norm(cfg) if used else nn.Identity()
