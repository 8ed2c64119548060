"""`train.schedule: wsd` and shared trunks: the schedule's values, its validation, and branched runs
that equal separately trained ones row for row (in one process, through a trunk killed at any
point, and through a sweep that trains each stable phase once)."""
from __future__ import annotations

import csv
import dataclasses
import io
import math
from pathlib import Path

import pytest
import torch
import yaml
from fakes import FakeBackend, fake_spec
from helpers import REPO, tiny_config

from gptlab.errors import GptlabError
from gptlab.executors import BACKENDS, ExecutorConfig, Resources
from gptlab.run.branching import Branch, record_branches
from gptlab.run.config import TrainConfig, resolve_run_config
from gptlab.run.resultsdir import SUMMARY_CSV
from gptlab.run.rundir import RunDir
from gptlab.run.runner import train_run
from gptlab.run.schedules import SCHEDULES
from gptlab.run.trainer import TrainerCallback, lr_at
from gptlab.sweep.execute import SweepOptions, planner_for, train_stages
from gptlab.sweep.planners import FinishedRuns, FixedSeeds, Stage
from gptlab.sweep.runs import Run, SweepSpec
from gptlab.sweep.spec import load_spec
from gptlab.sweep.trunks import SharedTrunks, steps_trained, trunk_groups
from gptlab.sweep_cli import main as sweep_main

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

WSD = TrainConfig(max_iters=1000, warmup_iters=100, lr=1e-3, min_lr=1e-4, schedule="wsd")  # cooldown from step 800


# -- the schedule --------------------------------------------------------------------------------

def test_wsd_warms_up_holds_then_cools_down_along_1_minus_sqrt():
    lr, low = WSD.lr, WSD.min_lr
    assert WSD.cooldown_start == 800
    assert lr_at(99, WSD) == lr * 100 / 101  # the warmup's last step, as in cosine
    assert lr_at(100, WSD) == lr_at(500, WSD) == lr_at(799, WSD) == lr  # stable
    assert lr_at(800, WSD) == lr  # the cooldown's first step: progress 0
    assert lr_at(850, WSD) == pytest.approx(low + (lr - low) * 0.5)  # a quarter in: 1 - sqrt(1/4) = 1/2
    assert lr_at(900, WSD) == pytest.approx(low + (lr - low) * (1 - math.sqrt(0.5)))  # the midpoint
    assert lr_at(1000, WSD) == low  # min_lr where it ends
    cooldown = [lr_at(s, WSD) for s in range(800, 1001)]
    assert all(a > b for a, b in zip(cooldown, cooldown[1:]))
    assert lr_at(400, TrainConfig(max_iters=4000, warmup_iters=100, schedule="wsd")) == lr  # no length before b(L)


def test_cosine_keeps_its_values_and_every_finished_run_its_id():
    cosine = TrainConfig()  # 2000 steps, warmup 100, decay to min_lr at 2000
    assert lr_at(100, cosine) == cosine.lr and lr_at(2000, cosine) == cosine.min_lr
    assert lr_at(1050, cosine) == pytest.approx((cosine.lr + cosine.min_lr) / 2)  # half way down the cosine
    assert lr_at(575, cosine) == pytest.approx(cosine.min_lr + (cosine.lr - cosine.min_lr) * (1 + math.cos(math.pi / 4)) / 2)
    assert SCHEDULES.names()[:2] == ["cosine", "wsd"]  # the shipped ones, in order (a plugin's come after)
    folders = sorted((REPO / "results" / "transfer" / "runs").iterdir())  # trained before train.schedule existed
    assert len(folders) >= 12
    for folder in folders:
        recorded = yaml.safe_load((folder / "config.yaml").read_text())
        assert "schedule" not in recorded["train"]
        config = resolve_run_config(recorded)
        assert config.train.schedule == "cosine" and folder.name.endswith("_" + config.run_hash())
        ignored = resolve_run_config({**recorded, "train": {**recorded["train"], "cooldown_fraction": 0.5}})
        assert ignored.run_hash() == config.run_hash()  # cosine reads no cooldown_fraction
        wsd = resolve_run_config({**recorded, "train": {**recorded["train"], "schedule": "wsd"}})
        assert wsd.run_hash() != config.run_hash() and wsd.identity()["train"]["schedule"] == "wsd"


