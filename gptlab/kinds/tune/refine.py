"""`tune.method: refine`: selection in rounds, extending edge picks and refining around each optimum until the picks are trusted.

Round 1 is the grid method's selection (every cell at every level of `tune.space`, one seed, the
same run ids). Each later round asks `gptlab.stats.refine.decide_all`, from the selection runs on
disk, what every cell tries next: one coarse step beyond an edge pick, the half-step neighbours of
its lowest mean, one coarse step beyond a side of its pick that is not yet clearly above it (closing
the curve), or one more seed at its pick and its closest rival, until each pick's probability of
being the best lr tried is at least `tune.confidence`, or its expected loss left on the table is
below `tune.tolerance`, or the cell has used `tune.max_runs_per_cell` runs. Runs that did not train
and lrs beyond a cell's stability cliff (`stats.lr_model`) stay out of its fit, its pick and the noise.
The estimation seeds then train at each refined pick. `results/NAME/refine.csv` records every round's
decisions (`decision` says where a tried point overruled the fit's minimum; `cliff_lr` is the cell's
lowest lr beyond its cliff).

Only one numeric key can be refined (the learning rate, typically), over a geometric grid of at
least three levels: the lattice of lrs it may add is that grid's half-steps (`stats.refine.Lattice`).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, ClassVar, Mapping, TextIO

from gptlab.errors import GptlabError, shown
from gptlab.kinds.tune.spec import TuneSpec, tune_of
from gptlab.kinds.tune.tuning import SELECTION, TuneThenEstimate, runs_at
from gptlab.runio import write_csv
from gptlab.stats.lr_model import SAYS_NOTHING, trained
from gptlab.stats.picks import Pairs, Trial
from gptlab.stats.refine import BEATEN, CellDecision, Lattice, RefineRule, decide_all, geometric_ratio, risk_free_pick
from gptlab.sweep.planners import Case, FinishedRuns, Stage
from gptlab.sweep.runs import ESTIMATION, SELECTION_SEED_OFFSET, Run, SweepSpec

MAX_RUNS_PER_CELL = 100  # the largest tune.max_runs_per_cell
REFINE_COLS = ["round", "cell", "runs", "pick", "p_best", "expected_regret", "noise_sd", "noise_df", "decision", "adds",
               "cliff_lr"]


def _lattice(spec: SweepSpec) -> Lattice:
    """The lrs the sweep may try: tune.space's half-steps, cut where a value makes an invalid run (lr < min_lr...)."""
    (key, levels), = tune_of(spec).space.items()
    lattice = Lattice(tuple(sorted(float(v) for v in levels)))
    low, high = lattice.bounds
    limits = []
    for ks in (range(-1, low - 1, -1), range(2 * len(levels) - 1, high + 1)):
        last = None
        for k in ks:
            try:
                runs_at(spec, [((key, lattice.value(k)),)], [SELECTION_SEED_OFFSET], SELECTION, [spec.runs[0].cell])
            except (GptlabError, OverflowError):  # an invalid run, or an lr beyond a float's range, ends it
                break
            last = k
        limits.append(last if last is not None else (0 if ks.step < 0 else 2 * (len(levels) - 1)))
    return Lattice(lattice.levels, lattice.extend, (limits[0], limits[1]))


