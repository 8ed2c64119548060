"""Print how the seed-only and the seed x block CIs do on simulated sweeps with planted arm x block interactions.

For each scenario of `calibration.text_share_sim.TEXT_SCENARIOS` (2x2 designs like results/tuned, 3 or 5
seeds, 20 test blocks per run; tests/stats/test_text_share.py checks small versions): for each method, the
coverage of the planted effects on the whole population of text (main effects, the interaction and the
simple effects), false better/worse calls on truly-zero effects, the mean 95% CI half-width of the main
effects and their mean text share. The paired seed x block bootstrap (main effects only, paired seeds
only) is the alternative the calibration rejects.

    python benchmarks/text_share_calibration.py [--scale 1] [--bootstrap 999]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.text_share_sim import TEXT_SCENARIOS, calibrate_text  # noqa: E402


def _f(value: float, digits: int) -> str:
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1, help="multiply every scenario's number of datasets")
    parser.add_argument("--bootstrap", type=int, default=999, help="bootstrap resamples (0: leave the bootstrap out)")
    args = parser.parse_args()
    print(f"{'scenario':<46} {'method':<15} {'datasets':>8} {'coverage':>9} {'CIs':>6} {'false calls':>11} "
          f"{'nulls':>6} {'main CI +/-':>11} {'text share':>10}")
    for name, (sc, datasets, rng_seed) in TEXT_SCENARIOS.items():
        start = time.perf_counter()
        n = max(1, round(datasets * args.scale))
        for cal in calibrate_text(sc, n, rng_seed, bootstrap=args.bootstrap).values():
            print(f"{name:<46} {cal.method:<15} {n:>8} {cal.coverage:>9.3f} {cal.n_intervals:>6} "
                  f"{_f(cal.false_calls, 3):>11} {cal.n_null:>6} {cal.half_width:>11.4f} {_f(cal.text_share, 2):>10}")
        print(f"{'':<46} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
