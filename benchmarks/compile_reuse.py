"""One compile per architecture per process, and what CUDA graphs save a step: lone runs trained one after another.

In one process, compiled (`train.compile: true`, `--cuda-graphs` adds `train.cuda_graphs`): a first run, a second
run of the same architecture (another seed), then a run of another architecture (`relu`). For each it prints
`compile_s` (its first step: tracing and compiling where the process has no graph for its shapes yet) and the
milliseconds of its later steps (after `--warmup`), then the same steps eager for comparison. On a GPU, run it
once without and once with `--cuda-graphs`.

Run: python benchmarks/compile_reuse.py [--device cpu] [--model tiny|default] [--steps 50] [--cuda-graphs]
Needs $GPTLAB_DATA_DIR (or the user cache) to hold tinyshakespeare. Prints one line per run.
"""
from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from gptlab.run.config import resolve_run_config
from gptlab.run.data import load_run_dataset
from gptlab.run.device import configure_process
from gptlab.run.trainer import Trainer

MODELS = {"default": ({}, 12), "tiny": ({"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32}, 8)}


def timed(trainer: Trainer, warmup: int, steps: int) -> float:
    """Milliseconds a step over `steps` steps after `warmup` untimed ones (the first of which compiles)."""
    for step in range(warmup):
        trainer.train_step(step, record=False)
    if trainer.device.type == "cuda":
        torch.cuda.synchronize(trainer.device)
    tick = time.perf_counter()
    for step in range(warmup, warmup + steps):
        trainer.train_step(step, record=False)
    if trainer.device.type == "cuda":
        torch.cuda.synchronize(trainer.device)
    return (time.perf_counter() - tick) / steps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", choices=MODELS, default="tiny")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cuda-graphs", action="store_true", help="train.cuda_graphs: true (CUDA only)")
    args = parser.parse_args()
    configure_process(args.threads)
    shapes, batch = MODELS[args.model]
    train = {"device": args.device, "batch_size": batch, "compile": True, "cuda_graphs": args.cuda_graphs}
    cfg = resolve_run_config({"model": shapes, "train": train, "data": {"dataset": "tinyshakespeare"}})
    dataset = load_run_dataset(cfg.data)
    cfg = cfg.bind_vocab(dataset.tokenizer.vocab_size)
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, device {args.device}"
          f"{' (' + torch.cuda.get_device_name(device) + ')' if device.type == 'cuda' else ''}, model {args.model}, "
          f"cuda_graphs {args.cuda_graphs}")
    runs = {"first": cfg, "same architecture, seed 1": dataclasses.replace(cfg, seed=1),
            "another architecture (relu)": dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, activation="relu"))}
    for name, run in runs.items():
        trainer = Trainer(run, dataset, device)
        ms = timed(trainer, args.warmup, args.steps)
        eager = timed(Trainer(dataclasses.replace(run, train=dataclasses.replace(run.train, compile=False,
                                                                                 cuda_graphs=False)), dataset, device),
                      args.warmup, args.steps)
        print(f"{name}: compile_s {trainer.compile_s:.2f}, {ms:.2f} ms a step compiled, {eager:.2f} eager "
              f"({eager / ms:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
