"""Print how the report's statistics do on simulated sweeps with planted effects.

For each design of `calibration.effects_sim.CALIBRATION_DESIGNS` (the ones tests/simulations/test_effects_sim.py
checks): datasets, model chosen, CI coverage of the planted effects, false better/worse calls on
truly-zero effects, and mean 95% CI half-width of the main effects.

    python benchmarks/effects_calibration.py [--scale 1]   # --scale 5: five times as many datasets
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.effects_sim import CALIBRATION_DESIGNS, calibrate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=1, help="multiply every design's number of datasets")
    args = parser.parse_args()
    print(f"{'design':<36} {'datasets':>8} {'coverage':>9} {'CIs':>6} {'false calls':>11} {'nulls':>6} "
          f"{'main CI +/-':>11}  models")
    for name, case in CALIBRATION_DESIGNS.items():
        start = time.perf_counter()
        cal = calibrate(case.design, case.means, case.datasets * args.scale, case.seeds, noise_sd=case.noise_sd,
                        rng_seed=case.rng_seed)
        half = np.nanmean([a.main["ci95"].mean() for a in cal.analyses])
        kinds = Counter(a.fit.kind for a in cal.analyses)
        print(f"{name:<36} {len(cal.analyses):>8} {cal.coverage:>9.4f} {cal.n_intervals:>6} {cal.false_calls:>11.4f} "
              f"{cal.n_null:>6} {half:>11.4f}  {dict(kinds)} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
