"""Planners: which runs a sweep trains next, given the ones that finished. Every kind of round is one.

A sweep trains in stages. `execute` asks its planner for a stage, trains it, and asks again with
the finished stage's summary rows, until the planner answers None; a stage that does not finish
(a run failed or was not trained) ends the sweep there, and the next rerun asks again from the
first stage. A planner therefore decides only from what is on disk (the runs' summaries, never
anything it remembers from an earlier invocation), which is what makes a killed sweep, rerun,
make the same decisions. Its runs need not be the spec's: a later stage may make runs that only
the earlier stages' results define (tuning's estimation runs at each cell's pick).

The planners: `FixedSeeds` here (one stage: the spec's runs), `AdaptiveSeeds` in
`gptlab.kinds.seeds.stages` (Stein's two rounds), and the tuning methods in `gptlab.kinds.tune.kind.TUNERS`,
one per `tune.method` (`grid` in `gptlab.kinds.tune.tuning`, `refine` in `gptlab.kinds.tune.refine`, and a
plugin's: a class extending `TuneThenEstimate`, registered with `@TUNERS.register("name")` in one file the sweep's
`plugins:` names). None of them imports the driver (`execute`), and the driver names no kind and no tuning method:
`execute.planner_for` asks each kind of sweep (`SweepKind` here, with `SeedPlan` and `AfterRunsStopped`,
registered in `gptlab.sweep.kinds`) for its stages, and `tune:`'s kind asks the methods' registry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence, TextIO

from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunSummary
from gptlab.statuses import FAILED
from gptlab.sweep.runs import Run, SweepSpec


@dataclass(frozen=True)
class FinishedRuns:
    """What a planner decides its next stage from: the results folder and the runs finished so far."""

    results_dir: ResultsDir  # results/NAME (a path is taken as one); summary.csv holds exactly `rows`
    # the summaries of summary.csv's rows, every run planned so far (empty before the first stage; a mapping is taken
    # as its `RunSummary`)
    rows: tuple[RunSummary, ...] = ()

    def __post_init__(self) -> None:  # frozen: the one write, normalising
        object.__setattr__(self, "results_dir", ResultsDir(self.results_dir))
        object.__setattr__(self, "rows", tuple(r if isinstance(r, RunSummary) else RunSummary.from_mapping(r)
                                               for r in self.rows))


@dataclass(frozen=True)
class Stage:
    """One stage of a sweep: the runs it trains, and every run planned so far (summary.csv, the report)."""

    title: str  # heading of the stage's console lines, e.g. "round 2 (4 seeds)" or "sweep quick"
    runs: tuple[Run, ...]  # what this stage trains (its finished runs are skipped, so reruns are cheap)
    planned: tuple[Run, ...]  # every run planned so far, this stage's included, in summary.csv order
    tag: str = ""  # prefix of each progress line (the title when a sweep has several stages, else empty)
    unfinished: str = ""  # printed when the stage stops with runs failed or untrained: why the sweep stops there


@dataclass(frozen=True)
class Case:
    """One way a sweep may end, for `--dry-run`: its label and every run it trains."""

    label: str  # e.g. "worst case: 5 seeds per cell" (the dry run adds ", 20 runs, 20 to train")
    runs: tuple[Run, ...]  # every run of the sweep in this case that is known before it trains
    stand_ins: tuple[Run, ...] = ()  # runs counted and timed for those a later stage will choose (a tuned sweep's picks)
    whole: bool = False  # one way the whole sweep may end (the dry run's bottom line ranges over these)


@dataclass(frozen=True)
class Preview:
    """What `--dry-run` shows of a planner beyond the run table: one sentence, then the cases it may end in."""

    intro: str  # how the planner decides, in one line
    cases: tuple[Case, ...]  # counted and timed by the dry run


class Planner(Protocol):
    """Answers "which runs next, given the finished ones?"; None when the sweep is done."""

    def next_stage(self, finished: FinishedRuns) -> Stage | None:
        """The next stage. Called first with no rows, then only after every run of the previous
        stage finished (ok or diverged), with the rows of that stage's `planned` runs."""
        ...

    def preview(self) -> Preview | None:
        """The stages' possible outcomes for `--dry-run`; None when the run table says it all."""
        ...


def stage_finished(stage: Stage, rows: Sequence[RunSummary]) -> bool:
    """Every planned run has a summary and none failed: the only state in which a planner is asked again."""
    return len(rows) == len(stage.planned) and not any(r.status == FAILED for r in rows)


class FixedSeeds:
    """A sweep with a fixed seed list: one stage, the spec's runs."""

    def __init__(self, runs: Sequence[Run], name: str) -> None:
        self.runs, self.name = tuple(runs), name
        self.asked = False  # the one stage was handed out

    def next_stage(self, finished: FinishedRuns) -> Stage | None:
        if self.asked:
            return None
        self.asked = True
        return Stage(f"sweep {self.name}", self.runs, self.runs)

    def preview(self) -> Preview | None:
        return None


@dataclass(frozen=True)
class SeedPlan:
    """The estimation seeds per cell of a kind that decides them in rounds (adaptive seeds): round 1's, and the most
    it may train (every cell's seeds are 0..most-1; an arms baseline's more, `SweepSpec.seed_count`)."""

    first: int  # round 1's seeds per cell, whose runs alone give the effects' error (Stein)
    most: int  # the most seeds per cell the rounds may reach
    words: str  # how the planners and the dry run name them, e.g. "adaptive seeds (2 to 4)"
    fix: str = ""  # how to give round 1 more seeds, e.g. "a larger `seeds.min`" (the noise's df warning)


