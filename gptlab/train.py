"""One training run: `train_run(config, run_dir)` and `python -m gptlab.train`.

AdamW (decay on matrices only), linear warmup then cosine decay to `min_lr`, gradient clipping,
evaluation on the full validation split every `eval_interval` steps, and a checkpoint (model,
optimizer, step, RNG state, metric rows) at every evaluation, so a killed run resumes from its
last evaluation and reproduces the losses of a run never interrupted. A non-finite training loss
ends the run with status `diverged` (it is a result, not a crash).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import math
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

import gptlab
from gptlab.config import RunConfig, resolve_run_config, valid_keys, field_help, set_dotted
from gptlab.data import BatchSampler, CharDataset, eval_windows, load_dataset
from gptlab.errors import GptlabError
from gptlab.model import GPT, build_model
from gptlab.runio import METRIC_COLUMNS, read_json, read_yaml, write_csv, write_json, write_yaml

log = logging.getLogger("gptlab.train")

FINISHED = ("ok", "diverged")


def resolve_device(name: str) -> torch.device:
    """`auto` picks cuda, then mps, then cpu."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise GptlabError(f"train.device is {name!r} but CUDA is not available; use auto or cpu")
    return device


def autocast_for(device: torch.device, dtype: str) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA by default (matmuls in bf16, reductions and loss in fp32)."""
    use_bf16 = dtype == "bfloat16" or (dtype == "auto" and device.type == "cuda")
    if use_bf16:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def lr_at(step: int, cfg: gptlab.config.TrainConfig) -> float:
    """Linear warmup to `lr` over `warmup_iters`, then cosine decay to `min_lr` at `lr_decay_iters`."""
    decay_iters = cfg.lr_decay_iters or cfg.max_iters
    if step < cfg.warmup_iters:
        return cfg.lr * (step + 1) / (cfg.warmup_iters + 1)
    if step >= decay_iters:
        return cfg.min_lr
    progress = (step - cfg.warmup_iters) / max(1, decay_iters - cfg.warmup_iters)
    return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (cfg.lr - cfg.min_lr)


def make_optimizer(model: GPT, cfg: gptlab.config.TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW decaying only matrices (>= 2 dims): biases and norm gains are not shrunk toward 0."""
    params = [p for p in model.parameters() if p.requires_grad]  # unique: a tied matrix once
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    # One fused kernel for the whole update (CPU and CUDA): ~3.5x faster than the foreach path
    # on the nanoGPT CPU model, equal to it within float rounding (tests/test_fastpaths.py).
    fused = device.type in ("cpu", "cuda")
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), fused=fused)


@torch.inference_mode()
def evaluate(model: torch.nn.Module, data: torch.Tensor, block_size: int, batch_size: int,
             device: torch.device, autocast: contextlib.AbstractContextManager) -> float:
    """Mean next-token loss (nats) over every target of `data`, in fixed windows: no sampling noise."""
    was_training = model.training
    model.eval()
    total, count = torch.zeros((), device=device, dtype=torch.float64), 0
    for x, y, n_scored in eval_windows(data, block_size):
        for i in range(0, len(x), batch_size):
            xb, yb = x[i : i + batch_size].to(device), y[i : i + batch_size].to(device)
            with autocast:
                logits, _ = model(xb)
            logits, yb = logits[:, -n_scored:], yb[:, -n_scored:]
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)).float(), yb.reshape(-1), reduction="sum"
            )
            total += loss
            count += yb.numel()
    model.train(was_training)
    return total.item() / count


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (a worker's high-water mark)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)  # bytes on macOS, KiB on Linux


def environment(device: torch.device) -> dict[str, Any]:
    return {
        "device": str(device) if device.type != "cuda" else torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "gptlab": gptlab.__version__,
        "threads": torch.get_num_threads(),
    }


class RunLog(contextlib.AbstractContextManager):
    """Send the library's log records to `run_dir/train.log` while a run is in progress."""

    def __init__(self, path: Path) -> None:
        self.handler = logging.FileHandler(path, encoding="utf-8")
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        self.logger = logging.getLogger("gptlab")

    def __enter__(self) -> "RunLog":
        self.logger.addHandler(self.handler)
        if self.logger.level == logging.NOTSET or self.logger.level > logging.INFO:
            self.previous_level = self.logger.level
            self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self.handler)
        self.handler.close()
        if hasattr(self, "previous_level"):
            self.logger.setLevel(self.previous_level)


