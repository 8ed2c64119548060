"""Adaptive seeds on a real study: four_axes with `seeds: {min: 2, max: 8, precision: ...}`.

Runs `ablations/four_axes_adaptive.yaml` in a scratch folder. The shipped four_axes runs (seeds 0-2,
same configs, so the same run ids) are copied in first, without checkpoints: a finished run is
never trained twice, so only the seeds the rule asks for beyond them are trained here. Then it
prints the compute the adaptive sweep used against fixed-seed sweeps of the same cells, with the
widest called half-width each reaches (fixed-seed sweeps: the usual pure error of all their runs).

    python benchmarks/adaptive_real.py [--work DIR] [--jobs N] [--precision P --precision-for effects|interactions]

Without --precision it runs the committed YAML (main effects, 0.005); with it, a copy of that YAML
with the seeds rule changed, written into the work folder.

Compute is the sum of the runs' `wall_s` (one core each), whoever trained them.
"""
from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "ablations" / "four_axes_adaptive.yaml"
SHIPPED = REPO / "results" / "four_axes"


def seed_runs(work: Path) -> int:
    """Copy the shipped four_axes runs (their small files) into the scratch results folder."""
    target = work / "results" / "four_axes_adaptive" / "runs"
    copied = 0
    for run in sorted((SHIPPED / "runs").iterdir()):
        if (run / "summary.json").is_file() and not (target / run.name).exists():
            shutil.copytree(run, target / run.name, ignore=shutil.ignore_patterns("ckpt_*", "*.lock*", "progress.json"))
            copied += 1
    return copied


def widest_fixed(results: Path, n_seeds: int, precision_for: str) -> tuple[float, str]:
    """Widest called half-width of a fixed-seed sweep with seeds 0..n-1 (pure error of all its runs)."""
    from gptlab.report.load import load_results
    from gptlab.report.tables.analyses import analyse_runs
    from gptlab.stats.adaptive_seeds import SeedRule, Widest, called_rows

    res = load_results(results, margin=0.01)
    fixed = {k: v for k, v in res.spec.kinds.items() if k != "seeds"}  # a fixed-seed sweep: no first-round error
    res = dataclasses.replace(res, spec=dataclasses.replace(res.spec, kinds=fixed))
    ok = res.runs[res.runs["ok"] & (res.runs["seed"].astype(int) < n_seeds)]
    analysis = analyse_runs(res, ok, "best_val_loss")
    w = Widest.of(called_rows(analysis, SeedRule(2, 2, 1.0, precision_for), res.label))
    return w.half_width, w.effect


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, default=Path("/tmp/gptlab-adaptive-real"))
    p.add_argument("--jobs", type=int, help="workers for the runs still to train (default: the YAML's)")
    p.add_argument("--precision", type=float, help="target 95%% half-width (default: the YAML's)")
    p.add_argument("--precision-for", choices=["effects", "interactions"], default="effects")
    args = p.parse_args()
    spec = SPEC
    if args.precision is not None:
        import yaml

        raw = yaml.safe_load(SPEC.read_text())
        raw["seeds"] = {**raw["seeds"], "precision": args.precision, "precision_for": args.precision_for}
        spec = args.work / SPEC.name
        spec.parent.mkdir(parents=True, exist_ok=True)
        spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    print(f"copied {seed_runs(args.work)} shipped four_axes runs into {args.work}")
    cmd = [sys.executable, "-m", "gptlab.sweep", str(spec), "--results-dir", str(args.work / "results"),
           "--reports-dir", str(args.work / "reports"), *(["--jobs", str(args.jobs)] if args.jobs else [])]
    print("$ " + " ".join(cmd), flush=True)
    code = subprocess.call(cmd, cwd=REPO)
    if code != 0:
        return code
    results = args.work / "results" / "four_axes_adaptive"
    import yaml

    rule = yaml.safe_load((results / "sweep.yaml").read_text())["seeds"]
    rounds = pd.read_csv(results / "rounds.csv")
    runs = pd.read_csv(results / "summary.csv")
    every = {int(s): g for s, g in _all_runs(results).groupby("seed")}
    n_adaptive = int(rounds["seeds"].max())
    print(f"\nrule: {rule}")
    print(rounds.to_string(index=False))
    print("\n| design | seeds per cell | runs | compute (core-h, sum of wall_s) | widest 95% half-width | effect |")
    print("|---|---|---|---|---|---|")
    print(f"| adaptive (Stein, round 1's variance) | {n_adaptive} | {len(runs)} | {runs['wall_s'].sum() / 3600:.2f} "
          f"| {rounds['widest_half_width'].iloc[-1]:.4f} | {rounds['effect'].iloc[-1]} |")
    for n in range(2, max(every) + 2):
        if n - 1 not in every:
            break
        wall = sum(every[s]["wall_s"].sum() for s in range(n))
        w, effect = widest_fixed(results, n, rule.get("precision_for", "effects"))
        print(f"| fixed seeds 0..{n - 1} | {n} | {sum(len(every[s]) for s in range(n))} | {wall / 3600:.2f} | "
              f"{w:.4f} | {effect} |")
    print(f"| fixed at max | {rule['max']} | {16 * rule['max']} | ~{runs['wall_s'].mean() * 16 * rule['max'] / 3600:.2f} "
          "(mean run time x runs) | - | - |")
    return 0


def _all_runs(results: Path) -> pd.DataFrame:
    """Every finished run in the folder (summary.csv holds only the adaptive sweep's)."""
    import json

    rows = [json.loads(p.read_text()) for p in sorted((results / "runs").glob("*/summary.json"))]
    return pd.DataFrame([{"seed": r["seed"], "wall_s": r["wall_s"]} for r in rows])


if __name__ == "__main__":
    sys.exit(main())
