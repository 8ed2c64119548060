"""Shared trunks, the sweep side: runs that differ only in `train.max_iters` under wsd share their stable phase.

Under `train.schedule: wsd` (a schedule that `shares_trunk`) a run's learning rate is constant from the end
of its warmup to its cooldown start b(L) = L - round(cooldown_fraction x L), and a step's batch depends only on (seed,
step): runs of one cell and seed that differ only in their length L compute the same steps up to
the shorter one's b(L). The longest run of such a group is its trunk: it trains in full, and as it
passes each shorter run's b(L) it starts that run's folder from its state (`gptlab.run.branching`);
each shorter run, a branch, then trains only its cooldown, as a resume would. b(L) never decreases
with L, so the longest run passes every branch point in its own stable phase. A group of lengths
1000, 2000, 4000 and 8000 trains 8000 + 200 + 400 + 800 steps instead of 15000.

`SharedTrunks` wraps any planner (`FixedSeeds`, `AdaptiveSeeds`, tuning's): each stage it hands out
is split in two, the trunks (with every run that belongs to no group) and then the branches, so a
branch trains only once its trunk has finished (a branch whose trunk left no state, e.g. a trunk
that diverged before the branch point, trains from step 0 and gives the same result). The sharing
needs the trunk's process to write into its branches' folders: the loky backend's, which are the
results folder itself. Other backends train every length from step 0 (`with_shared_trunks` says so).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence, TextIO

from gptlab.run.branching import Branch, record_branches
from gptlab.run.schedules import SCHEDULES
from gptlab.sweep.kinds import shares_trunks
from gptlab.sweep.planners import Case, FinishedRuns, Planner, Preview, Stage
from gptlab.sweep.runs import Run, SweepSpec

SHARING_BACKENDS = ("loky",)  # whose workers train in the results folder, where a trunk reaches its branches


@dataclass(frozen=True)
class TrunkGroup:
    """Runs of one cell and seed under wsd that differ only in train.max_iters."""

    trunk: Run  # the longest: trained in full
    branches: tuple[tuple[Run, int], ...]  # each shorter run and its branch point (its cooldown start), shortest first


def _length(run: Run) -> int:
    return run.config.train.max_iters


def _cooldown_start(run: Run) -> int:
    return run.config.train.cooldown_start


def trunk_groups(runs: Sequence[Run]) -> list[TrunkGroup]:
    """The groups of `runs` that can share a trunk (two lengths or more), in the order of their first run."""
    by_rest: dict[str, list[Run]] = {}
    for run in runs:
        if not SCHEDULES.get(run.config.train.schedule).shares_trunk:
            continue
        rest = run.config.to_dict()  # the seed included
        del rest["train"]["max_iters"]
        by_rest.setdefault(json.dumps(rest, sort_keys=True, default=str), []).append(run)
    groups = []
    for members in by_rest.values():
        if len(members) < 2:
            continue
        members = sorted(members, key=_length)
        trunk, limit = members[-1], _cooldown_start(members[-1])
        # b(L) <= b(trunk) always holds (b never decreases with L); checked, as the equality depends on it.
        branches = tuple((run, b) for run in members[:-1] if (b := _cooldown_start(run)) <= limit)
        if branches:
            groups.append(TrunkGroup(trunk, branches))
    return groups


def steps_trained(runs: Sequence[Run]) -> tuple[int, int]:
    """Optimizer steps of `runs` with shared trunks and trained separately."""
    separate = sum(_length(r) for r in runs)
    return separate - sum(b for group in trunk_groups(runs) for _, b in group.branches), separate


def branch_starts(spec: SweepSpec, runs: Sequence[Run]) -> dict[str, int]:
    """The step each branch among `runs` starts from on the spec's backend (a run not named starts at 0).

    Groups are formed over every run given, finished or not: a finished trunk still starts its branches."""
    if spec.executor.backend not in SHARING_BACKENDS:
        return {}
    every = list({r.run_id: r for r in runs}.values())
    return {run.run_id: b for group in trunk_groups(every) for run, b in group.branches}


def describe_sharing(runs: Sequence[Run]) -> str:
    """One line for the console and `--dry-run`: the groups, and the steps trained with and without sharing."""
    groups = trunk_groups(runs)
    shared, separate = steps_trained(runs)
    lengths = sorted({_length(r) for g in groups for r in (g.trunk, *(run for run, _ in g.branches))})
    return (f"shared trunks: {len(groups)} group(s) of wsd runs differing only in train.max_iters "
            f"({', '.join(map(str, lengths))}) train each stable phase once: {shared:,} steps instead of "
            f"{separate:,} ({shared / separate:.0%}); trunks first, then each shorter length's cooldown")


class SharedTrunks:
    """Wraps a planner: each of its stages is trained as its trunks (and ungrouped runs), then its branches."""

    def __init__(self, base: Planner, runs: Sequence[Run], out: TextIO) -> None:
        self.base, self.runs, self.out = base, tuple(runs), out
        self.branches: Stage | None = None  # the second half of the base's current stage, handed out next

    def next_stage(self, finished: FinishedRuns) -> Stage | None:
        if self.branches is not None:  # the trunks finished: their branches now start from their states
            stage, self.branches = self.branches, None
            return stage
        stage = self.base.next_stage(finished)
        if stage is None:
            return None
        groups = trunk_groups(stage.runs)
        if not groups:
            return stage
        for group in groups:  # rewritten at every invocation: a trunk reads it when it (re)starts
            record_branches(finished.results_dir.run(group.trunk.run_id),
                            [Branch(b, run.run_id, run.config) for run, b in group.branches])
        later = {run.run_id for group in groups for run, _ in group.branches}
        print(describe_sharing(stage.runs), file=self.out)
        tag = f"{stage.tag}, " if stage.tag else ""
        self.branches = Stage(f"{stage.title}, cooldown branches", tuple(r for r in stage.runs if r.run_id in later),
                              stage.planned, tag=f"{tag}branches", unfinished=stage.unfinished)
        return Stage(f"{stage.title}, trunks", tuple(r for r in stage.runs if r.run_id not in later),
                     tuple(r for r in stage.planned if r.run_id not in later), tag=f"{tag}trunks",
                     unfinished="the trunks did not all finish: their shorter lengths branch from them once they "
                                "have (rerun to continue; --rerun-failed for a failed trunk)")

    def preview(self) -> Preview | None:
        base = self.base.preview()
        if base is None:
            return Preview(describe_sharing(self.runs), ())
        cases = []
        for case in base.cases:  # each way the sweep may end, with the steps its runs train
            shared, separate = steps_trained([*case.runs, *case.stand_ins])
            steps = f" ({shared:,} steps with shared trunks, {separate:,} without)" if shared < separate else ""
            cases.append(Case(case.label + steps, case.runs, case.stand_ins, whole=case.whole))
        return Preview(f"{base.intro}; wsd runs differing only in train.max_iters share their stable trunks",
                       tuple(cases))


def with_shared_trunks(spec: SweepSpec, base: Planner, out: TextIO) -> Planner:
    """`base` with shared trunks when the spec's runs have groups and its backend can share, else `base`."""
    if not trunk_groups(spec.runs) and not shares_trunks(spec):  # a kind may plan wsd lengths after the first stages
        return base
    if spec.executor.backend not in SHARING_BACKENDS:
        print(f"note: shared trunks need a backend whose workers train in the results folder "
              f"({', '.join(SHARING_BACKENDS)}); with {spec.executor.backend} each length trains from step 0", file=out)
        return base
    return SharedTrunks(base, spec.runs, out)
