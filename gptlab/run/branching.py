"""Shared trunks, the run side: a trunk run hands its state to the cooldown branches that start from it.

Under `train.schedule: wsd` the learning rate before the cooldown does not depend on
`train.max_iters`, and the batch of a step depends only on (seed, step): the first `b` steps of a
run of any length whose cooldown starts at `b` or later are one computation. A sweep whose runs
differ only in `train.max_iters` (`gptlab.sweep.trunks`) trains the longest of them, the trunk, and
records in its folder (`RunDir.BRANCHES`) each shorter run's branch point (its cooldown start), run
id and config. `BranchHandoff` watches the trunk's loop: when it reaches a branch point (after that
step's metrics row and evaluation, before it trains the step) it leaves in the branch's folder, a
sibling of the trunk's, exactly what a run of that length killed at that step would have left
(`RunDir.start_branch`). The branch then trains as an ordinary resume, and gives the metrics of a
run trained from step 0 row for row (on CPU at the same thread count).

A branch's summary.json records `branched_from`: the trunk's run id, the step, and `shared_s`, the
trunk's seconds up to that step. Its `wall_s` (and `tokens_per_sec`) count those shared seconds,
as a resumed run's count the time before its kill, so summary.csv compares with separate runs;
the time the sweep spent on the branch alone is `wall_s - branched_from.shared_s`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from gptlab.run.config import RunConfig, resolve_run_config
from gptlab.run.rundir import RunDir
from gptlab.run.trainer import Trainer, TrainerCallback

log = logging.getLogger("gptlab.train")


@dataclass(frozen=True)
class Branch:
    """One shorter run that starts from a trunk's state."""

    step: int  # the branch point: the branch's cooldown start, where its schedule leaves the trunk's
    run_id: str  # the branch's folder name, a sibling of the trunk's folder
    config: RunConfig  # the branch's resolved run config

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "run_id": self.run_id, "config": self.config.to_dict()}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Branch":
        """A branch as `branches.json` records it (a file read back: its config is resolved here)."""
        return cls(int(raw["step"]), str(raw["run_id"]), resolve_run_config(raw["config"]))


def record_branches(trunk: RunDir, branches: Sequence[Branch]) -> None:
    """Tell the trunk run in `trunk` where to hand its state over (before it trains)."""
    trunk.write_branches([b.to_dict() for b in sorted(branches, key=lambda b: (b.step, b.run_id))])


def handoff_for(folder: RunDir) -> list[TrainerCallback]:
    """The callback a trunk's loop needs ([] for a run that is no trunk)."""
    branches = [Branch.from_dict(raw) for raw in folder.branches()]
    return [BranchHandoff(folder, branches)] if branches else []


class BranchHandoff(TrainerCallback):
    """At each branch point of the trunk it watches, starts the branches' folders from its state."""

    def __init__(self, trunk: RunDir, branches: Sequence[Branch]) -> None:
        self.trunk = trunk
        self.at: dict[int, list[Branch]] = {}
        for branch in branches:
            self.at.setdefault(branch.step, []).append(branch)

    def before_step(self, trainer: Trainer) -> None:
        branches = self.at.get(trainer.step)
        if not branches:
            return
        state = trainer.state_dict()
        best = self.trunk.load_checkpoint("best")  # the best of the steps so far: the branch's best too
        for branch in branches:
            hand_off(RunDir(self.trunk.path.parent / branch.run_id), branch, trainer, state, best)


def hand_off(folder: RunDir, branch: Branch, trainer: Trainer, state: dict[str, Any],
             best: dict[str, Any] | None) -> bool:
    """Start `folder` from the trunk's `state`; False when it already holds a start (or a result) of its own."""
    from filelock import FileLock, Timeout

    if folder.state() != "pending":  # handed off before the trunk's kill, or trained since: never overwritten
        return False
    folder.path.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(folder / RunDir.LOCK), timeout=0):  # a process training the branch owns its folder
            if folder.state() != "pending":
                return False
            config, settings = branch.config, branch.config.to_dict()  # a checkpoint records the plain settings
            origin = {"run_id": trainer.run_id, "step": trainer.step, "shared_s": round(trainer.elapsed_s, 3)}
            folder.start_branch(config, origin, list(trainer.rows), {**state, "config": settings},
                                {**best, "config": settings} if best is not None else None)
    except Timeout:
        log.warning("branch %s is being trained elsewhere: not handed the state of %s at step %d",
                    branch.run_id, trainer.run_id, trainer.step)
        return False
    log.info("handed the state at step %d to branch %s", trainer.step, branch.run_id)
    return True
