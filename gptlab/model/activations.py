"""Axis `model.activation`: the MLP non-linearity.

An entry is an `nn.Module` class applied to the MLP's hidden pre-activations. Gated entries
(SwiGLU and friends) set `gated = True`: the MLP then projects to twice `hidden_dim` and the
entry receives both halves in one tensor, (B, T, 2 * hidden), returning (B, T, hidden).
`hidden_dim` lets an entry resize the MLP, e.g. to keep a gated MLP's parameter count
comparable to the ungated 4x one.

MLP parameters per block, with C = n_embd and H = hidden_dim(C):
- ungated: c_fc C x H + c_proj H x C = 2CH, i.e. 8C^2 with H = 4C (plus H + C biases with model.bias);
- gated:   c_fc C x 2H + c_proj H x C = 3CH (plus 2H + C biases with model.bias).
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


class GatedActivation(Activation):
    """Base class of GLU variants (Shazeer 2020): act(a) * b for the two halves a, b of c_fc's output."""

    gated = True

    @staticmethod
    def hidden_dim(n_embd: int) -> int:
        """round(8 n_embd / 3): the 2/3 rule of Shazeer 2020, so 3CH matches the ungated 8C^2.

        Rounded to the nearest integer, not to a hardware-friendly multiple, because an ablation
        compares parameter-matched models: 3C * round(8C/3) = 8C^2 + rC with r in {-1, 0, 1}
        (r = 0 when C is a multiple of 3), i.e. within one norm's worth of parameters per block.
        (8C + 1) // 3 is that rounding in integers, since 8C/3 is never halfway between two.
        """
        return (8 * n_embd + 1) // 3

    def gate(self, a: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        a, b = h.chunk(2, dim=-1)  # (B, T, hidden) each: gate input, linear value
        return self.gate(a) * b


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


@ACTIVATIONS.register("gelu_tanh")
class GELUTanh(Activation):
    """Tanh-approximated GELU (Hendrycks & Gimpel 2016), the one GPT-2 actually used."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.gelu(h, approximate="tanh")


@ACTIVATIONS.register("silu")
class SiLU(Activation):
    """SiLU / Swish x * sigmoid(x) (Elfwing et al. 2018; Ramachandran et al. 2017), ungated."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.silu(h)


@ACTIVATIONS.register("relu2")
class SquaredReLU(Activation):
    """Squared ReLU relu(x)^2 (So et al. 2021, Primer), ungated 4x MLP."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.relu(h).square()


@ACTIVATIONS.register("swiglu")
class SwiGLU(GatedActivation):
    """SwiGLU silu(a) * b (Shazeer 2020); hidden H = round(8C/3), so its 3CH MLP weights ~ 8C^2."""

    def gate(self, a: torch.Tensor) -> torch.Tensor:
        return F.silu(a)


@ACTIVATIONS.register("geglu")
class GEGLU(GatedActivation):
    """GEGLU gelu(a) * b (Shazeer 2020); hidden H = round(8C/3), so its 3CH MLP weights ~ 8C^2."""

    def gate(self, a: torch.Tensor) -> torch.Tensor:
        return F.gelu(a)
