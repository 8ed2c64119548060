"""Sweep specs: read a YAML (`sweep.loader`, strict) and validate all of it into a `SweepSpec` with its runs.

Validation happens before anything is written or trained: unknown keys (with the closest valid
one), wrong types, unknown registry names, impossible shapes, excludes that match nothing, an
empty grid and duplicate cells are all reported as one `GptlabError` naming the YAML key.
Scientific factors live in `grid`, or in `arms` (a one-at-a-time design: `sweep.arms_spec`); fixed
settings in `base` (Tuning Playbook): a key may be in one or the other, never both, so a preset can
never silently overwrite what the grid asks for.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import re
from pathlib import Path
from typing import Any

from gptlab.errors import GptlabError, closest, key_error, shown, unknown_key
from gptlab.executors.base import ExecutorConfig
from gptlab.plugins import import_plugins, resolve_plugin
from gptlab.run.config import MAX_SEED, RunConfig, resolve_run_config, set_dotted, valid_keys
from gptlab.stats.arms import ARM
from gptlab.stats.calls import DEFAULT_MARGIN
from gptlab.stats.levels import grid_level
from gptlab.sweep.arms_spec import ArmsDesign, check_arm_configs, check_arms
from gptlab.sweep.kinds import SWEEP_KINDS, asked_seeds, first_runs, import_shipped_kinds
from gptlab.sweep.levels import check_levels
from gptlab.sweep.loader import load_yaml, one_line, parse_overrides, read_spec_file  # noqa: F401 (re-exported)
from gptlab.sweep.runs import MAX_RUNS, MAX_SEEDS, ReportSettings, SweepSpec

TOP_KEYS = ["name", "description", "plugins", "base", "grid", "arms", "exclude", "baseline", "claims", "executor",
            "report"]  # and each kind's key (`sweep.kinds.SWEEP_KINDS`: `seeds`, `scale`, `tune`, `worth`, a plugin's)
REPORT_KEYS = ["equivalence_margin"]
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # fullmatch: $ would allow a final newline
MAX_EXCLUDE = 256  # exclude rules
_NOT_IN_GRID = object()



def _require(value: Any, kind: type, key: str, what: str) -> Any:
    if not isinstance(value, kind):
        raise key_error(key, f"must be {what}, got {shown(value)}")
    return value


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None,
              executor_overrides: dict[str, Any] | None = None) -> SweepSpec:
    """Read, validate and expand a sweep YAML into a frozen `SweepSpec`; the command line's overrides go in here:
    `overrides` set base keys (`--set`), `executor_overrides` executor keys (`--jobs`, `--backend`). The report's
    equivalence margin (`--margin`) goes in after, by `SweepSpec.with_margin`."""
    raw = read_spec_file(path)
    return validate_spec(raw, Path(path), overrides or {}, executor_overrides or {})


def validate_spec(raw: dict[str, Any], path: Path, overrides: dict[str, Any], executor_overrides: dict[str, Any],
                  *, plan: bool = True) -> SweepSpec:
    """Validate and expand a loaded spec; every problem is one `GptlabError` on one line, naming the key.
    `plan=False` validates without planning its runs (`runs` stays empty: a stored sweep read back, `sweep.stored`).
    The shipped kinds are registered first (`sweep.kinds.import_shipped_kinds`), as a plugin's are by its import."""
    import_shipped_kinds()
    try:
        return _validate_spec(raw, path, overrides, executor_overrides, plan)
    except GptlabError as err:
        if one_line(str(err)) == str(err):
            raise
        raise GptlabError(one_line(str(err))) from None  # user text quoted raw (a newline in a level) stays one line


def _validate_spec(raw: dict[str, Any], path: Path, overrides: dict[str, Any],
                   executor_overrides: dict[str, Any], plan: bool = True) -> SweepSpec:
    if "seeds" in overrides:  # `--set seeds=4` (or a list, or {min: .., max: ..}) replaces the top-level seeds
        overrides = dict(overrides)
        raw = {**raw, "seeds": overrides.pop("seeds")}
    name, description = _check_name_and_shape(raw)
    plugins, search_path = _import_spec_plugins(raw, path)
    base, keys = _base_with_overrides(raw, overrides)
    base_config = _check_base(base)
    arms, grid = _check_grid(raw, base, keys, path, base_config)

    # a count or a list of seeds, or the seeds a kind's section decides (the adaptive rule's 0..max-1: its kind joins
    # it below), asked for here: they bound the sweep's size before any grid is expanded
    seeds = asked_seeds(raw)
    seeds = seeds if seeds is not None else _check_seeds(raw.get("seeds", 1))

    exclude = raw.get("exclude") or []
    _require(exclude, list, "exclude", "a list of {factor: level} mappings")
    exclude = [_check_cell_mapping(rule, grid, f"exclude[{i}]") for i, rule in enumerate(exclude)]
    _check_size(grid, len(seeds), exclude)

    baseline = (raw.get("baseline") or {}) if arms is None else {ARM: arms.baseline}
    baseline = _check_cell_mapping(baseline, grid, "baseline")
    baseline = {k: baseline.get(k, levels[0]) for k, levels in grid.items()}

    executor = raw.get("executor") or {}
    _require(executor, dict, "executor", "a mapping")
    executor = ExecutorConfig.from_mapping({**executor, **executor_overrides})

    report = _check_report({} if raw.get("report") is None else raw["report"])

    spec = SweepSpec(name=name, description=description, plugins=plugins, base=base, grid=dict(grid), seeds=seeds,
                     exclude=exclude, baseline=baseline, executor=executor, report=report,
                     source=str(path), search_path=search_path, arms=arms)
    spec = _with_kinds(raw, spec)
    return _with_runs(spec, baseline) if plan else spec


