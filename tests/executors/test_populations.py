"""`executor.population` in the sweep: a population run has its own id (the lone run's label and seed, another hash:
`RunConfig.population`), and only such runs are batched; over the tests' 10 steps a member writes its lone run's
files, summary fields and rows to float tolerance; a diverging member is isolated, a killed population resumes (or
a member finishes alone), `auto` trains lone runs on CPU, bad values are refused in one line, the compile share is
reported.

Tolerance: 1e-5 nats over 10 steps, as tests/run/test_population.py (measured differences ~1e-6: float32 reductions
in another order). Over a whole run they grow past any fixed tolerance (docs/GPU.md): hence the ids of their own.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json

import pytest
import yaml
from fakes import write_spec
from helpers import skip_figures, tiny_config

from gptlab.errors import GptlabError
from gptlab.executors.base import ExecutorConfig, Resources, Task
from gptlab.executors.populations import execute_group, group_tasks, population_key, population_size
from gptlab.executors.worker import execute_run
from gptlab.run.config import resolve_run_config
from gptlab.run.identity import check_run_identity
from gptlab.run.population_run import train_population
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir, RunSummary
from gptlab.sweep.execute import SweepOptions, compile_line, execute
from gptlab.sweep.reuse import Reuse, identity, run_label
from gptlab.sweep.spec import load_spec
from gptlab.sweep_cli import main as sweep_main

TOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore:There is a performance drop")  # vmap's attention fallback on CPU
LRS = [2e-2, 1e-2, 1e3]  # two that learn (ok, not collapsed), one that diverges within a few steps
TRAIN = {"max_iters": 10, "log_interval": 1, "eval_interval": 5}
NUMBERS = ("best_val_loss", "final_val_loss", "final_train_loss", "best_test_loss")
EXACT = ("seed", "status", "best_step", "diverged_step", "params", "params_non_embedding", "error")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, corpus):
    """Three planned runs of one architecture (lrs 2e-2, 1e-2, 1e3, seed 0) and their lone results."""
    root = tmp_path_factory.mktemp("members")
    config = tiny_config(corpus, **TRAIN)
    config["train"].pop("lr")
    config["data"]["test_fraction"] = 0.05
    (root / "s.yaml").write_text(yaml.safe_dump({"name": "s", "base": config_sections(config),
                                                 "grid": {"train.lr": LRS}, "seeds": [0]}))
    planned = load_spec(root / "s.yaml").runs
    lone = [execute_run(task) for task in tasks(planned, root / "lone")]
    return planned, lone, root


def config_sections(config):
    return {k: config[k] for k in ("model", "train", "data")}


def tasks(planned, where, member=False):
    """Tasks of the planned runs in `where`; `member`: their configs marked as a population sweep plans them."""
    return tuple(Task(r.run_id, dataclasses.replace(r.config, population=member), str(where / r.run_id), 1)
                 for r in planned)


def assert_same_run(folder, lone_folder, member=False):
    """The folder holds what its lone run's holds: the same files, summary fields and metrics rows; a `member`
    planned as one (`population: true` in its config) under the lone run's label and seed with another hash."""
    mine, theirs = RunDir(folder).summary().to_dict(), RunDir(lone_folder).summary().to_dict()
    assert {k: mine.get(k) for k in EXACT} == {k: theirs.get(k) for k in EXACT}
    assert run_label(mine["run_id"]) == run_label(theirs["run_id"])
    assert (identity(mine["run_id"]) != identity(theirs["run_id"])) == member
    for key in NUMBERS:
        assert (mine[key] is None) == (theirs[key] is None), key
        if theirs[key] is not None:
            assert mine[key] == pytest.approx(theirs[key], abs=TOL), key
    assert mine["config"] == {**theirs["config"], **({"population": True} if member else {})}
    # progress.json: a worker clears it; place.json: a sweep writes it
    names = ({p.name for p in f.iterdir()} - {RunDir.PROGRESS, RunDir.PLACE} for f in (folder, lone_folder))
    assert next(names) == next(names)
    rows, lone_rows = (list(csv.DictReader(open(f / "metrics.csv"))) for f in (folder, lone_folder))
    assert [r["step"] for r in rows] == [r["step"] for r in lone_rows]
    if theirs["status"] == "diverged":  # its lr of 1e3 amplifies float32 rounding: only its first row is close
        rows, lone_rows = rows[:1], lone_rows[:1]
    for row, lone_row in zip(rows, lone_rows):
        for key in ("train_loss", "val_loss", "grad_norm"):
            assert (row[key] == "") == (lone_row[key] == "")
            if row[key] not in ("", "inf", "nan"):
                assert float(row[key]) == pytest.approx(float(lone_row[key]), abs=TOL), (row["step"], key)


