"""Kinds of sweep that add a top-level YAML key: their registry, `SWEEP_KINDS`, and the sweep's questions to them.

A kind owns one key of the sweep file (`scale:`, `tune:`, `worth:`, a plugin's own; `seeds:` in its mapping
form, the adaptive rule), and answers for it everything the sweep asks: how the key's section is checked into a typed
value (`check`, which `sweep.spec` calls once the rest of the spec is valid: `SweepSpec.kinds[key]`), what it
sets in the spec it joins (`joined`, `first_runs`: a tuned sweep's test split and selection runs), how it is
written back to sweep.yaml (the section's `to_dict`), its stages (`stages`: a planner wrapped around the
spec's, or its own for adaptive seeds' rounds and a tuning method), the runs it may plan (`known_runs`,
`planned_count`, `run_range`), whether they share trunks (`shares_trunks`), its columns of summary.csv (`columns`,
`row`), and its work once every run has finished (`after_runs`: `worth:` times the arms' steps side by side); and
what the rest of the sweep, and the report, take from it: the seeds it decides (`seeds`, `seed_plan`, `rounds`),
its scale keys (`scale_keys`), the settings it tries each cell at (`setting_space`,
`with_setting_space`), its words (`open_count`, `allocation_note`) and the registries it names
(`registries`). The report's side of a kind is `gptlab.report.kinds.REPORT_KINDS`, under the same name. The sweep
asks every kind these questions through the functions here; it names none.

Every kind is one folder of `gptlab/kinds/` (the shipped ones) or one plugin file, and registers itself with
`@SWEEP_KINDS.register("key")`. The shipped kinds' package, `SHIPPED_KINDS`, registers them in its fixed order
(`seeds`, `scale`, `tune`, `worth`); the spec's validation imports it by name as it imports a sweep's
`plugins:` (`import_shipped_kinds`), first, so that a plugin's kind comes after them. A kind extends
`planners.SweepKind`, whose hooks add nothing, so it overrides only what it adds.
"""
from __future__ import annotations

import importlib
from typing import Any, Iterator, Mapping, Sequence, TextIO

from gptlab.registry import Registry
from gptlab.run.resultsdir import ResultsDir
from gptlab.sweep.planners import Planner, SeedPlan, SweepKind
from gptlab.sweep.runs import Run, SweepSpec, expand

SWEEP_KINDS: Registry[type[SweepKind]] = Registry(
    "sweep kind", "Kinds of sweep: keys that plan or add stages (a plugin's too)")
SHIPPED_KINDS = "gptlab.kinds"  # the shipped kinds' package: importing it registers them, in the order they join a spec


def import_shipped_kinds() -> None:
    """Register the shipped kinds (`SHIPPED_KINDS`, imported once: Python keeps it), before a spec's plugins."""
    importlib.import_module(SHIPPED_KINDS)


def kinds_of(spec: SweepSpec) -> Iterator[tuple[str, SweepKind]]:
    """The kinds a spec uses, in its sections' order, each as (key, hooks)."""
    for key in spec.kinds:
        yield key, SWEEP_KINDS.get(key)()


def with_kind_stages(planner: Planner, spec: SweepSpec, out: TextIO) -> Planner:
    """`planner` wrapped by each kind's stages, in order."""
    for _, kind in kinds_of(spec):
        planner = kind.stages(planner, spec, out)
    return planner


def first_runs(spec: SweepSpec) -> list[Run]:
    """The runs a spec starts from: the first kind's that plans them (`SweepKind.first_runs`: a tuned sweep's
    selection), else the grid's (or the arms') cells x seeds (`expand`)."""
    first = next((runs for _, kind in kinds_of(spec) if (runs := kind.first_runs(spec)) is not None), None)
    return expand(spec) if first is None else list(first)


def known_runs(spec: SweepSpec) -> list[Run]:
    """The runs a spec may have in its folder, each once: its runs, then each kind's later ones (a tuned sweep's
    possible estimation runs, the lengths of `worth:`)."""
    runs = list(spec.runs)
    for _, kind in kinds_of(spec):
        first: dict[str, Run] = {}
        for run in runs + kind.known_runs(spec, runs):  # a refining tuner's possible runs include the first round's
            first.setdefault(run.run_id, run)
        runs = list(first.values())
    return runs


def planned_count(spec: SweepSpec) -> int:
    """How many runs the kinds' stages train at most (0 for a sweep without one)."""
    return sum(kind.planned_count(spec) for _, kind in kinds_of(spec))