class Refine(TuneThenEstimate):
    """The coarse grid, then edges extended, half-step lrs around each optimum and seeds until each pick is trusted."""

    OPTIONS: ClassVar[Mapping[str, Any]] = {"confidence": RefineRule.confidence, "max_runs_per_cell": None,
                                            "tolerance": RefineRule.tolerance}

    @classmethod
    def check_options(cls, raw: Mapping[str, Any], tune: TuneSpec) -> dict[str, Any]:
        if len(tune.space) != 1:
            raise GptlabError(f"tune.space: the refine method tunes one key (e.g. train.lr), got {len(tune.space)}: "
                              f"{', '.join(tune.space)}; use method grid for several")
        (key, levels), = tune.space.items()
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in levels)
        if not numeric or geometric_ratio(sorted(float(v) for v in levels)) is None:
            raise GptlabError(f"tune.space.{key}: the refine method needs at least 3 positive numbers spaced by one "
                              f"ratio (a geometric grid, e.g. [5.0e-4, 1.0e-3, 2.0e-3, 4.0e-3]), got {shown(list(levels))}")
        if tune.seeds != 1:
            raise GptlabError(f"tune.seeds: the refine method starts from one selection seed and adds seeds where the "
                              f"picks are close; leave tune.seeds out (got {tune.seeds})")
        out = {**cls.OPTIONS, **raw}
        conf = out["confidence"]
        if isinstance(conf, bool) or not isinstance(conf, (int, float)) or not 0.5 <= conf < 1:
            raise GptlabError(f"tune.confidence: must be a probability in [0.5, 1), got {shown(conf)}")
        tol = out["tolerance"]
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (math.isfinite(tol) and 0 <= tol <= 1):
            raise GptlabError(f"tune.tolerance: must be a loss in nats between 0 and 1, got {shown(tol)}")
        n = len(levels)
        runs = out["max_runs_per_cell"] if out["max_runs_per_cell"] is not None else 2 * n
        if isinstance(runs, bool) or not isinstance(runs, int) or not n <= runs <= MAX_RUNS_PER_CELL:
            raise GptlabError(f"tune.max_runs_per_cell: must be a whole number from {n} (the coarse grid's runs) to "
                              f"{MAX_RUNS_PER_CELL}, got {shown(runs)}")
        return {"confidence": float(conf), "max_runs_per_cell": runs, "tolerance": float(tol)}

    @classmethod
    def possible_runs(cls, spec: SweepSpec) -> list[Run]:
        """Every lattice lr x every selection seed the budget allows, and every lattice lr x the estimation seeds."""
        tune = tune_of(spec)
        lattice, key, budget = _lattice(spec), next(iter(tune.space)), tune.option("max_runs_per_cell")
        settings = [((key, lattice.value(k)),) for k in lattice.steps()]
        seeds = [SELECTION_SEED_OFFSET + j for j in range(budget - len(lattice.levels) + 1)]
        return [*runs_at(spec, settings, seeds, SELECTION), *runs_at(spec, settings, spec.seeds, ESTIMATION)]

    @classmethod
    def selection_range(cls, spec: SweepSpec) -> tuple[int, int]:
        cells = len({r.cell for r in spec.runs})
        return len(spec.runs), cells * tune_of(spec).option("max_runs_per_cell")

    def __init__(self, spec: SweepSpec, out: TextIO, **kw: Any) -> None:
        super().__init__(spec, out, **kw)
        self.key = next(iter(self.tune.space))
        self.lattice = _lattice(spec)
        self.rule = RefineRule(**dict(self.tune.options))
        self.round = 0  # selection rounds handed out
        self.log: list[dict[str, Any]] = []  # refine.csv, as decided in this invocation

    def describe(self) -> str:
        return (f"tuned sweep (refine): round 1 trains {len(self.cells)} cells x {len(self.lattice.levels)} levels of "
                f"{self.key} x 1 seed (seeds {SELECTION_SEED_OFFSET:,}+); later rounds extend edge picks (up to "
                f"{self.lattice.extend} steps), try half-steps around each optimum, close each curve (never past a "
                f"stability cliff) and add seeds, until each pick is the "
                f"best tried with probability >= {self.rule.confidence:g} (or leaves < {self.rule.tolerance:g} nats), at "
                f"most {self.rule.max_runs_per_cell} runs per cell; then {self._estimation_seeds()} at each pick")

    def _k(self, value: Any) -> int:
        return round(2 * math.log(float(value) / self.lattice.levels[0]) / math.log(self.lattice.ratio))

    def _observations(self, trials: list[Trial]) -> dict[Pairs, dict[int, list[float]]]:
        """Each cell's runs by half-step (a run that did not train: an infinite loss; a failed one: left out)."""
        obs: dict[Pairs, dict[int, list[float]]] = {cell: {} for cell in self.cells}
        for t in trials:
            if t.status != SAYS_NOTHING:
                obs[t.cell].setdefault(self._k(t.setting[0][1]), []).append(t.loss if trained(t.status) else math.inf)
        return obs

    def repick(self, finished: FinishedRuns) -> dict[Pairs, Pairs]:
        """Each cell's pick read again from its whole curve, its estimation runs included
        (`stats.refine.risk_free_pick`: where a run at the pick lagged, the lr with the lowest mean of every run,
        the lagging one included): the cells whose pick moves; tuning.csv is written again when one does."""
        obs = self._observations(self.curve_trials(finished))
        chosen = {c: risk_free_pick(obs[c], self._k(self.picks[c][0][1]), self.lattice.octaves)
                  for c in self.cells if c in self.picks}
        moved = {c: ((self.key, self.lattice.value(k)),) for c, k in chosen.items() if k != self._k(self.picks[c][0][1])}
        if moved:
            self._pick(finished, chosen, [replace(CellDecision(), pick=chosen.get(c), reason="risk") for c in self.cells])
        return moved

    def select(self, finished: FinishedRuns) -> Stage | None:
        self.round += 1
        if self.round == 1:
            return Stage("selection round 1", self.selection, self.selection, tag="selection round 1",
                         unfinished="selection is incomplete: the next round is decided once every run of this one has "
                         "finished")
        obs = self._observations(self.trials(finished))
        decisions, _, _ = decide_all([obs[c] for c in self.cells], self.lattice, self.rule)
        new: list[Run] = []
        for cell, d in zip(self.cells, decisions):
            self.log.append({"round": self.round - 1, "cell": self._label(cell), "runs": d.runs,
                             "pick": self.lattice.value(d.pick) if d.pick is not None else None, "p_best": d.p_best,
                             "expected_regret": d.expected_regret, "noise_sd": d.noise_sd, "noise_df": d.noise_df,
                             "decision": self._decision(d), "adds": " ".join(f"{self.lattice.value(k):g}" for k in d.add),
                             "cliff_lr": self.lattice.value(d.cliff) if d.cliff is not None else None})
            for k in d.add:
                seed = SELECTION_SEED_OFFSET + len(obs[cell].get(k, []))
                new += runs_at(self.spec, [((self.key, self.lattice.value(k)),)], [seed], SELECTION, [cell])
        write_csv(finished.results_dir.refine_csv, self.log, REFINE_COLS)
        if new:
            title = f"selection round {self.round}"
            order = {c: i for i, c in enumerate(self.cells)}
            planned = tuple(sorted((*self.selection, *new), key=lambda r: order[r.cell]))  # stable: cell-major
            return Stage(title, tuple(new), planned, tag=title, unfinished="selection is incomplete: the next round is "
                         "decided once every run of this one has finished")
        self._pick(finished, {cell: d.pick for cell, d in zip(self.cells, decisions)}, decisions)
        return None

    def _decision(self, d: CellDecision) -> str:
        """refine.csv's decision: the reason, and where the fit's minimum was overruled by a lower tried mean."""
        if d.beaten is None or d.pick is None:
            return d.reason
        return (f"{d.reason}; lowest mean taken: the fit's minimum {self.lattice.value(d.beaten):g} was above "
                f"{self.lattice.value(d.pick):g} by more than {BEATEN:g} SEs")

    def _label(self, cell: Pairs) -> str:
        from gptlab.stats.picks import pairs_text, short_names

        return pairs_text(cell, short_names(list(self.spec.grid)))

    def _pick(self, finished: FinishedRuns, chosen: dict[Pairs, int | None], decisions: list[CellDecision]) -> None:
        """tuning.csv over every lr tried, the refined picks marked; each pick's confidence printed."""
        from gptlab.stats.picks import pick_rows

        tried = sorted({self._k(t.setting[0][1]) for t in self.trials(finished)})
        settings = [((self.key, self.lattice.value(k)),) for k in tried]
        space = {self.key: [self.lattice.value(k) for k in tried]}
        rows = pick_rows(self.trials(finished), self.cells, settings, space)
        rows = [replace(r, picked=chosen.get(r.cell) is not None and self._k(r.setting[0][1]) == chosen[r.cell])
                for r in rows]
        edges = {tried[0], tried[-1]}  # the best may lie beyond the lrs tried (the lattice's bound, or the budget)
        rows = [replace(r, at_edge=r.picked and self._k(r.setting[0][1]) in edges) for r in rows if r.runs or r.picked]
        self.record_picks(finished, rows, "refined: lowest fitted val loss near the best lr tried")
        for cell, d in zip(self.cells, decisions):
            print(f"  {self._label(cell)}: {d.runs} selection runs, pick {self.key}={self.lattice.value(d.pick):g}, "
                  f"P(best) {d.p_best:.2f}, expected loss left {d.expected_regret:.4f} ({d.reason})"
                  if d.pick is not None else f"  {self._label(cell)}: no ok selection run", file=self.out)

    def selection_cases(self) -> list[Case]:
        n, budget = len(self.cells), self.rule.max_runs_per_cell
        first = tuple(self.spec.runs)
        # Which lrs later rounds add is known only once round 1 has run: the worst case is counted and timed
        # with stand-ins (each cell's first level at more seeds; every lr trains the same model here).
        seeds = [SELECTION_SEED_OFFSET + j for j in range(1, budget - len(self.lattice.levels) + 1)]
        extra = runs_at(self.spec, self.tune.settings()[:1], seeds, SELECTION) if seeds else []  # none past round 1
        return [Case(f"selection round 1: {n} cells x {len(self.lattice.levels)} levels x 1 seed", first),
                Case(f"selection, worst case: {budget} runs per cell (tune.max_runs_per_cell)", first, tuple(extra))]
