"""Axis `model.activation`: the MLP non-linearity.

An entry is an `nn.Module` class applied to the MLP's hidden pre-activations. Gated entries
(SwiGLU and friends) set `gated = True`: the MLP then projects to twice `hidden_dim` and the
entry receives both halves in one tensor. `hidden_dim` lets an entry resize the MLP, e.g. to
keep a gated MLP's parameter count comparable to the ungated 4x one.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from gptlab.registry import Registry

ACTIVATIONS: Registry[type["Activation"]] = Registry("activation", "MLP non-linearity")


class Activation(nn.Module):
    """Base class: maps (B, T, hidden * (2 if gated else 1)) -> (B, T, hidden)."""

    gated: bool = False

    @staticmethod
    def hidden_dim(n_embd: int) -> int:
        """MLP hidden width; 4 x n_embd as in GPT-2."""
        return 4 * n_embd


@ACTIVATIONS.register("gelu")
class GELU(Activation):
    """Exact (erf) GELU (Hendrycks & Gimpel 2016), as in nanoGPT."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.gelu(h)


@ACTIVATIONS.register("relu")
class ReLU(Activation):
    """ReLU, the original Transformer's MLP non-linearity (Vaswani et al. 2017)."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.relu(h)
