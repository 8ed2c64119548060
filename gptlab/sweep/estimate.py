"""How long one run of a sweep should take (for `--dry-run`), and a Trainer that writes nothing.

A run is timed beside as many others as the sweep trains at once (`companions`): on a CPU the workers share
the memory bandwidth and the caches, so a step side by side is slower than alone (measured on a 2-core VM:
134 ms against 110 ms), and a dry run that timed one process alone promised too little.

The timing leaves out `torch.compile`'s own time (the timed steps come after the first, which compiles), and a
compiled sweep's workers each compile every architecture they train once: `compile_seconds` adds that, at a
stated figure (`FIRST_COMPILE_S`, `NEXT_COMPILE_S`), where it was missing (a sweep timed at 1 s trained 54 s).
"""
from __future__ import annotations

import contextlib
import math
import multiprocessing
import signal
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from gptlab.run.config import RunConfig


def time_train_steps(trainer: Any, steps: int, warmup: int = 1) -> float:
    """Seconds per training step of `trainer`, timed over `steps` after `warmup` untimed ones.

    The steps really train the model; their losses are discarded, not logged.
    """
    for step in range(warmup + steps):
        if step == warmup:
            tick = time.perf_counter()
        trainer.train_step(step, record=False)
    return (time.perf_counter() - tick) / steps


def build_trainer(config: RunConfig, run_id: str = "estimate", stand_in: bool = False) -> Any:
    """A `Trainer` for `config` that writes nothing anywhere (for timing and benchmarks).

    `stand_in`: a char-tokenized corpus is replaced by random ids of its vocabulary (`stand_in_dataset`).
    """
    from gptlab.run.data import load_run_dataset
    from gptlab.run.device import resolve_device
    from gptlab.run.trainer import Trainer

    dataset = stand_in_dataset(config) if stand_in and config.data.tokenizer == "char" else load_run_dataset(config.data)
    return Trainer(config.bind_vocab(dataset.tokenizer.vocab_size), dataset, resolve_device(config.train.device),
                   run_id=run_id)


def stand_in_dataset(cfg: RunConfig) -> Any:
    """Random ids of a char corpus's vocabulary: at most 2^20 for training, one evaluation batch for validation
    (`val_chars_scored` keeps the real split's size, which is its tokens less one).

    A step costs the same whatever the ids, and the model is the run's (the same vocabulary, from
    one bounded-memory scan), so timing needs neither the text nor its ids: a dry run of a 300 MB
    corpus would otherwise hold about 3.5 GB.
    """
    import torch

    from gptlab.run.data import TextDataset, resolve_dataset, split_points
    from gptlab.run.textscan import scan_corpus
    from gptlab.run.tokenizers import CharTokenizer

    scan = scan_corpus(resolve_dataset(cfg.data.dataset, cfg.data.path).resolve())
    start_val, start_test = split_points(scan.chars, cfg.data.val_fraction, cfg.data.test_fraction)
    tokenizer, ids = CharTokenizer(scan.vocab), torch.Generator().manual_seed(0)
    train = torch.randint(len(scan.vocab), (min(start_val, 2**20),), generator=ids)
    batch = cfg.train.eval_batch_size * cfg.model.block_size + 1
    val = torch.randint(len(scan.vocab), (min(start_test - start_val, batch),), generator=ids)
    return TextDataset(tokenizer, train, val, max(start_test - start_val - 1, 1))


