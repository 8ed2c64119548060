"""Calibration of the change of an effect between two texts (`stats.transfer`), by simulation.

    python benchmarks/transfer_calibration.py [--studies 400] [--seed 0]

For each world of `calibration.transfer_sim.TRANSFER_WORLDS`, `--studies` pairs of arms studies, one per text,
drawn independently (`arms_sim.ArmsWorld`: 8 arms and a baseline at Dunnett's allocation, 20 test blocks per
run, run SD 0.006, arm x block SD 0.01 (0.002 in the last world), run x block SD 0.02; the second text's SDs
1.5 times the first's where so named). Planted, in nats: arms 1-2 at +0.03 and -0.03 on both texts (change 0),
arm 3 +0.03 then 0 (lost), arm 4 +0.03 then -0.03 (reversed), arm 5 0 then -0.03 (gained), arms 6-8 0 on both.
Each study is analysed the report's way (`arms_sim.comparisons`, effects with the text's blocks), each change
tested unpaired (`unpaired_change`, Welch-Satterthwaite df, Holm over the 8 changes) and called
(`transfer_calls`). One row per world: coverage of the planted change by its 95% CI (all arms), the share of
studies with a `changes` or `reverses` call on a change planted at zero (the familywise false rate), the share
with a false `reverses`, `holds` on the kept effects (arms 1-2) and on the changed ones (a wrong "same"),
the power to call the changed arms and the reversing one, the mean 95% half-width and the median df.
Deterministic for a given --seed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.transfer_sim import TRANSFER_WORLDS, calibrate_transfer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=400, help="study pairs per world")
    parser.add_argument("--seed", type=int, default=0, help="the simulation's rng seed")
    args = parser.parse_args()
    print(f"{args.studies} study pairs per world, seed {args.seed}\n")
    print("| world | coverage | familywise false change | false reverses | holds, kept | holds, changed "
          "| power, changed | power, reversed | 95% +/- | median df |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    wall, cpu = time.perf_counter(), time.process_time()
    for i, (name, world) in enumerate(TRANSFER_WORLDS.items()):
        c = calibrate_transfer(world, args.studies, rng_seed=args.seed * 1000 + i)
        print(f"| {name} | {c.coverage:.3f} | **{c.familywise_false_change:.3f}** | {c.false_reverse:.3f} | "
              f"{c.holds_when_zero:.3f} | {c.holds_when_changed:.3f} | {c.power_change:.3f} | {c.power_reverse:.3f} | "
              f"{c.half_width:.4f} | {c.welch_df:.0f} |")
    print(f"\n({time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} s CPU)")


if __name__ == "__main__":
    main()
