"""`ModelShape`: the fields of the model's config that the axis entries read, below `gpt.py`.

`gpt.py` imports every axis to build the model and validate `ModelConfig`; the axes type their
factories with this Protocol, which `ModelConfig` satisfies, so no axis imports `gpt.py` back. Entries
are given the `ModelConfig` itself: a plugin's entry may read any of its fields.
"""
from __future__ import annotations

from typing import Protocol


class ModelShape(Protocol):
    """What the built-in norms and position encodings read of a `ModelConfig` (read-only)."""

    @property
    def block_size(self) -> int: ...

    @property
    def n_embd(self) -> int: ...

    @property
    def n_head(self) -> int: ...

    @property
    def bias(self) -> bool: ...

    @property
    def norm_type(self) -> str: ...