@dataclass(frozen=True)
class StepTiming:
    """A run's cost measured on its first steps: seconds per training step and per full evaluation."""

    per_step: float  # one optimizer step
    per_eval: float  # one evaluation of the whole validation split

    def seconds(self, config: RunConfig, start: int = 0) -> float:
        """Seconds to train `config` from step `start` (a branch of a shared trunk starts at its cooldown)."""
        steps = max(0, config.train.max_iters - start)
        return steps * self.per_step + (steps // config.train.eval_interval + 2) * self.per_eval


# A worker's compiles, measured by benchmarks/compile_reuse.py on the lab's 2-core CPU VM (torch 2.13.0+cpu, inductor,
# cold caches, the tests' tiny model; benchmarks/README.md "One compile per architecture", docs/GPU.md): a process's
# first run 22.00 s (the compiler's own start in it), a second architecture after it 4.03 s, a run of an
# architecture it has compiled 0.00 s. A larger model, or a GPU, compiles for longer or shorter: a figure, not a timing.
FIRST_COMPILE_S = 22.0
NEXT_COMPILE_S = 4.0


def compiles(configs: Sequence[RunConfig], workers: int) -> int:
    """How many compiles the workers make for `configs`' runs: each worker compiles each architecture it trains once,
    and an architecture's runs are taken to be spread over every worker (the most compiles); 0 where none compiles."""
    from gptlab.run.compiled import compile_mode
    from gptlab.run.device import resolve_device

    devices = {name: resolve_device(name) for name in {c.train.device for c in configs}}
    runs = Counter((c.model, c.train.batch_size, c.train.device) for c in configs
                   if compile_mode(c.train, devices[c.train.device]) is not None)
    return sum(min(max(1, workers), n) for n in runs.values())


def compile_seconds(n_compiles: int, workers: int) -> float:
    """The seconds `n_compiles` take over all the workers: each worker's first at `FIRST_COMPILE_S`, the rest at
    `NEXT_COMPILE_S`."""
    first = min(max(1, workers), n_compiles)
    return first * FIRST_COMPILE_S + (n_compiles - first) * NEXT_COMPILE_S


def time_run(config: RunConfig, steps: int = 6, companions: int = 0, threads: int = 1) -> StepTiming:
    """Time a few training steps of `config` and one evaluation batch (the split's batches scale it), with
    `companions` other processes training the same model meanwhile (each on `threads` threads), as the sweep's
    other workers will be."""
    from gptlab.run.evaluation import evaluate

    trainer = build_trainer(config, stand_in=True)
    cfg = trainer.cfg
    trainer.train_step(0, record=False)  # first: a forked companion inherits what it imports (torch's optimizer
    # imports torch._dynamo at its first step: seconds a companion would otherwise spend before it trains)
    with side_by_side(config, companions, threads):
        per_step = time_train_steps(trainer, steps)
        window = cfg.train.eval_batch_size * cfg.model.block_size
        tick = time.perf_counter()
        evaluate(trainer.model, trainer.dataset.val[: window + 1], cfg.model.block_size, cfg.train.eval_batch_size,
                 trainer.device, trainer.autocast)
        per_batch = time.perf_counter() - tick
    val_tokens = trainer.dataset.val_chars_scored + 1 if cfg.data.tokenizer == "char" else len(trainer.dataset.val)
    return StepTiming(per_step, math.ceil(val_tokens / window) * per_batch)


COMPANION_LIMIT_S = 600.0  # a companion stops by itself after this long, whatever becomes of the dry run


@contextlib.contextmanager
def side_by_side(config: RunConfig, companions: int, threads: int) -> Iterator[None]:
    """While inside, `companions` processes train `config`'s model (stand-in data, nothing written), each
    built and past its first step before the block starts; they are stopped and reaped on the way out.

    Forked where each runs on one thread (fast, as torch's own DataLoader workers are), spawned otherwise:
    an OpenMP pool a parent used is not safe to use again in a forked child."""
    if companions <= 0:
        yield
        return
    ctx = multiprocessing.get_context("fork" if threads == 1 else "spawn")
    ready, stop = ctx.Barrier(companions + 1), ctx.Event()
    procs = [ctx.Process(target=_companion, args=(config, threads, ready, stop), daemon=True)
             for _ in range(companions)]
    try:
        for proc in procs:
            proc.start()
        ready.wait(timeout=COMPANION_LIMIT_S)
        yield
    finally:
        stop.set()
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join()


def _companion(config: RunConfig, threads: int, ready: Any, stop: Any) -> None:
    """One of `side_by_side`'s processes: build, step once, meet the others, then train until told to stop."""
    from gptlab.run.device import configure_process

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the dry run's to handle; it stops us
    configure_process(threads)
    trainer = build_trainer(config, stand_in=True)
    trainer.train_step(0, record=False)
    ready.wait(timeout=COMPANION_LIMIT_S)
    start, step = time.monotonic(), 1
    while not stop.is_set() and time.monotonic() - start < COMPANION_LIMIT_S:
        trainer.train_step(step, record=False)
        step += 1
