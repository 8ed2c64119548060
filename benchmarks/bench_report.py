"""Time report generation for a synthetic 16-cell (four 2-level factors) x 3-seed sweep.

Usage: python benchmarks/bench_report.py [--seeds 3]
Prints the in-process time of `write_report` and the cold end-to-end time of
`python -m gptlab.report` (imports included). The target is under 30 s on 2 CPU cores.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration.synthetic import make_results  # noqa: E402
from gptlab.report import write_report  # noqa: E402

GRID = {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"],
        "model.position": ["learned", "sinusoidal"], "model.tying": ["tied", "untied"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = make_results(Path(tmp), GRID, args.seeds, name="bench",
                               effects={(("model.norm", "post"),): 0.05},
                               status={(("post", "relu", "learned", "tied"), 1): "diverged"})
        start = time.perf_counter()
        out = write_report(results)
        warm = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gptlab.report", str(results), "--out", str(Path(tmp) / "cli")],
                       check=True, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
        cold = time.perf_counter() - start
    print(f"report for 16 cells x {args.seeds} seeds: write_report {warm:.2f} s "
          f"(modules loaded), CLI end to end {cold:.2f} s (cold start); wrote {out.name}/")


if __name__ == "__main__":
    main()
