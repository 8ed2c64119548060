"""Model FLOPs utilisation of training on this machine.

Achieved training FLOP/s counts 6 x non-embedding parameters per token (forward + backward) plus
attention, 12 x n_layer x n_embd x block_size per token (the PaLM appendix B convention, also
nanoGPT's; a causal kernel skips about half of the attention work, so this slightly flatters).
The peak is measured here, at the same thread count: the best of several large float32 matmuls.

    python benchmarks/mfu.py [--threads 2] [--steps 60] [--set model.n_layer=6 ...]
"""
from __future__ import annotations

import argparse
import time

import torch
import yaml

from gptlab.run.config import resolve_run_config, set_dotted
from gptlab.sweep.estimate import build_trainer, time_train_steps

NANOGPT_CPU = {"model": {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64},
               "train": {"batch_size": 12, "device": "cpu"}}


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of the best of `repeats` n x n float32 matmuls."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = min(_timed(lambda: torch.mm(a, b)) for _ in range(repeats))
    return 2 * n**3 / best


def _timed(fn) -> float:
    tick = time.perf_counter()
    fn()
    return time.perf_counter() - tick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--steps", type=int, default=60, help="timed training steps (after 5 warm-up steps)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = yaml.safe_load(yaml.safe_dump(NANOGPT_CPU))
    for item in args.set:
        key, value = item.split("=", 1)
        set_dotted(config, key, yaml.safe_load(value))
    cfg = resolve_run_config(config)
    trainer = build_trainer(cfg, "mfu")
    per_step = time_train_steps(trainer, args.steps, warmup=5)
    n = trainer.model.num_params(non_embedding=True)
    m = cfg.model
    flops_per_token = 6 * n + 12 * m.n_layer * m.n_embd * m.block_size
    tokens = cfg.train.batch_size * m.block_size
    achieved = flops_per_token * tokens / per_step
    peak = matmul_peak()
    print(f"{args.threads} thread(s); model {m.n_layer}x{m.n_embd}, block {m.block_size}, batch {cfg.train.batch_size}; "
          f"{n} non-embedding params")
    print(f"training: {per_step * 1000:.1f} ms/step, {tokens / per_step:.0f} tokens/s, {achieved / 1e9:.2f} GFLOP/s")
    print(f"matmul peak (2048^3 fp32): {peak / 1e9:.2f} GFLOP/s")
    print(f"MFU: {achieved / peak:.1%}")


if __name__ == "__main__":
    main()
