"""Calibration of the tuning check: its calls, and the calls at the picks, against the truth at the cells' true optima.

    python benchmarks/robustness_calibration.py [--sims 300] [--seed 0]

For each world of `gptlab.stats.robustness_sim.WORLDS` (the `tuned` study's 2x2 with `stats.refine_sim`'s
planted lr curves: (a) best losses equal, (b) relu better by more than the margin, (c) relu worse by
less than it; the primed worlds put gelu's optima on a grid lr and relu's midway between two, so that
relu's picks always leave loss on the table) and each setup (the grid 5e-4 .. 8e-3 at 1 or 2
selection seeds; 3 or 5 estimation seeds at the picks), it simulates `--sims` studies on the same
draws and goes the report's way: `lr_curves.fit_curves` (each cell's L_c^hi), then
`effects.analyse(..., loss_left=L^hi)`. One row per world and setup: studies with a false
better/worse call and with a false equivalent call (among every printed effect), at the picks
(`call_at_picks`) and after the check (`call`); true calls per printed effect before and after, and the
share the check turned into `depends on the picks` (its cost); that share for each call at the picks;
the relu main effect called right; each cell's L^hi (unbounded, median when finite, at or above the
true loss left) and the true loss left. Deterministic for a given --seed.
"""
from __future__ import annotations

import argparse
import math
import time

from gptlab.stats.robustness_sim import SETUPS, WORLDS, Summary, run


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.3f}"


def _row(world: str, s: Summary) -> str:
    d = s.depends
    return (f"| {world} | {s.setup.selection_seeds} | {s.setup.estimation_seeds} | "
            f"{_pct(s.false_dir_picks)} -> **{_pct(s.false_dir)}** | "
            f"{_pct(s.false_eq_picks)} -> **{_pct(s.false_eq)}** | "
            f"{_pct(s.true_picks)} -> {_pct(s.true_checked)} ({_pct(s.cost)}) | "
            f"{_pct(d['better'])} / {_pct(d['worse'])} / {_pct(d['equivalent'])} | "
            f"{_pct(s.main_right_picks)} -> {_pct(s.main_right)} | {_pct(s.unbounded)} | {s.high_median:.4f} | "
            f"{_pct(s.high_covers)} | {s.loss_left:.4f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sims", type=int, default=300, help="simulated studies per world (every setup on the same ones)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.sims < 2:
        p.error(f"--sims must be >= 2, got {args.sims}")
    start = time.perf_counter()
    print(f"{args.sims} studies per world; MC SE of a per-study share p: sqrt(p(1-p)/{args.sims}) "
          f"(<= {math.sqrt(0.25 / args.sims):.3f}; {math.sqrt(0.05 * 0.95 / args.sims):.3f} at 0.05)\n")
    print("| world | selection seeds | estimation seeds | false better/worse (studies): at picks -> checked | "
          "false equivalent (studies): at picks -> checked | true calls (per effect): at picks -> checked (turned "
          "depends) | depends, of better / worse / equivalent | relu main effect right: at picks -> checked | "
          "L^hi unbounded (cells) | median finite L^hi | L^hi >= true L | true L (mean) |")
    print("|" + "---|" * 12)
    summaries = []
    for i, (name, world) in enumerate(WORLDS.items()):
        for s in run(world, args.sims, SETUPS, rng_seed=args.seed + 1000 * i):
            summaries.append(s)
            print(_row(name.split(":")[0], s), flush=True)
    se = math.sqrt(0.05 * 0.95 / args.sims)
    worst = max(max(s.false_dir, s.false_eq) for s in summaries)
    worst_picks = max(max(s.false_dir_picks, s.false_eq_picks) for s in summaries)
    costs = [s.cost for s in summaries if not math.isnan(s.cost)]
    print(f"\nfalse calls (studies, worst row): at the picks {worst_picks:.3f}, after the check {worst:.3f} "
          f"(target: at most about 0.05: {'met' if worst <= 0.05 + 2 * se else 'NOT met'})")
    print(f"the check's cost (true calls turned depends): {min(costs):.3f} .. {max(costs):.3f}")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
