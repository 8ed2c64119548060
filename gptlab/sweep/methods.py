"""The tuning methods, registered in one place: `TUNERS` maps each `tune.method` name to its planner class.

`grid` (`gptlab.sweep.tuning.Grid`) and `refine` (`gptlab.sweep.refine.Refine`) are registered here, in
the registry's own module, so looking a method up never depends on which module happened to be
imported first; a plugin's method registers itself with `@TUNERS.register("name")` in the file the
sweep's `plugins:` names (imported before the spec is validated). What the rest of the sweep asks of
a method by name lives here too: its class (`tuner_of`), the runs it may plan (`tuned_known_runs`),
how many it trains (`planned_range`).
"""
from __future__ import annotations

from gptlab.registry import Registry
from gptlab.sweep.refine import Refine
from gptlab.sweep.runs import Run, SweepSpec
from gptlab.sweep.tuning import Grid, TuneThenEstimate, selects

TUNERS: Registry[type[TuneThenEstimate]] = Registry(
    "tune.method", "How a tuned sweep chooses each cell's setting (its selection runs)")
TUNERS.register("grid")(Grid)
TUNERS.register("refine")(Refine)


def tuned_known_runs(spec: SweepSpec) -> list[Run]:
    """The runs a spec may have in its folder, each once: its runs, and a tuned sweep's every possible later run
    (`gptlab.sweep.worth.known_runs` adds the baseline's lengths)."""
    runs = list(spec.runs) + (tuner_of(spec).possible_runs(spec) if selects(spec) else [])
    first: dict[str, Run] = {}
    for run in runs:  # a refining tuner's possible runs include the first round's
        first.setdefault(run.run_id, run)
    return list(first.values())


def tuner_of(spec: SweepSpec) -> type[TuneThenEstimate]:
    """The planner class of a tuned sweep's method (`tune.method`)."""
    return TUNERS.get(spec.tune.method)


def planned_range(spec: SweepSpec) -> tuple[int, int]:
    """How many runs the whole sweep trains: (fewest, most); they differ with adaptive seeds and adaptive tuners."""
    rule, runs = spec.seed_rule, len(spec.runs)
    if not selects(spec):
        return (sum(r.seed < spec.seed_count(r.cell, rule.min) for r in spec.runs) if rule else runs), runs
    cells = list(dict.fromkeys(r.cell for r in spec.runs))
    low, high = tuner_of(spec).selection_range(spec)
    seeds = lambda n: sum(spec.seed_count(cell, n) for cell in cells)  # noqa: E731 (an arms baseline: more)
    return low + seeds(rule.min if rule else len(spec.seeds)), high + seeds(len(spec.seeds))