def _check_name_and_shape(raw: dict[str, Any]) -> tuple[str, str]:
    """The top-level keys a sweep must have or may not have (before its plugins, which may add a kind's key), and
    its `name` and `description`, checked."""
    for key in raw:
        if key in ("model", "train", "data"):
            raise GptlabError(f"unknown key '{key}': run settings go under base (base.{key})")
        if key not in TOP_KEYS and key not in SWEEP_KINDS and "plugins" not in raw:  # a plugin may add a kind's key
            raise unknown_key(key, [*TOP_KEYS, *SWEEP_KINDS], listed="valid top-level keys")
    if "name" not in raw:
        raise key_error("name", "is required")
    if "grid" not in raw and "arms" not in raw:
        raise key_error("grid", "is required (or arms: for a baseline and variants compared with it one at a time)")
    if "claims" in raw and "arms" not in raw:
        raise key_error("claims", "records the claims of an arms sweep's arms; this sweep has a grid, not arms")
    name = raw["name"]
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise key_error("name", "must be a folder-safe name of 1 to 100 characters (letters, digits, _ . -), "
                                f"got {shown(name, 42)}")
    description = raw.get("description") or ""
    _require(description, str, "description", "a string")
    return name, description


def _import_spec_plugins(raw: dict[str, Any], path: Path) -> tuple[list[str], list[str]]:
    """The `plugins:` list resolved and imported (before the grid is validated: its entries must exist), and the
    search path they were imported from; then every top-level key is one of a sweep's or of a kind now registered."""
    plugins = raw.get("plugins") or []
    _require(plugins, list, "plugins", "a list of module names or .py paths")
    search_path = [str(path.parent.resolve()), str(Path.cwd())]
    plugins = [resolve_plugin(p, path.parent) for p in plugins]
    import_plugins(plugins, search_path)  # before the grid is validated: entries must exist
    for key in raw:
        if key not in TOP_KEYS and key not in SWEEP_KINDS:
            raise unknown_key(key, [*TOP_KEYS, *SWEEP_KINDS], listed="valid top-level keys")
    return plugins, search_path


def _base_with_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`base:` (a copy) with the command line's `--set` overrides in it, and the run settings it may name."""
    base = copy.deepcopy(raw.get("base") or {})
    _require(base, dict, "base", "a mapping with model, train and data sections")
    if "seed" in base:
        raise key_error("base.seed", "seeds are set by the top-level 'seeds' key")
    if "population" in base:  # a lone run would carry a member's id
        raise key_error("base.population", "not a run setting: executor.population decides which runs train in a "
                                           "population, and marks their configs and ids")
    keys = [k for k in valid_keys() if k != "seed"]
    for dotted, value in overrides.items():
        if dotted not in keys:
            raise GptlabError(f"--set: unknown key {shown(dotted)}{closest(dotted, [*keys, 'seeds'])}; --set takes a run "
                              "setting of base (python -m gptlab.train --help lists them) or seeds")
        set_dotted(base, dotted, value)
    return base, keys


def _check_grid(raw: dict[str, Any], base: dict[str, Any], keys: list[str], path: Path,
                base_config: RunConfig) -> tuple[ArmsDesign | None, dict[str, Any]]:
    """The arms (an arms sweep's, else None) and the grid: the YAML's `grid:`, or the one factor of the arms."""
    arms = check_arms(raw, base, keys, path) if "arms" in raw else None
    if arms is not None:
        check_arm_configs(arms, base_config)
    grid = arms.grid if arms is not None else raw["grid"]
    _require(grid, dict, "grid", "a mapping of dotted keys to lists of levels")
    if not grid:
        raise key_error("grid", "needs at least one factor")
    for dotted, levels in (grid.items() if arms is None else ()):
        check_levels("grid", dotted, levels, base, keys)
    return arms, grid


