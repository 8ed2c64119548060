"""A factor's level, the one rule of sameness: `same_level`, for the sweep's typed YAML values and summary.csv's text.

A level is written once as a YAML value (sweep.yaml: `0.001`, `true`, `gelu`) and read back as text
(summary.csv: `0.001`, `True`, `gelu`). Two levels are the same when their `level_key`s are: the
canonical text of the value, a number by its float (so 40, 40.0 and "40" are one level) and any other
text case-folded (so True, "True" and "true" are one). The sweep refuses a grid listing one level
twice under this rule (it could not be told apart in summary.csv), matches a baseline, an exclude
rule or a given pick to the grid's own level with it, and the report maps summary.csv's text onto
the grid's levels with it: one rule on both sides of the results folder. 1 and True stay two levels
(their keys are "1.0" and "true").
"""
from __future__ import annotations

from typing import Any, Iterable

_MISSING = object()


def level_key(value: Any) -> str:
    """The canonical text of a level: a number's float repr, any other text stripped and lower-cased."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text.lower()
    return repr(number) if text.lower() not in ("nan", "inf", "-inf") else text.lower()


def same_level(a: Any, b: Any) -> bool:
    """Whether `a` and `b` are one level: the sweep's typed values and summary.csv's text alike."""
    return a is b or level_key(a) == level_key(b)


def grid_level(levels: Iterable[Any], value: Any, default: Any = _MISSING) -> Any:
    """The level of `levels` that `value` is (the grid's own value, typed as the grid has it), else `default`.

    Raises `KeyError` when none is and no default is given.
    """
    key = level_key(value)
    found = next((level for level in levels if level_key(level) == key), _MISSING)
    if found is _MISSING:
        if default is _MISSING:
            raise KeyError(value)
        return default
    return found
