"""The one exception type the lab raises for bad user input.

Command-line entry points catch `GptlabError` and print its message as a single line (no
traceback) before exiting non-zero; anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import difflib
from typing import Any, Iterable


class GptlabError(ValueError):
    """Invalid input: a config value, a registry name, a missing or corrupted dataset."""


def closest(name: str, valid: Iterable[str]) -> str:
    """Return ' (did you mean 'x'?)' for the nearest valid name, or '' when none is close."""
    match = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else ""


def shown(value: Any, limit: int = 60) -> str:
    """repr of a user's value, cut to `limit` characters for a one-line message."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit str limit
        return f"an integer of {value.bit_length():,} bits"
    if len(text) <= limit:
        return text
    count = len(value) if isinstance(value, (str, list, tuple, dict)) else len(text)  # the value's size, not its repr's
    unit = "characters" if isinstance(value, str) else "items" if isinstance(value, (list, tuple, dict)) else "characters"
    return f"{text[:limit]}... ({count:,} {unit})"
