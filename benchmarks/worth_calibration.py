"""Print how `gptlab.stats.worth`'s step-multiplier CIs do on simulated length studies with planted multipliers.

For each world of `calibration.worth_sim.WORLDS` (a planted baseline curve, its seeds at 0.5x, 1x, 2x and 4x
the study's 2000 steps, 20 test blocks per run) and each curve (`pchip`, the lab's; `power`, the rejected
saturating power law): per planted multiplier (0.35 and 5 lie beyond the range and should be censored), the
coverage of the 95% CI (open ends extended), the shares censored above and below, the median CI half-width in
doublings, the median estimate and the share of CIs excluding 1 (power where m != 1, false calls at m = 1).
Worlds with a cosine anchor place the arms on the wsd curve's shape (`step_multiplier(..., anchor=)`).
tests/stats/test_worth.py runs a small version.

    python benchmarks/worth_calibration.py [--scale 1] [--curves pchip,power] [--worlds REGEX]
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.worth_sim import WORLDS, calibrate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1, help="multiply every world's number of studies")
    parser.add_argument("--curves", default="pchip,power", help="the curves to calibrate, comma-separated")
    parser.add_argument("--worlds", default="", help="only the worlds whose name matches this regular expression")
    args = parser.parse_args()
    print(f"{'world':<52} {'curve':<6} {'studies':>7} {'m':>5} {'coverage':>8} {'above':>6} {'below':>6} "
          f"{'half (dbl)':>10} {'median m':>8} {'excl. 1':>7}")
    for name, (world, studies, rng_seed) in WORLDS.items():
        if not re.search(args.worlds, name):
            continue
        n = max(1, round(studies * args.scale))
        for curve in args.curves.split(","):
            start = time.perf_counter()
            for s in calibrate(world, n, rng_seed, curve):
                print(f"{name:<52} {curve:<6} {n:>7} {s.multiplier:>5.2f} {s.coverage:>8.3f} {s.censored_above:>6.3f} "
                      f"{s.censored_below:>6.3f} {s.log2_half_width:>10.3f} {s.median_estimate:>8.3f} {s.excludes_one:>7.3f}")
            print(f"{'':<52} ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
