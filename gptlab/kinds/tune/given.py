"""Given picks (`tune: {picks: [...], picked_by: ...}`): each cell at a nuisance setting chosen elsewhere, no selection here.

A sweep that reuses the learning rates another study tuned (the `lengths` study trains each arm at
the rate the `tuned` study picked for it) names them per cell instead of tuning them again:

    tune:
      picks:
        - {model.activation: gelu, train.lr: 4.0e-3}
        - {model.activation: relu, model.tying: tied, train.lr: 4.0e-3}
        - {model.activation: relu, model.tying: untied, train.lr: 2.0e-3}
      picked_by: "the tuned study (reports/tuned/tables/tuning.csv)"

An entry's grid keys say which cells it covers (a key left out matches every level); its other keys
are the setting, the same keys in every entry, validated like `tune.space`'s. Every cell of the grid
must be covered by exactly one entry, and every entry must cover a cell. The runs are the sweep's
`seeds:` at each cell's setting, as a tuned sweep's estimation runs (same ids, same `stage` column),
trained by the plain planners: nothing is selected, so the settings were chosen on data these runs
never see only if `picked_by` says so truthfully: the report quotes it.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from gptlab.errors import key_error, shown
from gptlab.stats.levels import same_level
from gptlab.stats.picks import Pairs
from gptlab.sweep.runs import SweepSpec

GIVEN_KEYS = ["picks", "picked_by"]
MAX_PICKED_BY = 300  # characters of the provenance note



def check_given(raw: dict[str, Any], spec: SweepSpec, cells: Sequence[Pairs],
                check_levels: Callable[[str, list[Any]], tuple[Any, ...]]) -> tuple[tuple[Pairs, Pairs], ...]:
    """The validated `tune.picks` as (cell, setting) pairs for the grid's `cells`; `check_levels(key, levels)`
    resolves a tuned key's values as `tune.space` does (a valid key, not data.*, not in base or grid)."""
    other = [k for k in raw if k not in GIVEN_KEYS]
    if other:
        raise key_error("tune", f"{shown(other[0])} cannot go with tune.picks (the settings are given: nothing is "
                    f"selected); with picks, valid keys under tune: {', '.join(GIVEN_KEYS)}")
    note = raw.get("picked_by", "")
    if not isinstance(note, str) or len(note) > MAX_PICKED_BY:
        raise key_error("tune.picked_by", f"must be a string of at most {MAX_PICKED_BY} characters saying who chose the "
                    f"picks and on which runs, got {shown(note)}")
    entries = raw["picks"]
    if not isinstance(entries, list) or not entries:
        raise key_error("tune.picks", "must be a non-empty list of mappings, e.g. [{model.activation: gelu, train.lr: "
                    f"4.0e-3}}, ...], got {shown(entries)}")
    matches: list[dict[str, Any]] = []
    settings: list[dict[str, Any]] = []
    for i, entry in enumerate(entries):
        where = f"tune.picks[{i}]"
        if not isinstance(entry, dict) or not entry:
            raise key_error(where, f"must be a mapping of grid keys (which cells) and tuned keys (their setting), got "
                        f"{shown(entry)}")
        match = {k: v for k, v in entry.items() if k in spec.grid}
        setting = {k: v for k, v in entry.items() if k not in spec.grid}
        for key, level in match.items():
            if not any(same_level(level, lv) for lv in spec.grid[key]):
                raise key_error(f"{where}.{key}", f"{shown(level)} is not a level of the grid; levels: "
                            f"{', '.join(map(str, spec.grid[key]))}")
        if not setting:
            raise key_error(where, "sets nothing: name the setting, e.g. train.lr, beside the grid keys")
        if settings and set(setting) != set(settings[0]):
            raise key_error(where, f"sets {', '.join(setting)}; every entry must set the same keys as the first "
                        f"({', '.join(settings[0])})")
        matches.append(match)
        settings.append(setting)
    keys = list(settings[0])
    resolved = {key: check_levels(key, [s[key] for s in settings]) for key in keys}
    given = []
    covered = [0] * len(entries)
    for cell in cells:
        hits = [i for i, m in enumerate(matches) if all(same_level(dict(cell)[k], v) for k, v in m.items())]
        label = ", ".join(f"{k}={v}" for k, v in cell)
        if not hits:
            raise key_error("tune.picks", f"no entry covers the cell ({label}); every cell needs its setting")
        if len(hits) > 1:
            raise key_error("tune.picks", f"entries {hits[0]} and {hits[1]} both cover the cell ({label}); make them "
                        "disjoint")
        covered[hits[0]] += 1
        given.append((cell, tuple((k, resolved[k][hits[0]]) for k in keys)))
    idle = covered.index(0) if 0 in covered else None
    if idle is not None:
        raise key_error(f"tune.picks[{idle}]", "covers no cell of the grid (after exclude)")
    return tuple(given)

