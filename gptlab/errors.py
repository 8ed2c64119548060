"""The one exception type the lab raises for bad user input.

Command-line entry points catch `GptlabError` and print its message as a single line (no
traceback) before exiting non-zero; anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import difflib
import sys
from typing import Any, Iterable, Sequence, TextIO


class GptlabError(ValueError):
    """Invalid input: a config value, a registry name, a missing or corrupted dataset."""


def closest(name: str, valid: Iterable[str]) -> str:
    """Return ' (did you mean 'x'?)' for the nearest valid name, or '' when none is close."""
    match = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else ""


def key_error(key: str, message: str, section: str = "") -> GptlabError:
    """The one message for a bad value of a key: `SECTION.KEY: MESSAGE` (`KEY: MESSAGE` at the top level)."""
    return GptlabError(f"{section}.{key}: {message}" if section else f"{key}: {message}")


def unknown_key(key: Any, valid: Sequence[Any], where: str = "", listed: str | None = "valid",
                hint: str | None = None) -> GptlabError:
    """The one message for a key a section does not take: `WHERE: unknown key 'K' (did you mean 'V'?); valid: ...`.

    `listed` names the list of valid keys that ends it (None: no list, where it would be every run setting);
    `hint` replaces the guess of the closest valid name."""
    text = f"unknown key {shown(key)}{closest(str(key), valid) if hint is None else hint}"
    text += f"; {listed}: {', '.join(map(str, valid))}" if listed else ""
    return GptlabError(f"{where}: {text}" if where else text)


def exit_status(err: BaseException, stream: TextIO | None = None) -> int:
    """What a command line does with an error it caught: one line `error: MESSAGE` (stderr by default), and its exit
    status: 2 for bad input (a `GptlabError`, a file not found), 1 for any other OS error (a full disk)."""
    print(f"error: {err}", file=stream or sys.stderr)
    return 2 if isinstance(err, (GptlabError, FileNotFoundError)) else 1


def first_line(error: BaseException | str, limit: int | None = None, empty: str = "no message") -> str:
    """The first line of an error's message (cut to `limit` characters), for a one-line report of it.

    The one place such lines are built: many errors carry no message at all (torch's `EOFError` for an empty
    checkpoint, a bare `ValueError()`), and `str(err).splitlines()[0]` then raises IndexError in the handler
    that meant to report them. Those read as `empty`."""
    lines = str(error).strip().splitlines()
    line = lines[0].strip() if lines else ""
    return (line[:limit] if limit is not None else line) or empty


def hidden_package() -> GptlabError | None:
    """The error to stop on when `gptlab` is not the package, else None; every command line asks first, and so does
    a run before it trains (a worker started elsewhere).

    From a folder holding a bare folder named gptlab (no __init__.py: the checkout's parent, an empty folder),
    Python imports that folder as a namespace package before an editable install's finder is asked; the
    submodules are still found, but the package's __init__ never ran, so every run trained to its last step
    and then failed at its summary (no `gptlab.__version__`)."""
    package = sys.modules.get("gptlab")  # imported before this module, always: it is gptlab's
    if package is None or getattr(package, "__file__", None) is not None:
        return None
    folder = next(iter(getattr(package, "__path__", None) or ()), "a folder named gptlab")
    return GptlabError(f"{folder} is not the gptlab package (a folder named gptlab without __init__.py, which Python "
                       "imports in its place); run from another folder, or rename that one")


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