@pytest.mark.slow
def test_a_population_writes_each_members_lone_run_and_isolates_a_diverging_one(runs):
    planned, lone, root = runs
    results = execute_group(tasks(planned, root / "pop"))
    assert [r.run_id for r in results] == [r.run_id for r in lone]
    assert [r.status for r in results] == [r.status for r in lone] == ["ok", "ok", "diverged"]
    for run in planned:
        assert_same_run(root / "pop" / run.run_id, root / "lone" / run.run_id)
    summary = results[0].summary
    assert summary.extra["population"]["size"] == 3 and summary.extra["population"]["members"] == [r.run_id for r in planned]
    assert summary.compile_s == 0 and all(r.summary.compile_s == 0 for r in lone)  # train.compile: off on CPU


def test_a_compiled_lone_run_times_its_first_step_as_compile(corpus, monkeypatch, tmp_path):
    import torch

    from gptlab.run.runner import train_run

    monkeypatch.setattr(torch, "compile", lambda model, **kwargs: model)  # a stand-in: the first step is still timed
    summary = train_run(resolve_run_config(tiny_config(corpus, max_iters=2, eval_interval=2, compile=True)), tmp_path / "run")
    assert 0 < summary["compile_s"] <= summary["wall_s"]


class Killed(BaseException):
    """Stands in for a kill between two steps (every file written by then is whole: atomic writes)."""


class KillAt:
    def __init__(self, step):
        self.step = step

    def on_step(self, population):
        if population.step == self.step:
            raise Killed()


@pytest.mark.slow
def test_a_killed_population_resumes_and_a_member_without_its_checkpoint_finishes_alone(runs):
    planned, _, root = runs
    member_alone = 1
    where = root / "killed"
    folders = [where / r.run_id for r in planned]
    configs = [r.config for r in planned]
    with pytest.raises(Killed):
        train_population(configs, folders, callbacks=[KillAt(7)])  # after the checkpoints of step 5
    assert all((f / RunDir.LAST).exists() and not (f / RunDir.SUMMARY).exists() for f in folders)
    # Its checkpoints lost: it trains alone from step 0, the other two resume as a population from step 5.
    for name in (RunDir.LAST, RunDir.BEST):
        (folders[member_alone] / name).unlink()
    summaries = train_population(configs, folders)
    assert [s["status"] for s in summaries] == ["ok", "ok", "diverged"]
    for run, folder in zip(planned, folders):
        assert_same_run(folder, root / "lone" / run.run_id)
    assert "population" not in summaries[member_alone] and summaries[0]["population"]["size"] == 2


