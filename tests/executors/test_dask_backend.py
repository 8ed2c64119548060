"""The dask backend: same results as loky, lost workers (retry / fail), shared_dir resume, bad addresses."""
from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import yaml
from fakes import LOKY_EXECUTOR, boom_activation, write_spec
from helpers import REPO

from gptlab.sweep_cli import main as sweep_main

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

distributed = pytest.importorskip("distributed")

# Entries get a `dask_` prefix: the registries are shared by every test module of a pytest process.
PLUGIN = '''
"""Test plugin: GELU activations that SIGKILL their worker process, once or always."""
import os, signal
import torch
from gptlab.model.activations import ACTIVATIONS, Activation

MARKERS = {markers!r}


def first_time(name):
    """True exactly once per marker file, even for two processes racing (O_EXCL)."""
    try:
        os.close(os.open(MARKERS[name], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


class Killer(Activation):
    """GELU that kills its own process at its `after`-th training call (each layer counts its own)."""
    name, after, always = "", 1, False

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, h):
        if self.training:
            self.calls += 1
            if self.calls == self.after and (self.always or first_time(self.name)):
                os.kill(os.getpid(), signal.SIGKILL)
        return torch.nn.functional.gelu(h)


KILLERS = [("dask_kill_always", 1, True), ("dask_kill_once", 1, False),  # at the first training step
           ("dask_kill_midway_0", 26, False), ("dask_kill_midway_1", 26, False)]  # after the step-20 checkpoint
for name, after, always in KILLERS:
    ACTIVATIONS.register(name)(type(name, (Killer,), {{"name": name, "after": after, "always": always}}))

''' + boom_activation("dask_boom").replace("{", "{{").replace("}", "}}")  # PLUGIN is a str.format template


@pytest.fixture(scope="session")
def plugin(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dask_plugins")
    markers = {name: str(folder / f"{name}.killed") for name in ("dask_kill_once", "dask_kill_midway_0", "dask_kill_midway_1")}
    path = folder / "dask_killers.py"
    path.write_text(PLUGIN.format(markers=markers))
    return path


@pytest.fixture(autouse=True)
def no_reports(monkeypatch):
    """Reports are built from results/NAME alone (tested elsewhere); skipping them here saves minutes."""
    monkeypatch.setattr("gptlab.report.write_report", lambda results_dir, reports_dir, margin=None: reports_dir)


def _local_cluster() -> distributed.LocalCluster:
    """Two single-threaded worker processes on 127.0.0.1, as `dask worker --nthreads 1` would give; the dashboard on
    a free port (None still asks for 8787, which another test's cluster may hold: a warning)."""
    return distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                    dashboard_address="127.0.0.1:0")


@pytest.fixture(scope="module")
def cluster():
    cluster = _local_cluster()
    yield cluster
    cluster.close()


@pytest.fixture
def killable_cluster():
    """A cluster of its own for a test whose plugin kills workers: the nannies of a shared one, after the kills of an
    earlier test, were once found gone with a run still queued (the sweep then waited for a worker forever)."""
    cluster = _local_cluster()
    yield cluster
    cluster.close()


def sweep(spec: Path, root: Path, *extra: str) -> int:
    return sweep_main([str(spec), "--results-dir", str(root / "results"), "--reports-dir", str(root / "reports"), *extra])


def read_summary(results: Path) -> dict[str, dict]:
    with open(results / "summary.csv") as f:
        return {row["run_id"]: row for row in csv.DictReader(f)}


LOSSES = ("status", "best_val_loss", "best_step", "final_val_loss", "final_train_loss", "params", "error")


def losses(row: dict) -> dict:
    return {k: row[k] for k in LOSSES}


def metrics(run: Path) -> list[dict]:
    with open(run / "metrics.csv") as f:
        return [{k: v for k, v in row.items() if k != "elapsed_s"} for row in csv.DictReader(f)]


