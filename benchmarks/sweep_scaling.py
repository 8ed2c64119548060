"""How well a sweep uses the machine: the same runs trained in parallel vs one after another.

Trains a sweep twice into fresh folders: once with `--jobs 1` (one run at a time, each with every
core as threads) and once with the given `--jobs` (default: auto, the lab's plan). It prints both
wall times, their ratio, and the parallel wall time divided by the sum of the sequential runs'
own times (issue target: below 0.8). The runs are identical in both (same ids, same batches).

    python benchmarks/sweep_scaling.py ablations/quick.yaml                      # full quick sweep
    python benchmarks/sweep_scaling.py ablations/quick.yaml --cells 2 --seeds 2 --iters 300   # 4 runs
"""
from __future__ import annotations

import argparse
import csv
import itertools
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml


def subset_spec(spec: dict, cells: int | None, seeds: int | None, iters: int | None) -> dict:
    """Keep the first `cells` cells of the grid (by dropping the others with `exclude`)."""
    spec = dict(spec)
    if cells is not None:
        grid = spec["grid"]
        product = list(itertools.product(*grid.values()))
        spec["exclude"] = [dict(zip(grid, levels)) for levels in product[cells:]]
    if seeds is not None:
        spec["seeds"] = seeds
    if iters is not None:
        spec["base"] = {**spec["base"], "train": {**spec["base"].get("train", {}), "max_iters": iters}}
    return spec


def run_sweep(spec_path: Path, results: Path, jobs: str) -> tuple[float, list[dict], str]:
    cmd = [sys.executable, "-m", "gptlab.sweep", str(spec_path), "--results-dir", str(results),
           "--reports-dir", str(results / "reports")]
    if jobs != "auto":
        cmd += ["--jobs", jobs]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    plan = next(line for line in proc.stderr.splitlines() if line.startswith("plan:"))
    name = yaml.safe_load(spec_path.read_text())["name"]
    with open(results / name / "summary.csv") as f:
        return wall, list(csv.DictReader(f)), plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spec", type=Path)
    parser.add_argument("--jobs", default="auto", help="parallel setting to compare with --jobs 1 (default auto)")
    parser.add_argument("--cells", type=int, help="keep only the first N cells of the grid")
    parser.add_argument("--seeds", type=int, help="override the number of seeds")
    parser.add_argument("--iters", type=int, help="override train.max_iters")
    args = parser.parse_args()
    spec = subset_spec(yaml.safe_load(args.spec.read_text()), args.cells, args.seeds, args.iters)
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
        seq_wall, seq_rows, seq_plan = run_sweep(spec_path, Path(tmp) / "sequential", "1")
        par_wall, par_rows, par_plan = run_sweep(spec_path, Path(tmp) / "parallel", args.jobs)
    run_sum = sum(float(r["wall_s"]) for r in seq_rows)
    same = [r["best_val_loss"] for r in seq_rows] == [r["best_val_loss"] for r in par_rows]
    print(f"{len(seq_rows)} runs of {args.spec}")
    print(f"sequential ({seq_plan}): {seq_wall:.1f} s wall; sum of run times {run_sum:.1f} s")
    print(f"parallel   ({par_plan}): {par_wall:.1f} s wall")
    print(f"parallel / sequential wall: {par_wall / seq_wall:.2f}; parallel wall / sum of sequential run times: "
          f"{par_wall / run_sum:.2f}; identical losses: {same} (thread counts differ, so small float differences are expected)")


if __name__ == "__main__":
    main()