@pytest.mark.slow
def test_grouping_by_architecture_and_shared_settings(runs, tmp_path):
    planned, _, root = runs
    other = tiny_config(root, **TRAIN)
    other["model"]["n_layer"] = 1
    odd = Task("odd", dataclasses.replace(resolve_run_config(other), population=True), str(tmp_path / "odd"), 1)
    batch = tasks(planned, tmp_path, member=True) * 2 + (odd,)  # 6 runs of one architecture (ids repeated: grouping only)
    units = group_tasks(batch, 4)
    assert sorted(len(u) for u in units) == [1, 3, 3]  # 6 at most 4 a population: 3 and 3; the other model alone
    assert (odd,) in units
    assert group_tasks(batch, 1) == [(t,) for t in batch]
    dropout = planned[0].config.with_settings({"model.dropout": 0.1})
    assert population_key(dropout, auto=True) is None and population_key(dropout, auto=False) is not None
    RunDir(tmp_path / planned[0].run_id).write_branches([{"step": 5, "run_id": "x", "config": {}}])
    assert any(u == (batch[0],) for u in group_tasks(batch, 4))  # a shared trunk trains alone


def plan(tmp_path, corpus, name, train=TRAIN, **executor):
    """The runs a sweep of 2 lrs x 2 seeds plans under `executor` (over the loky defaults)."""
    spec = write_spec(tmp_path / name, corpus, {"train.lr": LRS[:2]}, seeds=2, train=train,
                      executor={"backend": "loky", "n_jobs": 1, "threads": 1, **executor})
    return load_spec(spec).runs


def test_a_population_run_has_its_own_id_and_a_lone_run_keeps_todays(tmp_path, corpus):
    """A member is not its lone run (its losses drift apart as training goes on: docs/GPU.md), so its id says how it
    trains: the same label and seed, another hash. Where the sweep trains every run alone, the ids are today's."""
    lone, members = plan(tmp_path, corpus, "off"), plan(tmp_path, corpus, "pop", population=3)
    assert [(run_label(r.run_id), r.seed) for r in members] == [(run_label(r.run_id), r.seed) for r in lone]
    assert not {identity(r.run_id) for r in members} & {identity(r.run_id) for r in lone}
    assert all(r.config.population for r in members) and not any(r.config.population for r in lone)
    for alone in ({"population": 1}, {"population": "auto"}, {"population": 3, "backend": "dask", "scheduler": "local"}):
        assert [r.run_id for r in plan(tmp_path, corpus, "alone", **alone)] == [r.run_id for r in lone], alone
    graphs = {**TRAIN, "device": "auto", "cuda_graphs": True}  # never in a population: a population's step has no graphs
    assert not any(r.config.population for r in plan(tmp_path, corpus, "graphs", train=graphs, population=3))
    member = members[0]
    check_run_identity(member.run_id, member.config, [])  # the worker's check: the id is the config's own
    back = resolve_run_config(member.config.to_dict())  # config.yaml says so, and reads back as the same run
    assert member.config.to_dict()["population"] is True and back == member.config
    assert "population" not in lone[0].config.to_dict()  # a lone run's config.yaml is what it always was


def test_reuse_never_takes_a_lone_run_for_a_population_run_nor_the_reverse(tmp_path, corpus):
    lone, members = plan(tmp_path, corpus, "off"), plan(tmp_path, corpus, "pop", population=3)
    for name, runs in (("lone", lone), ("members", members)):
        for run in runs:
            folder = tmp_path / name / "runs" / run.run_id
            folder.mkdir(parents=True)
            (folder / RunDir.SUMMARY).write_text(json.dumps({"run_id": run.run_id, "status": "diverged"}))
    assert all(Reuse([ResultsDir(tmp_path / "lone")]).find(r.run_id) is None for r in members)
    assert all(Reuse([ResultsDir(tmp_path / "members")]).find(r.run_id) is None for r in lone)
    assert Reuse([ResultsDir(tmp_path / "lone")]).find(lone[0].run_id) is not None  # the same run is found


def test_only_runs_planned_as_members_share_a_population(tmp_path, corpus):
    """The executor batches a run only where its id says it trains in a population: a lone run is never batched."""
    lone, members = plan(tmp_path, corpus, "off"), plan(tmp_path, corpus, "pop", population=3)
    batch = tuple(Task(r.run_id, r.config, str(tmp_path / "runs" / r.run_id), 1) for r in (*lone, *members))
    units = group_tasks(batch, 3)
    assert sorted(len(u) for u in units) == [1, 1, 1, 1, 2, 2]  # 4 members at most 3 a population: 2 and 2
    assert {t.run_id for u in units if len(u) > 1 for t in u} == {r.run_id for r in members}