def _with_runs(spec: SweepSpec, baseline: dict[str, Any]) -> SweepSpec:
    """`spec` with the runs it starts from (a kind's, such as a tuned sweep's selection, else the cells x seeds); the
    baseline cell must be one of them."""
    spec = dataclasses.replace(spec, runs=tuple(first_runs(spec)))
    if not any(r.factors == baseline for r in spec.runs):
        raise key_error("baseline", f"the cell {shown(baseline, 200)} is excluded; name a cell that is trained")
    return spec


def _with_kinds(raw: dict[str, Any], spec: SweepSpec) -> SweepSpec:
    """`spec` with each kind's key (`sweep.kinds`, in their order: `seeds`, `scale`, `tune`, `worth`) checked by its kind against
    the spec so far, and joined to it; a kind whose check gives None (`worth: false`, a count of seeds) joins nothing."""
    for key in SWEEP_KINDS:
        if key in TOP_KEYS:  # a plugin's kind may not take a key every sweep has
            raise GptlabError(f"sweep kind {key!r} is registered under a top-level key of every sweep; register it under "
                              "another name")
        kind = SWEEP_KINDS.get(key)()
        section = kind.check(raw[key], spec) if key in raw else None
        if section is not None:
            spec = kind.joined(dataclasses.replace(spec, kinds={**spec.kinds, key: section}))
    return spec


def _check_size(grid: dict[str, list[Any]], n_seeds: int, exclude: list[Any]) -> None:
    """Refuse, before the product is built, a sweep too large to validate in seconds or to train."""
    cells = math.prod(len(levels) for levels in grid.values())
    if cells * n_seeds > MAX_RUNS:
        raise key_error("grid", f"{cells:,} cells (before exclude) x {n_seeds:,} seeds is {cells * n_seeds:,} runs; a "
                    f"sweep may have at most {MAX_RUNS:,}: split it, or use fewer levels or seeds")
    if len(exclude) > MAX_EXCLUDE:  # each rule is checked against every cell
        raise key_error("exclude", f"lists {len(exclude):,} rules; at most {MAX_EXCLUDE}: name the cells to train in a "
                    "smaller grid instead")


def _check_base(base: dict[str, Any]) -> RunConfig:
    """`base` resolved: the one place a sweep's YAML settings become a `RunConfig` (its runs derive from it)."""
    try:
        return resolve_run_config(base)
    except GptlabError as err:
        raise GptlabError(f"base: {err}") from None


def _check_seeds(seeds: Any) -> list[int]:
    """A count or a list of seeds in [0, 2**63), at most MAX_SEEDS of them, none twice."""
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if not 1 <= seeds <= MAX_SEEDS:
            raise key_error("seeds", f"a count must be between 1 and {MAX_SEEDS:,}, got {seeds:,}")
        return list(range(seeds))
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise key_error("seeds", f"must be a count (e.g. 3), a list of non-negative integers or an adaptive rule "
                    f"{{min: 3, max: 12, precision: 0.005}}, got {shown(seeds)}")
    if len(seeds) > MAX_SEEDS:
        raise key_error("seeds", f"lists {len(seeds):,} seeds; at most {MAX_SEEDS:,}")
    bad = next((s for s in seeds if not 0 <= s < MAX_SEED), None)
    if bad is not None:
        raise key_error("seeds", f"each seed must be in [0, 2**63), got {bad}")
    if len(set(seeds)) != len(seeds):
        raise key_error("seeds", f"lists a seed twice: {shown(seeds)}")
    return seeds


def _check_cell_mapping(rule: Any, grid: dict[str, list[Any]], key: str) -> dict[str, Any]:
    """`rule` ({factor: level}) with each level the grid's own (`stats.levels.grid_level`: "0.5" is the grid's 0.5)."""
    if not isinstance(rule, dict) or (key.startswith("exclude") and not rule):
        raise key_error(key, f"must be a mapping of grid factors to levels, got {shown(rule)}")
    mapped = {}
    for factor, level in rule.items():
        if factor not in grid:
            raise key_error(key, f"{shown(factor)} is not a grid factor{closest(str(factor), grid)}; factors: "
                        f"{shown(list(grid), 200)}")
        mapped[factor] = grid_level(grid[factor], level, _NOT_IN_GRID)
        if mapped[factor] is _NOT_IN_GRID:
            raise key_error(key, f"{factor} level {shown(level)} ({type(level).__name__}) is not in the grid; levels: "
                        f"{shown(grid[factor], 200)}")
    return mapped


def _check_report(report: Any) -> ReportSettings:
    """`report:` checked (the command line's `--margin` replaces its equivalence margin after: `SweepSpec.with_margin`)."""
    _require(report, dict, "report", "a mapping (e.g. {equivalence_margin: 0.01})")
    for key in report:
        if key not in REPORT_KEYS:
            raise unknown_key(f"report.{key}", REPORT_KEYS, listed="valid keys under report",
                              hint=closest(f"report.{key}", [f"report.{k}" for k in REPORT_KEYS]))
    return ReportSettings(report.get("equivalence_margin", DEFAULT_MARGIN))  # checked there


