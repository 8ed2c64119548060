"""The `tune:` section of a sweep YAML: `TuneKind`, the kind of sweep that tunes each cell before estimating it.

Owns the keys every tuning method shares (`space`, `seeds`, `method`), the given picks' entry point
(`picks`, `picked_by`: `given`), and the hand-off of a method's own keys to its planner's `check_options`
(`methods.TUNERS`): a method adds keys without an edit here. What the rest of the sweep asks of a tuned sweep is
the kind's hooks' (`gptlab.sweep.planners.SweepKind`): its test split, first runs, planner, columns, run range,
the words on its open count and its arms' allocation, and its methods' registry for `--list`.
"""
from __future__ import annotations

import copy
import dataclasses
import typing
from typing import Any, Mapping, TextIO

from gptlab.errors import GptlabError, closest, key_error, shown, unknown_key
from gptlab.kinds.tune.given import check_given
from gptlab.kinds.tune.methods import TUNERS, tuner_of
from gptlab.kinds.tune.spec import KEY, TuneSpec, selects, tune_of, tuned_space
from gptlab.kinds.tune.tuning import ESTIMATION, SELECTION, expand_cells, runs_at, tuned_columns
from gptlab.registry import Registry
from gptlab.run.config import SECTIONS, coerce, get_dotted, set_dotted, valid_keys
from gptlab.sweep.kinds import SWEEP_KINDS, seed_plan
from gptlab.sweep.planners import Planner, SweepKind
from gptlab.sweep.runs import MAX_RUNS, SELECTION_SEED_OFFSET, Run, SweepSpec

MAX_TUNE_SEEDS = 100  # selection seeds per cell and setting
TUNE_KEYS = ["space", "seeds", "method", "picks", "picked_by"]  # and each method's own (its planner's OPTIONS)



@SWEEP_KINDS.register(KEY)
class TuneKind(SweepKind):
    """`tune:` (`gptlab.sweep.kinds.SWEEP_KINDS`): the section, the tuned sweep's test split, its selection runs, its
    method's planner (`methods.TUNERS`) and the tuned keys' columns of summary.csv."""

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
    if "picks" in raw:  # settings chosen elsewhere: no selection runs (`given`)
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


