"""The training loop alone: `Trainer` (steps, evaluations, schedule) and the callbacks it calls.

AdamW (decay on matrices only), linear warmup then a `train.schedule` (`gptlab.run.schedules`), gradient clipping,
and evaluation on the full validation split every `eval_interval` steps (and on the test split,
when the data has one, wherever validation improves: the test loss at the best validation step).
A non-finite training loss ends the loop with status `diverged` (a result, not a crash). The loop
knows nothing about files: what happens at a metrics row or an evaluation (writing metrics, checkpoints, progress)
is a `TrainerCallback`'s job, in the style of minGPT's trainer. `state_dict()` holds everything
needed to resume (model, optimizer, step, RNG state, rows), so a resumed loop reproduces the
losses of one never interrupted.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

import torch

from gptlab.model import GPT, build_model
from gptlab.run.compiled import GRAPHS, compile_mode, compiled
from gptlab.run.config import RunConfig, TrainConfig
from gptlab.run.data import BatchSampler, TextDataset
from gptlab.run.device import autocast_for
from gptlab.run.evaluation import evaluate, evaluate_per_target, test_blocks
from gptlab.run.schedules import SCHEDULES
from gptlab.statuses import DIVERGED, OK

log = logging.getLogger("gptlab.train")


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to `lr` over `warmup_iters`, then the schedule `train.schedule` names."""
    if step < cfg.warmup_iters:
        return cfg.lr * (step + 1) / (cfg.warmup_iters + 1)
    return SCHEDULES.get(cfg.schedule).lr(step, cfg)


