"""Calibration of the arms design (`arms:`): Dunnett's sqrt(k) baseline against equal allocation, by simulation.

    python benchmarks/arms_calibration.py [--studies 400] [--seed 0] [--only TEXT] [--skip TEXT]

For each world of `calibration.arms_sim.WORLDS` (10 arms and a baseline, 3 seeds per arm, run SD 0.006
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
call the +-0.01 and +-0.02 arms in the right direction, and the share of studies whose seed model used
per-cell variances (always, with each arm's own; Bartlett's choice, pooled). Then, per world and setup,
each arm's coverage: the noisy arm's (null and planted studies) and the lowest and highest of the others.
`--only TEXT` runs the worlds whose name contains TEXT (`--only 5x`: the three worlds with one arm five
times noisier, each arm's own variance against the pooled one); `--skip TEXT` leaves them out. Each world
keeps its own rng stream whichever run. Deterministic for a given --seed.

Measured on the 2-core x86-64 CPU VM (CPython 3.11.7) on 2026-11-27, under load from parallel work (load
average 6-8): `--studies 400 --seed 0 --skip 5x` took 111 s of CPU and 9 min 21 s of wall time, and
`--studies 1000 --seed 0 --only 5x` 116 s of CPU and about 11.5 min of wall time (run as two, one per
seed count), imports included (the tables: docs/STATISTICS.md, "Arms against a baseline ... Calibration
by simulation"; each study goes through `arms_sim.comparisons`, the main table of `effects.analyse` to
1e-9). Run `PYTHONPATH=. python benchmarks/arms_calibration.py` from a checkout that is not installed.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.arms_scores import WORLDS, calibrate  # noqa: E402


def _f(value: float, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=400, help="null studies and planted studies per world")
    parser.add_argument("--seed", type=int, default=0, help="the simulation's rng seed")
    parser.add_argument("--only", default="", help="only the worlds whose name contains this text")
    parser.add_argument("--skip", default="", help="not the worlds whose name contains this text")
    args = parser.parse_args()
    print(f"{args.studies} null + {args.studies} planted studies per world, seed {args.seed}\n")
    worlds = {name: w for name, w in WORLDS.items() if args.only in name and not (args.skip and args.skip in name)}
    arms: list[str] = []
    print("| world | setup | runs | seeds base / arm | coverage, planted | coverage, null | familywise false, null "
          "| familywise false, planted | 95% +/- mean | median | widest | RMS error / true SD | text share "
          "| power 0.01 | power 0.02 | Welch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    wall, cpu = time.perf_counter(), time.process_time()
    for name, (world, chosen) in worlds.items():
        i = list(WORLDS).index(name)  # each world's rng stream, whichever worlds run
        for cal in calibrate(world, args.studies, chosen(world), rng_seed=args.seed * 1000 + i).values():
            p, n = cal.planted, cal.null
            lo, hi = min(p.others_coverage[0], n.others_coverage[0]), max(p.others_coverage[1], n.others_coverage[1])
            arms.append(f"| {name} | {p.setup.name} | {_f(n.noisy_coverage)} | {_f(p.noisy_coverage)} | "
                        f"{lo:.3f} - {hi:.3f} | {n.familywise:.3f} | {p.half_width:.4f} |")
            print(f"| {name} | {p.setup.name} | {p.setup.runs} | {p.setup.seeds_label} | "
                  f"{p.coverage:.3f} +/- {p.coverage_se:.3f} | {n.coverage:.3f} | **{n.familywise:.3f}** | "
                  f"{p.familywise:.3f} | {p.half_width:.4g} | {p.median_half_width:.4f} | {p.max_half_width:.3g} | "
                  f"{p.error_sd:.4f} / {p.true_sd:.4f} | {_f(p.text_share, 2)} | {p.power_at(0.01):.3f} | "
                  f"{p.power_at(0.02):.3f} | {_f(p.welch, 3)} |")
    print("\n| world | setup | noisy arm's coverage, null | planted | other arms' coverage, lowest - highest "
          "(null or planted) | familywise false, null | 95% +/- mean, planted |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(arms))
    print(f"\n({time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} s CPU)")


if __name__ == "__main__":
    main()