def test_a_sweep_refuses_to_mark_its_runs_by_hand(tmp_path, corpus):
    """Which runs train in a population is the executor's to say: `base: {population: true}` would give lone runs
    a member's id."""
    spec = write_spec(tmp_path, corpus, {"train.lr": LRS[:2]}, train=TRAIN)
    raw = yaml.safe_load(spec.read_text())
    raw["base"]["population"] = True
    spec.write_text(yaml.safe_dump(raw))
    with pytest.raises(GptlabError, match=r"^base.population: not a run setting: executor.population .*$"):
        load_spec(spec)


def test_auto_is_lone_runs_on_cpu_and_off_is_the_default():
    assert ExecutorConfig().population == "off" and "population" not in ExecutorConfig().to_dict()
    assert population_size(ExecutorConfig.from_mapping({"population": "auto"}), "cpu") == 1
    assert population_size(ExecutorConfig.from_mapping({"population": False}), "cuda") == 1  # YAML's bare `off`
    assert population_size(ExecutorConfig.from_mapping({"population": 3}), "cpu") == 3


@pytest.mark.parametrize("value", ["fast", 0, -2, 1.5, True, [3], 10_000])
def test_bad_population_values_are_one_line_errors(value):
    with pytest.raises(GptlabError) as err:
        ExecutorConfig.from_mapping({"population": value})
    message = str(err.value)
    assert message.startswith("executor.population:") and "\n" not in message


def test_compile_share_line():
    assert compile_line([]) is None and compile_line([RunSummary(wall_s=3.0)]) is None  # runs of before the field
    assert compile_line([RunSummary(compile_s=0.0, wall_s=3.0)] * 2).startswith("compile: 0 s of 6 s of training over 2")
    assert "(25% of the workers' time)" in compile_line([RunSummary(compile_s=1.0, wall_s=4.0)])


@pytest.mark.slow
def test_a_sweep_trains_its_runs_as_one_population_under_ids_of_their_own(runs, tmp_path):
    """Over 10 steps the members' rows are their lone runs' to float tolerance; their ids are not the lone runs'."""
    planned, _, root = runs
    spec = load_spec(root / "s.yaml", executor_overrides={"population": 3, "n_jobs": 1, "threads": 1})
    out = io.StringIO()
    plan = Resources(workers=1, threads=1, device="cpu", gpus=0, reason="test")
    assert execute(spec, plan, SweepOptions(tmp_path / "s", tmp_path / "reports", stream=out, progress_every_s=60)) == 0
    assert "populations of up to 3 runs" in out.getvalue() and "compile: 0 s of" in out.getvalue()
    rows = list(csv.DictReader(open(tmp_path / "s" / "summary.csv")))
    assert [r["run_id"] for r in rows] == [r.run_id for r in spec.runs]
    assert [run_label(r["run_id"]) for r in rows] == [run_label(r.run_id) for r in planned]
    for row, lone in zip(rows, planned):
        assert RunDir(tmp_path / "s" / "runs" / row["run_id"]).summary().extra["population"]["size"] == 3
        assert_same_run(tmp_path / "s" / "runs" / row["run_id"], root / "lone" / lone.run_id, member=True)


