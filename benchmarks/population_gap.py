"""How far a population member's losses end from its lone run's over a whole run (docs/GPU.md, "Equivalence").

K runs of one architecture (the tests' tiny model by default: 2 x 32, block 32, batch 8) on tinyshakespeare, one
per `--lrs` value (default 3e-3, 1e-2, 2e-2) with seeds 0..K-1, each trained alone (`train_run`) and all of them as one population
(`train_population`), on CPU in float32. Per member it prints the absolute gaps of the best and final validation
losses and of the final training loss, and the largest gap of a validation row; then the largest over the members.
The gap is float32 rounding (the batched kernels reduce in another order) amplified by training, and, with
`--dropout`, masks drawn from one generator for the whole population instead of each lone run's own.

Run: python benchmarks/population_gap.py [--lrs 3e-3 1e-2 2e-2] [--steps 150] [--dropout 0.1] [--model tiny] [--threads 1]
Needs $GPTLAB_DATA_DIR (or the user cache) to hold tinyshakespeare.
"""
from __future__ import annotations

import argparse
import csv
import tempfile
import warnings
from pathlib import Path

import torch

from gptlab.run.config import resolve_run_config
from gptlab.run.population_run import train_population
from gptlab.run.runner import train_run

MODELS = {"default": ({}, 12), "tiny": ({"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32}, 8)}
FIELDS = ("best_val_loss", "final_val_loss", "final_train_loss")


def configs(lrs: list[float], steps: int, dropout: float, model: str) -> list:
    """The members: seed k at the k-th lr (min_lr a tenth of it), evaluated three times, a metrics row every 10 steps."""
    shapes, batch = MODELS[model]
    train = {"max_iters": steps, "batch_size": batch, "warmup_iters": max(1, steps // 20), "device": "cpu",
             "eval_interval": max(1, steps // 3), "log_interval": 10}
    return [resolve_run_config({"model": {**shapes, "dropout": dropout}, "train": {**train, "lr": lr, "min_lr": lr / 10},
                                "data": {"dataset": "tinyshakespeare"}, "seed": k}) for k, lr in enumerate(lrs)]


def val_losses(folder: Path) -> list[float]:
    with open(folder / "metrics.csv", newline="") as handle:
        return [float(row["val_loss"]) for row in csv.DictReader(handle) if row["val_loss"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lrs", type=float, nargs="+", default=[3e-3, 1e-2, 2e-2], help="one member per lr")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--model", choices=sorted(MODELS), default="tiny")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="There is a performance drop")  # vmap's attention fallback on CPU
    torch.set_num_threads(args.threads)
    cfgs = configs(args.lrs, args.steps, args.dropout, args.model)
    print(f"torch {torch.__version__}, cpu, threads {torch.get_num_threads()}, model {args.model}, {len(cfgs)} "
          f"members, {args.steps} steps, dropout {args.dropout}")
    with tempfile.TemporaryDirectory() as tmp:
        lone = [Path(tmp, f"lone{k}") for k in range(len(cfgs))]
        pop = [Path(tmp, f"pop{k}") for k in range(len(cfgs))]
        alone = [train_run(cfg, folder) for cfg, folder in zip(cfgs, lone)]
        together = train_population(cfgs, pop)
        worst = dict.fromkeys((*FIELDS, "val_rows"), 0.0)
        for k, (a, b) in enumerate(zip(alone, together)):
            gaps = {f: abs(a[f] - b[f]) for f in FIELDS}
            gaps["val_rows"] = max(abs(x - y) for x, y in zip(val_losses(lone[k]), val_losses(pop[k])))
            worst = {f: max(worst[f], gaps[f]) for f in worst}
            print(f"member {k} (seed {cfgs[k].seed}, lr {cfgs[k].train.lr:.2e}, {a['status']}/{b['status']}): "
                  + ", ".join(f"{f} {a[f]:.4f} vs {b[f]:.4f}" for f in FIELDS)
                  + f"; gaps: best_val_loss {gaps['best_val_loss']:.2e}, largest val row {gaps['val_rows']:.2e}")
        print("largest gap over the members: " + ", ".join(f"{f} {v:.2e}" for f, v in worst.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
