"""The `ladder:` key's sweep side: `LadderKind`, the kind of sweep that tunes and estimates every arm at every rung.

A ladder is an arms sweep with `tune:` trained once per rung (`spec`: the rungs, each a set of run settings that
change together), smallest rung first. The spec the rest of the sweep sees is the first rung's (`joined`: its
`base` carries rung 1's settings, so the run table, the memory check and the first runs are rung 1's); each rung's
stages are `stages.LadderStages`'s. The kind adds summary.csv's `rung` and `started_at` columns.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence, TextIO

from gptlab.errors import GptlabError
from gptlab.kinds.ladder.spec import KEY, LadderSpec, at_rung, check_ladder, ladder_of, rung_of, with_settings
from gptlab.kinds.ladder.stages import LadderStages, rung_spec
from gptlab.run.config import LENGTH_KEY
from gptlab.run.resultsdir import RUNG, ResultsDir
from gptlab.sweep.kinds import SWEEP_KINDS, kinds_of, known_runs, planned_range, setting_space
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
        space = setting_space(spec)
        arm_keys = {k for settings in spec.arms.arms.values() for k in settings} | set(space)
        ladder = dataclasses.replace(check_ladder(raw, spec.base_config, arm_keys), space=dict(space))
        _check_kinds_at_rungs(ladder, spec)
        return ladder

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

    def parts(self, spec: SweepSpec, results_dir: ResultsDir,
              planned: Sequence[Run]) -> list[tuple[SweepSpec, ResultsDir, Sequence[Run]]]:
        """Each rung: the kinds' work after the runs (`worth:`'s step timing) is each rung's, in its own folder."""
        ladder = ladder_of(spec)
        return [(at_rung(spec, rung), results_dir.at_rung(rung.name),
                 [r for r in planned if rung_of(ladder, r.config) == rung.name]) for rung in ladder.rungs]

    def open_count(self, spec: SweepSpec) -> str:
        return f"each of the {len(ladder_of(spec).rungs)} rungs' tuning starts from the picks of the rung below"


def _check_kinds_at_rungs(ladder: LadderSpec, spec: SweepSpec) -> None:
    """Every other kind's section checked again at each rung's settings (its own check, as the rung's sweep: a
    `worth:` length valid at one rung's steps may not be at another's); a kind that trains a run at another length
    (`shares_trunks`: `worth:`) needs rungs that differ in more than their steps, or its run would be another rung's."""
    steps_only = all(set(r.settings) <= {LENGTH_KEY} for r in ladder.rungs)
    for key, kind in kinds_of(spec):
        if key == KEY or not hasattr(spec.kinds[key], "to_dict"):
            continue
        if steps_only and kind.shares_trunks(spec):
            raise GptlabError(f"ladder: {key}: trains the baseline at other lengths, and these rungs differ only in "
                              f"{LENGTH_KEY} (a length of one rung would be another rung): give the rungs other "
                              f"settings too, or leave {key}: out")
        for rung in ladder.rungs:
            try:
                kind.check(spec.kinds[key].to_dict(), at_rung(spec, rung))
            except GptlabError as err:
                raise GptlabError(f"ladder.rungs.{rung.name}: {err}") from None
