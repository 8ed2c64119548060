"""Populations: K runs of one architecture trained as one batched model, each member trained as its lone run would be.

`Population(cfgs, dataset, device)` takes K run configs that share their `ModelConfig` (and the settings that
fix a step's shapes and timing: max_iters, batch_size, eval/log intervals, device, dtype) and may differ in
seed, lr, min_lr, warmup, schedule, weight decay and grad clipping. Each member gets what its lone `Trainer`
would: its initialisation (`build_model` after `torch.manual_seed(seed)`), its batches (`BatchSampler` of its
seed), its lr at every step (`lr_at`), its own gradient clipping and AdamW update (`population_optim`), its
metrics rows, evaluations (in a plain model holding its weights: the lone run's numbers), best step and test
loss. The parameters are stacked (`torch.func.stack_module_state`) and the step is one `vmap`ped
`functional_call` (`population_cache`). A member whose loss goes non-finite is frozen at once on the device
(no host sync), recorded `diverged` at that step at its next row, and the others train on untouched.
Dropout masks are the member's own but not its lone run's draws (docs/GPU.md). "Reproducing" holds to float
rounding over the first steps (1e-5 nats over the tests' 10); training amplifies that rounding, so over a whole
run a member ends measurably away from its lone run (docs/GPU.md has the figures), and a sweep plans a member
under an id of its own (`RunConfig.population`).
"""
from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from torch.func import stack_module_state

from gptlab.errors import GptlabError
from gptlab.model import build_model
from gptlab.run.compiled import compile_mode
from gptlab.run.config import RunConfig
from gptlab.run.data import BatchSampler, TextDataset
from gptlab.run.device import autocast_for
from gptlab.run.evaluation import evaluate, evaluate_per_target, test_blocks
from gptlab.run.population_cache import STEP_CACHE, StepCache, eval_model
from gptlab.run.population_optim import StackedAdamW, clip_per_member, max_norms
from gptlab.run.trainer import Outcome, lr_at, make_optimizer
from gptlab.statuses import DIVERGED, OK

log = logging.getLogger("gptlab.train")

# Train settings every member must share: they fix the step's shapes, its device, or when rows and evaluations
# come. The others (lr, min_lr, warmup_iters, lr_decay_iters, schedule, cooldown_fraction, weight_decay,
# grad_clip) are per member.
SHARED_TRAIN = ("max_iters", "batch_size", "eval_interval", "eval_batch_size", "log_interval", "device", "dtype",
                "compile", "beta1", "beta2")


def population_key(config: RunConfig, auto: bool) -> tuple[Any, ...] | None:
    """What runs of one population share (None: the run trains alone): its model, data and shared train settings
    (`check_population`'s rule); under `auto` a dropout run stays alone (its masks are not its lone run's)."""
    if (auto and config.model.dropout > 0) or config.train.cuda_graphs:  # a population's step is not captured as graphs
        return None
    return config.model, config.data, tuple(getattr(config.train, name) for name in SHARED_TRAIN)


def check_population(cfgs: Sequence[RunConfig]) -> None:
    """Refuse configs that cannot train as one population, naming the first setting that differs."""
    if not cfgs:
        raise GptlabError("a population needs at least one run config")
    first = cfgs[0]
    graphs = next((i for i, cfg in enumerate(cfgs) if cfg.train.cuda_graphs), None)
    if graphs is not None:
        raise GptlabError(f"population member {graphs}: train.cuda_graphs is set; a population's step is compiled without "
                          "CUDA graphs, so such a run trains alone")
    for i, cfg in enumerate(cfgs[1:], start=1):
        if cfg.model != first.model:
            raise GptlabError(f"population member {i}: model {cfg.model} differs from member 0's {first.model}; "
                              "only runs of one architecture train as one population")
        if cfg.data != first.data:
            raise GptlabError(f"population member {i}: its data section differs from member 0's")
        for name in SHARED_TRAIN:
            if getattr(cfg.train, name) != getattr(first.train, name):
                raise GptlabError(f"population member {i}: train.{name} {getattr(cfg.train, name)!r} differs from "
                                  f"member 0's {getattr(first.train, name)!r}; members share it")


