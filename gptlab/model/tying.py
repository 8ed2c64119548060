"""Axis `model.tying`: whether the output head shares the token-embedding matrix.

An entry is a function `(wte, lm_head) -> None` called once by the builder after both modules
exist. Tying assigns one `nn.Parameter` to both, so it is stored, counted and optimised once.
"""
from __future__ import annotations

from typing import Callable

import torch.nn as nn

from gptlab.registry import Registry

Tie = Callable[[nn.Embedding, nn.Linear], None]
TYING: Registry[Tie] = Registry("tying", "output head shares the token embedding or not")


@TYING.register("tied")
def tied(wte: nn.Embedding, lm_head: nn.Linear) -> None:
    """Head reuses the token embedding (Press & Wolf 2017; GPT-2): one shared tensor."""
    lm_head.weight = wte.weight


@TYING.register("untied")
def untied(wte: nn.Embedding, lm_head: nn.Linear) -> None:
    """Head has its own vocab x n_embd matrix."""
