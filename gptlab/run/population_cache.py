"""One step function per architecture per worker: a population's batched loss, built (and compiled) once per shapes.

A population's step is a function of its stacked parameters, not of a module instance: `functional_call`
over a template model, under `vmap`. Every population of one architecture (the same `ModelConfig`, vocabulary
bound) on one device can therefore share one template and one step, and, where it is compiled, one
compilation: a worker that trains several populations of the same shapes pays for the compile once
(issue 43: a compile is 10-20 s on a GPU, a large share of a short run). `StepCache` holds them; `STEP_CACHE`
is the worker's (one per process). The first step through a compiled step is timed (`compile_s`): the share
of a sweep's wall time spent compiling is that sum over its workers.
"""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Callable

import torch
from torch.func import functional_call, vmap

from gptlab.model import GPT, ModelConfig, build_model
from gptlab.run.compiled import compiled

log = logging.getLogger("gptlab.train")

Compiler = Callable[[Callable[..., torch.Tensor]], Callable[..., torch.Tensor]]


@dataclass(frozen=True)
class StepKey:
    """What a step depends on: the architecture (shapes and axes, dropout included), the device, the compile."""

    model: ModelConfig
    device: str
    compiled: bool


@dataclass
class PopulationStep:
    """A template model (its own parameter values are never used by the step) and the batched loss over it."""

    template: GPT
    buffers: dict[str, torch.Tensor]
    loss: Callable[..., torch.Tensor]  # (params stacked (K, ...), buffers, x (K, B, T), y (K, B, T)) -> (K,)
    compiled: bool = False
    calls: int = 0
    compile_s: float = 0.0  # the first step through a compiled loss: tracing and compiling forward and backward
    evaluator: GPT | None = None  # `eval_model`'s copy of the template

    def __call__(self, params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.loss(params, self.buffers, x, y)

    def note_first_step(self, seconds: float) -> None:
        """The caller timed the first whole step (forward and backward) through this step: where it is compiled,
        that is the compile's time (the backward is compiled at its first call, outside this function)."""
        if self.compiled and self.calls == 1:
            self.compile_s = seconds


def batched_loss(template: GPT) -> Callable[..., torch.Tensor]:
    """The members' training losses (K,) in one call: each member's own parameters on its own batch.

    Dropout draws differ per member (`randomness="different"`); they are drawn from the global generator
    for the whole population, so they are not the draws of the member's lone run (docs/GPU.md).
    """
    def member_loss(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], x: torch.Tensor,
                    y: torch.Tensor) -> torch.Tensor:
        return functional_call(template, (params, buffers), (x, y))[1]

    return vmap(member_loss, in_dims=(0, None, 0, 0), randomness="different")


class StepCache:
    """Population steps by `StepKey`; `compiler` compiles a step (`compiled`, torch.compile's default mode, unless given)."""

    def __init__(self, compiler: Compiler | None = None) -> None:
        self.compiler = compiler
        self.entries: dict[StepKey, PopulationStep] = {}
        self.builds = 0

    def get(self, model: ModelConfig, device: torch.device, compiled: bool) -> PopulationStep:
        key = StepKey(model, str(device), compiled)
        if key not in self.entries:
            self.entries[key] = self._build(key, device)
            self.builds += 1
        return self.entries[key]

    def _build(self, key: StepKey, device: torch.device) -> PopulationStep:
        with torch.random.fork_rng(devices=[]):  # the template's init must not move the members' RNG
            template = build_model(key.model).to(device)
        template.requires_grad_(False)
        loss = batched_loss(template)
        if key.compiled:
            loss = (self.compiler or compiled)(loss)
            log.info("compiled a population step for %s on %s", key.model, key.device)
        buffers = {name: b for name, b in template.named_buffers()}
        return PopulationStep(template, buffers, loss, compiled=key.compiled)

    def compile_s(self) -> float:
        """Seconds spent in first steps through compiled steps in this process (the compile share's numerator)."""
        return sum(step.compile_s for step in self.entries.values())

    def clear(self) -> None:
        self.entries.clear()


STEP_CACHE = StepCache()  # this process's steps: a worker reuses them across the populations it trains


def eval_model(step: PopulationStep) -> GPT:
    """A model to evaluate members in (a deep copy of the template: loading a member into it leaves the step alone)."""
    if step.evaluator is None:
        step.evaluator = copy.deepcopy(step.template)
    return step.evaluator
