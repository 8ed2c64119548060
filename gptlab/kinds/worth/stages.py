"""The sweep's side of `worth:`: `WorthKind`, and its stage, the baseline trained to several lengths, for what each arm
is worth in steps.

After the tuner and the estimation seeds are done (the baseline's pick and seeds are then on disk),
`WorthStages` adds one stage per sweep: the baseline at its pick, warmup-stable-decay, at each
length (e.g. 0.5x, 1x, 2x, 4x the study's `train.max_iters`) with its first estimation seeds
(role `worth`), and at the shortest and longest length at lrs around its pick on the first
selection seed (role `worth_tuning`: does the optimum move with length? Bjorck et al. 2025).
Runs of one seed and lr differing only in `train.max_iters` share their stable phase
(`gptlab.sweep.trunks`, which the kind asks for: `shares_trunks`): a seed's four lengths cost its longest run plus
three cooldowns. Once every run has finished, the kind times the arms' steps side by side (`step_times`).

Why wsd and not the study's own schedule: each length must be fully decayed (Kaddour et al. 2023),
and wsd gives every length from one trunk. When the study trains with cosine, the report places an
arm's effect (arm - baseline, both cosine at the study's length) on the wsd curve's shape
(`gptlab.stats.worth.step_multiplier`'s anchor): Hägele et al. 2024 found wsd with a cooldown
matching cosine at each length. Like every planner, the stage is decided from the runs on disk,
so a killed sweep, rerun, plans the same runs.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence, TextIO

from gptlab.kinds.worth.spec import KEY, WORTH, WORTH_TUNING, BaselineSeeds, WorthSpec, check_worth, length_config, steps_at
from gptlab.kinds.worth.step_times import time_steps
from gptlab.run.config import LENGTH_KEY, LR_KEY
from gptlab.run.identity import run_sources
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunSummary
from gptlab.stats.arms import ARM
from gptlab.statuses import OK
from gptlab.sweep.kinds import SWEEP_KINDS, scale_keys, seed_plan
from gptlab.sweep.planners import Case, FinishedRuns, Planner, Preview, Stage, SweepKind
from gptlab.sweep.runs import ESTIMATION, SELECTION_SEED_OFFSET, Run, SweepSpec, TunedRun, cell_label


def length_of(run: Run) -> int:
    """A run's train.max_iters (summary.csv's `train.max_iters` column in a sweep with `worth:`)."""
    return run.config.train.max_iters


def _run(spec: SweepSpec, like: Run, lr: float, seed: int, steps: int, role: str) -> TunedRun:
    config = length_config(like.config.with_settings({"seed": seed, LR_KEY: lr}), steps)
    digest = config.run_hash(run_sources(spec.plugins, config.data.path))
    setting = ((LR_KEY, lr),)
    label = cell_label(like.cell + setting + ((LENGTH_KEY, f"wsd{steps}"),))
    return TunedRun(f"{label}_s{seed}_{digest}", like.cell, seed, config, setting, role)


def _trained_as(run: Run) -> tuple[int, str]:
    """What a run trains: its seed and its config's hash (the run id's last part)."""
    return run.seed, run.run_id.rsplit("_", 1)[-1]


def learned(runs: Sequence[Run], rows: Sequence[RunSummary]) -> set[str]:
    """The ids of `runs` that finished ok (their own curve showed no failure, `gptlab.statuses.judge`): the seeds a
    curve may take, as every statistic takes them."""
    by_id = {str(r.run_id): r for r in rows}
    return {r.run_id for r in runs if r.run_id in by_id and str(by_id[r.run_id].status) == OK}


def worth_runs(spec: SweepSpec, estimation: Sequence[Run], trained: set[str] | None = None) -> list[TunedRun]:
    """The worth stage's runs for the baseline's `estimation` runs (those in `trained`, all when None), cell-major."""
    worth: WorthSpec = spec.kinds[KEY]
    study = spec.base_config.train.max_iters
    taken = {_trained_as(r) for r in estimation}
    out: list[TunedRun] = []
    by_cell: dict[Any, list[Run]] = {}
    for run in estimation:
        if dict(run.cell).get(ARM) == spec.arms.baseline and (trained is None or run.run_id in trained):
            by_cell.setdefault(run.cell, []).append(run)
    for runs in by_cell.values():
        by_lr: dict[float, list[Run]] = {}
        for run in runs:
            by_lr.setdefault(run.config.train.lr, []).append(run)
        for lr, at_lr in by_lr.items():  # one lr per cell once picked; every possible pick for `known_runs`
            first = sorted(at_lr, key=lambda r: r.seed)[:worth.seeds]
            for run in first:
                out += [_run(spec, run, lr, run.seed, steps_at(f, study), WORTH) for f in worth.lengths]
            ends = (worth.lengths[0], worth.lengths[-1])
            for factor in (1.0, *worth.retune):
                if lr * factor >= first[0].config.train.min_lr:  # below min_lr no schedule decays
                    out += [_run(spec, first[0], lr * factor, SELECTION_SEED_OFFSET, steps_at(end, study),
                                 WORTH_TUNING) for end in ends]
    unique: dict[str, TunedRun] = {}
    for run in out:  # a wsd study's 1x runs are its estimation runs (same config and seed): trained once, as those
        if _trained_as(run) not in taken:
            unique.setdefault(run.run_id, run)
    return list(unique.values())


def selecting(spec: SweepSpec) -> bool:
    """Whether the spec's runs are not its estimation runs (a tuned sweep's selection): those are known once picked."""
    return not any(r.role == ESTIMATION for r in spec.runs)


def stand_in_estimation(spec: SweepSpec) -> list[Run]:
    """The baseline's estimation runs as the dry run counts them. A sweep that selects no setting knows them: its own
    runs. A tuned one's are known once picked: stand-ins at the first lr with its most seeds, each id ending in its
    config's hash as a real run's does, so that a wsd study's 1x lengths are found to be them (trained once)."""
    if not selecting(spec):
        return [r for r in spec.runs if r.role == ESTIMATION and dict(r.cell).get(ARM) == spec.arms.baseline]
    seen: dict[Any, Run] = {}
    for run in spec.runs:
        if dict(run.cell).get(ARM) == spec.arms.baseline:
            seen.setdefault(run.cell, run)
    plan = seed_plan(spec)
    n = plan.most if plan else len(spec.seeds)
    runs = []
    for run in seen.values():
        count = spec.seed_count(run.cell, n)
        for seed in range(min(count, spec.kinds[KEY].seeds or count)):
            config = dataclasses.replace(run.config, seed=seed)
            digest = config.run_hash(run_sources(spec.plugins, config.data.path))
            runs.append(Run(f"{cell_label(run.cell)}-stand-in_s{seed}_{digest}", run.cell, seed, config))
    return runs


