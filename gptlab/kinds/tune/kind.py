"""The `tune:` section of a sweep YAML: `TuneKind`, the kind of sweep that tunes each cell before estimating it.

Owns the keys every tuning method shares (`space`, `seeds`, `method`), the given picks (`picks`, `picked_by`:
`check_given`), the tuning methods' registry (`TUNERS`: each `tune.method` name to its planner class, `grid` and
`refine` registered here, in the registry's own module, so that looking a method up never depends on which module
was imported first; a plugin's method registers itself with `@TUNERS.register("name")` in the file the sweep's
`plugins:` names), and the hand-off of a method's own keys to its planner's `check_options`: a method adds keys
without an edit here. What the rest of the sweep asks of a tuned sweep is
the kind's hooks' (`gptlab.sweep.planners.SweepKind`): its test split, first runs, planner, columns, run range,
the words on its open count and its arms' allocation, and its methods' registry for `--list`.
"""
from __future__ import annotations

import copy
import dataclasses
import typing
from typing import Any, Callable, Mapping, Sequence, TextIO

from gptlab.errors import GptlabError, closest, key_error, shown, unknown_key
from gptlab.kinds.tune.refine import Refine
from gptlab.kinds.tune.spec import KEY, TuneSpec, selects, tune_of, tuned_space
from gptlab.kinds.tune.tuning import ESTIMATION, SELECTION, Grid, TuneThenEstimate, expand_cells, runs_at, tuned_columns
from gptlab.registry import Registry
from gptlab.run.config import SECTIONS, coerce, get_dotted, set_dotted, valid_keys
from gptlab.stats.levels import same_level
from gptlab.stats.picks import Pairs
from gptlab.sweep.kinds import SWEEP_KINDS, seed_plan
from gptlab.sweep.planners import Planner, SweepKind
from gptlab.sweep.runs import MAX_RUNS, SELECTION_SEED_OFFSET, Run, SweepSpec

MAX_TUNE_SEEDS = 100  # selection seeds per cell and setting
TUNE_KEYS = ["space", "seeds", "method", "picks", "picked_by"]  # and each method's own (its planner's OPTIONS)



TUNERS: Registry[type[TuneThenEstimate]] = Registry(
    "tune.method", "How a tuned sweep chooses each cell's setting (its selection runs)")
TUNERS.register("grid")(Grid)
TUNERS.register("refine")(Refine)


def tuner_of(spec: SweepSpec) -> type[TuneThenEstimate]:
    """The planner class of a tuned sweep's method (`tune.method`)."""
    return TUNERS.get(tune_of(spec).method)


