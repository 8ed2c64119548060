"""How long one run of a sweep should take (for `--dry-run`), and a Trainer that writes nothing."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

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


def time_run(config: RunConfig, steps: int = 6) -> StepTiming:
    """Time a few training steps of `config` and one evaluation batch (the split's batches scale it)."""
    from gptlab.run.evaluation import evaluate

    trainer = build_trainer(config, stand_in=True)
    cfg = trainer.cfg
    per_step = time_train_steps(trainer, steps)
    window = cfg.train.eval_batch_size * cfg.model.block_size
    tick = time.perf_counter()
    evaluate(trainer.model, trainer.dataset.val[: window + 1], cfg.model.block_size, cfg.train.eval_batch_size,
             trainer.device, trainer.autocast)
    per_batch = time.perf_counter() - tick
    val_tokens = trainer.dataset.val_chars_scored + 1 if cfg.data.tokenizer == "char" else len(trainer.dataset.val)
    return StepTiming(per_step, math.ceil(val_tokens / window) * per_batch)
