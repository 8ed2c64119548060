"""Nothing keeps running: workers die with their driver, and every stop signal stops a sweep cleanly.

A loky worker whose driver is SIGKILLed stops its run within seconds, leaving it resumable; a
rerun then finishes with the metrics of a sweep never interrupted. SIGHUP (a closed terminal) and
a Ctrl-C pressed several times stop a sweep as SIGTERM does: exit 130, the resume message, no
traceback. The watchdog itself (`DriverWatch`) is checked in-process, with its exit replaced.
"""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import yaml

from gptlab.executors.worker import ORPHAN_EXIT, DriverWatch, RunStopped, driver_identity
from gptlab.runio import atomic_write_text, remove_temp_files
from gptlab.sweep import main as sweep_main

from helpers import REPO, tiny_config

VOLATILE = {"elapsed_s"}  # wall-clock seconds: the one metrics column a rerun cannot reproduce


def write_spec(folder: Path, corpus: Path, seeds: int) -> Path:
    """2 cells x `seeds`, on 2 loky workers; long enough (~120 steps) to be caught mid-run."""
    config = tiny_config(corpus, max_iters=120, eval_interval=20)
    spec = {"name": "t", "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"model.norm": ["pre", "post"]}, "seeds": seeds, "executor": {"backend": "loky", "n_jobs": 2}}
    path = folder / f"orphans{seeds}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def sweep_cmd(spec: Path, results: Path) -> list[str]:
    return [sys.executable, "-m", "gptlab.sweep", str(spec), "--results-dir", str(results),
            "--reports-dir", str(results.parent / "reports")]


def start_and_wait_for_training(spec: Path, results: Path) -> subprocess.Popen:
    """The sweep as a process group of its own, once one run has written a checkpoint."""
    proc = subprocess.Popen(sweep_cmd(spec, results), env={**os.environ, "PYTHONPATH": str(REPO)},
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    runs = results / "t" / "runs"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not list(runs.glob("*/ckpt_last.pt")):
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()[1]
    assert list(runs.glob("*/ckpt_last.pt")), "no run wrote a checkpoint within 120 s"
    return proc


def rerun(spec: Path, results: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(sweep_cmd(spec, results), env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def metrics(results: Path) -> dict[str, list[dict[str, str]]]:
    """Every run's metrics.csv rows, without the wall-clock column."""
    out = {}
    for path in sorted((results / "t" / "runs").glob("*/metrics.csv")):
        with open(path) as f:
            out[path.parent.name] = [{k: v for k, v in row.items() if k not in VOLATILE} for row in csv.DictReader(f)]
    return out


def statuses(results: Path) -> list[str]:
    with open(results / "t" / "summary.csv") as f:
        return [row["status"] for row in csv.DictReader(f)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, corpus):
    """The 2-run sweep trained once, uninterrupted: what every stopped and resumed sweep must equal."""
    root = tmp_path_factory.mktemp("reference")
    spec = write_spec(root, corpus, seeds=1)
    assert sweep_main([str(spec), "--results-dir", str(root / "results"), "--reports-dir", str(root / "reports")]) == 0
    return spec, metrics(root / "results")


def test_workers_of_a_sigkilled_driver_exit_and_a_rerun_matches_an_uninterrupted_sweep(reference, tmp_path):
    spec, expected = reference
    assert len(expected) == 2 and all(len(rows) == 12 for rows in expected.values())  # 120 steps, a row per 10
    results = tmp_path / "results"
    proc = start_and_wait_for_training(spec, results)
    children = psutil.Process(proc.pid).children(recursive=True)  # the workers (and loky's resource trackers)
    assert len([c for c in children if "resource_tracker" not in " ".join(c.cmdline())]) == 2

    os.kill(proc.pid, signal.SIGKILL)  # not reaped yet: the workers see a zombie driver, which is gone too
    _, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, f"still running 5 s after their driver was killed: {alive}"
    proc.wait(timeout=10)
    runs = results / "t" / "runs"
    assert len(list(runs.glob("*/summary.json"))) < 2, "the sweep finished before it could be killed"
    assert not list(runs.glob("*/running.json"))  # a stopped run is no longer marked in flight
    logs = "".join(p.read_text() for p in runs.glob("*/train.log"))
    assert f"driver process {proc.pid} is gone: stopping run" in logs

    # What a writer killed mid-write would have left: the resumed run removes it.
    victim = next(runs.iterdir())
    leftover = victim / ".ckpt_last.pt.killed01.tmp"
    leftover.write_bytes(b"half a checkpoint")
    rerun(spec, results)
    assert metrics(results) == expected
    assert not leftover.exists() and not list(runs.glob("*/.*.tmp"))


def test_sighup_stops_the_sweep_like_sigterm_and_a_rerun_resumes_it(reference, tmp_path):
    spec, expected = reference
    results = tmp_path / "results"
    proc = start_and_wait_for_training(spec, results)
    checkpointed = {p.parent.name for p in (results / "t" / "runs").glob("*/ckpt_last.pt")}
    os.killpg(proc.pid, signal.SIGHUP)  # a closed terminal hangs up the whole job: driver, workers, trackers
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, err
    assert "interrupted: " in err and "run the same command again to resume" in err
    assert "Traceback" not in err and "Error" not in err, err
    assert (results / "t" / "summary.csv").exists()

    rerun(spec, results)
    assert statuses(results) == ["ok", "ok"]
    assert metrics(results) == expected
    for run_id in checkpointed:  # resumed from its checkpoint, not trained again from step 0
        assert f"resumed {run_id} from step " in (results / "t" / "runs" / run_id / "train.log").read_text()


def test_ctrl_c_pressed_three_times_stops_once_without_a_traceback(tmp_path, corpus):
    # 4 runs on 2 workers: runs still queued in loky when the stop comes, which is what made its
    # shutdown print an InvalidStateError (or KeyError) traceback and leave the workers training.
    spec = write_spec(tmp_path, corpus, seeds=2)
    results = tmp_path / "results"
    proc = start_and_wait_for_training(spec, results)
    children = psutil.Process(proc.pid).children(recursive=True)
    for _ in range(3):  # Ctrl-C reaches the whole foreground job
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.1)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, err
    assert err.count("interrupted: ") == 1 and "of 4 runs finished" in err
    assert "Traceback" not in err and "Error" not in err, err
    _, alive = psutil.wait_procs(children, timeout=5)  # workers killed, then loky's trackers see them gone
    assert not alive


# -- the watchdog, in-process -------------------------------------------------------------------
def dead_process() -> tuple[int, float]:
    """The identity of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    identity = (proc.pid, psutil.Process(proc.pid).create_time())
    proc.wait()
    return identity


class Recorder:
    """Stands in for os._exit: records the status and wakes the test."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self.called = threading.Event()

    def __call__(self, code: int) -> None:
        self.codes.append(code)
        self.called.set()


def test_a_watch_on_a_gone_driver_stops_the_run_at_its_next_step_then_exits():
    exit_ = Recorder()
    with DriverWatch(dead_process(), "r1", poll_s=0.01, grace_s=0.05, exit=exit_) as watch:
        assert watch.gone.wait(10)
        with pytest.raises(RunStopped):
            watch.on_step(None)
        assert exit_.called.wait(10)  # the run did not stop within grace_s: the process exits anyway
    assert exit_.codes == [ORPHAN_EXIT]


def test_a_watch_on_a_living_driver_never_stops_the_run():
    exit_ = Recorder()
    with DriverWatch(driver_identity(), "r1", poll_s=0.01, grace_s=0.01, exit=exit_) as watch:
        time.sleep(0.1)  # ten polls
        watch.on_step(None)
    assert not watch.gone.is_set() and not exit_.codes


@pytest.mark.parametrize("case", ["reused pid", "zombie"])
def test_a_reused_pid_or_a_zombie_is_no_living_driver(case):
    exit_ = Recorder()
    if case == "reused pid":  # this very process, but born at another time than the driver was
        pid, created = driver_identity()
        driver, proc = (pid, created - 3600.0), None
    else:  # killed and not reaped yet, as a SIGKILLed driver is until its shell waits for it
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        driver = (proc.pid, psutil.Process(proc.pid).create_time())
        proc.kill()
        while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
    try:
        with DriverWatch(driver, "r1", poll_s=0.01, grace_s=0.0, exit=exit_) as watch:
            assert watch.gone.wait(10)
            assert exit_.called.wait(10)
    finally:
        if proc is not None:
            proc.wait()
    assert exit_.codes == [ORPHAN_EXIT]


def test_only_the_temp_files_of_the_named_files_are_removed(tmp_path):
    atomic_write_text(tmp_path / "metrics.csv", "step\n")
    for name in (".ckpt_last.pt.a1b2c3.tmp", ".metrics.csv.x.tmp", ".running.json.y.tmp", "ckpt_last.pt"):
        (tmp_path / name).write_text("x")
    assert remove_temp_files(tmp_path, ["ckpt_last.pt", "metrics.csv", "ckpt_best.pt"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [".running.json.y.tmp", "ckpt_last.pt", "metrics.csv"]
