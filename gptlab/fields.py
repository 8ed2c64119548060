"""`setting()`: a dataclass field with one line of help text (shown by `--help` and `--list`)."""
from __future__ import annotations

from dataclasses import field
from typing import Any


def setting(default: Any, help: str) -> Any:
    """A config field whose `metadata['help']` documents it in one line."""
    return field(default=default, metadata={"help": help})