@pytest.mark.slow
def test_a_sweep_with_populations_gives_ids_of_its_own_and_the_lone_sweeps_rows(tmp_path, corpus, capsys):
    """At `population: 3` the runs are the lone sweep's (label, seed, rows to 1e-5 over 10 steps) under other hashes;
    `auto` on CPU trains the lone runs themselves, under their ids."""
    rows = {}
    with pytest.MonkeyPatch.context() as mp:
        skip_figures(mp)
        for population in ("off", 3, "auto"):
            spec = write_spec(tmp_path / str(population), corpus, {"train.lr": LRS[:2]}, seeds=2, train=TRAIN,
                              executor={"backend": "loky", "n_jobs": 2, "threads": 1, "population": population})
            results = tmp_path / str(population) / "results"
            assert sweep_main([str(spec), "--results-dir", str(results), "--reports-dir", str(tmp_path / "rep")]) == 0
            err = capsys.readouterr().err
            assert "compile: 0 s of" in err and "no run was compiled" in err
            rows[population] = list(csv.DictReader(open(results / "t" / "summary.csv")))
            sizes = {(RunDir(results / "t" / "runs" / r["run_id"]).summary().extra.get("population") or {}).get("size")
                     for r in rows[population]}
            assert sizes == ({2} if population == 3 else {None})  # 2 seeds x 2 lrs: two populations of 2
            if population == "auto":
                assert "executor.population auto: lone runs on cpu" in err
    assert [r["run_id"] for r in rows["auto"]] == [r["run_id"] for r in rows["off"]]
    assert [run_label(r["run_id"]) for r in rows[3]] == [run_label(r["run_id"]) for r in rows["off"]]
    assert not {identity(r["run_id"]) for r in rows[3]} & {identity(r["run_id"]) for r in rows["off"]}
    for population in (3, "auto"):
        for row, lone in zip(rows[population], rows["off"]):
            assert {k: row[k] for k in ("seed", "status", "best_step", "params", "train.lr")} == \
                {k: lone[k] for k in ("seed", "status", "best_step", "params", "train.lr")}
            for key in ("best_val_loss", "final_val_loss", "final_train_loss"):
                assert float(row[key]) == pytest.approx(float(lone[key]), abs=TOL)


def test_the_memory_plan_counts_a_populations_members(tmp_path, corpus, monkeypatch):
    """A worker holds every member's weights, moments and activations, and its corpus and evaluation batch once."""
    import psutil

    from gptlab.executors.plan import WORKER_BASE_BYTES, estimate_run_bytes, plan_resources
    from gptlab.sweep import preflight

    config = resolve_run_config(tiny_config(corpus))
    one, two, four = (estimate_run_bytes(config, 65, 10**6, members=k) for k in (1, 2, 4))
    assert four - one == 3 * (two - one) and 0 < two - one < one - WORKER_BASE_BYTES - 10**6

    def spec(executor):
        base = config_sections(tiny_config(corpus))
        base["train"].pop("lr")
        raw = {"name": "s", "base": base, "grid": {"train.lr": [1e-3, 2e-3, 3e-3]}, "executor": executor}
        (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
        return load_spec(tmp_path / "s.yaml")

    batched, on_dask = spec({"population": 4}), spec({"population": 4, "backend": "dask", "scheduler": "local"})
    (corpus_info,) = preflight.check_datasets(batched).values()
    alone = estimate_run_bytes(batched.runs[0].config, corpus_info.vocab_size, corpus_info.memory_bytes)
    three = estimate_run_bytes(batched.runs[0].config, corpus_info.vocab_size, corpus_info.memory_bytes, members=3)
    assert preflight.check_memory(batched, "cpu", preflight.check_datasets(batched)) == three > alone  # 3 runs
    assert preflight.check_memory(on_dask, "cpu", preflight.check_datasets(on_dask)) == alone  # dask: lone runs
    monkeypatch.setattr(preflight, "memory_budget", lambda device: ((alone + three) // 2, "of a stand-in"))
    with pytest.raises(GptlabError, match=r"a population of 3 runs like .* or lower executor.population$"):
        preflight.check_memory(batched, "cpu", preflight.check_datasets(batched))
    plan = plan_resources(32, batched.executor, "cpu", int(psutil.virtual_memory().available / 2))
    assert plan.members == 4 and plan.workers == 1 and "memory allows 1 population(s) of up to 4 runs" in plan.reason