def shares_trunks(spec: SweepSpec) -> bool:
    """Whether a kind's stages plan runs that may share trunks later (`SweepKind.shares_trunks`)."""
    return any(kind.shares_trunks(spec) for _, kind in kinds_of(spec))


def asked_seeds(raw: Mapping[str, Any]) -> list[int] | None:
    """The seeds a kind's section of the sweep file `raw` decides (`SweepKind.seeds`: adaptive seeds' 0..max-1),
    checked; None where no kind decides them (the sweep's `seeds:` count or list)."""
    for key in SWEEP_KINDS:
        seeds = SWEEP_KINDS.get(key)().seeds(raw[key]) if key in raw else None
        if seeds is not None:
            return seeds
    return None


def scale_keys(spec: SweepSpec) -> list[str]:
    """The grid keys the spec's kinds name as scales (`SweepKind.scale_keys`: `scale:`'s), in their order, each once:
    effects are reported at each of their levels, never as effects of their own."""
    return list(dict.fromkeys(key for _, kind in kinds_of(spec) for key in kind.scale_keys(spec)))


def setting_space(spec: SweepSpec) -> dict[str, tuple[Any, ...]]:
    """The keys the spec's kinds try each cell at, with their levels (`SweepKind.setting_space`: `tune.space`)."""
    return {key: levels for _, kind in kinds_of(spec) for key, levels in kind.setting_space(spec).items()}


def with_setting_space(spec: SweepSpec, space: Mapping[str, tuple[Any, ...]]) -> SweepSpec:
    """`spec` with the space its kinds try each cell at replaced by `space` (`SweepKind.with_setting_space`)."""
    for _, kind in kinds_of(spec):
        spec = kind.with_setting_space(spec, space)
    return spec


def seed_plan(spec: SweepSpec) -> SeedPlan | None:
    """The estimation seeds per cell of the spec's kind that decides them in rounds (`SweepKind.seed_plan`), or None:
    `spec.seeds`, in one stage."""
    return next((plan for _, kind in kinds_of(spec) if (plan := kind.seed_plan(spec)) is not None), None)


def estimation_rounds(spec: SweepSpec, runs: Sequence[Run], out: TextIO) -> Planner | None:
    """The planner of `runs` in the rounds of the spec's kind that decides the seeds (`SweepKind.rounds`), or None:
    they train in one stage."""
    return next((planner for _, kind in kinds_of(spec) if (planner := kind.rounds(spec, runs, out)) is not None), None)


def planned_range(spec: SweepSpec) -> tuple[int, int]:
    """How many runs the whole sweep trains: (fewest, most), from the outermost kind that plans it whole (the last to
    wrap the stages: a tuning method, a ladder around it; `SweepKind.run_range`), else from its runs (fewer where its
    seeds are decided in rounds)."""
    whole = next((r for _, kind in reversed(list(kinds_of(spec))) if (r := kind.run_range(spec)) is not None), None)
    if whole is not None:
        return whole
    plan, runs = seed_plan(spec), len(spec.runs)
    return (sum(r.seed < spec.seed_count(r.cell, plan.first) for r in spec.runs) if plan else runs), runs


def after_runs(spec: SweepSpec, results_dir: ResultsDir, planned: Sequence[Run], threads: int, out: TextIO) -> None:
    """Each kind's work once every run has finished (`SweepKind.after_runs`), in each part of the sweep that the
    outermost kind splitting it names (`SweepKind.parts`: a ladder's rungs, each in its own folder), else in the whole."""
    parts = next((p for _, kind in reversed(list(kinds_of(spec))) if (p := kind.parts(spec, results_dir, planned))
                  is not None), None)
    for sub, folder, runs in parts if parts is not None else [(spec, results_dir, planned)]:
        for _, kind in kinds_of(sub):
            kind.after_runs(sub, folder, runs, threads, out)


def open_count(spec: SweepSpec) -> str:
    """What leaves a sweep's run count open until it has run, in words (`SweepKind.open_count`, each kind's), or ""."""
    return " and ".join(words for _, kind in kinds_of(spec) if (words := kind.open_count(spec)))


def kind_registries() -> dict[str, Any]:
    """The registries every registered kind's keys name, by dotted key (`tune.method`), for `--list`."""
    return {key: registry for name in SWEEP_KINDS for key, registry in SWEEP_KINDS.get(name)().registries().items()}
