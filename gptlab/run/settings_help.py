"""What a run's settings accept, for the command lines: each dotted key's registry (its names) and its default.

`python -m gptlab.train --help` shows every flag with the names it takes and its default; `python -m
gptlab.sweep --list` prints the same registries with one line per entry. Which key a registry fills is
written here once.
"""
from __future__ import annotations

import dataclasses

from gptlab.model import REGISTRIES
from gptlab.registry import Registry
from gptlab.run.config import SECTIONS
from gptlab.run.corpora import DATASETS
from gptlab.run.schedules import SCHEDULES
from gptlab.run.tokenizers import TOKENIZERS


def registries_by_key() -> dict[str, Registry]:
    """Every registry a setting names an entry of, by the setting's dotted key (plugins' entries included once imported)."""
    return {**{f"model.{axis}": registry for axis, registry in REGISTRIES.items()}, "data.dataset": DATASETS,
            "data.tokenizer": TOKENIZERS, "train.schedule": SCHEDULES}


def field_help(dotted: str) -> str:
    """The one line of help of a run setting, e.g. 'train.lr' -> 'peak learning rate'."""
    section, name = dotted.split(".", 1)
    return next(f for f in dataclasses.fields(SECTIONS[section]) if f.name == name).metadata.get("help", "")


def default_of(dotted: str) -> object:
    """The default of a run setting, e.g. 'train.lr' -> 0.0006 (None where the field has none)."""
    section, name = dotted.split(".", 1)
    field = next(f for f in dataclasses.fields(SECTIONS[section]) if f.name == name)
    return None if field.default is dataclasses.MISSING else field.default


def flag_help(dotted: str) -> str:
    """A setting's one line of help, the names it accepts when a registry fills it, and its default."""
    parts = [field_help(dotted)]
    registry = registries_by_key().get(dotted)
    if registry is not None:
        parts.append(f"one of: {', '.join(registry.names())}")
    default = default_of(dotted)
    parts.append(f"default: {'none' if default is None else default}")
    return "; ".join(p for p in parts if p)
