"""Adaptive sweeps (`seeds: {min, max, precision}`): the `AdaptiveSeeds` planner, which also writes rounds.csv.

The rule is `gptlab.stats.precision`'s (Stein's two-stage procedure); this module only applies it.
Round 1 trains seeds 0..min-1 of every cell; the first round's results alone fix the seed count
N; round 2 trains seeds up to N. Every decision is recomputed from the runs on disk, which never
change once finished, so a killed sweep, rerun, makes the same decisions and trains the same runs.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence, TextIO

from gptlab.run.resultsdir import ResultsDir
from gptlab.runio import write_csv
from gptlab.stats.precision import ROUND_COLS, SeedRule, Widest
from gptlab.sweep.planners import Case, FinishedRuns, Preview, Stage
from gptlab.sweep.runs import Run

WidestAt = Callable[[ResultsDir, int], Widest]  # (results_dir, seeds) -> the widest called half-width


def widest_on_disk(results_dir: ResultsDir, n_seeds: int) -> Widest:
    """The rule's input as the report computes it, from the runs with seeds 0..n_seeds-1 on disk."""
    from gptlab.report.load import load_results  # lazily: the report room loads pandas
    from gptlab.report.tables.rounds import widest_at

    return widest_at(load_results(results_dir), n_seeds)


class AdaptiveSeeds:
    """Round 1 (seeds 0..min-1), Stein's decision from round 1 alone, round 2 (seeds 0..N-1), then done."""

    def __init__(self, runs: Sequence[Run], rule: SeedRule, out: TextIO, widest: WidestAt = widest_on_disk,
                 seed_count: Callable[[Any, int], int] = lambda cell, n: n) -> None:
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
                       tuple(Case(f"{what}: {n} seeds per cell", self.with_seeds(n))
                             for what, n in (("minimum", rule.min), ("worst case", rule.max))))