def train_run(config: dict[str, Any] | RunConfig, run_dir: str | os.PathLike, *,
              threads: int | None = None, run_id: str | None = None) -> dict[str, Any]:
    """Train (or resume, or return the finished result of) one run; returns its summary as a plain dict.

    A run directory holding `summary.json` with status ok/diverged is finished and returned as is;
    one holding `ckpt_last.pt` resumes from it. Exceptions propagate (the sweep records them).
    """
    cfg = resolve_run_config(config)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    summary_path = run_dir / "summary.json"
    if summary_path.exists():
        previous = read_json(summary_path)
        if previous.get("status") in FINISHED:
            return previous
    config_path = run_dir / "config.yaml"
    if config_path.exists() and read_yaml(config_path) != cfg.to_dict():
        raise GptlabError(f"{run_dir} holds a run with a different config; use another directory")
    write_yaml(config_path, cfg.to_dict())
    if threads:
        torch.set_num_threads(threads)
    with RunLog(run_dir / "train.log"):
        return Trainer(cfg, run_dir, run_id or run_dir.name).run()


class Trainer:
    """The state of one run between its steps; `run()` trains it to the end."""

    def __init__(self, cfg: RunConfig, run_dir: Path, run_id: str) -> None:
        self.cfg, self.run_dir, self.run_id = cfg, run_dir, run_id
        t = cfg.train
        self.device = resolve_device(t.device)
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True  # TF32 for any fp32 matmul left
            torch.backends.cudnn.allow_tf32 = True
        self.autocast = autocast_for(self.device, t.dtype)
        self.dataset: CharDataset = load_dataset(cfg.data.dataset, cfg.data.path, cfg.data.val_fraction)
        self.model_cfg = dataclasses.replace(cfg.model, vocab_size=self.dataset.tokenizer.vocab_size)
        torch.manual_seed(cfg.seed)
        self.model = build_model(self.model_cfg).to(self.device)
        use_compile = t.compile if t.compile is not None else self.device.type == "cuda"
        self.forward = torch.compile(self.model) if use_compile else self.model
        self.optimizer = make_optimizer(self.model, t, self.device)
        self.sampler = BatchSampler(self.dataset.train, self.model_cfg.block_size, t.batch_size, cfg.seed, self.device)
        self.step = 0
        self.rows: list[dict[str, Any]] = []
        self.best_val_loss, self.best_step = math.inf, -1
        self.elapsed_s = self.train_s = self.eval_s = 0.0
        # Rows come at least every min(log_interval, eval_interval) steps: that many losses wait at most.
        self.losses = torch.zeros(min(t.log_interval, t.eval_interval), device=self.device)
        self.grad_norms = torch.zeros_like(self.losses)
        self.pending = 0  # steps whose loss sits in self.losses, not yet in a metrics row
        self.resumed = self._load_checkpoint()

    # -- checkpoints -------------------------------------------------------------------------
    def _checkpoint(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "rows": self.rows,
            "best_val_loss": self.best_val_loss,
            "best_step": self.best_step,
            "times": [self.elapsed_s, self.train_s, self.eval_s],
            "rng": {"cpu": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "config": self.cfg.to_dict(),
            "vocab": self.dataset.tokenizer.chars,
        }

    def _save(self, name: str, state: dict[str, Any]) -> None:
        tmp = self.run_dir / f".{name}.tmp"
        torch.save(state, tmp)
        os.replace(tmp, self.run_dir / name)

    def _load_checkpoint(self) -> bool:
        path = self.run_dir / "ckpt_last.pt"
        if not path.exists():
            return False
        state = torch.load(path, map_location=self.device, weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.rows = state["step"], state["rows"]
        self.best_val_loss, self.best_step = state["best_val_loss"], state["best_step"]
        self.elapsed_s, self.train_s, self.eval_s = state["times"]
        torch.set_rng_state(state["rng"]["cpu"])
        if state["rng"]["cuda"]:
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        log.info("resumed %s from step %d", self.run_id, self.step)
        return True

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        t = self.cfg.train
        params = self.model.num_params()
        log.info("run %s: %s, %d parameters, device %s", self.run_id, self.model_cfg, params, self.device)
        self.model.train()
        start = time.perf_counter() - self.elapsed_s
        status, diverged_step = "ok", None
        skip_bookkeeping = self.resumed  # the checkpoint was written after this step's row
        while True:
            step = self.step
            # No evaluation at step 0: at a standard init it measures ~ln(vocab), and it would cost
            # a full pass over the val split (benchmarks/README.md: evaluation under 10% of a run).
            is_eval = step > 0 and (step % t.eval_interval == 0 or step == t.max_iters)
            if not skip_bookkeeping and step > 0 and (is_eval or step % t.log_interval == 0):
                row, diverged_step = self._row(step, start)
                if diverged_step is None and is_eval:
                    row["val_loss"] = self._evaluate()
                self.rows.append(row)
                self.elapsed_s = time.perf_counter() - start
                write_csv(self.run_dir / "metrics.csv", self.rows, METRIC_COLUMNS)
                if diverged_step is not None:
                    status = "diverged"
                    log.warning("run %s diverged at step %d (non-finite loss)", self.run_id, diverged_step)
                    break
                if is_eval:
                    self._after_eval(row["val_loss"], step)
                log.info("step %d/%d train %s val %s lr %.2e", step, t.max_iters,
                         _fmt(row["train_loss"]), _fmt(row["val_loss"]), row["lr"])
            skip_bookkeeping = False
            if step == t.max_iters:
                break
            self._train_step(step)
            self.step += 1
        self.elapsed_s = time.perf_counter() - start
        return self._finish(status, diverged_step, params)

    def _train_step(self, step: int) -> None:
        t = self.cfg.train
        tick = time.perf_counter()
        lr = lr_at(step, t)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        x, y = self.sampler.batch(step)
        with self.autocast:
            _, loss = self.forward(x, y)
        loss.backward()
        max_norm = t.grad_clip if t.grad_clip > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        # Stored on the device without .item(): the host syncs once per metrics row, not per step.
        self.losses[self.pending] = loss.detach()
        self.grad_norms[self.pending] = grad_norm.detach()
        self.pending += 1
        self.train_s += time.perf_counter() - tick

    def seconds_per_step(self, steps: int, warmup: int = 1) -> float:
        """Time `steps` training steps after `warmup` untimed ones (for estimates and benchmarks).

        The steps really train the model; their losses are discarded, not logged.
        """
        for step in range(warmup + steps):
            if step == warmup:
                tick = time.perf_counter()
            self._train_step(step)
            self.pending = 0
        return (time.perf_counter() - tick) / steps

    def _row(self, step: int, start: float) -> tuple[dict[str, Any], int | None]:
        """A metrics row for `step`; also returns the first step whose loss was non-finite."""
        losses = self.losses[: self.pending].tolist()
        norms = self.grad_norms[: self.pending].tolist()
        first_step = step - self.pending
        diverged_step = next((first_step + i + 1 for i, v in enumerate(losses) if not math.isfinite(v)), None)
        self.pending = 0
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

    def _evaluate(self) -> float:
        tick = time.perf_counter()
        val = evaluate(self.forward, self.dataset.val, self.cfg.model.block_size,
                       self.cfg.train.eval_batch_size, self.device, self.autocast)
        self.eval_s += time.perf_counter() - tick
        return val

    def _after_eval(self, val_loss: float, step: int) -> None:
        improved = val_loss < self.best_val_loss
        if improved:
            self.best_val_loss, self.best_step = val_loss, step
        state = self._checkpoint()
        if improved:
            self._save("ckpt_best.pt", state)
        self._save("ckpt_last.pt", state)

    def _finish(self, status: str, diverged_step: int | None, params: int) -> dict[str, Any]:
        evals = [r for r in self.rows if r["val_loss"] is not None]
        trains = [r for r in self.rows if r["train_loss"] is not None and math.isfinite(r["train_loss"])]
        tokens = self.step * self.cfg.train.batch_size * self.cfg.model.block_size
        summary = {
            "run_id": self.run_id,
            "seed": self.cfg.seed,
            "status": status,
            "best_val_loss": self.best_val_loss if evals else None,
            "best_step": self.best_step if evals else None,
            "final_val_loss": evals[-1]["val_loss"] if evals else None,
            "final_train_loss": trains[-1]["train_loss"] if trains else None,
            "params": params,
            "params_non_embedding": self.model.num_params(non_embedding=True),
            "tokens_per_sec": tokens / self.train_s if self.train_s > 0 else None,
            "wall_s": round(self.elapsed_s, 3),
            "eval_s": round(self.eval_s, 3),
            "peak_rss_mb": peak_rss_mb(),
            "error": f"non-finite training loss at step {diverged_step}" if diverged_step else None,
            "diverged_step": diverged_step,
            "environment": environment(self.device),
            "config": self.cfg.to_dict(),
        }
        write_json(self.run_dir / "summary.json", summary)
        log.info("run %s finished: %s, best val %s at step %s, %.1f s", self.run_id, status,
                 _fmt(summary["best_val_loss"]), summary["best_step"], self.elapsed_s)
        return summary


def write_failure(run_dir: str | os.PathLike, run_id: str, config: dict[str, Any], error: BaseException | str) -> dict[str, Any]:
    """Record a run that raised: `error.txt` holds the traceback, `summary.json` says failed."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(error, BaseException):
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        message = f"{type(error).__name__}: {error}".splitlines()[0]
    else:
        text = message = error
    (run_dir / "error.txt").write_text(text, encoding="utf-8")
    summary = {"run_id": run_id, "seed": config.get("seed"), "status": "failed", "error": message,
               "log": str(run_dir / "error.txt"), "config": config}
    write_json(run_dir / "summary.json", summary)
    return summary


def estimate_run_seconds(config: dict[str, Any], steps: int = 6) -> float:
    """Seconds one run of `config` should take, from timing its first few steps and one eval batch."""
    import tempfile

    cfg = resolve_run_config(config)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp), "estimate")
        per_step = trainer.seconds_per_step(steps)
        val = trainer.dataset.val[: cfg.train.eval_batch_size * cfg.model.block_size + 1]
        tick = time.perf_counter()
        evaluate(trainer.model, val, cfg.model.block_size, cfg.train.eval_batch_size, trainer.device, trainer.autocast)
        per_batch = time.perf_counter() - tick
    n_batches = math.ceil(len(trainer.dataset.val) / (cfg.train.eval_batch_size * cfg.model.block_size))
    n_evals = cfg.train.max_iters // cfg.train.eval_interval + 2
    return cfg.train.max_iters * per_step + n_evals * n_batches * per_batch


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


# -- command line --------------------------------------------------------------------------------
def _parse_value(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gptlab.train",
        description="Train one GPT on a character corpus. Settings come from --config (a YAML with "
        "model/train/data/seed sections), then from the flags below.",
    )
    parser.add_argument("--config", help="YAML file with model/train/data sections and seed")
    parser.add_argument("--out", help="run directory (default: results/train/<run hash>)")
    for key in valid_keys():
        parser.add_argument(f"--{key}", dest=key, metavar="VALUE", help=field_help(key) if "." in key else "random seed")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        raw: dict[str, Any] = {}
        if args.config:
            raw = read_yaml(args.config) or {}
            if not isinstance(raw, dict):
                raise GptlabError(f"{args.config} must hold a mapping with model/train/data sections")
        for key in valid_keys():
            value = getattr(args, key)
            if value is not None:
                set_dotted(raw, key, _parse_value(value))
        cfg = resolve_run_config(raw)
        run_dir = Path(args.out or Path("results") / "train" / cfg.run_hash())
        summary = train_run(cfg, run_dir)
    except GptlabError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{summary['status']}: best val loss {_fmt(summary['best_val_loss'])} at step "
          f"{summary['best_step']}; run directory {run_dir}")
    return 0 if summary["status"] in FINISHED else 1


if __name__ == "__main__":
    sys.exit(main())
