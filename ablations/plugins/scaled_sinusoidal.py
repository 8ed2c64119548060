"""Example plugin: a position entry that lives outside the package (used by ablations/plugin_example.yaml).

A sweep YAML names this file under `plugins:` (a .py path, relative to the YAML's folder). The
lab imports it before validating the grid and again inside every worker, so after the
`@POSITIONS.register` below `model.position: scaled_sinusoidal` is as valid as a built-in
entry. Nothing under gptlab/ changes. The same pattern works for every axis: subclass the
axis's base class (or a built-in entry, as here), give it a one-line docstring (shown by
`python -m gptlab.sweep --list`), and register it under a new name.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from gptlab.model import ModelConfig
from gptlab.model.positions import POSITIONS, SinusoidalPosition


@POSITIONS.register("scaled_sinusoidal")
class ScaledSinusoidalPosition(SinusoidalPosition):
    """Fixed sinusoids times one learnable scalar (Hua et al. 2022, FLASH): 1 parameter.

    It starts exactly as `sinusoidal` (scale 1 on the table RMS-matched to the token
    embeddings), then training decides how loud position should be next to token identity.
    A 0-d parameter, so the trainer's matrices-only weight decay leaves it alone.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.scale = nn.Parameter(torch.ones(()))

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        T = x.size(1)
        return x + self.scale * self.table[:T].to(x.dtype)  # (B, T, C) + () * (T, C)
