"""Why two cells of a sweep grid resolve to one run config, said in the "same config" error of `runs.expand`.

The factors where the two cells differ are the ones the resolved config ignores, or resolves to
one value (bpe with no `vocab_size` is bpe with its default 1024). A factor the two cells share
is named as the cause when another of its grid levels would make them two configs: with
`data.tokenizer: [char, bpe]` x `data.vocab_size: [256, 1024]`, data.tokenizer=char ignores the
vocabulary size. The message ends with an `exclude:` rule that keeps one cell of each such pair.
"""
from __future__ import annotations

import copy
from typing import Any

import yaml

from gptlab.errors import GptlabError
from gptlab.run.config import get_dotted, resolve_run_config, set_dotted
from gptlab.stats.levels import same_level

Cell = tuple[tuple[str, Any], ...]  # ((dotted factor, level), ...) in grid order


def _flow(value: Any) -> str:
    """As YAML writes it on one line: the string '1e-1' stays distinct from the number 0.1."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**9, sort_keys=False).strip()


def _identity(base: dict[str, Any], cell: Cell, change: tuple[str, Any] | None = None) -> dict[str, Any] | None:
    """The run identity of `cell` over `base` (with one factor changed), None if that is no valid config."""
    config = copy.deepcopy(base)
    for dotted, level in cell:
        set_dotted(config, dotted, level)
    if change is not None:
        set_dotted(config, *change)
    try:
        return resolve_run_config({**config, "seed": 0}).identity()
    except GptlabError:  # that other level is invalid with these settings: it tells nothing
        return None


def same_config_message(base: dict[str, Any], grid: dict[str, list[Any]], first: Cell, second: Cell) -> str:
    """One line: the two cells, the factors they differ in and why those do not count, and an exclude."""
    a, b = dict(first), dict(second)
    differ = [k for k in a if not same_level(a[k], b[k])]
    causes = []
    for key in (k for k in a if k not in differ):
        for other in (level for level in grid[key] if not same_level(level, a[key])):
            pair = _identity(base, first, (key, other)), _identity(base, second, (key, other))
            if None not in pair and pair[0] != pair[1]:
                causes.append(key)
                break
    if causes:
        named = [f"{k}={_flow([a[k]])[1:-1]}" for k in causes]
        why = f"which {' and '.join(named)} {'ignores' if len(named) == 1 else 'ignore'}"
    elif all(any(same_level(_resolved(base, first, k), level) for level in (a[k], b[k])) for k in differ):
        why = "whose levels resolve to the same value"  # the identity holds one of the two levels
    else:
        why = "which the rest of the config (base) ignores"
    drop = {k: b[k] for k in causes + differ} if causes else b
    levels = [_flow([level for _, level in cell])[1:-1] for cell in (first, second)]
    return (f"cells ({levels[0]}) and ({levels[1]}) resolve to the same config: they differ only in "
            f"{' and '.join(differ)}, {why}; exclude one of them (e.g. exclude: [{_flow(drop)}])")


def _resolved(base: dict[str, Any], cell: Cell, key: str) -> Any:
    """The value `key` takes in the run identity of `cell` (None where the identity leaves it out)."""
    try:
        return get_dotted(_identity(base, cell) or {}, key)
    except (KeyError, TypeError):
        return None
