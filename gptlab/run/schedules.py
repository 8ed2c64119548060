"""Axis `train.schedule`: the learning rate after the warmup, and the registry of schedules (`SCHEDULES`).

An entry is a `Schedule` subclass registered with `@SCHEDULES.register("name")` (a plugin's too):
`lr(step, train)` is the learning rate at a step past the warmup (`gptlab.run.trainer.lr_at` adds
the warmup), `check(train)` refuses settings it cannot train (resolution calls it, so a bad sweep
fails before it starts). `uses_cooldown` says whether `train.cooldown_fraction` means anything to
it: a run's identity drops it where not, as it drops a char run's vocab_size. `shares_trunk` says
its lr before `cooldown_start` does not depend on `max_iters`, so runs of several lengths train
one trunk (`gptlab.sweep.trunks`). Shipped: `cosine` and `wsd` (warmup-stable-decay, Hägele et al. 2024).
"""
from __future__ import annotations

import math
from typing import ClassVar, Protocol

from gptlab.errors import GptlabError
from gptlab.registry import Registry

WSD = "wsd"  # the schedule a `worth:` study trains its lengths with (its trunks shared)


class TrainSettings(Protocol):
    """What a schedule reads of a run's `train` section (a `gptlab.run.config.TrainConfig`, which checks its names here)."""

    max_iters: int
    lr: float
    min_lr: float
    warmup_iters: int
    lr_decay_iters: int | None
    cooldown_fraction: float

    @property
    def cooldown_start(self) -> int: ...


class Schedule:
    """A learning-rate schedule after the warmup (this base: a constant `lr`); an entry overrides `lr`, and `check`."""

    uses_cooldown: ClassVar[bool] = True  # reads train.cooldown_fraction (the safe default: it enters the run's identity)
    shares_trunk: ClassVar[bool] = False  # its lr before cooldown_start does not depend on max_iters (a branch point)

    @staticmethod
    def lr(step: int, train: TrainSettings) -> float:
        """The learning rate at `step` (>= warmup_iters)."""
        return train.lr

    @staticmethod
    def check(train: TrainSettings) -> None:
        """Raise `GptlabError`, naming the `train.*` key, for settings this schedule cannot train."""


SCHEDULES: Registry[type[Schedule]] = Registry("schedule", "learning rate after the warmup")


@SCHEDULES.register("cosine")
class Cosine(Schedule):
    """Cosine decay over the whole run to min_lr (at lr_decay_iters, default max_iters)."""

    uses_cooldown = False

    @staticmethod
    def lr(step: int, train: TrainSettings) -> float:
        decay_iters = train.lr_decay_iters or train.max_iters
        if step >= decay_iters:
            return train.min_lr
        progress = (step - train.warmup_iters) / max(1, decay_iters - train.warmup_iters)
        return train.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (train.lr - train.min_lr)


@SCHEDULES.register(WSD)
class WarmupStableDecay(Schedule):
    """Constant, then a 1-sqrt cooldown to min_lr over the last cooldown_fraction (warmup-stable-decay)."""

    shares_trunk = True  # that is what lets runs of several lengths share their stable trunk

    @staticmethod
    def lr(step: int, train: TrainSettings) -> float:
        start = train.cooldown_start
        if step < start:
            return train.lr
        progress = min(1.0, (step - start) / (train.max_iters - start))
        return train.min_lr + (train.lr - train.min_lr) * (1.0 - math.sqrt(progress))

    @staticmethod
    def check(train: TrainSettings) -> None:
        # wsd's decay always ends at max_iters: a second knob for it would only make runs of one
        # length differ in where their cooldown lands, and break the shared trunks of a length sweep.
        if train.lr_decay_iters is not None:
            raise GptlabError("train.lr_decay_iters is the cosine's; with train.schedule wsd the cooldown ends at "
                              "train.max_iters (set train.cooldown_fraction instead, or remove lr_decay_iters)")
        if train.cooldown_start == train.max_iters:
            raise GptlabError(f"train.cooldown_fraction {train.cooldown_fraction} x train.max_iters {train.max_iters} "
                              "rounds to no cooldown step: raise either")
        if train.warmup_iters > train.cooldown_start:
            raise GptlabError(f"train.warmup_iters ({train.warmup_iters}) must end before the wsd cooldown starts at "
                              f"step {train.cooldown_start} (train.max_iters - train.cooldown_fraction x max_iters)")
