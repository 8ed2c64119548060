"""`train_run(config, run_dir)`: one run from start (or from its checkpoint) to its summary.

It joins the loop (`Trainer`) to the run directory (`RunDir`): a callback writes the metrics
rows, a checkpoint at every evaluation and the live progress record; at the end the summary
gathers the loop's results, the environment and the config. Process-wide settings (threads,
TF32) are not set here: the process that trains sets them (`gptlab.run.device.configure_process`).
"""
from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch

import gptlab
from gptlab.errors import GptlabError, first_line, hidden_package
from gptlab.run.branching import handoff_for
from gptlab.run.config import RunConfig
from gptlab.run.data import load_run_dataset, unigram_loss
from gptlab.run.device import resolve_device
from gptlab.run.rundir import CorruptCheckpoint, RunDir
from gptlab.run.tokenizers import Tokenizer
from gptlab.run.trainer import Outcome, Trainer, TrainerCallback, fmt_loss
from gptlab.runio import atomic_write_text, remove_temp_files
from gptlab.statuses import STATUS_RULE, classify

log = logging.getLogger("gptlab.train")

PROGRESS_EVERY_S = 2.0  # a run in flight rewrites progress.json at most this often


class RunDirWriter(TrainerCallback):
    """Writes what the loop produces into the run directory, as it produces it."""

    def __init__(self, run_dir: RunDir, progress_every_s: float = PROGRESS_EVERY_S) -> None:
        self.run_dir, self.progress_every_s = run_dir, progress_every_s
        self.last_progress = -math.inf

    def on_row(self, trainer: Trainer, row: dict[str, Any]) -> None:
        self.run_dir.write_metrics(trainer.rows)

    def on_evaluation(self, trainer: Trainer, val_loss: float, improved: bool) -> None:
        self.run_dir.save_checkpoint(trainer.state_dict(), best=improved)

    def on_step(self, trainer: Trainer) -> None:
        now = time.monotonic()
        if now - self.last_progress < self.progress_every_s:
            return
        self.last_progress = now
        last_row = trainer.rows[-1] if trainer.rows else {}
        recent = trainer.recent_train_loss()
        self.run_dir.write_progress({
            "run_id": trainer.run_id, "step": trainer.step, "max_iters": trainer.cfg.train.max_iters,
            "train_loss": recent if recent is not None else last_row.get("train_loss"),
            "best_val_loss": trainer.best_val_loss if math.isfinite(trainer.best_val_loss) else None,
            "train_s": round(trainer.train_s, 3), "eval_s": round(trainer.eval_s, 3), "time": time.time(),
        })


def train_run(config: RunConfig, run_dir: str | os.PathLike, *, run_id: str | None = None,
              callbacks: Sequence[TrainerCallback] = ()) -> dict[str, Any]:
    """Train (or resume, or return the finished result of) one run; returns its summary as a plain dict.

    A run directory whose summary says ok/diverged/collapsed/unstable is finished and returned as is; one holding a
    last checkpoint resumes from it. Exceptions propagate (the sweep records them). `callbacks`
    join the loop after the one writing the run directory (e.g. a worker's stop on a lost driver).
    """
    if (hidden := hidden_package()) is not None:  # refused before it trains: its summary would need the package
        raise hidden
    folder = RunDir(run_dir)
    # One trainer per run folder: a worker orphaned by a killed driver, or a second terminal, may
    # be training this run; wait for it (it then leaves a finished run, or a checkpoint to resume).
    with folder.exclusive():
        return _train_locked(config, folder, run_id, callbacks)


