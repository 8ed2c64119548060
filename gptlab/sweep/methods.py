"""The tuning methods, registered in one place: `TUNERS` maps each `tune.method` name to its planner class.

`grid` (`gptlab.sweep.tuning.Grid`) and `refine` (`gptlab.sweep.refine.Refine`) are registered here, in
the registry's own module, so looking a method up never depends on which module happened to be
imported first; a plugin's method registers itself with `@TUNERS.register("name")` in the file the
sweep's `plugins:` names (imported before the spec is validated). What the rest of the sweep asks of
a method by name lives here too: its class (`tuner_of`) and how many runs it trains (`planned_range`).
"""
from __future__ import annotations

from gptlab.registry import Registry
from gptlab.sweep.refine import Refine
from gptlab.sweep.runs import SweepSpec
from gptlab.sweep.tuning import Grid, TuneThenEstimate, selects

TUNERS: Registry[type[TuneThenEstimate]] = Registry(
    "tune.method", "How a tuned sweep chooses each cell's setting (its selection runs)")
TUNERS.register("grid")(Grid)
TUNERS.register("refine")(Refine)


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
