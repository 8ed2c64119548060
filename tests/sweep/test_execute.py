"""The sweep runner: layout, resume, kill + restart, fault isolation, plugins, validation, dry run."""
from __future__ import annotations

import csv
import multiprocessing
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from fakes import boom_activation, write_spec
from helpers import REPO, python_m, skip_figures

from gptlab.executors import WORKER_DIED, ExecutorConfig, plan_resources
from gptlab.sweep_cli import main as sweep_main

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

PLUGIN = '''
"""Test plugin: activations that misbehave on purpose."""
import os, signal
import torch
from gptlab.model.activations import ACTIVATIONS, Activation

''' + boom_activation("boom") + '''
@ACTIVATIONS.register("nan_soon")
class NanSoon(Activation):
    """GELU that returns NaN after 30 training calls."""
    calls = 0
    def forward(self, h):
        if self.training:
            NanSoon.calls += 1
        return h * float("nan") if NanSoon.calls > 30 else torch.nn.functional.gelu(h)

@ACTIVATIONS.register("sigkill")
class SigKill(Activation):
    """Kills its own process, as the out-of-memory killer would."""
    def forward(self, h):
        if self.training:
            os.kill(os.getpid(), signal.SIGKILL)
        return h

@ACTIVATIONS.register("plugin_gelu")
class PluginGelu(Activation):
    """A well-behaved activation from outside the package."""
    def forward(self, h):
        return torch.nn.functional.gelu(h)
'''


@pytest.fixture(scope="module", autouse=True)
def no_figures_here():
    """No test here reads the report's figures, and each sweep would draw them (seconds each)."""
    with pytest.MonkeyPatch.context() as mp:
        skip_figures(mp)
        yield


