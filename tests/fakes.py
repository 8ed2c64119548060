"""Fakes shared by the tests: stand-ins for the parts a test is not about (no fixtures: those live in conftest.py)."""
from __future__ import annotations

from typing import Any, Callable, Mapping

from gptlab.executors import RunResult
from gptlab.run.rundir import RunDir


class FakeBackend:
    """Finishes every task at once with the loss `loss(config)`, or `loss[run_id]` for a mapping; ids in `fail`
    fail, in `diverge` diverge. `trained` lists the run ids it was given, in order."""

    def __init__(self, loss: Callable[[dict], float] | Mapping[str, float], fail=(), diverge=()) -> None:
        self.loss, self.fail, self.diverge, self.trained = loss, set(fail), set(diverge), []

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
            summary = {"run_id": task.run_id, "status": status, "best_val_loss": self.loss_of(task)}
            RunDir(task.run_dir).path.mkdir(parents=True, exist_ok=True)
            RunDir(task.run_dir).write_summary(summary)
            on_result(RunResult(task.run_id, summary, 0.1))