@dataclass
class Member:
    """One member's record, as its lone `Trainer` keeps it."""

    cfg: RunConfig
    run_id: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    best_val_loss: float = math.inf
    best_step: int = -1
    best_test_loss: float | None = None
    best_test_blocks: list[dict[str, Any]] | None = None
    outcome: Outcome | None = None  # set when it stops: diverged at a row, or ok at max_iters

    @property
    def training(self) -> bool:
        return self.outcome is None


class Population:
    """K members trained as one batched model; `run()` trains them to `max_iters` and returns their outcomes."""

    def __init__(self, cfgs: Sequence[RunConfig], dataset: TextDataset, device: torch.device,
                 run_ids: Sequence[str] | None = None, cache: StepCache | None = None) -> None:
        cfgs = [c if c.vocab_size is not None else c.bind_vocab(dataset.tokenizer.vocab_size) for c in cfgs]
        check_population(cfgs)
        self.dataset, self.device = dataset, device
        run_ids = list(run_ids) if run_ids is not None else [f"member{k}" for k in range(len(cfgs))]
        if len(run_ids) != len(cfgs):
            raise GptlabError(f"a population of {len(cfgs)} run configs needs {len(cfgs)} run ids, got {len(run_ids)}")
        self.members = [Member(c, rid) for c, rid in zip(cfgs, run_ids)]
        t = cfgs[0].train
        self.train_cfg = t
        self.autocast = autocast_for(device, t.dtype)
        models = []
        for cfg in cfgs:  # each member's init is the one its lone run draws from its seed
            torch.manual_seed(cfg.seed)
            models.append(build_model(cfg.model).to(device))
        self.step_fn = (cache or STEP_CACHE).get(cfgs[0].model, device, compile_mode(t, device) is not None)
        params, _ = stack_module_state(models)  # unique names: a tied matrix once, as the lone optimizer has it
        self.params: dict[str, torch.Tensor] = params
        per_member = {name: p for name, p in models[0].named_parameters()}
        self.optimizer = StackedAdamW(list(params.values()), [per_member[n].dim() >= 2 for n in params],
                                      self._tensor([c.train.weight_decay for c in cfgs]), (t.beta1, t.beta2))
        self.max_norm = max_norms([c.train.grad_clip for c in cfgs], device)
        self.samplers = [BatchSampler(dataset.train, c.model.block_size, t.batch_size, c.seed, device) for c in cfgs]
        self.active = torch.ones(len(cfgs), dtype=torch.bool, device=device)  # on the device: frozen without a sync
        self.step = 0
        self.elapsed_s = self.train_s = self.eval_s = 0.0
        size = min(t.log_interval, t.eval_interval, t.max_iters)
        self._losses = torch.zeros(size, len(cfgs), device=device)
        self._grad_norms = torch.zeros_like(self._losses)
        self._pending = 0
        self.resumed = False
        # Objects with `on_rows(population, step, is_eval)` (after a step's rows and evaluations) and
        # `on_step(population)` (after each step), either optional: the run folders' writer, a worker's driver watch.
        self.callbacks: list[Any] = []

    @property
    def size(self) -> int:
        return len(self.members)

    def _tensor(self, values: Sequence[float]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.float32, device=self.device)

    # -- the loop ----------------------------------------------------------------------------
    def run(self, stop_at: int | None = None) -> list[Outcome | None]:
        """Train every member to max_iters (or until it diverges); the rows and bests sit in `members`.

        `stop_at`: stop at that step instead, its row and evaluation done (where a lone run's checkpoint
        resumes): the members still training then have no outcome yet (None)."""
        t = self.train_cfg
        log.info("population of %d: %s, device %s", self.size, self.members[0].cfg.model, self.device)
        start = time.perf_counter() - self.elapsed_s
        skip_bookkeeping = self.resumed  # a resumed state was taken after its step's row
        while True:
            step = self.step
            is_eval = step > 0 and (step % t.eval_interval == 0 or step == t.max_iters)
            if not skip_bookkeeping and step > 0 and (is_eval or step % t.log_interval == 0):
                self._bookkeeping(step, is_eval, start)
                self._call("on_rows", step, is_eval)
            skip_bookkeeping = False
            if step in (t.max_iters, stop_at) or not any(m.training for m in self.members):
                break
            self.train_step(step)
            self.step += 1
            self.elapsed_s = time.perf_counter() - start
            self._call("on_step")
        for m in self.members:
            if m.training and self.step == t.max_iters:
                m.outcome = Outcome(OK, None)
        self.elapsed_s = time.perf_counter() - start
        return [m.outcome for m in self.members]

    def _call(self, name: str, *args: Any) -> None:
        for callback in self.callbacks:
            if hasattr(callback, name):
                getattr(callback, name)(self, *args)

    def train_step(self, step: int, record: bool = True) -> None:
        """One step of every member on its own batch of `step`; frozen members' parameters do not move."""
        tick = time.perf_counter()
        lrs = self._tensor([lr_at(step, m.cfg.train) for m in self.members])
        batches = [s.batch(step) for s in self.samplers]
        x = torch.stack([b[0] for b in batches])
        y = torch.stack([b[1] for b in batches])
        with self.autocast:
            losses = self.step_fn(self.params, x, y)  # (K,)
        detached = losses.detach()
        self.active &= torch.isfinite(detached)  # a non-finite loss freezes its member from this step on
        # Each member's gradient is that of its own loss: the sum couples nothing. A frozen member's loss is
        # left out so that its (maybe non-finite) graph sends no gradient.
        torch.where(self.active, losses, torch.zeros_like(losses)).sum().backward()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params.values()]
        norms = clip_per_member(grads, self.max_norm)
        for p, g in zip(self.params.values(), grads):
            p.grad = g
        self.optimizer.step(lrs, self.active)
        self.optimizer.zero_grad()
        if record:  # `record=False` discards the losses (timing)
            self._losses[self._pending] = detached
            self._grad_norms[self._pending] = norms
            self._pending += 1
        self.step_fn.note_first_step(time.perf_counter() - tick)
        self.train_s += time.perf_counter() - tick

    def _bookkeeping(self, step: int, is_eval: bool, start: float) -> None:
        """Each training member's metrics row for `step` (one host sync for all), its evaluation, its stop."""
        losses = self._losses[: self._pending].T.tolist()  # (K, pending)
        norms = self._grad_norms[: self._pending].T.tolist()
        first_step = step - self._pending
        self._pending = 0
        t = self.train_cfg
        for k, m in enumerate(self.members):
            if not m.training:
                continue
            diverged = next((first_step + i + 1 for i, v in enumerate(losses[k]) if not math.isfinite(v)), None)
            row = {
                "step": step,
                "train_loss": sum(losses[k]) / len(losses[k]) if losses[k] else None,
                "val_loss": None,
                "lr": lr_at(max(step - 1, 0), m.cfg.train),
                "grad_norm": sum(norms[k]) / len(norms[k]) if norms[k] else None,
                "tokens": step * t.batch_size * m.cfg.model.block_size,
                "elapsed_s": round(time.perf_counter() - start, 3),
            }
            if diverged is None and is_eval:
                row["val_loss"] = self.evaluate(k)
            m.rows.append(row)
            if diverged is not None:
                log.warning("population member %s diverged at step %d (non-finite loss); the others go on",
                            m.run_id, diverged)
                m.outcome = Outcome(DIVERGED, diverged)
                continue
            if is_eval and row["val_loss"] < m.best_val_loss:
                m.best_val_loss, m.best_step = row["val_loss"], step
                if self.dataset.test is not None:
                    self._evaluate_test(k)

    # -- members -----------------------------------------------------------------------------
    @torch.no_grad()
    def member_model(self, k: int) -> torch.nn.Module:
        """A plain model holding member k's weights now (shared scratch: copy it to keep it)."""
        model = eval_model(self.step_fn)
        for name, p in model.named_parameters():  # unique names: a tied matrix is loaded once
            p.copy_(self.params[name][k])
        return model

    def member_state(self, k: int) -> dict[str, torch.Tensor]:
        """Member k's weights as its lone run's `model.state_dict()` has them (tied names both present)."""
        return {name: v.detach().clone() for name, v in self.member_model(k).state_dict().items()}

    def _lone_model(self, k: int) -> torch.nn.Module:
        """A model of its own holding member k's weights, trainable as the lone run's (its optimizer's groups)."""
        return copy.deepcopy(self.member_model(k)).requires_grad_(True)

    def member_trainer_state(self, k: int) -> dict[str, Any]:
        """Member k as its lone `Trainer.state_dict()` has it: a lone run resumes it from here (it finishes alone),
        and `resume` takes it back (a killed population resumed from its members' checkpoints)."""
        m = self.members[k]
        model = self._lone_model(k)
        optimizer = make_optimizer(model, m.cfg.train, self.device)
        names = {id(p): name for name, p in model.named_parameters()}
        moments = self.optimizer.member_state(k)
        index = {name: i for i, name in enumerate(self.params)}
        for group in optimizer.param_groups:
            for p in group["params"]:
                i = index[names[id(p)]]
                optimizer.state[p] = {"step": torch.tensor(moments["step"], dtype=torch.float32, device=self.device),
                                      "exp_avg": moments["exp_avg"][i], "exp_avg_sq": moments["exp_avg_sq"][i]}
        return {
            "model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": self.step, "rows": list(m.rows),
            "best_val_loss": m.best_val_loss, "best_step": m.best_step, "best_test_loss": m.best_test_loss,
            "best_test_blocks": m.best_test_blocks, "times": [self.elapsed_s, self.train_s, self.eval_s],
            "pending": {"losses": self._losses[: self._pending, k].cpu(),
                        "grad_norms": self._grad_norms[: self._pending, k].cpu()},
            "rng": {"cpu": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "config": m.cfg.to_dict(), "tokenizer": self.dataset.tokenizer.to_state(),
        }

    @torch.no_grad()
    def resume(self, states: Sequence[dict[str, Any]]) -> None:
        """Load every member from a lone-run state (`member_trainer_state`, or a lone run's checkpoint) of one step."""
        steps = {s["step"] for s in states}
        if len(states) != self.size or len(steps) != 1:
            raise GptlabError(f"a population of {self.size} resumes from one state per member, all at one step; "
                              f"got {len(states)} at steps {sorted(steps)}")
        for k, (m, state) in enumerate(zip(self.members, states)):
            model = self._lone_model(k)
            model.load_state_dict(state["model"])
            optimizer = make_optimizer(model, m.cfg.train, self.device)
            optimizer.load_state_dict(state["optimizer"])
            index = {name: i for i, name in enumerate(self.params)}
            for name, p in model.named_parameters():
                self.params[name][k] = p
                saved = optimizer.state[p]
                self.optimizer.exp_avg[index[name]][k] = saved["exp_avg"]
                self.optimizer.exp_avg_sq[index[name]][k] = saved["exp_avg_sq"]
                self.optimizer.steps[k] = float(saved["step"])
            m.rows, m.best_val_loss, m.best_step = list(state["rows"]), state["best_val_loss"], state["best_step"]
            m.best_test_loss, m.best_test_blocks = state.get("best_test_loss"), state.get("best_test_blocks")
            pending = state["pending"]["losses"]
            self._losses[: len(pending), k] = pending.to(self.device)
            self._grad_norms[: len(pending), k] = state["pending"]["grad_norms"].to(self.device)
            self._pending = len(pending)
        self.step = steps.pop()
        self.elapsed_s, self.train_s, self.eval_s = states[0]["times"]
        torch.set_rng_state(states[0]["rng"]["cpu"])
        self.resumed = True
        log.info("resumed a population of %d from step %d", self.size, self.step)

    def evaluate(self, k: int) -> float:
        """Member k's validation loss, computed as its lone run computes it."""
        tick = time.perf_counter()
        val = evaluate(self.member_model(k), self.dataset.val, self.members[k].cfg.model.block_size,
                       self.train_cfg.eval_batch_size, self.device, self.autocast)
        self.eval_s += time.perf_counter() - tick
        return val

    def _evaluate_test(self, k: int) -> None:
        tick = time.perf_counter()
        losses = evaluate_per_target(self.member_model(k), self.dataset.test, self.members[k].cfg.model.block_size,
                                     self.train_cfg.eval_batch_size, self.device, self.autocast)
        self.members[k].best_test_blocks = test_blocks(losses, self.dataset.test, self.dataset.tokenizer)
        self.members[k].best_test_loss = losses.mean().item()
        self.eval_s += time.perf_counter() - tick