@pytest.mark.parametrize("train, message", [
    ({"schedule": "wds"}, "train.schedule: unknown schedule 'wds' (did you mean 'wsd'?); valid: cosine, wsd"),
    ({"schedule": "wsd", "cooldown_fraction": 0}, "train.cooldown_fraction must be in (0, 1], got 0.0"),
    ({"cooldown_fraction": 1.5}, "train.cooldown_fraction must be in (0, 1], got 1.5"),
    ({"cooldown_fraction": "nan"}, "train.cooldown_fraction must be a finite number"),
    ({"schedule": "wsd", "lr_decay_iters": 500}, "train.lr_decay_iters is the cosine's; with train.schedule wsd"),
    ({"schedule": "wsd", "max_iters": 100, "warmup_iters": 90}, "train.warmup_iters (90) must end before the wsd "
                                                                 "cooldown starts at step 80"),
    ({"schedule": "wsd", "max_iters": 2, "warmup_iters": 0}, "train.cooldown_fraction 0.2 x train.max_iters 2 "
                                                              "rounds to no cooldown step"),
])
def test_bad_schedule_settings_are_one_line_naming_the_key(train, message):
    with pytest.raises(GptlabError) as err:
        resolve_run_config({"train": train})
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_bad_schedule_in_a_sweep_exits_2_before_anything_is_written(tmp_path, corpus, capsys):
    config = tiny_config(corpus)
    spec = {"name": "t", "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"train.schedule": ["cosine", "wds"]}, "seeds": 1}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    assert sweep_main([str(tmp_path / "s.yaml"), "--results-dir", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: grid cell (train.schedule=wds): train.schedule: unknown schedule 'wds'")
    assert "\n" not in err and not (tmp_path / "results").exists()


# -- a branch equals a separate run --------------------------------------------------------------

def _wsd(corpus: Path, length: int) -> dict:
    config = tiny_config(corpus, max_iters=length, schedule="wsd")  # log every 10, evaluate every 20
    config["model"]["dropout"] = 0.1  # dropout draws from the RNG state the branch inherits
    return resolve_run_config(config).to_dict()


def _metrics(folder: Path) -> list[dict]:
    with open(folder / RunDir.METRICS, newline="") as f:
        return [{k: v for k, v in row.items() if k != "elapsed_s"} for row in csv.DictReader(f)]  # wall clock


@pytest.fixture(scope="module")
def separate(tmp_path_factory, corpus):
    """The 60-step wsd run trained from step 0, on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("separate") / "run"
    summary = train_run(resolve_run_config(_wsd(corpus, 60)), folder)
    torch.set_num_threads(threads)
    return folder, summary


class Killed(Exception):
    """Stands for a kill at a step: the run stops with the files it has written."""


class KillAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step(self, trainer) -> None:
        if trainer.step == self.step:
            raise Killed


@pytest.mark.parametrize("kill", [None, 45, 55, "handoff"])
def test_a_branch_gives_the_metrics_of_a_run_trained_from_step_0(tmp_path, corpus, separate, kill, monkeypatch):
    """A 60-step run branched from an 80-step trunk at its cooldown start, step 48: between two metrics rows
    (40, 50), so the losses of steps 41-48 travel with the state. The trunk killed before the branch point
    (its checkpoint at 40 is before it), after it, or in the middle of the handoff: the same metrics."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    short, long = _wsd(corpus, 60), _wsd(corpus, 80)
    b = resolve_run_config(short).train.cooldown_start
    assert b == 48 and b % 10 and b < resolve_run_config(long).train.cooldown_start
    trunk, branch = RunDir(tmp_path / "trunk"), RunDir(tmp_path / "branch")
    record_branches(trunk, [Branch(b, "branch", resolve_run_config(short))])
    if kill == "handoff":
        save = RunDir.start_branch

        def dies_before_the_checkpoint(self, config, origin, rows, state, best):
            save(self, config, origin, rows, state, best)
            (self / RunDir.LAST).unlink()  # as if killed before the last file landed
            raise Killed

        monkeypatch.setattr(RunDir, "start_branch", dies_before_the_checkpoint)
    if kill is not None:
        with pytest.raises(Killed):
            train_run(resolve_run_config(long), trunk.path, callbacks=[KillAt(kill)] if kill != "handoff" else [])
        assert branch.state() == ("partial" if kill == 55 else "pending")
        monkeypatch.undo()
    train_run(resolve_run_config(long), trunk.path)
    assert branch.state() == "partial"  # what a run killed at step 48 leaves
    summary = train_run(resolve_run_config(short), branch.path)
    torch.set_num_threads(threads)
    folder, reference = separate
    assert _metrics(branch.path) == _metrics(folder) and len(_metrics(folder)) == 6
    keep = ("status", "best_val_loss", "best_step", "final_val_loss", "final_train_loss", "config")
    assert {k: summary[k] for k in keep} == {k: reference[k] for k in keep}
    assert (branch / RunDir.SAMPLE).read_text() == (folder / RunDir.SAMPLE).read_text()
    assert summary["branched_from"]["run_id"] == "trunk" and summary["branched_from"]["step"] == b
    assert "resumed branch from step 48" in (branch / RunDir.LOG).read_text()  # it trained its cooldown only


