"""False calls of seed rules on simulated null sweeps: Stein's two-stage rule against the naive rule.

    python benchmarks/adaptive_null.py [--sweeps 20000] [--seed 0]

For 2^k factorials of 2 to 16 cells and round-1 sizes of 2 and 3 seeds (max 12), with a precision
at which round 1's typical noise asks for about 6 seeds, it simulates `--sweeps` null sweeps per
design and rule (`calibration.adaptive_seeds_sim`, which states the model) and prints the rate of
false `better`/`worse` calls on each sweep's first main effect, with its Monte-Carlo standard
error, and the seed counts the rules chose. The `report` rule (the report since issue 54: all seeds'
variance where a sweep reached the maximum) runs on stein's own draws, at that precision and at one
where round 1 asks for about 24 seeds (most sweeps at the maximum). Deterministic for a given --seed.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.adaptive_seeds_sim import precision_for_seeds, simulate_null  # noqa: E402
from gptlab.stats.adaptive_seeds import SeedRule  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweeps", type=int, default=20_000, help="null sweeps per design and rule")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print("| cells | round-1 seeds | rule | sweeps | false calls (first effect) | MC SE | all effects | "
          "any effect (unadjusted) | mean seeds | at max |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    totals = {"stein": [0, 0], "naive": [0, 0], "report": [0, 0]}
    for factors in (1, 2, 3, 4):
        for min_seeds in (2, 3):
            rule = SeedRule(min_seeds, 12, precision_for_seeds(factors, min_seeds, 6))
            state = rng.bit_generator.state  # the report's rule on stein's own draws (stein's and naive's unchanged)
            runs = [(which, rule, rng) for which in ("stein", "naive")]
            for target in (6, 24):  # round 1's noise asks for ~6 seeds (some at max), or ~24 (most at the max of 12)
                replay = np.random.default_rng()
                replay.bit_generator.state = state
                runs.append(("report", SeedRule(min_seeds, 12, precision_for_seeds(factors, min_seeds, target)), replay))
            for which, rule, gen in runs:
                r = simulate_null(factors, rule, args.sweeps, gen, which)
                totals[which][0] += r.false_first
                totals[which][1] += r.sweeps
                print(f"| {r.cells} | {min_seeds} | {which} | {r.sweeps:,} | {r.rate:.4f} | {r.mc_se:.4f} | "
                      f"{r.effects_called / r.effects:.4f} | {r.false_any / r.sweeps:.4f} | {r.mean_seeds:.2f} | "
                      f"{r.at_max:.3f} |")
    for which, (called, n) in totals.items():
        rate = called / n
        print(f"\n{which}: {called:,} false calls in {n:,} null sweeps = {rate:.4f} "
              f"(MC SE {math.sqrt(0.05 * 0.95 / n):.4f}; {(rate - 0.05) / math.sqrt(0.05 * 0.95 / n):+.1f} SE from 5%)")
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