def _train_locked(cfg: RunConfig, folder: RunDir, run_id: str | None,
                  callbacks: Sequence[TrainerCallback] = ()) -> dict[str, Any]:
    finished = folder.finished_summary()
    if finished is not None:
        return finished.to_dict()
    folder.claim(cfg)
    # A trainer killed mid-write (SIGKILL, or its worker's exit on a lost driver) leaves its temp
    # file, which nothing reads but which can be as large as a checkpoint; this lock keeps its writers away.
    remove_temp_files(folder.path, (RunDir.LAST, RunDir.BEST, RunDir.METRICS, RunDir.PROGRESS, RunDir.SAMPLE))
    run_id = run_id or folder.path.name
    with logging_to_file(folder):
        device = resolve_device(cfg.train.device)
        dataset = load_run_dataset(cfg.data)
        dataset.check_fits(cfg.model.block_size, f"data {cfg.data.path or cfg.data.dataset}")
        cfg = cfg.bind_vocab(dataset.tokenizer.vocab_size)
        # A shared trunk hands its state to its branches' folders as it passes their branch points.
        trainer = Trainer(cfg, dataset, device, [RunDirWriter(folder), *handoff_for(folder), *callbacks], run_id)
        state = resume_state(folder, device)
        if state is not None:
            check_same_tokenizer(state, dataset.tokenizer, folder)
            trainer.load_state_dict(state)
        else:  # from step 0: a branch origin left by an unfinished handoff is not this run's
            (folder / RunDir.TRUNK).unlink(missing_ok=True)
        outcome = trainer.run()
        write_sample(folder)
        if trainer.best_test_blocks is not None:  # written before the summary: a finished run has its blocks
            folder.write_test_blocks(trainer.best_test_blocks)
        summary = run_summary(trainer, outcome)
        if (origin := folder.branched_from()) is not None:  # its steps up to origin["step"] were its trunk's
            summary["branched_from"] = origin
        folder.write_summary(summary)
        log.info("run %s finished: %s, best val %s at step %s, %.1f s", run_id, summary["status"],
                 fmt_loss(summary["best_val_loss"]), summary["best_step"], trainer.elapsed_s)
    return summary