def make_optimizer(model: GPT, cfg: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW decaying only matrices (>= 2 dims): biases and norm gains are not shrunk toward 0."""
    params = [p for p in model.parameters() if p.requires_grad]  # unique: a tied matrix once
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    # One fused kernel for the whole update (CPU and CUDA): ~3.5x faster than the foreach path
    # on the nanoGPT CPU model, equal to it within float rounding (tests/scenarios/test_fastpaths.py).
    fused = device.type in ("cpu", "cuda")
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), fused=fused)


class TrainerCallback:
    """What happens around the loop; every method is optional (the defaults do nothing)."""

    def on_row(self, trainer: "Trainer", row: dict[str, Any]) -> None:
        """A metrics row was appended to `trainer.rows` (its val_loss is set at an evaluation)."""

    def on_evaluation(self, trainer: "Trainer", val_loss: float, improved: bool) -> None:
        """An evaluation finished; `improved`: it is the best validation loss so far."""

    def on_step(self, trainer: "Trainer") -> None:
        """A training step finished (`trainer.step` counts it); keep this cheap."""

    def before_step(self, trainer: "Trainer") -> None:
        """Step `trainer.step` is about to train, its metrics row and evaluation done: `state_dict()`
        now resumes exactly here, at any step (a shared trunk hands its state to a branch); keep this cheap."""


@dataclass(frozen=True)
class Outcome:
    """How the loop ended."""

    status: str  # ok | diverged
    diverged_step: int | None  # the first step whose training loss was non-finite


class Trainer:
    """The state of one run between its steps; `run()` trains it to `max_iters`."""

    def __init__(self, cfg: RunConfig, dataset: TextDataset, device: torch.device,
                 callbacks: Sequence[TrainerCallback] = (), run_id: str = "run") -> None:
        if cfg.vocab_size is None:
            raise ValueError("bind the run config to its tokenizer first: cfg.bind_vocab(dataset.tokenizer.vocab_size)")
        self.cfg, self.dataset, self.device, self.run_id = cfg, dataset, device, run_id
        self.callbacks = list(callbacks)
        t = cfg.train
        self.autocast = autocast_for(device, t.dtype)
        torch.manual_seed(cfg.seed)
        self.model = build_model(cfg.model).to(device)
        mode = compile_mode(t, device)
        self.forward = compiled(self.model, mode) if mode else self.model
        self.graphs = mode == GRAPHS  # CUDA graphs: each step's forward replays one capture
        self.optimizer = make_optimizer(self.model, t, device)
        self.sampler = BatchSampler(dataset.train, cfg.model.block_size, t.batch_size, cfg.seed, device)
        self.step = 0
        self.rows: list[dict[str, Any]] = []
        self.best_val_loss, self.best_step = math.inf, -1
        self.best_test_loss: float | None = None  # test loss at best_step (None without a test split)
        self.best_test_blocks: list[dict[str, Any]] | None = None  # its per-block losses (`test_blocks`)
        self.elapsed_s = self.train_s = self.eval_s = 0.0
        self.compile_s = 0.0  # the first step through torch.compile (tracing, compiling): the sweep's compile share
        self._compile_pending = mode is not None
        self.resumed = False
        self.started_at = ""  # when the run first started training (UTC, ISO 8601): a resumed run keeps its first start
        # Rows come at least every min(log_interval, eval_interval) steps, and at max_iters: that
        # many losses wait at most (a log_interval of 1e9 must not allocate 1e9 floats).
        self._losses = torch.zeros(min(t.log_interval, t.eval_interval, t.max_iters), device=device)
        self._grad_norms = torch.zeros_like(self._losses)
        self._pending = 0  # steps whose loss sits in self._losses, not yet in a metrics row

    # -- resuming ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed loop needs (saved at each evaluation)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "rows": list(self.rows),  # a copy: a state handed to a branch must not grow with the trunk's rows
            "best_val_loss": self.best_val_loss,
            "best_step": self.best_step,
            "best_test_loss": self.best_test_loss,  # measured at best_step: a resume cannot measure it again
            "best_test_blocks": self.best_test_blocks,
            "times": [self.elapsed_s, self.train_s, self.eval_s],
            "compile_s": self.compile_s,
            "started_at": self.started_at,  # a resume (or a shared trunk's branch) started when its first leg did
            # Losses of the steps since the last row (none at an evaluation): a state taken between
            # rows must carry them, or the next row would average fewer steps than an unbroken run's.
            "pending": {"losses": self._losses[: self._pending].cpu(),
                        "grad_norms": self._grad_norms[: self._pending].cpu()},
            "rng": {"cpu": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "config": self.cfg.to_dict(),
            "tokenizer": self.dataset.tokenizer.to_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.rows = state["step"], list(state["rows"])  # a copy: one state may start several loops
        self.best_val_loss, self.best_step = state["best_val_loss"], state["best_step"]
        self.best_test_loss = state.get("best_test_loss")  # absent from checkpoints of before test splits
        self.best_test_blocks = state.get("best_test_blocks")  # absent from checkpoints of before test blocks
        self.elapsed_s, self.train_s, self.eval_s = state["times"]
        self.compile_s += state.get("compile_s", 0.0)  # absent from checkpoints of before the compile share
        self.started_at = state.get("started_at") or self.started_at  # absent from checkpoints of before the ladder
        pending = state.get("pending")  # absent from checkpoints of before branch points
        self._pending = len(pending["losses"]) if pending else 0
        if pending:
            self._losses[: self._pending] = pending["losses"].to(self.device)
            self._grad_norms[: self._pending] = pending["grad_norms"].to(self.device)
        torch.set_rng_state(state["rng"]["cpu"])
        if state["rng"]["cuda"]:
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        self.resumed = True
        log.info("resumed %s from step %d", self.run_id, self.step)

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> Outcome:
        t = self.cfg.train
        log.info("run %s: %s, %d parameters, device %s", self.run_id, self.cfg.model,
                 self.model.num_params(), self.device)
        self.model.train()
        self.started_at = self.started_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
        start = time.perf_counter() - self.elapsed_s
        skip_bookkeeping = self.resumed  # the checkpoint was written after this step's row
        while True:
            step = self.step
            # No evaluation at step 0: at a standard init it measures ~ln(vocab), and it would cost
            # a full pass over the val split (benchmarks/README.md: evaluation under 10% of a run).
            is_eval = step > 0 and (step % t.eval_interval == 0 or step == t.max_iters)
            if not skip_bookkeeping and step > 0 and (is_eval or step % t.log_interval == 0):
                row, diverged_step = self._drain_row(step, start)
                if diverged_step is None and is_eval:
                    row["val_loss"] = self.evaluate()
                self.rows.append(row)
                self.elapsed_s = time.perf_counter() - start
                for callback in self.callbacks:
                    callback.on_row(self, row)
                if diverged_step is not None:
                    log.warning("run %s diverged at step %d (non-finite loss)", self.run_id, diverged_step)
                    self.elapsed_s = time.perf_counter() - start
                    return Outcome(DIVERGED, diverged_step)
                if is_eval:
                    improved = row["val_loss"] < self.best_val_loss
                    if improved:
                        self.best_val_loss, self.best_step = row["val_loss"], step
                        if self.dataset.test is not None:  # before the callbacks: the checkpoint holds it
                            self.best_test_loss = self.evaluate_test()
                    for callback in self.callbacks:
                        callback.on_evaluation(self, row["val_loss"], improved)
                log.info("step %d/%d train %s val %s lr %.2e", step, t.max_iters,
                         fmt_loss(row["train_loss"]), fmt_loss(row["val_loss"]), row["lr"])
            skip_bookkeeping = False
            if step == t.max_iters:
                break
            self.elapsed_s = time.perf_counter() - start  # what a state taken before this step holds
            for callback in self.callbacks:
                callback.before_step(self)
            self.train_step(step)
            self.step += 1
            for callback in self.callbacks:
                callback.on_step(self)
        self.elapsed_s = time.perf_counter() - start
        return Outcome(OK, None)

    def train_step(self, step: int, record: bool = True) -> None:
        """One optimizer step on the batch of `step`; `record=False` discards its loss (timing)."""
        t = self.cfg.train
        tick = time.perf_counter()
        lr = lr_at(step, t)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        x, y = self.sampler.batch(step)
        if self.graphs:  # a new iteration: the last replay's outputs (its loss, copied below) may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        with self.autocast:
            _, loss = self.forward(x, y)
        loss.backward()
        max_norm = t.grad_clip if t.grad_clip > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if record:
            # Stored on the device without .item(): the host syncs once per metrics row, not per step.
            self._losses[self._pending] = loss.detach()
            self._grad_norms[self._pending] = grad_norm.detach()
            self._pending += 1
        self.train_s += time.perf_counter() - tick
        if self._compile_pending:  # this process's first compiled step: its time is the compile's
            self._compile_pending = False
            self.compile_s += time.perf_counter() - tick

    def recent_train_loss(self) -> float | None:
        """Mean training loss of the steps since the last metrics row (None right after a row)."""
        if not self._pending:
            return None
        return self._losses[: self._pending].mean().item()

    def _drain_row(self, step: int, start: float) -> tuple[dict[str, Any], int | None]:
        """Empty the loss buffer into a metrics row for `step`; also return the first non-finite step."""
        losses = self._losses[: self._pending].tolist()
        norms = self._grad_norms[: self._pending].tolist()
        first_step = step - self._pending
        diverged_step = next((first_step + i + 1 for i, v in enumerate(losses) if not math.isfinite(v)), None)
        self._pending = 0
        t = self.cfg.train
        row = {
            "step": step,
            "train_loss": sum(losses) / len(losses) if losses else None,
            "val_loss": None,
            "lr": lr_at(max(step - 1, 0), t),
            "grad_norm": sum(norms) / len(norms) if norms else None,
            "tokens": step * t.batch_size * self.cfg.model.block_size,
            "elapsed_s": round(time.perf_counter() - start, 3),
        }
        return row, diverged_step

    def evaluate(self) -> float:
        """Validation loss of the model as it is now (nats per token)."""
        tick = time.perf_counter()
        # The eager model, not the compiled forward: evaluation batches come in several shapes (full, the last
        # partial batch, the one-window tail), each a recompile; on CUDA torch hit its limit of 8 and warned.
        val = evaluate(self.model, self.dataset.val, self.cfg.model.block_size,
                       self.cfg.train.eval_batch_size, self.device, self.autocast)
        self.eval_s += time.perf_counter() - tick
        return val

    def evaluate_test(self) -> float:
        """Test loss of the model as it is now (nats per token), in the same fixed windows as validation;
        its per-block losses go to `best_test_blocks` (this is only called at a new best checkpoint).

        Called only where validation improved: it is recorded, never compared, so the test split
        chooses nothing (not the best checkpoint, not a setting).
        """
        tick = time.perf_counter()
        losses = evaluate_per_target(self.model, self.dataset.test, self.cfg.model.block_size,
                                     self.cfg.train.eval_batch_size, self.device, self.autocast)
        self.best_test_blocks = test_blocks(losses, self.dataset.test, self.dataset.tokenizer)
        self.eval_s += time.perf_counter() - tick
        return losses.mean().item()


def fmt_loss(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