@pytest.fixture(scope="session")
def plugin(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plugins") / "misbehaving.py"
    path.write_text(PLUGIN)
    return path


def read_summary(results: Path) -> list[dict]:
    with open(results / "summary.csv") as f:
        return list(csv.DictReader(f))


GRID = {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"]}


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory, corpus):
    """One 2x2 x 2-seed sweep, trained once and shared by the tests that only read it; it is also the
    uninterrupted reference of the kill test (80 steps, a checkpoint every 20: killed once a third run has
    one, six runs are still unfinished)."""
    root = tmp_path_factory.mktemp("sweep")
    spec = write_spec(root, corpus, GRID, seeds=2, train={"max_iters": 80, "eval_interval": 20})
    code = sweep_main([str(spec), "--results-dir", str(root / "results"), "--reports-dir", str(root / "reports")])
    return root, spec, code


def test_grid_trains_every_run_into_the_layout(finished_sweep):
    root, _, code = finished_sweep
    assert code == 0
    results = root / "results" / "t"
    rows = read_summary(results)
    assert len(rows) == 8
    assert list(rows[0]) == ["run_id", "seed", "model.norm", "model.activation", "status", "best_val_loss",
                             "best_step", "final_val_loss", "final_train_loss", "params", "params_non_embedding",
                             "tokens_per_sec", "wall_s", "error", "best_val_bpc", "role"]
    assert {(r["model.norm"], r["model.activation"], r["seed"]) for r in rows} == {
        (n, a, s) for n in ("pre", "post") for a in ("gelu", "relu") for s in ("0", "1")}
    assert all(r["status"] == "ok" and float(r["best_val_loss"]) < 3.0 for r in rows)
    for row in rows:
        folder = results / "runs" / row["run_id"]
        for name in ("config.yaml", "metrics.csv", "summary.json", "train.log"):
            assert (folder / name).is_file()
    resolved = yaml.safe_load((results / "sweep.yaml").read_text())
    assert resolved["seeds"] == [0, 1] and resolved["grid"] == GRID and resolved["command"].startswith("python -m gptlab.sweep")


def test_rerun_trains_nothing_and_a_deleted_run_is_retrained(finished_sweep, capsys):
    root, spec, _ = finished_sweep
    results = root / "results" / "t"
    before = {r["run_id"]: r for r in read_summary(results)}
    args = [str(spec), "--results-dir", str(root / "results"), "--reports-dir", str(root / "reports")]
    capsys.readouterr()
    assert sweep_main(args) == 0
    assert "8 already finished, 0 to train" in capsys.readouterr().err

    victim = sorted(before)[3]
    mtimes = {rid: (results / "runs" / rid / "summary.json").stat().st_mtime_ns for rid in before}
    subprocess.run(["rm", "-rf", str(results / "runs" / victim)], check=True)
    assert sweep_main(args) == 0
    assert "7 already finished, 1 to train" in capsys.readouterr().err
    after = {r["run_id"]: r for r in read_summary(results)}
    losses = ("status", "best_val_loss", "best_step", "final_val_loss", "final_train_loss", "params")
    assert {k: {c: r[c] for c in losses} for k, r in after.items()} == {
        k: {c: r[c] for c in losses} for k, r in before.items()}  # same id, same losses: deterministic
    changed = [rid for rid in before if (results / "runs" / rid / "summary.json").stat().st_mtime_ns != mtimes.get(rid)]
    assert changed == [victim]


def test_sweep_killed_mid_run_and_restarted_matches_an_uninterrupted_one(finished_sweep, tmp_path):
    root, spec, _ = finished_sweep  # the uninterrupted sweep (its spec: 80 steps a run)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [str(spec), "--reports-dir", str(tmp_path / "reports"), "--results-dir", str(tmp_path / "killed")]
    proc = subprocess.Popen(python_m("gptlab.sweep", figures=False) + args, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    runs = tmp_path / "killed" / "t" / "runs"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not (
            runs.exists() and len(list(runs.glob("*/ckpt_last.pt"))) >= 3):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    err = proc.communicate(timeout=30)[1]
    finished = len(list(runs.glob("*/summary.json")))
    assert finished < 8, "the sweep finished before it could be killed"
    assert proc.returncode == -signal.SIGKILL, err  # killed, not stopped by an error of its own

    assert sweep_main(args) == 0  # the restart (in this process: what it resumes from is on disk)
    clean, killed = read_summary(root / "results" / "t"), read_summary(tmp_path / "killed" / "t")
    keep = ("run_id", "status", "best_val_loss", "best_step", "final_val_loss", "final_train_loss")
    assert [{k: r[k] for k in keep} for r in killed] == [{k: r[k] for k in keep} for r in clean]


def test_failed_and_diverged_runs_are_recorded_and_siblings_finish(tmp_path, corpus, plugin, capsys):
    spec = write_spec(tmp_path, corpus, {"model.activation": ["plugin_gelu", "boom", "nan_soon"]}, seeds=1,
                      plugins=[plugin])
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "rep")])
    assert code == 1  # a failed run makes the sweep exit non-zero
    rows = {r["model.activation"]: r for r in read_summary(tmp_path / "results" / "t")}
    assert rows["plugin_gelu"]["status"] == "ok"  # a registry entry from a plugin module trains
    assert rows["boom"]["status"] == "failed" and "boom: this activation always fails" in rows["boom"]["error"]
    error_txt = tmp_path / "results" / "t" / "runs" / rows["boom"]["run_id"] / "error.txt"
    assert "Traceback" in error_txt.read_text() and "RuntimeError" in error_txt.read_text()
    assert rows["nan_soon"]["status"] == "diverged"
    out = capsys.readouterr().out  # results on stdout, progress on stderr
    assert "2 run(s) did not finish ok" in out and str(error_txt) in out

    # Without the failing cell the same kind of sweep (one diverged run) exits 0.
    spec = write_spec(tmp_path, corpus, {"model.activation": ["plugin_gelu", "nan_soon"]}, seeds=1, plugins=[plugin])
    assert sweep_main([str(spec), "--results-dir", str(tmp_path / "r2"), "--reports-dir", str(tmp_path / "rep2")]) == 0
    capsys.readouterr()
    # A diverged run is a result: a rerun does not train it again.
    assert sweep_main([str(spec), "--results-dir", str(tmp_path / "r2"), "--reports-dir", str(tmp_path / "rep2")]) == 0
    assert "2 already finished, 0 to train" in capsys.readouterr().err