def test_dask_sweep_matches_the_loky_sweep(cluster, tmp_path, corpus, capsys):
    grid = {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"]}
    spec = write_spec(tmp_path, corpus, grid, seeds=1)  # 4 runs on 2 workers, either backend
    assert sweep(spec, tmp_path / "loky") == 0
    dask_args = ["--backend", "dask", "--scheduler", cluster.scheduler_address]
    assert sweep(spec, tmp_path / "dask", *dask_args) == 0
    loky, dask = read_summary(tmp_path / "loky" / "results" / "t"), read_summary(tmp_path / "dask" / "results" / "t")
    assert len(dask) == 4 and list(dask) == list(loky)
    assert {k: losses(r) for k, r in dask.items()} == {k: losses(r) for k, r in loky.items()}
    assert all(r["status"] == "ok" for r in dask.values())
    for run_id in dask:
        run = tmp_path / "dask" / "results" / "t" / "runs" / run_id
        assert sorted(p.name for p in run.iterdir()) == ["config.yaml", "metrics.csv", "place.json", "sample.txt",
                                                         "summary.json", "train.log"]
        assert metrics(run) == metrics(tmp_path / "loky" / "results" / "t" / "runs" / run_id)
        assert (run / "config.yaml").read_text() == (
            tmp_path / "loky" / "results" / "t" / "runs" / run_id / "config.yaml"
        ).read_text()
    resolved = yaml.safe_load((tmp_path / "dask" / "results" / "t" / "sweep.yaml").read_text())
    assert resolved["executor"]["backend"] == "dask" and resolved["executor"]["on_worker_lost"] == "retry"

    capsys.readouterr()
    assert sweep(spec, tmp_path / "dask", *dask_args) == 0  # resume: the driver's folder says it all
    assert "4 already finished, 0 to train" in capsys.readouterr().err


# The run's own start count decides with the scheduler's default allowed-failures (3); with 0 the
# scheduler raises KilledWorker at the first loss and the driver resubmits: the outcome is the same.
@pytest.mark.parametrize("allowed_failures", [3, 0], ids=["counted-by-the-run", "KilledWorker"])
def test_a_lost_worker_is_retried_once_and_resumes_from_the_shared_dir(allowed_failures, killable_cluster, tmp_path,
                                                                       corpus, plugin, monkeypatch, caplog):
    cluster = killable_cluster
    monkeypatch.setattr(cluster.scheduler, "allowed_failures", allowed_failures)  # the scheduler runs in this process
    shared = tmp_path / "shared"
    midway_entry = f"dask_kill_midway_{int(allowed_failures == 0)}"
    spec = write_spec(tmp_path, corpus, {"model.activation": ["gelu", midway_entry, "dask_kill_always"]},
                      seeds=1, plugins=[plugin],
                      executor={**LOKY_EXECUTOR, "backend": "dask", "scheduler": cluster.scheduler_address,
                                "shared_dir": str(shared)})
    with caplog.at_level("WARNING", logger="gptlab.executors.dask"):
        assert sweep(spec, tmp_path) == 1
    assert ("retrying it" in caplog.text) == (allowed_failures == 0)  # the driver resubmitted after KilledWorker
    results = tmp_path / "results" / "t"
    rows = {r["model.activation"]: r for r in read_summary(results).values()}

    # Killed after its step-20 checkpoint, retried, resumed there: the losses of an unbroken run.
    midway = rows[midway_entry]
    assert midway["status"] == "ok"
    assert {k: midway[k] for k in LOSSES} == {k: rows["gelu"][k] for k in LOSSES}
    assert metrics(results / "runs" / midway["run_id"]) == metrics(results / "runs" / rows["gelu"]["run_id"])
    assert "resumed" in (results / "runs" / midway["run_id"] / "train.log").read_text()

    always = rows["dask_kill_always"]
    assert always["status"] == "failed" and "worker was lost" in always["error"] and "2 times" in always["error"]
    assert "worker was lost" in (results / "runs" / always["run_id"] / "error.txt").read_text()

    # Checkpoints stay in the shared folder; the driver gets the small files only.
    assert not list(results.rglob("*.pt"))
    assert (shared / "t" / "runs" / midway["run_id"] / "ckpt_last.pt").is_file()

    # A run whose result never reached the driver is collected from the shared folder, not retrained.
    gelu = results / "runs" / rows["gelu"]["run_id"]
    before = (gelu / "summary.json").read_text(), (gelu / "train.log").read_text()
    shutil.rmtree(gelu)
    assert sweep(spec, tmp_path) == 1  # the failed run stays failed without --rerun-failed
    assert ((gelu / "summary.json").read_text(), (gelu / "train.log").read_text()) == before


def test_on_worker_lost_fail_marks_the_run_and_a_rerun_completes_it(killable_cluster, tmp_path, corpus, plugin,
                                                                     capsys):
    cluster = killable_cluster
    spec = write_spec(tmp_path, corpus, {"model.activation": ["gelu", "dask_kill_once"]}, seeds=1, plugins=[plugin],
                      executor={**LOKY_EXECUTOR, "backend": "dask", "scheduler": cluster.scheduler_address,
                                "on_worker_lost": "fail"})
    assert sweep(spec, tmp_path) == 1
    results = tmp_path / "results" / "t"
    rows = {r["model.activation"]: r for r in read_summary(results).values()}
    assert rows["gelu"]["status"] == "ok"
    killed = rows["dask_kill_once"]
    assert killed["status"] == "failed" and "worker was lost" in killed["error"] and "once" in killed["error"]

    capsys.readouterr()
    assert sweep(spec, tmp_path, "--rerun-failed") == 0  # the plugin kills only the first time
    assert "1 already finished, 1 to train" in capsys.readouterr().err
    rows = {r["model.activation"]: r for r in read_summary(results).values()}
    assert losses(rows["dask_kill_once"]) == losses(rows["gelu"])
    assert not (results / "runs" / killed["run_id"] / "error.txt").exists()


def test_a_failing_run_ships_its_traceback_and_fail_fast_stops(cluster, tmp_path, corpus, plugin, capsys):
    spec = write_spec(tmp_path, corpus, {"model.activation": ["dask_boom", "gelu", "relu"]}, seeds=2, plugins=[plugin],
                      executor={**LOKY_EXECUTOR, "backend": "dask", "scheduler": cluster.scheduler_address})
    assert sweep(spec, tmp_path, "--fail-fast") == 1
    rows = list(read_summary(tmp_path / "results" / "t").values())
    assert 1 <= len(rows) < 6  # stopped at the first failure: the gelu and relu runs never came back
    boom = [r for r in rows if r["model.activation"] == "dask_boom"]
    assert boom and all(r["status"] == "failed" and "dask_boom: this activation always fails" in r["error"] for r in boom)
    error_txt = (tmp_path / "results" / "t" / "runs" / boom[0]["run_id"] / "error.txt").read_text()
    assert "Traceback" in error_txt and "RuntimeError" in error_txt


def test_shared_dir_equal_to_the_results_parent_trains_in_place(cluster, tmp_path, corpus):
    spec = write_spec(tmp_path, corpus, {"model.norm": ["pre"]}, seeds=1, executor={**LOKY_EXECUTOR, "backend": "dask",
                      "scheduler": cluster.scheduler_address, "shared_dir": str(tmp_path / "results")})
    assert sweep(spec, tmp_path) == 0
    run = next((tmp_path / "results" / "t" / "runs").iterdir())
    assert (run / "ckpt_last.pt").is_file() and (run / "summary.json").is_file()


def test_a_cli_cluster_whose_scheduler_lacks_gptlab(tmp_path, corpus):
    """docs/CLUSTER.md's `dask scheduler` / `dask worker` commands; only the worker can import gptlab."""
    blocker = tmp_path / "blocker" / "gptlab"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('the scheduler must not need gptlab')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    scheduler_file = tmp_path / "scheduler.json"
    started = []
    try:
        started.append(subprocess.Popen(
            [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(scheduler_file)],
            cwd=tmp_path, env={**env, "PYTHONPATH": str(blocker.parent)}, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        started.append(subprocess.Popen(
            [sys.executable, "-m", "dask", "worker", "--scheduler-file", str(scheduler_file), "--nworkers", "1",
             "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"],
            cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.time() + 300  # a bound, not a budget
        while not scheduler_file.exists() and time.time() < deadline:
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        spec = write_spec(tmp_path, corpus, {"model.norm": ["pre"]}, seeds=1,
                          executor={**LOKY_EXECUTOR, "backend": "dask", "scheduler": address})
        assert sweep(spec, tmp_path) == 0  # the run waits for the worker to join
        assert [r["status"] for r in read_summary(tmp_path / "results" / "t").values()] == ["ok"]
    finally:
        for proc in started:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in started:
            proc.wait(timeout=30)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_scheduler_is_one_line_within_seconds(tmp_path, corpus, capsys, monkeypatch):
    """Refused once the connect timeout is over: 5 s at most by default, 1 s here (the test need not wait 5 s)."""
    from gptlab.executors import scheduler

    assert scheduler.CONNECT_TIMEOUT_S <= 5
    monkeypatch.setattr(scheduler, "CONNECT_TIMEOUT_S", 1)
    address = f"tcp://127.0.0.1:{closed_port()}"
    spec = write_spec(tmp_path, corpus, {"model.norm": ["pre"]}, seeds=1)
    capsys.readouterr()
    start = time.perf_counter()
    code = sweep(spec, tmp_path, "--backend", "dask", "--scheduler", address)
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err.strip()
    assert code == 2 and elapsed < scheduler.CONNECT_TIMEOUT_S + 5
    assert err.startswith("error: cannot reach the dask scheduler at " + address) and "\n" not in err, err
    assert not (tmp_path / "results").exists()  # checked before anything is written


def test_a_worker_address_is_not_taken_for_a_scheduler(cluster, tmp_path, corpus, capsys):
    worker = next(iter(cluster.scheduler_info["workers"]))
    spec = write_spec(tmp_path, corpus, {"model.norm": ["pre"]}, seeds=1)
    assert sweep(spec, tmp_path, "--backend", "dask", "--scheduler", worker) == 2
    assert f"{worker} is not a dask scheduler (it answers as Worker)" in capsys.readouterr().err


@pytest.mark.parametrize("executor, message", [
    ({"backend": "dask"}, "executor.scheduler: the dask backend needs a scheduler address"),
    ({"backend": "dask", "scheduler": "local", "on_worker_lost": "ignore"},
     "executor.on_worker_lost: must be one of retry, fail"),
    ({"backend": "dask", "scheduler": "local", "shared_dir": 3}, "executor.shared_dir: must be a non-empty string"),
])
def test_dask_executor_keys_are_validated(executor, message, tmp_path, corpus, capsys):
    spec = write_spec(tmp_path, corpus, {"model.norm": ["pre"]}, seeds=1, executor={**LOKY_EXECUTOR, **executor})
    assert sweep(spec, tmp_path) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err, err
    assert not (tmp_path / "results").exists()


def test_scheduler_local_starts_its_own_cluster(tmp_path, corpus, capsys, caplog):
    spec = write_spec(tmp_path, corpus, {"model.norm": ["pre"]}, seeds=1,
                      executor={**LOKY_EXECUTOR, "backend": "dask", "scheduler": "local", "n_jobs": 1})
    # The dashboard's usual port taken (as by a second sweep's cluster, or another test's here): no Python warning
    with socket.socket() as taken, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.suppress(OSError):  # already taken by someone else: the same case
            taken.bind(("127.0.0.1", 8787))
            taken.listen()
        with caplog.at_level("INFO", logger="gptlab.executors.dask"):  # the plan line (stderr, from the command line)
            assert sweep(spec, tmp_path) == 0
    assert not [str(w.message) for w in caught if "already in use" in str(w.message)]
    assert [r["status"] for r in read_summary(tmp_path / "results" / "t").values()] == ["ok"]
    captured = capsys.readouterr()
    assert " - INFO - " not in captured.err, captured.err  # distributed's INFO lines (about 50) are not the output
    assert re.search(r"dashboard http://127\.0\.0\.1:\d+/status", caplog.text), caplog.text  # the address it got