class SweepKind:
    """The sweep's hooks of a kind of sweep; every hook but `check` has a default that adds nothing."""

    description = ""  # one line on what its key asks for (`--list`)

    def seeds(self, raw: Any) -> list[int] | None:
        """The seeds every cell may train where the key's section (`raw`, as the YAML gives it, checked here) decides
        them, before the rest of the spec is checked: they bound the sweep's size (adaptive seeds: 0..max-1);
        None where the section leaves them to the sweep's `seeds:` count or list."""
        return None

    def registries(self) -> Mapping[str, Any]:
        """The registries the kind's keys name, by dotted key (`tune.method`'s methods), for `--list`."""
        return {}

    def check(self, raw: Any, spec: SweepSpec) -> Any:
        """The key's section (`raw`, as the YAML gives it) validated into a frozen value with `to_dict()`, against the
        rest of the validated `spec`; None where the value turns the kind off; bad input raises `GptlabError` naming
        the key."""
        raise NotImplementedError(f"{type(self).__name__}.check")

    def joined(self, spec: SweepSpec) -> SweepSpec:
        """The spec once this kind's section is in `spec.kinds`: `spec` itself, or with defaults the kind sets (a tuned
        sweep's test split)."""
        return spec

    def first_runs(self, spec: SweepSpec) -> list[Run] | None:
        """The runs the sweep starts from, where this kind plans them (a tuned sweep's selection runs); None: the
        grid's (or the arms') cells x seeds."""
        return None

    def stages(self, planner: Planner, spec: SweepSpec, out: TextIO) -> Planner:
        """The sweep's planner with this kind's stages added (`planner` itself when it adds none); a kind that plans
        the whole sweep returns its own (a tuning method plans its selection and then the estimation seeds)."""
        return planner

    def setting_space(self, spec: SweepSpec) -> Mapping[str, tuple[Any, ...]]:
        """The keys this kind tries every cell's runs at and their levels (`tune.space`), which its picks choose
        from; none by default."""
        return {}

    def with_setting_space(self, spec: SweepSpec, space: Mapping[str, tuple[Any, ...]]) -> SweepSpec:
        """`spec` with this kind's `setting_space` replaced by `space` (a ladder's upper rung starts from the picks of
        the rung below); `spec` itself where the kind tries none."""
        return spec

    def scale_keys(self, spec: SweepSpec) -> Sequence[str]:
        """Grid keys whose levels are scales, reported per level and never as effects (`scale:`'s); none by default."""
        return ()

    def seed_plan(self, spec: SweepSpec) -> SeedPlan | None:
        """How many estimation seeds per cell this kind trains, where it decides them in rounds; None where it does not."""
        return None

    def rounds(self, spec: SweepSpec, runs: Sequence[Run], out: TextIO) -> Planner | None:
        """A planner of `runs` (every cell's estimation runs, seeds 0..most-1) in this kind's rounds, where it decides
        the seeds (a tuned sweep's estimation at its picks asks for it); None where they train in one stage."""
        return None

    def known_runs(self, spec: SweepSpec, runs: list[Run]) -> list[Run]:
        """Runs beyond `runs` (the spec's, and a tuned sweep's possible ones) that this kind may plan."""
        return []

    def planned_count(self, spec: SweepSpec) -> int:
        """How many runs this kind's stages train at most (the progress line's total)."""
        return 0

    def run_range(self, spec: SweepSpec) -> tuple[int, int] | None:
        """The fewest and most runs of the whole sweep, where this kind plans it whole (a tuning method); None where
        it does not."""
        return None

    def allocation_note(self, spec: SweepSpec) -> str:
        """What this kind adds to the line on an arms sweep's seed allocation (`sweep.design_notes`), "" for nothing."""
        return ""

    def open_count(self, spec: SweepSpec) -> str:
        """What about this kind leaves the sweep's run count open until it has run, in words ("" for nothing)."""
        return ""

    def columns(self, spec: SweepSpec, taken: list[str]) -> list[str]:
        """Columns this kind adds to summary.csv after the tuned settings (`taken`: the columns already there)."""
        return []

    def row(self, spec: SweepSpec, run: Run) -> dict[str, Any]:
        """A run's values in this kind's columns."""
        return {}

    def shares_trunks(self, spec: SweepSpec) -> bool:
        """Whether this kind's stages plan runs that differ only in `train.max_iters` (`worth:`'s lengths), so that the
        sweep shares their trunks (`sweep.trunks`) even where its first runs have none to share."""
        return False

    def parts(self, spec: SweepSpec, results_dir: ResultsDir,
              planned: Sequence[Run]) -> list[tuple[SweepSpec, ResultsDir, Sequence[Run]]] | None:
        """The parts of a sweep in which every kind does its work after the runs, each a spec without this kind, its
        folder and its runs (a ladder: each rung); None: the sweep is one part (`sweep.kinds.after_runs`)."""
        return None

    def after_runs(self, spec: SweepSpec, results_dir: ResultsDir, planned: Sequence[Run], threads: int,
                   out: TextIO) -> None:
        """Work of this kind once every planned run has finished, before the report (`worth:` times the arms'
        steps side by side); what it writes goes into `results_dir` under a name `ResultsDir` owns. A stop meanwhile
        raises `AfterRunsStopped`, which says what to do next."""


class AfterRunsStopped(KeyboardInterrupt):
    """A stop (Ctrl-C, SIGTERM, SIGHUP) while a kind worked after every run had finished (`SweepKind.after_runs`): the
    command line says so with `then`, what rerunning the command does (no run trains again)."""

    then = "run the same command again to finish its work after the runs (no run trains again)"
