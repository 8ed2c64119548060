"""Calibration of the arms design (`arms:`): Dunnett's sqrt(k) baseline against equal allocation, by simulation.

    python benchmarks/arms_calibration.py [--studies 400] [--seed 0]

For each world of `gptlab.stats.arms_sim.WORLDS` (10 arms and a baseline, 3 seeds per arm, run SD 0.006
nats of which the share rho is the seed's and shared by every arm with that seed, 20 test blocks per run
with an arm x block interaction of SD 0.01 per block (0.003 in the last world) and run x block noise of
SD 0.02; every term drawn afresh per study) and each setup (the baseline at `arms.baseline_seed_count`
seeds; at n seeds; Dunnett's total runs spread evenly; n seeds analysed with the seed block; Dunnett
with the seed-only CI), it simulates `--studies` null studies (every effect 0) and `--studies` planted
ones (arms at +0.02, -0.02, +0.01, -0.01, the other six at 0) on the same draws for every setup, each
analysed the report's way (`effects.analyse(..., blocks=..., block_seeds=False)`: 10 comparisons, one
Holm family). One row per world and setup: runs, baseline / arm seeds, the coverage of the 95% CIs of
every arm's true effect (planted studies, with its Monte-Carlo SE; null studies), the studies with a
false better/worse call (null: the familywise rate over the 10 comparisons; planted: over its six zero
arms and the wrong sign), the 95% half-width (mean, median, widest), the RMS error of the estimates
against the true SD (`ArmsWorld.contrast_variance`), the text's mean share of the variance, the power to
call the +-0.01 and +-0.02 arms in the right direction, and the share of studies whose seed model went
Welch. Deterministic for a given --seed (two runs printed the same figures).

Measured on the 2-core x86-64 CPU VM (CPython 3.11.7) on 2026-11-25, under load from a training job on
both cores (load average above 3): `python benchmarks/arms_calibration.py --studies 400 --seed 0` took 29 s
of CPU and 5 min 13 s of wall time, imports included (the table: docs/STATISTICS.md, "One-at-a-time arms";
each study goes through `arms_sim.comparisons`, the main table of `effects.analyse` to 1e-9, which an
earlier run through `effects.analyse` itself printed identically for the rows it reached).
"""
from __future__ import annotations

import argparse
import math
import time

from gptlab.stats.arms_scores import WORLDS, calibrate


def _f(value: float, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=400, help="null studies and planted studies per world")
    parser.add_argument("--seed", type=int, default=0, help="the simulation's rng seed")
    args = parser.parse_args()
    print(f"{args.studies} null + {args.studies} planted studies per world, seed {args.seed}\n")
    print("| world | setup | runs | seeds base / arm | coverage, planted | coverage, null | familywise false, null "
          "| familywise false, planted | 95% +/- mean | median | widest | RMS error / true SD | text share "
          "| power 0.01 | power 0.02 | Welch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    wall, cpu = time.perf_counter(), time.process_time()
    for i, (name, (world, chosen)) in enumerate(WORLDS.items()):
        for cal in calibrate(world, args.studies, chosen(world), rng_seed=args.seed * 1000 + i).values():
            p, n = cal.planted, cal.null
            print(f"| {name} | {p.setup.name} | {p.setup.runs} | {p.setup.seeds_label} | "
                  f"{p.coverage:.3f} +/- {p.coverage_se:.3f} | {n.coverage:.3f} | **{n.familywise:.3f}** | "
                  f"{p.familywise:.3f} | {p.half_width:.4g} | {p.median_half_width:.4f} | {p.max_half_width:.3g} | "
                  f"{p.error_sd:.4f} / {p.true_sd:.4f} | {_f(p.text_share, 2)} | {p.power_at(0.01):.3f} | "
                  f"{p.power_at(0.02):.3f} | {_f(p.welch, 3)} |")
    print(f"\n({time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} s CPU)")


if __name__ == "__main__":
    main()