def test_a_branch_its_trunk_never_handed_a_state_trains_from_step_0(tmp_path, corpus, separate):
    """Leftovers of an unfinished handoff (no last checkpoint) are no start: the run trains from step 0."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    branch = RunDir(tmp_path / "branch")
    branch.claim(resolve_run_config(_wsd(corpus, 60)))
    (branch / RunDir.TRUNK).write_text('{"run_id": "trunk", "step": 48, "shared_s": 1.0}')
    summary = train_run(resolve_run_config(_wsd(corpus, 60)), branch.path)
    torch.set_num_threads(threads)
    assert "branched_from" not in summary and not (branch / RunDir.TRUNK).exists()
    assert _metrics(branch.path) == _metrics(separate[0])


# -- the sweep: trunks first, then branches --------------------------------------------------------

def _runs(lengths=(40, 80), seeds=(0, 1), schedule="wsd") -> list[Run]:
    runs = []
    for length in lengths:
        for seed in seeds:
            config = resolve_run_config({"train": {"max_iters": length, "warmup_iters": 5, "schedule": schedule},
                                         "seed": seed})
            runs.append(Run(f"{length}_s{seed}", (("train.max_iters", length),), seed, config))
    return runs


def _spec(runs: list[Run]) -> SweepSpec:
    return fake_spec({"train.max_iters": [40, 80]}, runs, {"train.max_iters": 40})


def test_runs_differing_only_in_length_under_wsd_share_the_longest_as_their_trunk():
    groups = trunk_groups(_runs((40, 80, 160)))
    assert [(g.trunk.run_id, [(r.run_id, b) for r, b in g.branches]) for g in groups] == [
        ("160_s0", [("40_s0", 32), ("80_s0", 64)]), ("160_s1", [("40_s1", 32), ("80_s1", 64)])]
    assert steps_trained(_runs((40, 80, 160))) == (2 * (160 + 8 + 16), 2 * 280)
    assert trunk_groups(_runs(schedule="cosine")) == [] and trunk_groups(_runs(seeds=(0,), lengths=(80,))) == []
    assert isinstance(planner_for(_spec(_runs(schedule="cosine")), io.StringIO()), FixedSeeds)  # nothing to share
    dask = dataclasses.replace(_spec(_runs()), executor=ExecutorConfig(backend="dask", scheduler="local"))
    out = io.StringIO()
    assert isinstance(planner_for(dask, out), FixedSeeds) and "with dask each length trains from step 0" in out.getvalue()


def _loop(tmp_path: Path, planner, backend) -> tuple[tuple[Run, ...], str]:
    out = io.StringIO()
    options = SweepOptions(tmp_path, tmp_path / "reports", stream=out, progress_every_s=60)
    return train_stages(_spec(_runs()), planner, Resources(1, 1, "cpu", 0, "test"), options, backend), out.getvalue()


def test_each_stage_trains_its_trunks_then_their_branches_which_wait_for_them(tmp_path):
    runs = _runs()
    planner = SharedTrunks(FixedSeeds(runs, "fake"), runs, io.StringIO())
    first = planner.next_stage(FinishedRuns(tmp_path))
    assert [r.run_id for r in first.runs] == [r.run_id for r in first.planned] == ["80_s0", "80_s1"]
    assert first.title == "sweep fake, trunks" and first.tag == "trunks"
    assert RunDir(tmp_path / "runs" / "80_s0").branches() == [{"step": 32, "run_id": "40_s0", "config": runs[0].config.to_dict()}]
    second = planner.next_stage(FinishedRuns(tmp_path, ({"status": "ok"},) * 2))
    assert second == Stage("sweep fake, cooldown branches", (runs[0], runs[1]), tuple(runs), tag="branches")
    assert planner.next_stage(FinishedRuns(tmp_path, ({"status": "ok"},) * 4)) is None
    assert "176 steps instead of 240 (73%)" in planner.preview().intro

    backend = FakeBackend(lambda config: 1.0, fail=("80_s1",))  # a failed trunk: no branch trains, the sweep says why
    planned, out = _loop(tmp_path / "failed", SharedTrunks(FixedSeeds(runs, "fake"), runs, io.StringIO()), backend)
    assert backend.trained == ["80_s0", "80_s1"] and [r.run_id for r in planned] == ["80_s0", "80_s1"]
    assert "the trunks did not all finish: their shorter lengths branch from them once they have" in out


class TwoStages:
    """A planner like tuning's: seed 0 first, then seed 1 (runs it only names once stage 1 is done)."""

    def __init__(self, runs: list[Run]) -> None:
        self.runs, self.asked = runs, []

    def next_stage(self, finished: FinishedRuns) -> Stage | None:
        self.asked.append(len(finished.rows))
        if len(self.asked) > 2:
            return None
        first = tuple(r for r in self.runs if r.seed == 0)
        stage = first if len(self.asked) == 1 else tuple(self.runs)
        return Stage(f"stage {len(self.asked)}", stage, stage, tag=f"stage {len(self.asked)}")

    def preview(self):
        return None


