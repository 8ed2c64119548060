"""Print how `gptlab.stats.worth_lr.retune_check`'s verdicts do on simulated re-tunes with a planted lr optimum.

For each world of `calibration.worth_lr_sim.WORLDS` (the lab's lr curve, three runs at 0.5, 1 and 2 times
the pick) and each shift of the true optimum from the pick (0: a `moves` is false; +-1 octave: the power),
the share of each verdict (`stays`, `moves`, `unclear`). tests/stats/test_worth.py runs a small version.

    python benchmarks/worth_lr_calibration.py [--trials 4000] [--shifts -1,-0.5,0,0.5,1]
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.worth_lr_sim import WORLDS, verdict_rates  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000, help="simulated re-tunes per world and shift")
    parser.add_argument("--shifts", default="-1,-0.5,0,0.5,1", help="octaves from the pick to the true optimum")
    args = parser.parse_args()
    print(f"{'world':<40} {'shift':>6} {'stays':>6} {'moves':>6} {'unclear':>7}")
    for i, (name, world) in enumerate(WORLDS.items()):
        for j, shift in enumerate(float(s) for s in args.shifts.split(",")):
            rates = verdict_rates(replace(world, shift=shift), args.trials, rng_seed=100 * i + j)
            print(f"{name:<40} {shift:>6.2f} {rates['stays']:>6.3f} {rates['moves']:>6.3f} {rates['unclear']:>7.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
