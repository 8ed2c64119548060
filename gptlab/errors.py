"""The one exception type the lab raises for bad user input.

Command-line entry points catch `GptlabError` and print its message as a single line (no
traceback) before exiting non-zero; anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import difflib
from typing import Iterable


class GptlabError(ValueError):
    """Invalid input: a config value, a registry name, a missing or corrupted dataset."""


def closest(name: str, valid: Iterable[str]) -> str:
    """Return ' (did you mean 'x'?)' for the nearest valid name, or '' when none is close."""
    match = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else ""
