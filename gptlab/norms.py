"""Axis `model.norm`: where the normalisation sits relative to each residual sublayer.

An entry wraps one sublayer (attention or MLP) together with its residual connection and owns
the norms it needs. Its class attribute `final_norm` says whether the model must end with a
norm before the head (pre-LN needs one because its residual stream is never normalised).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch
import torch.nn as nn

from gptlab.registry import Registry

if TYPE_CHECKING:
    from gptlab.model import ModelConfig

Sublayer = Callable[[torch.Tensor], torch.Tensor]

NORMS: Registry[type["NormPlacement"]] = Registry("norm", "placement of normalisation around each sublayer")


def make_norm(cfg: "ModelConfig") -> nn.Module:
    """The normalisation module itself (what it is, as opposed to where it goes)."""
    return nn.LayerNorm(cfg.n_embd, bias=cfg.bias)


class NormPlacement(nn.Module):
    """Base class: `forward(x, sublayer)` returns the block's residual update of `x`."""

    final_norm: bool = True

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError


@NORMS.register("pre")
class PreNorm(NormPlacement):
    """Pre-LN x + f(LN(x)), final LN before the head (GPT-2; Xiong et al. 2020)."""

    final_norm = True

    def __init__(self, cfg: "ModelConfig") -> None:
        super().__init__()
        self.ln = make_norm(cfg)

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return x + sublayer(self.ln(x))


@NORMS.register("post")
class PostNorm(NormPlacement):
    """Post-LN LN(x + f(x)), no final LN (Vaswani et al. 2017; GPT-1)."""

    # The last block already ends in a LN, so a final one would normalise twice.
    final_norm = False

    def __init__(self, cfg: "ModelConfig") -> None:
        super().__init__()
        self.ln = make_norm(cfg)

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return self.ln(x + sublayer(x))
