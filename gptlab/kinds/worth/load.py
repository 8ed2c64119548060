"""The report's load step for `worth:`: what the kind reads of results/NAME/ beyond the report's own `Results`.

The test blocks of the baseline's lengths (its runs of roles `WORTH` and `WORTH_TUNING`, whose per-block losses
let the curve's CIs count the text as the effects' do: `gptlab.report.load.block_losses`) and the arms' steps
timed side by side after the runs (`step_times.csv`, through its one reader, `ResultsDir.step_times`: a damaged
or foreign file is none, so no step is said to cost anything). The kind's one module that reads files.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from gptlab.kinds.worth.spec import KEY, WORTH, WORTH_TUNING
from gptlab.report.load import Results, run_roles
from gptlab.report.load.block_losses import BlockLosses, read_test_blocks


@dataclass(frozen=True)
class WorthLoaded:
    """What `worth:` reads beyond the report's `Results` (`Results.kinds["worth"]`)."""

    blocks: BlockLosses = field(default_factory=BlockLosses)  # the test blocks of the `worth:` runs, or why none
    step_times: pd.DataFrame = field(default_factory=pd.DataFrame)  # step_times.csv: the arms timed side by side


def load(res: Results) -> WorthLoaded:
    """The blocks of the baseline's lengths (none without such runs) and step_times.csv (empty without one)."""
    other = res.other_roles
    blocks = read_test_blocks(res.results_dir, other[run_roles(other).isin([WORTH, WORTH_TUNING])], res.outcome,
                              res.unit) if len(other) else BlockLosses()
    return WorthLoaded(blocks=blocks, step_times=pd.DataFrame(res.results_dir.step_times(res.factors) or []))


def loaded(res: Results) -> WorthLoaded:
    """What the load step read for `worth:` (nothing, for results read without the kind)."""
    return res.kinds.get(KEY) or WorthLoaded()
