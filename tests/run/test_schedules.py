"""gptlab/run/schedules.py: `train.schedule` is a registry; a plugin's schedule is checked, listed and trained like
cosine and wsd (their values: tests/run/test_runner.py and tests/sweep/test_trunks.py)."""
from __future__ import annotations

import csv

import pytest
import yaml
from helpers import tiny_config

from gptlab.errors import GptlabError
from gptlab.plugins import import_plugin
from gptlab.run.config import resolve_run_config
from gptlab.run.runner import train_run
from gptlab.run.schedules import SCHEDULES
from gptlab.run.settings_help import flag_help
from gptlab.run.trainer import lr_at
from gptlab.sweep_cli import main as sweep_main

PLUGIN = '''
"""Test plugin: a learning-rate schedule registered from outside the package."""
from gptlab.errors import GptlabError
from gptlab.run.schedules import SCHEDULES, Schedule


@SCHEDULES.register("halving")
class Halving(Schedule):
    """lr for the first half of the run, half of it for the second."""

    uses_cooldown = False

    @staticmethod
    def lr(step, train):
        return train.lr if step < train.max_iters // 2 else train.lr / 2

    @staticmethod
    def check(train):
        if train.max_iters < 2:
            raise GptlabError(f"train.max_iters must be >= 2 under train.schedule halving, got {train.max_iters}")
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The plugin file; what it registers goes into a copy of the registry, gone after the test."""
    monkeypatch.setattr(SCHEDULES, "_entries", dict(SCHEDULES._entries))
    path = tmp_path / "halving.py"
    path.write_text(PLUGIN)
    return path


def test_a_plugin_schedule_is_checked_named_listed_and_sets_the_lr(plugin):
    with pytest.raises(GptlabError, match="unknown schedule 'halving'"):
        resolve_run_config({"train": {"schedule": "halving"}})  # not before its plugin is imported
    import_plugin(str(plugin))
    train = resolve_run_config({"train": {"schedule": "halving", "max_iters": 10, "warmup_iters": 2}}).train
    assert [lr_at(step, train) for step in (2, 4, 5, 9)] == [train.lr, train.lr, train.lr / 2, train.lr / 2]
    assert lr_at(0, train) == train.lr / 3  # the warmup is lr_at's, whatever the schedule
    with pytest.raises(GptlabError, match=r"^train.max_iters must be >= 2 under train.schedule halving, got 1$"):
        resolve_run_config({"train": {"schedule": "halving", "max_iters": 1, "warmup_iters": 0}})
    with pytest.raises(GptlabError) as err:
        resolve_run_config({"train": {"schedule": "halvin"}})
    assert str(err.value) == ("train.schedule: unknown schedule 'halvin' (did you mean 'halving'?); "
                              "valid: cosine, wsd, halving")
    assert "one of: cosine, wsd, halving" in flag_help("train.schedule")
    one, other = (resolve_run_config({"train": {"schedule": "halving", "cooldown_fraction": f}}) for f in (0.2, 0.5))
    assert one.run_hash() == other.run_hash()  # it reads no cooldown_fraction: one run
    assert not SCHEDULES.get("halving").shares_trunk and SCHEDULES.get("wsd").shares_trunk


def _lrs(run) -> list[float]:
    with open(run / "metrics.csv") as f:
        return [float(row["lr"]) for row in csv.DictReader(f)]


def test_a_run_trains_under_a_plugin_schedule(plugin, tmp_path, corpus):
    import_plugin(str(plugin))
    config = tiny_config(corpus, max_iters=10, warmup_iters=0, eval_interval=10, log_interval=5, lr=2e-2, min_lr=1e-3,
                         schedule="halving")
    summary = train_run(resolve_run_config(config), tmp_path / "run")
    assert summary["status"] == "ok"
    lrs = _lrs(tmp_path / "run")
    assert max(lrs) == pytest.approx(2e-2) and lrs[-1] == pytest.approx(1e-2)  # halved, not a cosine's min_lr


@pytest.mark.slow  # a real sweep: its worker pool takes seconds to start
def test_a_sweep_trains_a_run_under_a_plugin_schedule(plugin, tmp_path, corpus, monkeypatch):
    config = tiny_config(corpus, max_iters=20, eval_interval=10, log_interval=5, lr=2e-2, min_lr=1e-3)  # learns
    spec = {"name": "halved", "plugins": [plugin.name], "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"train.schedule": ["halving"]}, "seeds": 1,
            "executor": {"backend": "loky", "n_jobs": 2}}  # as in test_plugins: one pool of workers serves both
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    monkeypatch.setattr("gptlab.report.write_report", lambda *a, **k: tmp_path)  # the run is what is checked
    assert sweep_main([str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results"),
                       "--reports-dir", str(tmp_path / "reports")]) == 0
    (run,) = (tmp_path / "results" / "halved" / "runs").iterdir()  # trained in a worker, which imported the plugin
    assert yaml.safe_load((run / "summary.json").read_text())["status"] == "ok"
    assert max(_lrs(run)) == pytest.approx(2e-2) and _lrs(run)[-1] == pytest.approx(1e-2)
