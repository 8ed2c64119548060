"""Train the nanoGPT CPU configuration once and print its full-val-split loss.

nanoGPT's README reports val loss ~1.88 for these settings (pre-LN, GELU, learned positions,
tied head, n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=12, dropout 0, lr 1e-3
-> 1e-4 cosine over 2000 iterations with 100 warmup, weight decay 0.1, beta2 0.99, clip 1.0).

    python benchmarks/reference_loss.py [--out DIR] [--set model.position=sinusoidal ...]
"""
from __future__ import annotations

import argparse
import logging
import tempfile
import time

import yaml

from gptlab.run.config import resolve_run_config, set_dotted
from gptlab.run.runner import train_run

NANOGPT_CPU = {
    "model": {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64, "dropout": 0.0, "bias": False,
              "norm": "pre", "activation": "gelu", "position": "learned", "tying": "tied"},
    "train": {"max_iters": 2000, "batch_size": 12, "lr": 1e-3, "min_lr": 1e-4, "warmup_iters": 100,
              "weight_decay": 0.1, "beta2": 0.99, "grad_clip": 1.0, "eval_interval": 250, "device": "cpu"},
    "seed": 0,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="run directory (default: a temporary one)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = yaml.safe_load(yaml.safe_dump(NANOGPT_CPU))
    for item in args.set:
        key, value = item.split("=", 1)
        set_dotted(config, key, yaml.safe_load(value))
    out = args.out or tempfile.mkdtemp(prefix="gptlab-reference-")
    start = time.perf_counter()
    summary = train_run(resolve_run_config(config), out)
    print(f"status {summary['status']}; best val loss {summary['best_val_loss']:.4f} at step "
          f"{summary['best_step']}; final val loss {summary['final_val_loss']:.4f}; "
          f"{summary['tokens_per_sec']:.0f} tokens/s; eval {summary['eval_s']:.1f} s of "
          f"{summary['wall_s']:.1f} s; wall {time.perf_counter() - start:.1f} s; dir {out}")


if __name__ == "__main__":
    main()
