"""Example plugin: a kind of sweep of its own, `recheck: {seeds: N}` (tests/sweep/test_kinds.py runs it).

Once the sweep's own stages are done, `recheck:` trains the baseline cell again at N fresh seeds (100, 101, ...),
role `recheck`, kept out of the effects, and the report gets a section listing their losses, with
`tables/recheck.csv`. A kind is one file like this (or one folder, as the shipped kinds are: `gptlab/kinds/`): a
`SweepKind` registered with `@SWEEP_KINDS.register` (its key's check, its stages, the runs it may plan) and, under
the same name, a `ReportKind` registered with `@REPORT_KINDS.register` (here its section alone; its numbers,
sentences and figures have hooks too). A sweep YAML names the file under `plugins:`; nothing under gptlab/ changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gptlab.errors import GptlabError, shown
from gptlab.report.document.blocks import Heading, Para, Table
from gptlab.report.kinds import REPORT_KINDS, KindSection, ReportKind
from gptlab.run.identity import run_sources
from gptlab.sweep.kinds import SWEEP_KINDS
from gptlab.sweep.planners import Planner, Stage, SweepKind
from gptlab.sweep.runs import TunedRun

FIRST_SEED = 100  # above the sweep's own seeds in every shipped study
ROLE = "recheck"  # summary.csv's role of its runs: the report's effects never take them


@dataclass(frozen=True)
class Recheck:
    """The validated `recheck:` section."""

    seeds: int  # how many fresh seeds the baseline cell trains again

    def to_dict(self) -> dict[str, Any]:
        return {"seeds": self.seeds}


def recheck_runs(spec) -> list[TunedRun]:
    """The baseline cell at each fresh seed; its id hashed like every run's, so a rerun finds them finished."""
    base = next(run for run in spec.runs if run.factors == spec.baseline)
    runs = []
    for seed in range(FIRST_SEED, FIRST_SEED + spec.kinds["recheck"].seeds):
        config = base.config.with_settings({"seed": seed})
        digest = config.run_hash(run_sources(spec.plugins, config.data.path))
        runs.append(TunedRun(f"recheck_s{seed}_{digest}", base.cell, seed, config, (), ROLE))
    return runs


class RecheckStages:
    """The sweep's planner, then one stage: the recheck runs. Decided from nothing but the spec, so a rerun plans
    the same runs."""

    def __init__(self, base: Planner, spec) -> None:
        self.base, self.spec, self.planned, self.done = base, spec, tuple(spec.runs), False

    def next_stage(self, finished):
        if not self.done:
            stage = self.base.next_stage(finished)
            if stage is not None:
                self.planned = stage.planned
                return stage
            self.done = True
            runs = tuple(recheck_runs(self.spec))
            return Stage("recheck: the baseline at fresh seeds", runs, self.planned + runs, tag="recheck")
        return None

    def preview(self):
        return self.base.preview()


@SWEEP_KINDS.register("recheck")
class RecheckKind(SweepKind):
    description = "The baseline cell trained again at fresh seeds once the sweep is done (an example plugin)"

    def check(self, raw, spec) -> Recheck:
        seeds = raw.get("seeds") if isinstance(raw, dict) and set(raw) == {"seeds"} else None
        if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= 100:
            raise GptlabError(f"recheck: must be {{seeds: N}} with N from 1 to 100, got {shown(raw)}")
        return Recheck(seeds)

    def stages(self, planner, spec, out):
        return RecheckStages(planner, spec)

    def known_runs(self, spec, runs):
        return recheck_runs(spec)

    def planned_count(self, spec):
        return spec.kinds["recheck"].seeds


@REPORT_KINDS.register("recheck")
class RecheckReport(ReportKind):
    """The report's section: the recheck runs' best validation losses."""

    def section(self, res, tables, words, figures) -> KindSection:
        rows = res.other_roles[res.other_roles["role"] == ROLE]
        table = rows[["run_id", "seed", "status", "best_val_loss"]].reset_index(drop=True)
        text = f"The baseline trained again at {len(table)} fresh seed(s) (`tables/recheck.csv`; kept out of the effects)."
        return KindSection(blocks=(Heading("Recheck"), Para(text), Table(table)), tables={"recheck": table})
