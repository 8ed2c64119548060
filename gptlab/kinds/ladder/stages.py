"""A ladder's stages: each rung a tuned arms sweep of its own, smallest first, predicted before it trains.

`LadderStages` trains rung 1 as the sweep file's tuned arms sweep at rung 1's settings (`rung_spec`), then each
rung above it the same way at its own settings, with two things taken from the rungs below:

- its tuned space starts from the picks of the rung below (`shifted_space`): the sweep file's lr lattice from one
  coarse step below the lowest of those picks to one step above the highest (at least three levels), and each
  arm's first round only the part of it around its own pick below (`arm_windows`: three levels, four where the
  pick was a half-step), so an upper rung's first round trains fewer lrs and its tuner extends an edge where the
  optimum moved further;
- before any of its runs is planned, what the rungs below predict it will measure (each arm's effect, and its worth
  where the sweep has `worth:`, with a 95% prediction interval, from the trend of every rung below:
  `measure.predict_rung`) goes into predictions.csv
  (`measure.record_predictions`: a rung's rows, once there, are never changed).

Each rung's planner (the tuning method, in the seeds kind's rounds where it has them) is the one every other kind
gives a sweep (`with_kind_stages`), on its own rung folder (`ResultsDir.at_rung`: rungs/RUNG/tuning.csv,
refine.csv, rounds.csv and step_times.csv), and sees only its own rung's runs; so does each kind's work after the
runs (`LadderKind.parts`). Every decision is recomputed from the runs on disk,
so a killed ladder, rerun, replays the finished rungs without training them and decides the same.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence, TextIO

from gptlab.kinds.ladder.measure import Measured, measure_quantities, measure_rung, predict_rung, record_predictions
from gptlab.kinds.ladder.spec import Rung, at_rung, ladder_of
from gptlab.run.rundir import RunSummary
from gptlab.stats.picks import Pairs
from gptlab.stats.refine import Lattice, geometric_ratio
from gptlab.sweep.kinds import first_runs, setting_space, with_kind_stages
from gptlab.sweep.planners import Case, FinishedRuns, FixedSeeds, Planner, Preview, Stage
from gptlab.sweep.runs import ESTIMATION, Run, SweepSpec


def rung_spec(spec: SweepSpec, rung: Rung, space: Mapping[str, tuple[Any, ...]] | None = None,
              windows: Mapping[Pairs, tuple[Any, ...]] | None = None) -> SweepSpec:
    """The tuned arms sweep of one rung: the sweep's at the rung's settings (and a tuned `space` in place of the sweep
    file's), without the ladder; its first runs planned as a sweep's are, each cell's only at the levels of its
    window where `windows` gives it one (`arm_windows`)."""
    sub = dataclasses.replace(at_rung(spec, rung, space), runs=())
    runs = first_runs(sub)
    if windows:
        runs = [r for r in runs if r.cell not in windows or all(v in windows[r.cell] for _, v in getattr(r, "setting", ()))]
    return dataclasses.replace(sub, runs=tuple(runs))


def shifted_space(space: Mapping[str, tuple[Any, ...]], picks: Sequence[float]) -> dict[str, tuple[float, ...]] | None:
    """The sweep file's one geometric `space` moved to `picks` (the rung below's lrs): its lattice's coarse levels
    from one step below the lowest pick to one above the highest, at least three; None where the space is not one
    geometric key or there are no picks (the rung then tries the sweep file's space)."""
    if len(space) != 1 or not picks:
        return None
    (key, levels), = space.items()
    values = sorted(float(v) for v in levels)
    ratio = geometric_ratio(values)
    if ratio is None:
        return None
    at = [math.log(p / values[0]) / math.log(ratio) for p in picks]
    low, high = math.floor(min(at) + 1e-9) - 1, math.ceil(max(at) - 1e-9) + 1
    high = max(high, low + 2)
    lattice = Lattice(tuple(values))
    return {key: tuple(lattice.value(2 * j) for j in range(low, high + 1))}


def arm_windows(space: Mapping[str, tuple[Any, ...]], picks: Mapping[Pairs, float]) -> dict[Pairs, tuple[float, ...]]:
    """Each cell's first-round levels at the next rung: `shifted_space` around its own pick below (a cell without
    a pick, none: it tries the whole space)."""
    out = {}
    for cell, pick in picks.items():
        moved = shifted_space(space, [pick])
        if moved is not None:
            (out[cell],) = moved.values()
    return out


class LadderStages:
    """Every rung's stages in turn (see the module's docstring); None once the top rung's planner is done."""

    def __init__(self, spec: SweepSpec, out: TextIO) -> None:
        self.spec, self.out = spec, out
        self.ladder = ladder_of(spec)
        self.index = 0  # the rung training now
        self.inner: Planner | None = None  # its planner, once made
        self.done: tuple[Run, ...] = ()  # every run planned by the rungs that finished, in summary.csv order
        self.current: tuple[Run, ...] = ()  # the planned runs of the rung training now
        self.measured: list[dict[tuple[str, str], Measured]] = []  # each finished rung's effects (and its kinds'
        # quantities: `worth:`'s multiplier) by (arm, quantity), as the sweep measured them
        self.space: Mapping[str, tuple[Any, ...]] | None = None  # the tuned space of the rung training now
        self.windows: dict[Pairs, tuple[float, ...]] = {}  # each cell's first-round levels there
        self.sub: SweepSpec = spec  # the sweep of the rung training now (`rung_spec`), once started

    def next_stage(self, finished: FinishedRuns) -> Stage | None:
        while self.index < len(self.ladder.rungs):
            rung = self.ladder.rungs[self.index]
            ids = {r.run_id for r in self.current}
            rows = tuple(r for r in finished.rows if r.run_id in ids)
            if self.inner is None:
                self.inner, rows = self._start(rung, finished), ()
            stage = self.inner.next_stage(FinishedRuns(finished.results_dir.at_rung(rung.name), rows))
            if stage is not None:
                self.current = tuple(stage.planned)
                return Stage(f"rung {rung.name}: {stage.title}", stage.runs, self.done + self.current,
                             tag=f"{rung.name} {stage.tag}".strip(), unfinished=stage.unfinished)
            self._finish(rung, rows, finished)
        return None

    def _start(self, rung: Rung, finished: FinishedRuns) -> Planner:
        """The rung's planner, once the rungs below have predicted what it will measure."""
        flops = [r.flops for r in self.ladder.rungs[: self.index + 1]]
        rows = predict_rung(flops, self.measured, rung.name)
        if record_predictions(finished.results_dir, rows, rung.name):
            print(f"rung {rung.name}: predicted from the {self.index} rungs below before it trains "
                  f"({len(rows)} arms, {finished.results_dir.predictions_csv.name})", file=self.out)
        sub = self.sub = rung_spec(self.spec, rung, self.space, self.windows)
        windows = "; ".join(f"{', '.join(f'{k}={v}' for k, v in cell)} {list(levels)}"
                            for cell, levels in self.windows.items())
        print(f"rung {rung.name} ({rung.params:,} parameters, {rung.tokens:,} tokens, {rung.flops:.3g} FLOPs): "
              f"{', '.join(f'{k} {list(v)}' for k, v in setting_space(sub).items())}"
              + (f"; round 1 of each arm around its pick below: {windows}" if windows else ""), file=self.out)
        return with_kind_stages(FixedSeeds(sub.runs, sub.name), sub, self.out)

    def _finish(self, rung: Rung, rows: Sequence[RunSummary], finished: FinishedRuns) -> None:
        """The rung is done: what it measured, and the space the next rung starts from (its estimation runs' lrs)."""
        estimation = [r for r in self.current if getattr(r, "role", ESTIMATION) == ESTIMATION]
        measured = measure_rung(self.current, rows, finished.results_dir, str(self.spec.arms.baseline))
        extra = measure_quantities(finished.results_dir.at_rung(rung.name), self.sub) if measured else []
        self.measured.append({**measured, **{m.key: m for m in extra}})
        trained = {r.run_id for r in rows}
        picks = {r.cell: float(v) for r in estimation if r.run_id in trained for _, v in getattr(r, "setting", ())}
        self.space = shifted_space(self.ladder.space, sorted(set(picks.values())))
        self.windows = arm_windows(self.ladder.space, picks) if self.space is not None else {}
        self.done, self.current, self.inner = self.done + self.current, (), None
        self.index += 1

    def preview(self) -> Preview | None:
        """Each rung's cases at the sweep file's space (an upper rung starts from the rung below's picks: fewer
        selection runs), and the whole ladder's."""
        cases: list[Case] = []
        wholes: list[tuple[Run, ...]] = []
        stand: list[tuple[Run, ...]] = []
        for rung in self.ladder.rungs:
            sub = rung_spec(self.spec, rung)
            preview = with_kind_stages(FixedSeeds(sub.runs, sub.name), sub, self.out).preview()
            rung_cases = list(preview.cases) if preview is not None else [Case("runs", sub.runs, whole=True)]
            cases += [dataclasses.replace(c, label=f"rung {rung.name}: {c.label}", whole=False) for c in rung_cases]
            whole = [c for c in rung_cases if c.whole][-1:] or rung_cases[:1]
            wholes.append(whole[0].runs)
            stand.append(whole[0].stand_ins)
        every = Case(f"the whole ladder ({len(self.ladder.rungs)} rungs, each at its worst case)",
                     tuple(r for runs in wholes for r in runs), tuple(r for runs in stand for r in runs), whole=True)
        intro = "; ".join(self.ladder.describe())
        return Preview(f"ladder, smallest rung first: {intro}", (*cases, every))
