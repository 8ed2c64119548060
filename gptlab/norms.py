"""Axes `model.norm` and `model.norm_type`: where each normalisation sits, and what it computes.

A placement entry (`NORMS`) says where a block's norms sit around each sublayer (attention or
MLP): on the branch's input, on its output, or on the sum after the residual add (see
`NormPlacement`); the block itself does the adds. `final_norm` says whether the model must end
with a norm before the head. Every norm comes from `make_norm`, which builds the `model.norm_type`
entry (`NORM_TYPES`), so the two axes combine freely. Pre-LN puts its norms at the input
positions, named `ln_1`/`ln_2`, so the baseline's state_dict is nanoGPT's key for key.

Parameter count of one norm, with C = n_embd: layernorm C (2C with model.bias), rmsnorm C.
Norms per model, with L = n_layer: pre 2L + 1, post 2L, sandwich 4L + 1, none 0.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch
import torch.nn as nn

from gptlab.registry import Registry

if TYPE_CHECKING:
    from gptlab.model import ModelConfig

NormFactory = Callable[["ModelConfig"], nn.Module]

NORMS: Registry[type["NormPlacement"]] = Registry("norm", "placement of normalisation around each sublayer")
NORM_TYPES: Registry[NormFactory] = Registry("norm_type", "what each normalisation layer computes")


@NORM_TYPES.register("layernorm")
def layernorm(cfg: "ModelConfig") -> nn.Module:
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
def rmsnorm(cfg: "ModelConfig") -> nn.Module:
    """RMSNorm (Zhang & Sennrich 2019): x / RMS(x) times a gain, no centring; C weights, no bias.

    A gain only, whatever `model.bias` says, as in T5 (Raffel et al. 2020) and LLaMA (Touvron et
    al. 2023); eps 1e-6 as in LLaMA. Cheaper than LayerNorm: one statistic instead of two.
    """
    return RMSNorm(cfg.n_embd, eps=1e-6)


def make_norm(cfg: "ModelConfig") -> nn.Module:
    """The normalisation module itself (what it is, as opposed to where it goes)."""
    return NORM_TYPES.get(cfg.norm_type)(cfg)


class NormPlacement:
    """Base class of a placement: which of a block's three norm positions hold a norm.

    Every block computes, for each sublayer f (attention, then MLP),

        x = sum_norm(x + out_norm(f(in_norm(x))))

    and a placement says which of `in_norm`, `out_norm` and `sum_norm` are a norm (from
    `make_norm`) rather than the identity, and whether the model ends with a final norm
    (`final_norm`: needed whenever the residual stream itself is never normalised).
    """

    in_norm: bool = False
    out_norm: bool = False
    sum_norm: bool = False
    final_norm: bool = False


@NORMS.register("pre")
class PreNorm(NormPlacement):
    """Pre-LN x + f(LN(x)), final LN before the head (GPT-2; Xiong et al. 2020)."""

    in_norm, final_norm = True, True


@NORMS.register("post")
class PostNorm(NormPlacement):
    """Post-LN LN(x + f(x)), no final LN (Vaswani et al. 2017; GPT-1).

    The last block already ends in a LN, so a final one would normalise twice.
    """

    sum_norm = True


@NORMS.register("sandwich")
class SandwichNorm(NormPlacement):
    """Sandwich-LN x + LN2(f(LN1(x))), final LN before the head (Ding et al. 2021, CogView).

    The extra LN on each branch's output bounds what a sublayer can add to the residual stream
    (CogView's cure for fp16 divergence). The stream itself is still a growing sum that no norm
    touches, exactly as in pre-LN, so it keeps pre-LN's final LN.
    """

    in_norm, out_norm, final_norm = True, True, True


@NORMS.register("none")
class NoNorm(NormPlacement):
    """No normalisation x + f(x), no final norm: the control showing what norms buy.

    It trains at small depth thanks to GPT-2's 1/sqrt(2 n_layer) init of the residual
    projections, but nothing bounds the residual stream, so expect deep or high-lr runs to
    diverge (Zhang et al. 2019, Fixup, show what it takes to train without norms).
    """


def norm_at(cfg: "ModelConfig", used: bool) -> nn.Module:
    """A norm where the placement puts one, the identity (no parameters) elsewhere."""
    return make_norm(cfg) if used else nn.Identity()