@SWEEP_KINDS.register(KEY)
class TuneKind(SweepKind):
    """`tune:` (`gptlab.sweep.kinds.SWEEP_KINDS`): the section, the tuned sweep's test split, its selection runs, its
    method's planner (`kind.TUNERS`) and the tuned keys' columns of summary.csv."""

    description = "Each cell's tune.space settings tried on selection seeds, then its estimation seeds at its pick"

    def check(self, raw: Any, spec: SweepSpec) -> TuneSpec:
        return _check_tune(raw, spec)

    def joined(self, spec: SweepSpec) -> SweepSpec:
        """A tuned sweep's verdict is on a test split the selection never saw: where neither `base` nor the grid
        sets `data.test_fraction`, it is half the validation text."""
        if any(k == "data.test_fraction" for k in spec.grid):
            return spec
        try:
            get_dotted(spec.base, "data.test_fraction")
            return spec
        except (KeyError, TypeError):  # half the held-out tail: 0.05 of Tiny Shakespeare, nanoGPT's val text halved
            base = copy.deepcopy(spec.base)
            set_dotted(base, "data.test_fraction", spec.base_config.data.val_fraction / 2)
            return dataclasses.replace(spec, base=base)

    def first_runs(self, spec: SweepSpec) -> list[Run]:
        tune = tune_of(spec)
        if tune.given:  # no selection: the runs are each cell at its given setting, as estimation runs
            return [r for cell, setting in tune.given for r in runs_at(spec, [setting], spec.seeds, ESTIMATION, [cell])]
        return list(runs_at(spec, tune.settings(), tune.selection_seeds, SELECTION))

    def stages(self, planner: Planner, spec: SweepSpec, out: TextIO) -> Planner:
        """The method's planner (selection, then the estimation seeds); given picks train as a plain sweep."""
        return tuner_of(spec)(spec, out) if selects(spec) else planner

    def known_runs(self, spec: SweepSpec, runs: list[Run]) -> list[Run]:
        """Every run the method may plan later (each possible pick's estimation runs)."""
        return tuner_of(spec).possible_runs(spec) if selects(spec) else []

    def setting_space(self, spec: SweepSpec) -> dict[str, tuple[Any, ...]]:
        return dict(tuned_space(spec))

    def with_setting_space(self, spec: SweepSpec, space: Mapping[str, tuple[Any, ...]]) -> SweepSpec:
        if not selects(spec):
            return spec
        return dataclasses.replace(spec, kinds={**spec.kinds, KEY: dataclasses.replace(tune_of(spec), space=dict(space))})

    def columns(self, spec: SweepSpec, taken: list[str]) -> list[str]:
        return tuned_columns(spec)  # each run's values: its `TunedRun.columns` (`sweep.summary`)

    def run_range(self, spec: SweepSpec) -> tuple[int, int] | None:
        """The selection's fewest and most runs, and the estimation seeds at every cell's pick (fewer in rounds)."""
        if not selects(spec):
            return None
        cells = list(dict.fromkeys(r.cell for r in spec.runs))
        low, high = tuner_of(spec).selection_range(spec)
        plan = seed_plan(spec)
        seeds = lambda n: sum(spec.seed_count(cell, n) for cell in cells)  # noqa: E731 (an arms baseline: more)
        return low + seeds(plan.first if plan else len(spec.seeds)), high + seeds(len(spec.seeds))

    def open_count(self, spec: SweepSpec) -> str:
        rounds = selects(spec) and len(set(tuner_of(spec).selection_range(spec))) > 1
        return f"tune.method {tune_of(spec).method} adds selection runs as it goes" if rounds else ""

    def allocation_note(self, spec: SweepSpec) -> str:
        return "; selection runs train every arm alike"

    def registries(self) -> dict[str, Registry]:
        return {"tune.method": TUNERS}


def _check_tune(raw: Any, spec: SweepSpec) -> TuneSpec:
    if not isinstance(raw, dict):
        raise key_error("tune", f"must be a mapping {{space: {{train.lr: [...]}}, seeds: 1}}, got {shown(raw)}")
    method = raw.get("method", "grid")
    if not isinstance(method, str):
        raise key_error("tune.method", f"must be the name of a tuning method ({', '.join(TUNERS.names())}), got {shown(method)}")
    tuner = TUNERS.get(method)  # an unknown name: one line listing the valid ones
    valid = TUNE_KEYS + list(tuner.OPTIONS)
    for key in raw:
        if key not in valid:
            raise unknown_key(f"tune.{key}", valid, listed=f"valid keys under tune with method {method}",
                              hint=closest(f"tune.{key}", [f"tune.{k}" for k in valid]))
    if "picks" in raw:  # settings chosen elsewhere: no selection runs (`check_given`)
        given = check_given(raw, spec, expand_cells(spec), lambda key, levels: _resolve_levels(spec, key, levels,
                                                                                                "tune.picks"))
        space = {k: tuple(dict.fromkeys(s[i][1] for _, s in given)) for i, (k, _) in enumerate(given[0][1])}
        return TuneSpec(space, 0, given, raw.get("picked_by", ""))
    space = raw.get("space")
    if not isinstance(space, dict) or not space:
        raise key_error("tune.space", "needs at least one key to tune, e.g. {train.lr: [5.0e-4, 1.0e-3, 2.0e-3]}, got "
                    f"{shown(space)}")
    levels_by_key: dict[str, tuple[Any, ...]] = {}
    for dotted, levels in space.items():
        where = f"tune.space.{dotted}"
        if not isinstance(levels, list) or not levels:
            raise key_error(where, f"must be a non-empty list of levels, got {shown(levels)}")
        resolved = _resolve_levels(spec, dotted, levels, "tune.space")
        if len(set(map(repr, resolved))) != len(resolved):
            raise key_error(where, f"lists a level twice: {shown(levels)}")
        if len(resolved) < 2:
            raise key_error(where, f"lists one level ({shown(levels[0])}); a fixed setting belongs in base")
        levels_by_key[dotted] = resolved
    seeds = raw.get("seeds", 1)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= MAX_TUNE_SEEDS:
        raise key_error("tune.seeds", f"must be a count of selection seeds between 1 and {MAX_TUNE_SEEDS}, got {shown(seeds)}")
    late = [s for s in spec.seeds if s >= SELECTION_SEED_OFFSET]
    if late:
        raise key_error("seeds", f"in a tuned sweep every seed must be below {SELECTION_SEED_OFFSET:,} (the selection "
                    f"seeds are {SELECTION_SEED_OFFSET:,} and up), got {late[0]:,}")
    tune = TuneSpec(levels_by_key, seeds, method=method)
    options = tuner.check_options({k: raw[k] for k in tuner.OPTIONS if k in raw}, tune)
    tune = TuneSpec(levels_by_key, seeds, method=method, options=tuple(options.items()))
    cells = len(expand_cells(spec))
    total = cells * len(tune.settings()) * (seeds + len(spec.seeds))
    if total > MAX_RUNS:
        raise key_error("tune", f"{cells:,} cells x {len(tune.settings()):,} settings x ({seeds} selection + "
                    f"{len(spec.seeds):,} estimation seeds) is {total:,} runs to plan; at most {MAX_RUNS:,}")
    return tune


