"""A factor's levels in a sweep YAML, validated: the one rule for `grid:` keys and an arms sweep's `scale:` keys.

A factor is a run-config key (the closest valid one is named when it is not), its levels a list of
plain values with none twice, and it is never also set in `base`: a fixed setting must not overwrite
a factor, nor a factor a fixed setting.
"""
from __future__ import annotations

from typing import Any

from gptlab.errors import GptlabError, shown, unknown_key
from gptlab.run.config import get_dotted
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
