"""Adaptive sweeps (`seeds: {min, max, precision}`): train in rounds, record them in rounds.csv.

The rule is `gptlab.report.precision`'s (Stein's two-stage procedure); this module only runs it.
Round 1 trains seeds 0..min-1 of every cell; the first round's results alone fix the seed count
N; round 2 trains seeds up to N. Every decision is recomputed from the runs on disk, which never
change once finished, so a killed sweep, rerun, makes the same decisions and trains the same runs.
"""
from __future__ import annotations

from typing import Any

from gptlab.executors import Plan
from gptlab.layout import ROUNDS_CSV
from gptlab.runio import write_csv
from gptlab.sweep.execute import SweepOptions, finish, train
from gptlab.sweep.spec import Run, SweepSpec


def runs_with_seeds(spec: SweepSpec, n_seeds: int) -> list[Run]:
    """Every cell's runs with seeds 0..n_seeds-1 (an adaptive sweep's seeds are 0..max-1)."""
    return [r for r in spec.runs if r.seed < n_seeds]


def run_rounds(spec: SweepSpec, plan: Plan, options: SweepOptions, backend: Any) -> int:
    """Round 1, the decision, round 2; then the report and the exit status as for any sweep."""
    from gptlab.report.load import load_results
    from gptlab.report.rounds import ROUND_COLS, widest_at

    rule, out, results_dir = spec.seed_rule, options.stream, options.results_dir
    first = runs_with_seeds(spec, rule.min)
    print(f"adaptive seeds: round 1 trains {rule.min} seeds per cell; round 1's noise alone then fixes the seed "
          f"count in [{rule.min}, {rule.max}] for a 95% half-width of {rule.precision:g}", file=out)
    rows = train(spec, first, plan, options, backend, f"round 1 ({rule.min} seeds)")
    if len(rows) < len(first) or any(r["status"] == "failed" for r in rows):
        print("round 1 is incomplete: the seed count is chosen once every round-1 run has finished", file=out)
        return finish(spec, results_dir, options.reports_dir, rows, out, planned=len(first))
    widest = widest_at(load_results(results_dir), rule.min)
    n_seeds = rule.seeds_needed(widest.half_width)
    rounds = [{"round": 1, "seeds": rule.min, "runs_trained": len(first),
               "widest_half_width": widest.half_width, "effect": widest.effect}]
    write_csv(results_dir / ROUNDS_CSV, rounds, ROUND_COLS)
    print(f"round 1: widest 95% half-width {widest.half_width:.4f} ({widest.effect or 'no called effect'}); "
          f"target {rule.precision:g} -> {n_seeds} seeds per cell"
          + (" (max)" if n_seeds == rule.max and widest.half_width * (rule.min / n_seeds) ** 0.5 > rule.precision
             else ""), file=out)
    planned = runs_with_seeds(spec, n_seeds)
    if n_seeds > rule.min:
        rows = train(spec, planned, plan, options, backend, f"round 2 ({n_seeds} seeds)")
        if len(rows) == len(planned) and not any(r["status"] == "failed" for r in rows):
            final = widest_at(load_results(results_dir), n_seeds)
            rounds.append({"round": 2, "seeds": n_seeds, "runs_trained": len(planned) - len(first),
                           "widest_half_width": final.half_width, "effect": final.effect})
            write_csv(results_dir / ROUNDS_CSV, rounds, ROUND_COLS)
    return finish(spec, results_dir, options.reports_dir, rows, out, planned=len(planned))
