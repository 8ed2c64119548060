"""WSD against cosine at the nanoGPT CPU setting, and the cost of a length sweep with and without shared trunks.

    python benchmarks/wsd_vs_cosine.py [--iters 2000] [--seeds 3] [--threads 1] [--lengths 1000,2000,4000,8000]
    python benchmarks/wsd_vs_cosine.py --iters 50 --seeds 1     # a check that it works (minutes: evaluations dominate)

(a) The nanoGPT CPU model (4 layers, 4 heads, 128 wide, block 64, batch 12, lr 1e-3 -> min_lr 1e-4,
100 warmup steps) on Tiny Shakespeare for `--iters` steps under `train.schedule: cosine` and
`wsd` (cooldown 20%, 1-sqrt), seeds 0..`--seeds`-1. A seed fixes the initialisation and the batch
order, so the two schedules of one seed see the same batches: the difference in best validation
loss is paired by seed, with a t interval (95%) over the seeds.

(b) A wsd length sweep of one cell and seed 0, `--lengths` steps (default: iters x 1/2, 1, 2, 4),
trained as the sweep trains it with shared trunks (the longest run in full, each shorter run's
cooldown from its branch point: `gptlab.sweep.trunks`, `gptlab.run.branching`) and as separate runs
from step 0: optimizer steps and wall time of each, and whether both give the same results.

Every run trains in this process, one after another, on `--threads` torch threads (equal results
need equal thread counts). Warmup and logging scale with `--iters` (100 and 50 steps at 2000);
an evaluation (the whole validation split) comes every `--eval-interval` steps (250) and at the end. The full
benchmark trains 12,000 + 15,000 + 9,400 steps: about an hour on one core.
Run folders go to `--out` (default: a temporary folder, deleted).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from gptlab.run.branching import Branch, record_branches
from gptlab.run.config import RunConfig, resolve_run_config
from gptlab.run.rundir import RunDir
from gptlab.run.runner import train_run
from gptlab.sweep.runs import Run
from gptlab.sweep.trunks import steps_trained, trunk_groups


def nanogpt_cpu(iters: int, schedule: str, seed: int, eval_interval: int = 250) -> RunConfig:
    """The nanoGPT CPU setting (as the reference studies train it), its warmup and logging scaled to `iters` steps."""
    scale = iters / 2000
    return resolve_run_config({
        "model": {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64, "dropout": 0.0},
        "train": {"max_iters": iters, "batch_size": 12, "lr": 1e-3, "min_lr": 1e-4, "schedule": schedule,
                  "warmup_iters": max(1, round(100 * scale)), "eval_interval": eval_interval,
                  "log_interval": max(1, round(50 * scale)), "device": "cpu"},
        "data": {"dataset": "tinyshakespeare"},
        "seed": seed,
    })


def with_length(config: RunConfig, length: int) -> RunConfig:
    """`config` at another length; warmup and intervals stay those of the sweep's base, as in a grid over max_iters."""
    return config.with_settings({"train.max_iters": length})


def paired_ci(diffs: list[float]) -> tuple[float, float]:
    """Mean of the paired differences and the half-width of its 95% t interval (nan with one pair)."""
    from scipy import stats

    mean = statistics.fmean(diffs)
    if len(diffs) < 2:
        return mean, math.nan
    return mean, stats.t.ppf(0.975, len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))


def compare_schedules(root: Path, iters: int, seeds: int, eval_interval: int) -> None:
    best: dict[str, list[float]] = {"cosine": [], "wsd": []}
    for seed in range(seeds):
        for schedule in best:
            config = nanogpt_cpu(iters, schedule, seed, eval_interval)
            summary = train_run(config, root / "schedules" / f"{schedule}_s{seed}")
            best[schedule].append(summary["best_val_loss"])
            print(f"  {schedule:<6} seed {seed}: best val {summary['best_val_loss']:.4f} at step "
                  f"{summary['best_step']}, {summary['wall_s']:.0f} s", flush=True)
    diff, half = paired_ci([w - c for w, c in zip(best["wsd"], best["cosine"])])
    print(f"\n(a) best validation loss (nats/char), nanoGPT CPU model, {iters} steps, {seeds} seed(s)\n")
    print("| schedule | mean | per seed |\n|---|---|---|")
    for schedule, values in best.items():
        print(f"| {schedule} | {statistics.fmean(values):.4f} | {', '.join(f'{v:.4f}' for v in values)} |")
    ci = f"[{diff - half:+.4f}, {diff + half:+.4f}]" if math.isfinite(half) else "n/a (one seed)"
    verdict = ("n/a" if not math.isfinite(half) else "no difference detected (the CI holds 0)" if abs(diff) <= half
               else "wsd lower" if diff < 0 else "cosine lower")
    print(f"\nwsd - cosine, paired by seed: {diff:+.4f}, 95% CI {ci}: {verdict}\n")


