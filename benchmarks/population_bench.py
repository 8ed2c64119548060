"""Training steps per second: K runs of one architecture as one population against the same K runs one after another.

The lab's default model (4 layers x 128, block 64, batch 12: the scorecard's; `--model tiny`: the tests' 2 x 32,
where a step is mostly Python and kernel launches, as the scorecard's is on a GPU) on tinyshakespeare, members with
seeds 0..K-1 and lrs spread over 3e-4..3e-3. Only training steps are timed (no evaluation): each lone run and
the population first take `--warmup` untimed steps, then `--steps` timed ones. A member-step is one run's
optimizer step; the ratio is population member-steps/s over lone member-steps/s (above 1: the population wins).

Run: python benchmarks/population_bench.py [--members 4] [--steps 30] [--threads 1] [--device cpu] [--model tiny]
Needs $GPTLAB_DATA_DIR (or the user cache) to hold tinyshakespeare. Prints one line per side and the ratio.
"""
from __future__ import annotations

import argparse
import time
import warnings

import torch

from gptlab.run.config import resolve_run_config
from gptlab.run.data import load_run_dataset
from gptlab.run.population import Population
from gptlab.run.trainer import Trainer

MODELS = {"default": ({}, 12), "tiny": ({"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32}, 8)}


def configs(members: int, device: str, model: str = "default") -> list:
    lrs = [3e-4 * 10 ** (i / max(1, members - 1)) for i in range(members)]
    shapes, batch = MODELS[model]
    return [resolve_run_config({"model": shapes, "train": {"device": device, "lr": lr, "min_lr": lr / 10,
                                                           "batch_size": batch},
                                "data": {"dataset": "tinyshakespeare"}, "seed": k}) for k, lr in enumerate(lrs)]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def lone_rate(cfgs: list, dataset, device: torch.device, warmup: int, steps: int) -> float:
    """Member-steps per second of the runs trained one after another (timed steps only)."""
    seconds = 0.0
    for cfg in cfgs:
        trainer = Trainer(cfg, dataset, device)
        for step in range(warmup):
            trainer.train_step(step, record=False)
        sync(device)
        tick = time.perf_counter()
        for step in range(warmup, warmup + steps):
            trainer.train_step(step, record=False)
        sync(device)
        seconds += time.perf_counter() - tick
    return len(cfgs) * steps / seconds


def population_rate(cfgs: list, dataset, device: torch.device, warmup: int, steps: int) -> float:
    population = Population(cfgs, dataset, device)
    for step in range(warmup):
        population.train_step(step, record=False)
    sync(device)
    tick = time.perf_counter()
    for step in range(warmup, warmup + steps):
        population.train_step(step, record=False)
    sync(device)
    return len(cfgs) * steps / (time.perf_counter() - tick)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per run (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", choices=sorted(MODELS), default="default",
                        help="default: 4 x 128, block 64, batch 12 (the scorecard's); tiny: 2 x 32, block 32, batch 8")
    parser.add_argument("--repeat", type=int, default=2, help="alternating repeats of both sides (default 2)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="There is a performance drop")  # vmap's attention fallback
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cfgs = configs(args.members, args.device, args.model)
    dataset = load_run_dataset(cfgs[0].data)
    cfgs = [c.bind_vocab(dataset.tokenizer.vocab_size) for c in cfgs]
    print(f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, "
          f"model {args.model}, {args.members} members, {args.steps} timed steps each")
    lone, pop = [], []
    for _ in range(args.repeat):  # alternated: load from other work on the machine hits both sides alike
        lone.append(lone_rate(cfgs, dataset, device, args.warmup, args.steps))
        pop.append(population_rate(cfgs, dataset, device, args.warmup, args.steps))
    print("lone runs one after another: " + ", ".join(f"{r:.1f}" for r in lone) + " member-steps/s")
    print("one population:              " + ", ".join(f"{r:.1f}" for r in pop) + " member-steps/s")
    print("population / lone: " + ", ".join(f"{p / lo:.2f}x" for p, lo in zip(pop, lone)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
