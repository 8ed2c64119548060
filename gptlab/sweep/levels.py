"""A factor's levels in a sweep YAML, the one rule for `grid:` keys and an arms sweep's `scale:` keys; why two cells are one run.

A factor is a run-config key (the closest valid one is named when it is not), its levels a list of
plain values with none twice, and it is never also set in `base`: a fixed setting must not overwrite
a factor, nor a factor a fixed setting.

Two cells of a grid may still resolve to one run config: `same_config_message` says why, in the "same
config" error of `runs.expand`. The factors where the two cells differ are the ones the resolved config
ignores, or resolves to one value (bpe with no `vocab_size` is bpe with its default 1024). A factor the two
cells share is named as the cause when another of its grid levels would make them two configs: with
`data.tokenizer: [char, bpe]` x `data.vocab_size: [256, 1024]`, data.tokenizer=char ignores the vocabulary
size. The message ends with an `exclude:` rule that keeps one cell of each such pair.
"""
from __future__ import annotations

from typing import Any

import yaml

from gptlab.errors import GptlabError, shown, unknown_key
from gptlab.run.config import RunConfig, get_dotted
from gptlab.stats.levels import same_level

_NONE = object()


def check_levels(section: str, dotted: Any, levels: Any, base: dict[str, Any], keys: list[str],
                 fewest: int = 1) -> None:
    """`section.dotted: levels` (section `grid` or `scale`): a known key, `fewest` or more plain levels, none
    twice, and not in base; else one GptlabError naming the key."""
    if dotted not in keys:
        raise unknown_key(dotted, keys, section, listed=None)
    where = f"{section}.{dotted}"
    if not isinstance(levels, list) or len(levels) < fewest or not levels:
        need = "a non-empty list of levels" if fewest == 1 else f"a list of at least {fewest} levels"
        raise GptlabError(f"{where}: must be {need}, got {shown(levels)}")
    if any(isinstance(v, (dict, list)) for v in levels):
        raise GptlabError(f"{where}: levels must be plain values (strings, numbers, booleans)")
    for i, level in enumerate(levels):
        twin = next((other for other in levels[:i] if same_level(other, level)), _NONE)
        if twin is not _NONE:  # 40 and 40.0 are one level too: one run config, two labels
            both = f"{shown(twin)} and {shown(level)} are one level" if repr(twin) != repr(level) else shown(level)
            raise GptlabError(f"{where}: lists a level twice ({both}): {shown(levels)}")
    try:
        get_dotted(base, dotted)
    except (KeyError, TypeError):
        return
    raise GptlabError(f"{dotted} is set in both base and {section}; keep it in one place")





Cell = tuple[tuple[str, Any], ...]  # ((dotted factor, level), ...) in grid order


def _flow(value: Any) -> str:
    """As YAML writes it on one line: the string '1e-1' stays distinct from the number 0.1."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**9, sort_keys=False).strip()


def _identity(config: RunConfig, change: tuple[str, Any] | None = None) -> dict[str, Any] | None:
    """The run identity of a cell's `config` (with one factor changed), None if that is no valid config."""
    try:
        return (config.with_settings(dict([change])) if change is not None else config).identity()
    except GptlabError:  # that other level is invalid with these settings: it tells nothing
        return None


def same_config_message(grid: dict[str, list[Any]], first_cell: tuple[Cell, RunConfig],
                        second_cell: tuple[Cell, RunConfig]) -> str:
    """One line: the two cells (each with its resolved config), the factors they differ in and why those do not
    count, and an exclude."""
    (first, first_config), (second, second_config) = first_cell, second_cell
    a, b = dict(first), dict(second)
    differ = [k for k in a if not same_level(a[k], b[k])]
    causes = []
    for key in (k for k in a if k not in differ):
        for other in (level for level in grid[key] if not same_level(level, a[key])):
            pair = _identity(first_config, (key, other)), _identity(second_config, (key, other))
            if None not in pair and pair[0] != pair[1]:
                causes.append(key)
                break
    if causes:
        named = [f"{k}={_flow([a[k]])[1:-1]}" for k in causes]
        why = f"which {' and '.join(named)} {'ignores' if len(named) == 1 else 'ignore'}"
    elif all(any(same_level(_resolved(first_config, k), level) for level in (a[k], b[k])) for k in differ):
        why = "whose levels resolve to the same value"  # the identity holds one of the two levels
    else:
        why = "which the rest of the config (base) ignores"
    drop = {k: b[k] for k in causes + differ} if causes else b
    levels = [_flow([level for _, level in cell])[1:-1] for cell in (first, second)]
    return (f"cells ({levels[0]}) and ({levels[1]}) resolve to the same config: they differ only in "
            f"{' and '.join(differ)}, {why}; exclude one of them (e.g. exclude: [{_flow(drop)}])")


def _resolved(config: RunConfig, key: str) -> Any:
    """The value `key` takes in the run identity of a cell's `config` (None where the identity leaves it out)."""
    try:
        return get_dotted(config.identity(), key)
    except (KeyError, TypeError):
        return None
