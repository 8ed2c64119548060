"""The tuning methods, registered in one place: `TUNERS` maps each `tune.method` name to its planner class.

`grid` (`gptlab.kinds.tune.tuning.Grid`) and `refine` (`gptlab.kinds.tune.refine.Refine`) are registered here, in
the registry's own module, so looking a method up never depends on which module happened to be
imported first; a plugin's method registers itself with `@TUNERS.register("name")` in the file the
sweep's `plugins:` names (imported before the spec is validated). What the rest of the sweep asks of
a method by name lives here too: its class (`tuner_of`).
"""
from __future__ import annotations

from gptlab.kinds.tune.refine import Refine
from gptlab.kinds.tune.spec import tune_of
from gptlab.kinds.tune.tuning import Grid, TuneThenEstimate
from gptlab.registry import Registry
from gptlab.sweep.runs import SweepSpec

TUNERS: Registry[type[TuneThenEstimate]] = Registry(
    "tune.method", "How a tuned sweep chooses each cell's setting (its selection runs)")
TUNERS.register("grid")(Grid)
TUNERS.register("refine")(Refine)


def tuner_of(spec: SweepSpec) -> type[TuneThenEstimate]:
    """The planner class of a tuned sweep's method (`tune.method`)."""
    return TUNERS.get(tune_of(spec).method)