def test_failed_runs_are_rerun_only_when_asked(tmp_path, corpus, plugin, capsys):
    spec = write_spec(tmp_path, corpus, {"model.activation": ["plugin_gelu", "boom"]}, seeds=1, plugins=[plugin])
    args = [str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "rep")]
    assert sweep_main(args) == 1
    capsys.readouterr()
    assert sweep_main(args) == 1
    assert "2 already finished, 0 to train" in capsys.readouterr().err
    assert sweep_main(args + ["--rerun-failed"]) == 1
    err = capsys.readouterr().err
    assert "1 already finished, 1 to train" in err and "no failed run to rerun" not in err


def test_rerun_failed_says_in_one_line_when_no_run_failed(tmp_path, corpus, capsys):
    """After an interrupt nothing failed: --rerun-failed resumes the unfinished runs as a plain rerun does, and says so
    rather than seem to have rerun something."""
    spec = write_spec(tmp_path, corpus, seeds=1)
    args = [str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "rep"),
            "--rerun-failed"]
    assert sweep_main(args) == 0
    assert "no failed run to rerun" in capsys.readouterr().err  # a first sweep: nothing failed, nothing to resume
    runs = sorted((tmp_path / "results" / "t" / "runs").iterdir())
    (runs[0] / "summary.json").unlink()  # as a kill leaves a run: its last checkpoint, no summary
    assert sweep_main(args) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "--rerun-failed" in line]
    assert lines == ["--rerun-failed: no failed run to rerun; resuming the 1 unfinished run(s) from their last "
                     "checkpoints"]


BAD_SPECS = [
    ({"nmae": "x"}, "unknown key 'nmae' (did you mean 'name'?)"),
    ({"grid": {"model.nrom": ["pre"]}}, "grid: unknown key 'model.nrom' (did you mean 'model.norm'?)"),
    ({"grid": {"model.norm": ["pre", "psot"]}}, "model.norm: unknown norm 'psot' (did you mean 'post'?)"),
    ({"grid": {"model.norm": "pre"}}, "grid.model.norm: must be a non-empty list"),
    ({"grid": {"model.norm": ["pre", "pre"]}}, "grid.model.norm: lists a level twice"),
    ({"grid": {}}, "grid: needs at least one factor"),
    ({"base": {"model": {"n_head": 3}}}, "base: model.n_embd (32) must be divisible by model.n_head (3)"),
    ({"grid": {"model.dropout": [0.0, 1.5]}}, "grid cell (model.dropout=1.5): model.dropout must be a number in [0, 1)"),
    ({"grid": {"train.weight_decay": ["lots"]}}, "train.weight_decay must be float, got 'lots'"),
    ({"base": {"train": {"max_iter": 5}}}, "base: unknown key 'train.max_iter' (did you mean 'max_iters'?)"),
    ({"base": {"model": {"norm": "pre"}}}, "model.norm is set in both base and grid"),
    ({"seeds": 0}, "seeds: a count must be between 1 and 10,000, got 0"),
    ({"seeds": [0, 0]}, "seeds: lists a seed twice"),
    ({"exclude": [{"model.norm": "pre"}, {"model.norm": "post"}]}, "exclude: removes every cell of the grid"),
    ({"exclude": [{"model.norm": "sandwich"}]}, "exclude[0]: model.norm level 'sandwich' (str) is not in the grid"),
    ({"grid": {"train.weight_decay": [0.1, 1.0e-1]}}, "grid.train.weight_decay: lists a level twice"),
    ({"grid": {"train.weight_decay": [0.1, "1e-1"]}},  # YAML reads 1e-1 as text: summary.csv could not tell them apart
     "grid.train.weight_decay: lists a level twice (0.1 and '1e-1' are one level): [0.1, '1e-1']"),
    ({"executor": {"backend": "ray"}}, "executor.backend: unknown backend 'ray'"),
    ({"executor": {"n_jobs": 0}}, "executor.n_jobs: must be 'auto' or a positive integer"),
    ({"plugins": ["no_such_plugin_module"]}, "plugins: cannot import 'no_such_plugin_module'"),
    ({"name": "../escape"}, "name: must be a folder-safe name"),
    ({"baseline": {"model.norm": "mid"}}, "baseline: model.norm level 'mid' (str) is not in the grid"),
    ({"data": {"dataset": "x"}}, "unknown key 'data': run settings go under base (base.data)"),
]