def test_shared_trunks_split_every_stage_of_the_planner_they_wrap(tmp_path):
    runs = _runs()
    base, backend = TwoStages(runs), FakeBackend(lambda config: 1.0)
    planned, out = _loop(tmp_path, SharedTrunks(base, runs, io.StringIO()), backend)
    assert backend.trained == ["80_s0", "40_s0", "80_s1", "40_s1"]  # each stage: its trunks, then its branches
    assert base.asked == [0, 2, 4]  # asked with the rows of all its planned runs, never of half a stage
    assert "stage 2, trunks: [2/2] 80 seed 1: ok" in out and "stage 2, branches: [2/2] 40 seed 1: ok" in out
    assert [r.run_id for r in planned] == [r.run_id for r in runs]


def test_a_wsd_length_sweep_trains_each_stable_phase_once_and_equals_separate_runs(tmp_path, corpus):
    """The sweep's loop on the loky backend (the report and the dry run's timing left out: they add nothing here)."""
    config = tiny_config(corpus, schedule="wsd")
    del config["train"]["max_iters"]
    config["model"]["dropout"] = 0.1
    raw = {"name": "t", "base": {k: config[k] for k in ("model", "train", "data")},
           "grid": {"train.max_iters": [40, 80]}, "seeds": 1, "executor": {"n_jobs": 1, "threads": 1}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    spec, out = load_spec(tmp_path / "s.yaml"), io.StringIO()
    results = tmp_path / "results" / "t"
    planner = planner_for(spec, out)
    assert "88 steps instead of 120 (73%)" in planner.preview().intro  # what --dry-run prints
    options = SweepOptions(results, tmp_path / "reports", stream=out, progress_every_s=60)
    planned = train_stages(spec, planner, Resources(1, 1, "cpu", 0, "test"), options, BACKENDS.get("loky")(spec.executor))
    assert [r.run_id for r in planned] == [r.run_id for r in spec.runs]
    assert "sweep t, trunks: 1 runs" in out.getvalue() and "sweep t, cooldown branches: 1 runs" in out.getvalue()
    with open(results / SUMMARY_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["train.max_iters"] for r in rows] == ["40", "80"] and "branched_from" not in rows[0]
    summaries = [RunDir(results / "runs" / r["run_id"]).summary().to_dict() for r in rows]
    trained = [int(r["train.max_iters"]) - (s.get("branched_from") or {"step": 0})["step"] for r, s in zip(rows, summaries)]
    assert trained == [8, 80]  # the 40-step run trained its cooldown alone: 88 steps in all, not 120

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    for row, summary in zip(rows, summaries):
        alone = train_run(resolve_run_config(summary["config"]), tmp_path / "alone" / row["run_id"])
        assert _metrics(results / "runs" / row["run_id"]) == _metrics(tmp_path / "alone" / row["run_id"])
        assert float(row["best_val_loss"]) == alone["best_val_loss"] and int(row["best_step"]) == alone["best_step"]
    torch.set_num_threads(threads)