def _resolve_levels(spec: SweepSpec, dotted: Any, levels: list[Any], owner: str) -> tuple[Any, ...]:
    """A tuned key's levels as the run config resolves them; the key must be tunable (a config key, not data.*,
    in neither base nor grid). `owner`: tune.space or tune.picks, for the messages."""
    keys = [k for k in valid_keys() if k != "seed"]
    where = f"{owner}.{dotted}"
    if dotted not in keys:
        raise unknown_key(dotted, keys, owner, listed=None)
    if str(dotted).startswith("data."):
        raise key_error(where, "data settings cannot be tuned: the selection compares validation losses, which "
                    "only mean the same on the same split and tokenizer; put it in base or grid")
    if dotted in spec.grid:
        raise GptlabError(f"{dotted} is in both grid and {owner}; keep it in one place")
    try:
        get_dotted(spec.base, dotted)
    except (KeyError, TypeError):
        pass
    else:
        raise GptlabError(f"{dotted} is set in both base and {owner}; keep it in one place (remove it from "
                          "base: each cell trains at the tuned levels)")
    if any(isinstance(v, (dict, list)) for v in levels):
        raise key_error(where, "levels must be plain values (strings, numbers, booleans)")
    section, name = dotted.split(".", 1)
    try:
        return tuple(coerce(dotted, v, typing.get_type_hints(SECTIONS[section])[name]) for v in levels)
    except GptlabError as err:
        raise key_error(where, str(err)) from None


# -- given picks (tune: {picks: [...], picked_by: ...}) --------------------------------------------
# Given picks (`tune: {picks: [...], picked_by: ...}`): each cell at a nuisance setting chosen elsewhere, no selection here.
#
# A sweep that reuses the learning rates another study tuned (the `lengths` study trains each arm at
# the rate the `tuned` study picked for it) names them per cell instead of tuning them again:
#
#     tune:
#       picks:
#         - {model.activation: gelu, train.lr: 4.0e-3}
#         - {model.activation: relu, model.tying: tied, train.lr: 4.0e-3}
#         - {model.activation: relu, model.tying: untied, train.lr: 2.0e-3}
#       picked_by: "the tuned study (reports/tuned/tables/tuning.csv)"
#
# An entry's grid keys say which cells it covers (a key left out matches every level); its other keys
# are the setting, the same keys in every entry, validated like `tune.space`'s. Every cell of the grid
# must be covered by exactly one entry, and every entry must cover a cell. The runs are the sweep's
# `seeds:` at each cell's setting, as a tuned sweep's estimation runs (same ids, same `stage` column),
# trained by the plain planners: nothing is selected, so the settings were chosen on data these runs
# never see only if `picked_by` says so truthfully: the report quotes it.
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
