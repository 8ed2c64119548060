"""Fakes shared by the tests: stand-ins for the parts a test is not about, and the sweep files they train
(no fixtures: those live in conftest.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml
from helpers import tiny_config

from gptlab.executors import RunResult
from gptlab.run.config import RunConfig
from gptlab.run.rundir import RunDir


class FakeBackend:
    """Finishes every task at once with the loss `loss(config)`, or `loss[run_id]` for a mapping; ids in `fail`
    fail, in `diverge` diverge; `extra` goes into every summary. `trained` lists the run ids it was given, in order."""

    def __init__(self, loss: Callable[[RunConfig], float] | Mapping[str, float], fail=(), diverge=(),
                 extra: Mapping[str, Any] | None = None) -> None:
        self.loss, self.fail, self.diverge, self.trained = loss, set(fail), set(diverge), []
        self.extra = dict(extra or {})  # more fields of every summary.json (e.g. unigram_val_loss)

    def loss_of(self, task: Any) -> float:
        return self.loss[task.run_id] if isinstance(self.loss, Mapping) else self.loss(task.config)

    def check(self) -> None:
        pass

    def describe(self, plan, dry_run=False):
        return None

    def run(self, tasks, plan, on_result, fail_fast=False) -> None:
        for task in tasks:
            self.trained.append(task.run_id)
            status = "failed" if task.run_id in self.fail else "diverged" if task.run_id in self.diverge else "ok"
            summary = {"run_id": task.run_id, "status": status, "best_val_loss": self.loss_of(task), **self.extra}
            RunDir(task.run_dir).path.mkdir(parents=True, exist_ok=True)
            RunDir(task.run_dir).write_summary(summary)
            on_result(RunResult(task.run_id, summary, 0.1))


# Two loky workers of one thread each: one thread whatever the machine, so that CPU losses are the same on every
# backend, and so that loky's workers (their environment is the thread count) are reused from sweep to sweep.
LOKY_EXECUTOR = {"backend": "loky", "n_jobs": 2, "threads": 1}


def write_spec(folder: Path, corpus: Path, grid: dict | None = None, *, seeds: Any = 1, plugins: Sequence = (),
               train: dict | None = None, data: dict | None = None, executor: dict | None = None, name: str = "t",
               file: str = "sweep.yaml", **extra: Any) -> Path:
    """Write a sweep of the tiny test model on `corpus` to `folder/file`; its path.

    `grid` defaults to `model.norm: [pre, post]`; a grid key is taken out of `base` (a key lives in one
    place). `train` and `data` override `tiny_config`'s settings, `executor` replaces `LOKY_EXECUTOR`, and
    `extra` adds (or replaces) top-level keys.
    """
    config = tiny_config(corpus, **(train or {}))
    config["data"].update(data or {})
    grid = {"model.norm": ["pre", "post"]} if grid is None else grid
    for key in grid:
        section, _, setting = key.partition(".")
        config.get(section, {}).pop(setting, None)
    spec = {"name": name, "plugins": [str(p) for p in plugins], "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": grid, "seeds": seeds, "executor": dict(LOKY_EXECUTOR if executor is None else executor), **extra}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def fake_spec(grid: dict, runs: list, baseline: dict, **fields: Any) -> Any:
    """A `SweepSpec` of these runs without a YAML (their seeds, no plugins, no base), for planners' tests."""
    from gptlab.executors import ExecutorConfig
    from gptlab.sweep.runs import ReportSettings, SweepSpec

    return SweepSpec(name="fake", description="", plugins=[], base={}, grid=dict(grid),
                     seeds=sorted({r.seed for r in runs}), exclude=[], baseline=baseline, executor=ExecutorConfig(),
                     report=ReportSettings(0.01), runs=tuple(runs), **fields)


def boom_activation(name: str) -> str:
    """Plugin source registering activation `name`, which raises on its first forward pass: a run that fails on
    its own, for tests of what a sweep does with one (the plugin file imports ACTIVATIONS and Activation)."""
    return f'''
@ACTIVATIONS.register("{name}")
class Boom(Activation):
    """Raises on the first training forward pass."""
    def forward(self, h):
        raise RuntimeError("{name}: this activation always fails")
'''


def tuned_arms_spec(name: str, config: dict, scale: dict, lrs: tuple[float, ...] = (1e-2, 2e-2)) -> dict:
    """A tuned arms sweep (nanogpt against relu and post_ln, ReLU's claim recorded) over a scale factor: the raw YAML.

    Its default lrs are high enough for the small tiny model to learn in 16 steps (lower ones leave it at the
    unigram loss: `collapsed`, in no effect)."""
    return {"name": name, "base": {k: config[k] for k in ("model", "train", "data")},
            "arms": {"nanogpt": {}, "relu": {"model.activation": "relu"}, "post_ln": {"model.norm": "post"}},
            "scale": scale, "seeds": 2, "tune": {"space": {"train.lr": list(lrs)}},
            "claims": {"relu": {"source": "Hendrycks & Gimpel 2016", "claim": "GELU wins", "direction": "worse"}},
            "executor": {"backend": "loky", "n_jobs": 2}}



def train_spec(spec: Any, results: Path, backend: Any, planner: Any = None, **options: Any) -> tuple[Any, str, Any]:
    """Train `spec`'s stages on `backend` (one worker) into `results`: (the runs planned, the sweep's output, the
    planner); `planner` replaces the spec's (`planner_for`), `options` go to `SweepOptions` (`rerun_failed=True`)."""
    import io

    from gptlab.executors import Resources
    from gptlab.sweep.execute import SweepOptions, planner_for, train_stages

    out = io.StringIO()
    settings = SweepOptions(results, results.parent / "reports", stream=out, progress_every_s=60, **options)
    plan = Resources(workers=1, threads=1, device="cpu", gpus=0, reason="test")
    planner = planner or planner_for(spec, out)
    return train_stages(spec, planner, plan, settings, backend), out.getvalue(), planner


def csv_rows(path: Path) -> list[dict]:
    """A CSV file's rows, as text."""
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))
