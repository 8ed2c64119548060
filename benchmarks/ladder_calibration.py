"""The ladder's trend, call, ranking and prediction intervals, scored in simulated ladders (`calibration.ladder_sim`).

    python benchmarks/ladder_calibration.py --sims 400 --seed 0

Prints one row per world: the slope's 95% CI coverage (linear worlds), the top rung's prediction interval
coverage and the third rung's (predicted from the two below it), the share of false calls on the slope, the
power to call a slope of at least the margin, how often `holds` was said of such a slope, and the ranking
interval's coverage of the true Kendall's tau.
"""
from __future__ import annotations

import argparse
import time

from calibration.ladder_sim import LADDER_WORLDS, MARGIN, simulate_ladder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=400, help="ladders per world")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worlds", nargs="*", default=None, help="world names (default: all)")
    args = parser.parse_args()
    start = time.perf_counter()
    print("| world | slope CI covers b | top rung's prediction covers its measure | third rung's, from two | "
          "false calls | power (|b| >= "
          f"{MARGIN}) | `holds` said of |b| >= {MARGIN} | ranking interval covers tau |")
    print("|---|---|---|---|---|---|---|---|")
    for name, world in LADDER_WORLDS.items():
        if args.worlds and name not in args.worlds:
            continue
        s = simulate_ladder(world, args.sims, args.seed)
        print(f"| {name} | {s.slope_covered:.3f} | {s.prediction_covered:.3f} | {s.third_covered:.3f} | "
              f"{s.false_calls:.3f} | {s.power:.3f} | {s.holds_false:.3f} | {s.tau_covered:.3f} |")
    print(f"\n({args.sims} ladders per world, {len(next(iter(LADDER_WORLDS.values())).slopes)} arms each, seed "
          f"{args.seed}; {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