def baseline_seeds(spec: SweepSpec) -> BaselineSeeds | None:
    """The most estimation seeds the baseline of an arms sweep trains (seeds decided in rounds: at their most); None for
    a grid."""
    if spec.arms is None:
        return None
    plan = seed_plan(spec)
    n = plan.most if plan else len(spec.seeds)
    return BaselineSeeds(spec.arms.baseline, spec.seed_count(((ARM, spec.arms.baseline),), n), plan is not None)


def shortfall(spec: SweepSpec, estimation: Sequence[Run], trained: set[str]) -> list[str]:
    """One warning per baseline cell (and lr) with fewer estimation seeds finished ok than `worth.seeds` asks (adaptive
    seeds that stopped early, a seed that failed to train): its lengths train on those, and the user is told so."""
    asked = spec.kinds[KEY].seeds
    if asked is None:
        return []
    seeds: dict[tuple[Any, float], set[int]] = {}
    for run in estimation:
        if dict(run.cell).get(ARM) == spec.arms.baseline:
            seeds.setdefault((run.cell, run.config.train.lr), set()).update([run.seed] if run.run_id in trained else [])
    return [f"warning: worth.seeds is {asked}, but {len(ok)} of the baseline {cell_label(cell)}'s estimation seeds finished "
            f"ok: its lengths train on those {len(ok)}" for (cell, _), ok in seeds.items() if ok and len(ok) < asked]