def length_sweep(root: Path, base: RunConfig, lengths: list[int]) -> None:
    runs = [Run(f"{n}", (("train.max_iters", n),), base.seed, with_length(base, n)) for n in lengths]
    groups = trunk_groups(runs)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    walls: dict[str, float] = {}
    for mode in ("separate", "shared"):
        folder = root / "lengths" / mode
        order = runs
        if mode == "shared":  # as the sweep's two stages: the trunk with its branch points, then the branches
            for group in groups:
                record_branches(RunDir(folder / group.trunk.run_id),
                                [Branch(b, run.run_id, run.config) for run, b in group.branches])
            order = [g.trunk for g in groups] + [run for g in groups for run, _ in g.branches]
        tick = time.perf_counter()
        results[mode] = {run.run_id: train_run(run.config, folder / run.run_id) for run in order}
        walls[mode] = time.perf_counter() - tick
        print(f"  {mode}: {walls[mode]:.0f} s", flush=True)
    shared_steps, separate_steps = steps_trained(runs)
    trained = sum(int(s["config"]["train"]["max_iters"]) - (s.get("branched_from") or {"step": 0})["step"]
                  for s in results["shared"].values())
    same = all(results["shared"][r.run_id]["best_val_loss"] == results["separate"][r.run_id]["best_val_loss"]
               for r in runs)
    print(f"\n(b) wsd length sweep {', '.join(map(str, lengths))} (one cell, seed {base['seed']})\n")
    print("| training | optimizer steps | wall time (s) |\n|---|---|---|")
    print(f"| separate runs | {separate_steps:,} | {walls['separate']:.0f} |")
    print(f"| shared trunks | {trained:,} (planned {shared_steps:,}) | {walls['shared']:.0f} |")
    print(f"\nshared / separate: {trained / separate_steps:.0%} of the steps, {walls['shared'] / walls['separate']:.0%} "
          f"of the wall time; same best validation loss in every run: {'yes' if same else 'NO'}\n")
    print("| length | best val (shared) | best val (separate) | branched at |\n|---|---|---|---|")
    for run in runs:
        shared, alone = results["shared"][run.run_id], results["separate"][run.run_id]
        origin = shared.get("branched_from")
        print(f"| {run.run_id} | {shared['best_val_loss']:.4f} | {alone['best_val_loss']:.4f} | "
              f"{origin['step'] if origin else '-'} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=2000, help="steps of each run of (a); (b)'s default lengths scale with it")
    p.add_argument("--seeds", type=int, default=3, help="seeds of each schedule in (a)")
    p.add_argument("--lengths", help="comma-separated lengths of (b) (default: iters x 1/2, 1, 2, 4)")
    p.add_argument("--eval-interval", type=int, default=250, help="steps between evaluations (and at the end); "
                   "each scores the whole validation split")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as a sweep's run on a CPU)")
    p.add_argument("--out", help="keep the run folders here (default: a temporary folder, deleted)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    lengths = sorted(int(n) for n in args.lengths.split(",")) if args.lengths else [args.iters * k // 2 for k in (1, 2, 4, 8)]
    print(f"torch {torch.__version__}, {args.threads} thread(s), {os.cpu_count()} core(s)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out) if args.out else Path(tmp)
        compare_schedules(root, args.iters, args.seeds, args.eval_interval)
        length_sweep(root, nanogpt_cpu(args.iters, "wsd", 0, args.eval_interval), lengths)


if __name__ == "__main__":
    main()
