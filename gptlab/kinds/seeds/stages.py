"""Adaptive seeds (`seeds: {min, max, precision}`): `AdaptiveSeedsKind`, and its planner, which writes rounds.csv.

The kind owns the mapping form of `seeds:` (a count or a list is the sweep's own: `sweep.spec`), whose seeds
0..max-1 it gives the spec before the grid's size is checked (`seeds`), and tells the rest of the sweep how many
seeds it trains (`seed_plan`: round 1's and the most) and plans them in rounds wherever estimation runs train
(`stages`, and `rounds` for a tuned sweep's estimation at its picks). Its rule is `gptlab.stats.adaptive_seeds`'s
(Stein's two-stage procedure), on the runs that count and the outcome and unit of `gptlab.stats.outcome` (the report's
too); this module only applies them.
Round 1 trains seeds 0..min-1 of every cell; the first round's results alone fix the seed count
N; round 2 trains seeds up to N. Every decision is recomputed from the runs on disk, which never
change once finished, so a killed sweep, rerun, makes the same decisions and trains the same runs.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, Sequence, TextIO

import numpy as np

from gptlab.run.corpora import CORPUS_KEYS
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.summary_csv import read_rows
from gptlab.runio import write_csv
from gptlab.stats.adaptive_seeds import ROUND_COLS, SeedRule, Widest, widest_called
from gptlab.stats.design import Design, design_cells, effect_label
from gptlab.stats.levels import grid_level
from gptlab.stats.outcome import counts, in_unit, number, outcome_of
from gptlab.stats.picks import Pairs
from gptlab.sweep.kinds import SWEEP_KINDS, scale_keys
from gptlab.sweep.planners import Case, FinishedRuns, Planner, Preview, SeedPlan, Stage, SweepKind
from gptlab.sweep.runs import MAX_SEEDS, Run, SweepSpec

KEY = "seeds"  # the sweep file's key (its mapping form), and the kind's name in both registries and the bundles
WidestAt = Callable[[ResultsDir, int], Widest]  # (results_dir, seeds) -> the widest called half-width


def check_seed_rule(raw: Any) -> SeedRule | None:
    """`seeds:` as an adaptive rule, checked (one `GptlabError` naming the key); None for a count or a list."""
    return SeedRule.from_mapping(raw, MAX_SEEDS) if isinstance(raw, dict) else None


@SWEEP_KINDS.register(KEY)  # its mapping form; a count or a list of seeds joins no kind
class AdaptiveSeedsKind(SweepKind):
    """`seeds: {min, max, precision}` (`gptlab.sweep.kinds.SWEEP_KINDS`): its rule, its seeds 0..max-1 (asked for
    before the grid's size is checked), and its rounds as the sweep's stages or a tuned sweep's estimation."""

    description = "{min, max, precision}: round 1's seeds per cell, then as many as round 1's noise asks for (Stein)"

    def check(self, raw: Any, spec: SweepSpec) -> SeedRule | None:
        return check_seed_rule(raw)

    def seeds(self, raw: Any) -> list[int] | None:
        rule = check_seed_rule(raw)
        return list(range(rule.max)) if rule is not None else None

    def seed_plan(self, spec: SweepSpec) -> SeedPlan:
        rule = spec.kinds[KEY]
        return SeedPlan(rule.min, rule.max, f"adaptive seeds ({rule.min} to {rule.max})", "a larger `seeds.min`")

    def rounds(self, spec: SweepSpec, runs: Sequence[Run], out: TextIO) -> Planner:
        return AdaptiveSeeds(runs, spec.kinds[KEY], out, partial(widest_in_summary, spec), seed_count=spec.seed_count)

    def stages(self, planner: Planner, spec: SweepSpec, out: TextIO) -> Planner:
        """Round 1, then round 2 as the rule decides, in place of the one stage of every seed (`planner`)."""
        return self.rounds(spec, spec.runs, out)

    def open_count(self, spec: SweepSpec) -> str:
        return "adaptive seeds"


def widest_in_summary(spec: SweepSpec, results_dir: ResultsDir, n_seeds: int) -> Widest:
    """The rule's input from summary.csv's rows that count (`gptlab.stats.outcome`, as the report reads them) with
    seeds 0..n_seeds-1 (an arms baseline: its share): each row with its run's bits-per-char factor (summary.json's),
    its losses in the outcome's unit. Levels are summary.csv's text read as the grid's (`stats.levels.grid_level`).
    """
    rows = [{**row, "val_bpc_factor": _factor(results_dir, row)} for row in read_rows(results_dir)]
    outcome = outcome_of(rows, several_texts=any(len(spec.grid.get(k, ())) > 1 for k in CORPUS_KEYS))
    factors = list(spec.grid)
    y, cells, seeds, first = [], [], [], []
    for row in rows:
        row = {**row, **in_unit(row, outcome.unit)}
        typed = tuple(grid_level(spec.grid[f], row.get(f, ""), _NOT_A_LEVEL) for f in factors)
        cell = tuple(zip(factors, typed))
        seed = int(number(row.get("seed"))) if math.isfinite(number(row.get("seed"))) else -1
        if not counts(row, outcome.column) or _NOT_A_LEVEL in typed or not 0 <= seed < spec.seed_count(cell, n_seeds):
            continue
        y.append(row[outcome.column])
        cells.append(tuple(str(level) for level in typed))
        seeds.append(seed)
        first.append(seed < spec.seed_count(cell, spec.kinds[KEY].min))
    if not y:
        return Widest(math.nan, "")
    levels = {f: tuple(str(level) for level in spec.grid[f]) for f in factors}
    present = set(cells)
    design = Design(tuple(factors), levels, {f: str(spec.baseline[f]) for f in factors},
                    tuple(c for c in (tuple(map(str, c)) for c in design_cells(spec.grid, spec.exclude)) if c in present))
    return widest_called(np.array(y), cells, np.array(seeds), design, partial(effect_label, factors), spec.kinds[KEY],
                         [f for f in scale_keys(spec) if f in factors], np.array(first), block_seeds=spec.arms is None,
                         own_variance=spec.arms is not None)


def _factor(results_dir: ResultsDir, row: dict[str, str]) -> float | None:
    """The run's bits-per-char factor as its summary.json records it (None: none recorded, or no summary)."""
    summary = results_dir.run(row.get("run_id", "")).summary() if row.get("run_id") else None
    return summary.val_bpc_factor if summary is not None else None


_NOT_A_LEVEL = object()


class AdaptiveSeeds:
    """Round 1 (seeds 0..min-1), Stein's decision from round 1 alone, round 2 (seeds 0..N-1), then done."""

    def __init__(self, runs: Sequence[Run], rule: SeedRule, out: TextIO, widest: WidestAt,
                 seed_count: Callable[[Pairs, int], int] = lambda cell, n: n) -> None:
        self.runs, self.rule, self.out, self.widest = tuple(runs), rule, out, widest
        self.seed_count = seed_count  # (cell, n) -> the seeds a cell trains where cells train n (an arms baseline: more)
        self.round = 0  # the last round handed out (3: done)
        self.n_seeds = rule.min  # seeds per cell once decided
        self.rounds: list[dict[str, Any]] = []  # rounds.csv, as decided in this invocation

    def with_seeds(self, n_seeds: int) -> tuple[Run, ...]:
        """Every cell's runs with seeds 0..n_seeds-1 (an adaptive sweep's seeds are 0..max-1; an arms baseline's more)."""
        return tuple(r for r in self.runs if r.seed < self.seed_count(r.cell, n_seeds))

    def next_stage(self, finished: FinishedRuns) -> Stage | None:
        rule, first = self.rule, self.with_seeds(self.rule.min)
        if self.round == 0:
            self.round = 1
            print(f"adaptive seeds: round 1 trains {rule.min} seeds per cell; round 1's noise alone then fixes the seed "
                  f"count in [{rule.min}, {rule.max}] for a 95% half-width of {rule.precision:g}", file=self.out)
            title = f"round 1 ({rule.min} seeds)"
            return Stage(title, first, first, tag=title, unfinished="round 1 is incomplete: the seed count is chosen "
                         "once every round-1 run has finished")
        if self.round == 1:
            widest = self.widest(finished.results_dir, rule.min)
            n_seeds = self.n_seeds = rule.seeds_needed(widest.half_width)
            self._record(finished.results_dir, rule.min, len(first), widest)
            capped = n_seeds == rule.max and widest.half_width * (rule.min / n_seeds) ** 0.5 > rule.precision
            print(f"round 1: widest 95% half-width {widest.half_width:.4f} ({widest.effect or 'no called effect'}); "
                  f"target {rule.precision:g} -> {n_seeds} seeds per cell" + (" (max)" if capped else ""), file=self.out)
            if n_seeds == rule.min:
                self.round = 3
                return None
            self.round = 2
            planned = self.with_seeds(n_seeds)
            title = f"round 2 ({n_seeds} seeds)"
            return Stage(title, planned, planned, tag=title)
        if self.round == 2:  # round 2 finished: its half-width goes on record (it decides nothing)
            self.round = 3
            self._record(finished.results_dir, self.n_seeds, len(self.with_seeds(self.n_seeds)) - len(first),
                         self.widest(finished.results_dir, self.n_seeds))
        return None

    def _record(self, results_dir: ResultsDir, seeds: int, runs_trained: int, widest: Widest) -> None:
        self.rounds.append({"round": len(self.rounds) + 1, "seeds": seeds, "runs_trained": runs_trained,
                            "widest_half_width": widest.half_width, "effect": widest.effect})
        write_csv(results_dir.rounds_csv, self.rounds, ROUND_COLS)

    def preview(self) -> Preview | None:
        rule = self.rule
        return Preview(f"adaptive seeds: round 1 trains {rule.min} seeds per cell; round 1's noise then fixes the seed "
                       f"count in [{rule.min}, {rule.max}] for a 95% half-width of {rule.precision:g}",
                       tuple(Case(f"{what}: {n} seeds per cell", self.with_seeds(n), whole=True)
                             for what, n in (("minimum", rule.min), ("worst case", rule.max))))
