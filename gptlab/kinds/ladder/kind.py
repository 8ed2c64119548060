"""The `ladder:` key's sweep side: `LadderKind`, the kind of sweep that tunes and estimates every arm at every rung.

A ladder is an arms sweep with `tune:` trained once per rung (`spec`: the rungs, each a set of run settings that
change together), smallest rung first. The spec the rest of the sweep sees is the first rung's (`joined`: its
`base` carries rung 1's settings, so the run table, the memory check and the first runs are rung 1's); each rung's
stages are `stages.LadderStages`'s. The kind adds summary.csv's `rung` and `started_at` columns.
"""
from __future__ import annotations

import dataclasses
from typing import Any, TextIO

from gptlab.errors import GptlabError
from gptlab.kinds.ladder.spec import KEY, LadderSpec, check_ladder, ladder_of, rung_of, with_settings
from gptlab.kinds.ladder.stages import LadderStages, rung_spec
from gptlab.run.resultsdir import RUNG
from gptlab.sweep.kinds import SWEEP_KINDS, known_runs, planned_range, setting_space
from gptlab.sweep.planners import Planner, SweepKind
from gptlab.sweep.runs import Run, SweepSpec


@SWEEP_KINDS.register(KEY)
class LadderKind(SweepKind):
    """`ladder:` (`gptlab.sweep.kinds.SWEEP_KINDS`): its rungs, the first rung's spec, the rungs' stages and columns."""

    description = "Named rungs of run settings, smallest first: every arm tuned and estimated at every rung"

    def check(self, raw: Any, spec: SweepSpec) -> LadderSpec:
        if spec.arms is None:
            raise GptlabError("ladder: needs arms: (a baseline and the arms compared with it at every rung)")
        if spec.arms.scale:
            raise GptlabError("ladder: the rungs are the scale; drop arms' scale: keys")
        if not setting_space(spec):
            raise GptlabError("ladder: every arm is tuned at every rung: add a tune: section with a space (method refine)")
        if "worth" in spec.kinds:
            raise GptlabError("ladder: worth: is not yet measured per rung of a ladder: leave it out")
        space = setting_space(spec)
        arm_keys = {k for settings in spec.arms.arms.values() for k in settings} | set(space)
        return dataclasses.replace(check_ladder(raw, spec.base_config, arm_keys), space=dict(space))

    def joined(self, spec: SweepSpec) -> SweepSpec:
        """The spec as rung 1 trains it: its base carries the first rung's settings."""
        return dataclasses.replace(spec, base=with_settings(spec.base, dict(ladder_of(spec).rungs[0].settings)))

    def stages(self, planner: Planner, spec: SweepSpec, out: TextIO) -> Planner:
        return LadderStages(spec, out)

    def known_runs(self, spec: SweepSpec, runs: list[Run]) -> list[Run]:
        return [r for rung in ladder_of(spec).rungs for r in known_runs(rung_spec(spec, rung))]

    def run_range(self, spec: SweepSpec) -> tuple[int, int] | None:
        """Every rung's range, at the space of the sweep file (upper rungs start from the one below: fewer)."""
        ranges = [planned_range(rung_spec(spec, rung)) for rung in ladder_of(spec).rungs]
        return sum(low for low, _ in ranges), sum(high for _, high in ranges)

    def columns(self, spec: SweepSpec, taken: list[str]) -> list[str]:
        return [RUNG, "started_at"]  # started_at: each run's summary.json's (`summary_csv.KIND_FIELDS`)

    def row(self, spec: SweepSpec, run: Run) -> dict[str, Any]:
        return {RUNG: rung_of(ladder_of(spec), run.config)}

    def open_count(self, spec: SweepSpec) -> str:
        return f"each of the {len(ladder_of(spec).rungs)} rungs' tuning starts from the picks of the rung below"