@contextlib.contextmanager
def logging_to_file(folder: RunDir) -> Iterator[None]:
    """Send the library's log records (INFO and up) to the run's `train.log` while the block runs."""
    handler = logging.FileHandler(folder / RunDir.LOG, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("gptlab")
    previous = logger.level
    logger.addHandler(handler)
    if previous == logging.NOTSET or previous > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.setLevel(previous)


def resume_state(folder: RunDir, device: Any) -> dict[str, Any] | None:
    """The state to resume from: `ckpt_last.pt`; where it is damaged, `ckpt_best.pt` (an earlier step of the same
    run: batches depend only on the seed and step, so training on from it gives the uninterrupted run's result);
    where both are, None (from step 0, the same result again). Each fallback is logged."""
    for which in ("last", "best"):
        try:
            return folder.load_checkpoint(which, map_location=device)
        except CorruptCheckpoint as err:
            log.warning("%s; %s", err, "resuming from ckpt_best.pt instead" if which == "last" else
                        "training from step 0 instead")
    return None


def check_same_tokenizer(state: dict[str, Any], tokenizer: Tokenizer, folder: RunDir) -> None:
    """Refuse to resume a checkpoint whose token ids meant other text (a rebuilt BPE cache, another version)."""
    saved = state.get("tokenizer", state.get("vocab"))
    if isinstance(saved, str):  # a checkpoint of the first release: its character vocabulary
        saved = {"name": "char", "chars": saved}
    if saved is not None and saved != tokenizer.to_state():
        raise GptlabError(f"{folder.path}: its checkpoint was trained with another {saved.get('name', '?')} tokenizer "
                          "than the data gives now (a rebuilt tokenizer cache, or another tokenizers version?); "
                          "delete the run folder to train it again")


def write_sample(folder: RunDir) -> None:
    """Keep a text sample of the best checkpoint beside the metrics: reports need no checkpoint then. A damaged
    best checkpoint is no reason to fail a run that trained: the last one samples instead, and with neither
    readable the run keeps no sample (a warning says why)."""
    from gptlab.run.sampling import sample_from_run

    for which, name in (("best", RunDir.BEST), ("last", RunDir.LAST)):
        if not (folder / name).exists():
            continue
        try:
            text = sample_from_run(folder.path, which=which)
        except (GptlabError, OSError, RuntimeError, ValueError, KeyError) as err:
            log.warning("%s: no sample from %s (%s)", folder.path.name, name, first_line(str(err)))
            continue
        atomic_write_text(folder / RunDir.SAMPLE, text)
        return


def run_summary(trainer: Trainer, outcome: Outcome) -> dict[str, Any]:
    """The run's summary.json (docs/CONTRACTS.md) from a loop that has ended."""
    cfg = trainer.cfg
    evals = [r for r in trainer.rows if r["val_loss"] is not None]
    trains = [r for r in trainer.rows if r["train_loss"] is not None and math.isfinite(r["train_loss"])]
    tokens = trainer.step * cfg.train.batch_size * cfg.model.block_size
    diverged_step = outcome.diverged_step
    test_factor = trainer.dataset.test_bits_per_char_factor
    unigram = unigram_loss(trainer.dataset)  # of the run's own validation split, in its own tokens
    plateau = unigram_loss(trainer.dataset, "train")  # where a run that learned only the frequencies sits
    verdict = classify(outcome.status, [r["train_loss"] for r in trains], plateau)  # stuck or blown up: its curve's
    error = f"non-finite training loss at step {diverged_step}" if diverged_step else verdict.note
    return {
        "run_id": trainer.run_id,
        "seed": cfg.seed,
        "status": verdict.status,
        "status_rule": STATUS_RULE,  # the rule that judged it (gptlab.statuses): an older one is judged again on read
        "best_val_loss": trainer.best_val_loss if evals else None,
        "best_val_bpc": trainer.best_val_loss * trainer.dataset.bits_per_char_factor if evals else None,
        "val_bpc_factor": trainer.dataset.bits_per_char_factor,  # val_loss (nats/token) x this = bits/char
        # The test loss at best_step (data.test_fraction > 0), in nats/token and bits/char; None without a test split.
        "best_test_loss": trainer.best_test_loss if evals else None,
        "best_test_bpc": trainer.best_test_loss * test_factor if evals and trainer.best_test_loss is not None else None,
        "test_bpc_factor": test_factor,
        "best_step": trainer.best_step if evals else None,
        "final_val_loss": evals[-1]["val_loss"] if evals else None,
        "final_train_loss": trains[-1]["train_loss"] if trains else None,
        "params": trainer.model.num_params(),
        "params_non_embedding": trainer.model.num_params(non_embedding=True),
        "tokens_per_sec": tokens / trainer.train_s if trainer.train_s > 0 else None,
        "started_at": trainer.started_at,  # UTC, ISO 8601: a ladder checks its rungs' runs began after their predictions
        "wall_s": round(trainer.elapsed_s, 3),
        "eval_s": round(trainer.eval_s, 3),
        "compile_s": round(trainer.compile_s, 3),  # in wall_s: first steps through torch.compile (0 uncompiled)
        "peak_rss_mb": peak_rss_mb(),
        "peak_gpu_mb": round(torch.cuda.max_memory_allocated(trainer.device) / 2**20, 1)
        if trainer.device.type == "cuda" else None,  # the plan's memory on CUDA is the GPU's
        "error": error,
        "diverged_step": diverged_step,
        "unigram_val_loss": unigram,  # nats/token: the report's ceiling
        "unigram_train_loss": plateau,  # nats/token: the plateau statuses.judge holds a stuck run to
        "environment": environment(trainer.device),
        "config": cfg.to_dict(),
    }


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
        **({"git_commit": commit} if (commit := git_commit()) else {}),
        "threads": torch.get_num_threads(),
    }


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the gptlab checkout this process runs (with `+dirty` if gptlab/ has edits), if any."""
    root = Path(gptlab.__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):  # no git, or a slow file system
        return None
    return head.stdout.strip()[:12] + ("+dirty" if dirty.stdout.strip() else "")
