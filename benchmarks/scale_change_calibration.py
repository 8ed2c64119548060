"""Print how the paired-by-seed change of an effect across scale levels does on simulated studies.

For n seeds 3, 5, 10 and a seed's correlation across scale levels rho 0, 0.5, 0.9
(`calibration.scale_change_sim.ChangeSim`, the model its module docstring states): coverage of the
95% CI of a planted change (paired, and with the pairing ignored), datasets with a false `changes`
call when no change is planted, datasets calling a change at the margin `no change within margin`,
bias of the estimate (in Monte Carlo SEs) and mean CI half-widths, paired and unpaired.

    python benchmarks/scale_change_calibration.py [--datasets 1000]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.scale_change_sim import ChangeSim, calibrate_changes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=1000, help="simulated studies per setting")
    parser.add_argument("--change", type=float, default=0.015, help="the planted change (nats/char)")
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"{'seeds':>5} {'rho':>4} {'coverage':>8} {'unpaired':>8} {'false changes':>13} {'no change @margin':>17} "
          f"{'bias/SE':>7} {'CI +/- paired':>13} {'unpaired':>8}")
    for n_seeds in (3, 5, 10):
        for rho in (0.0, 0.5, 0.9):
            common = {"datasets": args.datasets, "rng_seed": n_seeds * 10 + int(rho * 10)}
            planted = calibrate_changes(ChangeSim(n_seeds, rho, change=args.change, **common))
            null = calibrate_changes(ChangeSim(n_seeds, rho, change=0.0, **common))
            at_margin = calibrate_changes(ChangeSim(n_seeds, rho, change=planted.sim.margin, **common))
            print(f"{n_seeds:>5} {rho:>4} {planted.coverage:>8.3f} {planted.coverage_unpaired:>8.3f} "
                  f"{null.false_changes:>13.3f} {at_margin.no_change_calls:>17.3f} "
                  f"{planted.bias / planted.bias_se:>7.2f} {planted.half_width:>13.4f} "
                  f"{planted.half_width_unpaired:>8.4f}")
    print(f"({args.datasets} datasets per setting and column; {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
