"""How long one run of a sweep should take (for `--dry-run`), and a Trainer that writes nothing."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Mapping



def time_train_steps(trainer: Any, steps: int, warmup: int = 1) -> float:
    """Seconds per training step of `trainer`, timed over `steps` after `warmup` untimed ones.

    The steps really train the model; their losses are discarded, not logged.
    """
    for step in range(warmup + steps):
        if step == warmup:
            tick = time.perf_counter()
        trainer.train_step(step, record=False)
    return (time.perf_counter() - tick) / steps


def build_trainer(config: Mapping[str, Any], run_id: str = "estimate") -> Any:
    """A `Trainer` for `config` that writes nothing anywhere (for timing and benchmarks)."""
    from gptlab.run.config import resolve_run_config
    from gptlab.run.data import load_run_dataset
    from gptlab.run.device import resolve_device
    from gptlab.run.trainer import Trainer

    cfg = resolve_run_config(dict(config))
    dataset = load_run_dataset(cfg.data)
    return Trainer(cfg.bind_vocab(dataset.tokenizer.vocab_size), dataset, resolve_device(cfg.train.device), run_id=run_id)


@dataclass(frozen=True)
class StepTiming:
    """A run's cost measured on its first steps: seconds per training step and per full evaluation."""

    per_step: float  # one optimizer step
    per_eval: float  # one evaluation of the whole validation split

    def seconds(self, config: Mapping[str, Any], start: int = 0) -> float:
        """Seconds to train `config` from step `start` (a branch of a shared trunk starts at its cooldown)."""
        train = config["train"]
        steps = max(0, int(train["max_iters"]) - start)
        return steps * self.per_step + (steps // int(train["eval_interval"]) + 2) * self.per_eval


def time_run(config: Mapping[str, Any], steps: int = 6) -> StepTiming:
    """Time a few training steps of `config` and one evaluation batch (the split's batches scale it)."""
    from gptlab.run.evaluation import evaluate

    trainer = build_trainer(config)
    cfg = trainer.cfg
    per_step = time_train_steps(trainer, steps)
    window = cfg.train.eval_batch_size * cfg.model.block_size
    tick = time.perf_counter()
    evaluate(trainer.model, trainer.dataset.val[: window + 1], cfg.model.block_size, cfg.train.eval_batch_size,
             trainer.device, trainer.autocast)
    per_batch = time.perf_counter() - tick
    return StepTiming(per_step, math.ceil(len(trainer.dataset.val) / window) * per_batch)


def estimate_run_seconds(config: Mapping[str, Any], steps: int = 6) -> float:
    """Seconds one run of `config` should take, from timing its first few steps and one eval batch."""
    return time_run(config, steps).seconds(config)