class WorthStages:
    """Wraps a sweep's planner: once it is done, one more stage trains the baseline's lengths (`worth_runs`)."""

    def __init__(self, base: Planner, spec: SweepSpec, out: TextIO) -> None:
        self.base, self.spec, self.out = base, spec, out
        self.planned: tuple[Run, ...] = tuple(spec.runs)  # every run planned so far (the base's last stage's)
        self.state = "base"  # base -> worth -> done

    def next_stage(self, finished: FinishedRuns) -> Stage | None:
        if self.state == "base":
            stage = self.base.next_stage(finished)
            if stage is not None:
                self.planned = stage.planned
                return stage
            self.state = "done"
            estimation = [r for r in self.planned if r.role == ESTIMATION]
            trained = learned(estimation, finished.rows)
            runs = worth_runs(self.spec, estimation, trained)
            for line in shortfall(self.spec, estimation, trained):
                print(line, file=self.out)
            if not runs:
                print("worth: no estimation run of the baseline finished ok: no lengths to train", file=self.out)
                return None
            print(describe(self.spec, runs), file=self.out)
            return Stage("worth: the baseline's lengths", tuple(runs), tuple(self.planned) + tuple(runs), tag="worth",
                         unfinished="the baseline's lengths did not all finish (rerun to continue)")
        return None

    def preview(self) -> Preview | None:
        """The stage's runs added to each whole case: known runs where the sweep selects no setting (their state on
        disk counts), else stand-ins for the lengths of picks yet to be made."""
        base = self.base.preview()
        lengths = tuple(worth_runs(self.spec, stand_in_estimation(self.spec)))
        known, stand_ins = ((), lengths) if selecting(self.spec) else (lengths, ())
        intro = describe(self.spec, lengths)
        if base is None:
            return Preview(intro, (Case("the sweep with the baseline's lengths", tuple(self.spec.runs) + known, stand_ins,
                                        whole=True),))
        cases = tuple(Case(c.label + (" + the baseline's lengths" if c.whole else ""), c.runs + (known if c.whole else ()),
                           c.stand_ins + (stand_ins if c.whole else ()), whole=c.whole) for c in base.cases)
        return Preview(f"{base.intro}; then {intro}", cases)


def describe(spec: SweepSpec, runs: Sequence[Run]) -> str:
    """One line: what the worth stage trains."""
    worth: WorthSpec = spec.kinds[KEY]
    n_worth = sum(r.role == WORTH for r in runs)  # type: ignore[attr-defined]
    seeds: dict[Any, set[int]] = {}  # per cell: the estimation seeds its lengths train on (the seeds used, said)
    for run in runs:
        if run.role == WORTH:
            seeds.setdefault(run.cell, set()).add(run.seed)
    n_seeds = max((len(s) for s in seeds.values()), default=0)
    lengths, factors = (", ".join(f"{f:g}{x}" for f in fs) for fs, x in ((worth.lengths, "x"), ((1.0, *worth.retune), "")))
    return (f"worth: the baseline {spec.arms.baseline} at its pick under wsd, at {lengths} the study's steps on {n_seeds} "
            f"estimation seed{'' if n_seeds == 1 else 's'} ({n_worth} runs), and at lr x {factors} at "
            f"{worth.lengths[0]:g}x and {worth.lengths[-1]:g}x ({len(runs) - n_worth} runs: does its optimum move?)")


@SWEEP_KINDS.register(KEY)
class WorthKind(SweepKind):
    """The `worth:` key (`gptlab.sweep.kinds.SWEEP_KINDS`): its section, its stage, its column of summary.csv and the
    arms' steps timed after the runs."""

    description = "An arms sweep's baseline at its pick trained to several lengths: each arm's worth in its steps"

    def check(self, raw: Any, spec: SweepSpec) -> WorthSpec | None:
        return check_worth(raw, spec.arms is not None, spec.base_config, spec.arms.arms if spec.arms else {},
                           scale_keys(spec), baseline_seeds(spec))

    def stages(self, planner: Planner, spec: SweepSpec, out: TextIO) -> Planner:
        return WorthStages(planner, spec, out)

    def known_runs(self, spec: SweepSpec, runs: list[Run]) -> list[Run]:
        """The lengths of every possible pick."""
        return list(worth_runs(spec, [r for r in runs if r.role == ESTIMATION]))

    def planned_count(self, spec: SweepSpec) -> int:
        return len(worth_runs(spec, stand_in_estimation(spec)))

    def shares_trunks(self, spec: SweepSpec) -> bool:
        return True  # the lengths: wsd runs of one seed and lr differing only in train.max_iters

    def columns(self, spec: SweepSpec, taken: list[str]) -> list[str]:
        return [] if LENGTH_KEY in taken else [LENGTH_KEY]  # the runs' lengths (a tuned length is there already)

    def row(self, spec: SweepSpec, run: Run) -> dict[str, Any]:
        return {LENGTH_KEY: length_of(run)}

    def after_runs(self, spec: SweepSpec, results_dir: ResultsDir, planned: Sequence[Run], threads: int,
                   out: TextIO) -> None:
        """Each arm's step timed beside the others' (`step_times`): its cost per step against the baseline's."""
        time_steps(results_dir, planned, threads, out)
