"""Print how often `tables/lr_curves.csv`'s 95% CIs cover planted loss-against-lr curves.

For each scenario of `calibration.lr_curve_sim.SCENARIOS` (the model is in that module's docstring:
four cells a sweep, curvatures 0.013 to 0.05 nats per octave^2, optima spread over the factor-2
grid 5e-4..8e-3, run noise SD 0.006, three estimation seeds at each pick informing the noise; one
or two selection seeds per lr, with or without refine's half-step midpoints; parabolas, and curves
bent as results/tuned's are), it simulates `--sims` sweeps through `gptlab.stats.lr_curves.fit_curves`
and prints one Markdown row per scenario: the share of cells with a convex fit, the coverage of the
planted optimum by the optimum's CI (all convex fits; and among those with a bounded CI, with their
share and median width in octaves), and the coverage of the true loss left on the table by the
pick (all; and among those with a finite upper end, with their median width), with the Monte-Carlo
SE of a coverage; then the share of cells with an lr where no run can fail called beyond the stability
cliff (`stats.lr_model`), and with a failed run's lr in the fit (the two cliff scenarios plant failures).
Deterministic for a given --seed.

`--prior 0` fits plain parabolas (no bend prior): what the prior buys on bent curves.

    python benchmarks/lr_curve_calibration.py [--sims 300] [--seed 0] [--only SUBSTRING] [--prior SD]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.lr_curve_sim import SCENARIOS, calibrate_curves  # noqa: E402
from gptlab.stats.lr_curves import ASYMMETRY  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=300, help="simulated sweeps (of four cells) per scenario")
    parser.add_argument("--seed", type=int, default=0, help="RNG seed (each scenario adds its row number)")
    parser.add_argument("--only", default="", help="run only the scenarios whose name contains this")
    parser.add_argument("--prior", type=float, default=ASYMMETRY, help="the fit's prior SD of the bend (0: parabolas)")
    args = parser.parse_args()
    if args.sims < 1:
        parser.error(f"--sims must be >= 1, got {args.sims}")
    start = time.perf_counter()
    print("| scenario | cells | convex | optimum covered | MC SE | bounded | covered if bounded | median width "
          "(octaves) | loss left covered | bounded | covered if bounded | median width (nats) | pooled df | good lr cut | "
          "failed run in the fit |")
    print("|" + "---|" * 15)
    for i, (name, scenario) in enumerate(SCENARIOS.items()):
        if args.only not in name:
            continue
        c = calibrate_curves(scenario, args.sims, args.seed + i, args.prior)
        n = c.cells * c.convex
        print(f"| {name} | {c.cells} | {c.convex:.3f} | {c.optimum_coverage:.3f} | {c.se(c.optimum_coverage, n):.3f} | "
              f"{c.bounded:.3f} | {c.optimum_coverage_bounded:.3f} | {c.optimum_width:.2f} | "
              f"{c.loss_left_coverage:.3f} | {c.loss_left_bounded:.3f} | {c.loss_left_coverage_bounded:.3f} | "
              f"{c.loss_left_width:.4f} | {c.noise_df:.1f} | {c.cut:.3f} | {c.failed_in_fit:.3f} |", flush=True)
    print(f"({args.sims} sweeps of 4 cells per scenario, seed {args.seed}, bend prior SD {args.prior:g}; "
          f"{time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