@pytest.mark.parametrize("change, message", BAD_SPECS, ids=[m[:40] for _, m in BAD_SPECS])
def test_invalid_spec_is_one_line_naming_the_key_and_writes_nothing(change, message, tmp_path, corpus, capsys):
    spec_path = write_spec(tmp_path, corpus, {"model.norm": ["pre", "post"]}, seeds=2)
    spec = yaml.safe_load(spec_path.read_text())
    for key, value in change.items():
        if key == "base":
            for section, values in value.items():
                spec["base"][section].update(values)
        else:
            spec[key] = value
    spec_path.write_text(yaml.safe_dump(spec))
    code = sweep_main([str(spec_path), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "rep")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error: ") and "\n" not in err and message in err, err
    assert not (tmp_path / "results").exists() and not (tmp_path / "rep").exists()


def test_invalid_yaml_and_missing_file_are_one_line(tmp_path, capsys):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\ngrid: {model.norm: [pre, post\n")
    assert sweep_main([str(broken)]) == 2
    assert "invalid YAML at line" in capsys.readouterr().err
    assert sweep_main([str(tmp_path / "absent.yaml")]) == 2
    assert "not found" in capsys.readouterr().err


def test_set_overrides_base_keys_and_rejects_unknown_ones(tmp_path, corpus, capsys):
    spec = write_spec(tmp_path, corpus, {"model.norm": ["pre"]}, seeds=1)
    args = [str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "rep")]
    assert sweep_main(args + ["--set", "train.max_iters=10", "--set", "train.eval_interval=5"]) == 0
    config = yaml.safe_load(next((tmp_path / "results" / "t" / "runs").glob("*/config.yaml")).read_text())
    assert config["train"]["max_iters"] == 10 and config["train"]["eval_interval"] == 5
    assert sweep_main(args + ["--set", "train.max_itres=10"]) == 2
    assert "did you mean 'train.max_iters'" in capsys.readouterr().err


def _children() -> set:
    """This process's live children (other tests' loky workers may be among them: compare before and after)."""
    return set(multiprocessing.active_children())


def test_dry_run_lists_runs_and_estimates_time_without_writing(tmp_path, corpus, capsys):
    spec = write_spec(tmp_path, corpus, GRID, seeds=2)
    before = _children()
    code = sweep_main([str(spec), "--dry-run", "--results-dir", str(tmp_path / "results")])
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("pending") == 8 and "model.norm" in out and "estimate: ~" in out
    assert "plan: 2 worker(s)" in out
    assert "timed from its first steps beside 1 other run training, as the sweep's workers will" in out
    assert not (tmp_path / "results").exists()
    assert _children() <= before  # the timed run's company is reaped


def test_one_worker_times_its_run_alone(tmp_path, corpus, capsys):
    spec = write_spec(tmp_path, corpus, GRID, seeds=1, executor={"backend": "loky", "n_jobs": 1, "threads": 1})
    assert sweep_main([str(spec), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 0
    assert "timed from its first steps alone" in capsys.readouterr().out


def test_side_by_side_trains_company_while_inside_and_reaps_it_after(corpus):
    from helpers import tiny_config

    from gptlab.run.config import resolve_run_config
    from gptlab.sweep.estimate import side_by_side, time_run

    config = resolve_run_config(tiny_config(corpus))
    before = _children()
    with side_by_side(config, 2, threads=1):
        company = _children() - before
        assert len(company) == 2 and all(p.is_alive() for p in company)  # built and past their first step
    assert not (_children() & company) and all(p.exitcode == 0 for p in company)  # stopped, not killed
    timing = time_run(config, steps=2, companions=1, threads=1)
    assert timing.per_step > 0 and timing.per_eval > 0 and _children() <= before


def test_list_shows_every_registry_entry(capsys):
    assert sweep_main(["--list"]) == 0
    out = capsys.readouterr().out
    for axis, entries in {"norm": ["pre", "post"], "activation": ["gelu", "relu"],
                          "position": ["learned", "sinusoidal"], "tying": ["tied", "untied"]}.items():
        assert f"model.{axis}:" in out
        for entry in entries:
            assert f"  {entry} " in out
    kinds, methods = out.split("top-level keys:")[1].split("tune.method:")  # the kinds of sweep, then the methods
    assert "  tune " in kinds and "  worth " in kinds and "  grid " in methods and "  refine " in methods


def test_plan_uses_every_core_once_and_respects_memory(monkeypatch):
    import psutil

    monkeypatch.setattr("gptlab.executors.plan.available_cores", lambda: 8)
    plan = plan_resources(32, ExecutorConfig(), "cpu", 2**20)
    assert (plan.workers, plan.threads) == (8, 1)
    plan = plan_resources(3, ExecutorConfig(), "cpu", 2**20)
    assert (plan.workers, plan.threads) == (3, 2)
    plan = plan_resources(32, ExecutorConfig(n_jobs=2), "cpu", 2**20)
    assert (plan.workers, plan.threads) == (2, 4)
    available = psutil.virtual_memory().available
    plan = plan_resources(32, ExecutorConfig(), "cpu", int(available / 2))
    assert plan.workers == 1 and "memory allows 1" in plan.reason


def test_sigterm_stops_the_sweep_like_ctrl_c_and_a_rerun_finishes_it(tmp_path, corpus):
    spec = write_spec(tmp_path, corpus, {"model.norm": ["pre", "post"]}, seeds=1,
                      train={"max_iters": 150, "eval_interval": 20})  # 130 steps left after the first checkpoint
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports")]
    proc = subprocess.Popen(python_m("gptlab.sweep", figures=False) + args, env=env, stderr=subprocess.PIPE, text=True)
    runs = tmp_path / "results" / "t" / "runs"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not (runs.exists() and list(runs.glob("*/ckpt_last.pt"))):
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert (tmp_path / "results" / "t" / "summary.csv").exists()
    assert sweep_main(args) == 0  # the rerun (in this process: what it resumes from is on disk)
    assert [r["status"] for r in read_summary(tmp_path / "results" / "t")] == ["ok", "ok"]


# -- last: these two leave loky's reusable executor stopped, and the next sweep starts new workers
def test_fail_fast_stops_the_local_backend_at_the_first_failure(tmp_path, corpus, plugin, capsys):
    spec = write_spec(tmp_path, corpus, {"model.activation": ["boom", "plugin_gelu"]}, seeds=3, plugins=[plugin])
    code = sweep_main([str(spec), "--jobs", "1", "--fail-fast", "--results-dir", str(tmp_path / "results"),
                       "--reports-dir", str(tmp_path / "rep")])
    assert code == 1
    rows = read_summary(tmp_path / "results" / "t")
    assert rows[0]["model.activation"] == "boom" and rows[0]["status"] == "failed"
    # A boom run fails at once: the worker may fail the next boom runs before the driver has read the first
    # failure (three when the machine is loaded). No plugin_gelu run, which trains for seconds, ever finishes.
    assert [r["model.activation"] for r in rows] == ["boom"] * len(rows), "--fail-fast went on training"
    failed = sum(r["status"] == "failed" for r in rows)
    assert f"{failed} run(s) failed; fix the cause" in capsys.readouterr().out


def test_a_worker_that_dies_fails_only_its_own_run(tmp_path, corpus, plugin):
    spec = write_spec(tmp_path, corpus, {"model.activation": ["plugin_gelu", "sigkill"]}, seeds=2, plugins=[plugin])
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "rep")])
    assert code == 1
    rows = read_summary(tmp_path / "results" / "t")
    assert len(rows) == 4
    for row in rows:
        if row["model.activation"] == "sigkill":
            assert row["status"] == "failed" and row["error"] == WORKER_DIED
        else:
            assert row["status"] == "ok"


def test_the_sweep_command_leaves_no_thread_to_wait_for_once_it_is_over():
    """`python -m gptlab.sweep` releases loky's workers after main(): its manager thread, not a daemon, held the
    finished process about 3 s at exit. A caller of main() keeps them for its next sweep until it releases them."""
    import threading

    from joblib.externals.loky import get_reusable_executor

    from gptlab.executors.local import release_workers

    assert get_reusable_executor(max_workers=1).submit(int, "7").result() == 7  # the pool a sweep leaves behind
    release_workers()
    waited_for = [t.name for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()]
    assert waited_for == []
