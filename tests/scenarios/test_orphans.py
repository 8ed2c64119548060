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
from typing import Callable

import psutil
import pytest
from fakes import write_spec
from helpers import REPO

from gptlab.executors.worker import ORPHAN_EXIT, DriverWatch, RunStopped, driver_identity
from gptlab.runio import atomic_write_text, remove_temp_files
from gptlab.sweep_cli import main as sweep_main

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

# a checkpoint every 20 steps, 120 steps unless the grid says (on 2 loky workers: fakes.LOKY_EXECUTOR)
ORPHAN_TRAIN = {"max_iters": 120, "eval_interval": 20}

VOLATILE = {"elapsed_s"}  # wall-clock seconds: the one metrics column a rerun cannot reproduce


def sweep_args(spec: Path, results: Path) -> list[str]:
    return [str(spec), "--results-dir", str(results), "--reports-dir", str(results.parent / "reports")]


def _terminal_signals() -> None:
    """In the child: the stop signals as a terminal's job has them, whatever the suite inherited (`nohup` ignores
    SIGHUP, and an ignored disposition survives exec; the sweep rightly keeps an ignored signal ignored)."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def start(spec: Path, results: Path, ready: Callable[[Path], bool]) -> subprocess.Popen:
    """The sweep as a process group of its own, once `ready(runs folder)` (polled every 20 ms)."""
    proc = subprocess.Popen([sys.executable, "-m", "gptlab.sweep", *sweep_args(spec, results)],
                            # PYTHONWARNINGS out: what the sweep sets for its own children, it must set itself
                            env={**{k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"},
                                 "PYTHONPATH": str(REPO)}, start_new_session=True,
                            preexec_fn=_terminal_signals,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    runs = results / "t" / "runs"
    deadline = time.monotonic() + 300  # a bound, not a budget (a busy machine, other tests beside under xdist)
    while time.monotonic() < deadline and proc.poll() is None and not ready(runs):
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()[1]
    assert ready(runs), "the sweep never got there within 300 s"
    return proc


def checkpointed(runs: Path) -> bool:
    """Some run has a checkpoint: runs are in flight."""
    return bool(list(runs.glob("*/ckpt_last.pt")))


def one_done_one_training(runs: Path) -> bool:
    """One run finished (its worker idles) while another, checkpointed, trains on."""
    done = {p.parent for p in runs.glob("*/summary.json")}
    return bool(done) and any(p.parent not in done for p in runs.glob("*/ckpt_last.pt"))


def sweep_in_process(spec: Path, results: Path) -> None:
    """The sweep command in this process (no interpreter to start), which must finish the sweep.

    Without its report, which takes longer than these runs train and is not what is tested here.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("gptlab.report.write_report", lambda results_dir, reports_dir, **_: reports_dir)
        assert sweep_main(sweep_args(spec, results)) == 0


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


# A worker idles after the short run while the long one trains: long enough that on a quiet machine it is still
# training when the test kills its driver (at 200 steps it sometimes finished first).
SHORT_AND_LONG = {"train.max_iters": [40, 600]}


@pytest.fixture(scope="module")
def reference(tmp_path_factory, corpus):
    """The 2-run sweep trained once, uninterrupted: what every stopped and resumed sweep must equal."""
    root = tmp_path_factory.mktemp("reference")
    spec = write_spec(root, corpus, SHORT_AND_LONG, train=ORPHAN_TRAIN)
    sweep_in_process(spec, root / "results")
    return spec, metrics(root / "results")


def test_workers_of_a_sigkilled_driver_exit_and_a_rerun_matches_an_uninterrupted_sweep(reference, tmp_path):
    spec, expected = reference
    assert sorted(len(rows) for rows in expected.values()) == [4, 60]  # a row every 10 steps
    results = tmp_path / "results"
    proc = start(spec, results, one_done_one_training)
    children = psutil.Process(proc.pid).children(recursive=True)  # the workers (and loky's resource trackers)
    assert len([c for c in children if "resource_tracker" not in " ".join(c.cmdline())]) == 2

    os.kill(proc.pid, signal.SIGKILL)  # not reaped yet: the workers see a zombie driver, which is gone too
    _, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, f"still running 5 s after their driver was killed: {alive}"
    proc.wait(timeout=10)
    said = proc.stderr.read()  # the driver's and its children's (loky's resource tracker's too)
    assert "leaked" not in said and "Traceback" not in said, said
    runs = results / "t" / "runs"
    assert len(list(runs.glob("*/summary.json"))) == 1, "the long run finished before it could be killed"
    assert not list(runs.glob("*/running.json"))  # a stopped run is no longer marked in flight
    logs = "".join(p.read_text() for p in runs.glob("*/train.log"))
    assert f"driver process {proc.pid} is gone: stopping run" in logs

    # What a writer killed mid-write would have left: the resumed run removes it.
    stopped = next(p.parent for p in runs.glob("*/ckpt_last.pt") if not (p.parent / "summary.json").exists())
    leftover = stopped / ".ckpt_last.pt.killed01.tmp"
    leftover.write_bytes(b"half a checkpoint")
    sweep_in_process(spec, results)
    assert metrics(results) == expected
    assert not leftover.exists() and not list(runs.glob("*/.*.tmp"))
    assert "resumed " in (stopped / "train.log").read_text()


def test_sighup_stops_the_sweep_like_sigterm_and_a_rerun_resumes_it(reference, tmp_path):
    spec, expected = reference
    results = tmp_path / "results"
    proc = start(spec, results, checkpointed)
    os.killpg(proc.pid, signal.SIGHUP)  # a closed terminal hangs up the whole job: driver, workers, trackers
    err = proc.communicate(timeout=300)[1]
    assert proc.returncode == 130, err
    assert "interrupted: " in err and "run the same command again to resume" in err
    assert "Traceback" not in err and "Error" not in err, err
    assert (results / "t" / "summary.csv").exists()
    runs = results / "t" / "runs"
    resumable = {p.parent.name for p in runs.glob("*/ckpt_last.pt") if not (p.parent / "summary.json").exists()}
    assert resumable, "every run finished before the hangup"

    sweep_in_process(spec, results)
    assert statuses(results) == ["ok", "ok"]
    assert metrics(results) == expected
    for run_id in resumable:  # resumed from its checkpoint, not trained again from step 0
        assert f"resumed {run_id} from step " in (runs / run_id / "train.log").read_text()


def test_ctrl_c_pressed_three_times_stops_once_without_a_traceback(tmp_path, corpus):
    # 4 runs on 2 workers: runs still queued in loky when the stop comes, which is what made its
    # shutdown print an InvalidStateError (or KeyError) traceback and leave the workers training.
    spec = write_spec(tmp_path, corpus, {"model.norm": ["pre", "post"]}, seeds=2, train=ORPHAN_TRAIN)
    results = tmp_path / "results"
    proc = start(spec, results, checkpointed)
    children = psutil.Process(proc.pid).children(recursive=True)
    for _ in range(3):  # Ctrl-C reaches the whole foreground job
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.1)
    err = proc.communicate(timeout=300)[1]
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
    watch = DriverWatch(dead_process(), poll_s=0.01, grace_s=60, exit=exit_)
    with watch.training("r1"):
        watch.start()
        assert watch.gone.wait(10)
        with pytest.raises(RunStopped):
            watch.on_step(None)
        assert not exit_.called.is_set()  # it waits for the run to stop (up to grace_s)
    assert exit_.called.wait(10)  # the run stopped: the process exits at once, not grace_s later
    assert exit_.codes == [ORPHAN_EXIT]


def test_a_run_that_does_not_stop_is_ended_after_the_grace_period():
    exit_ = Recorder()
    watch = DriverWatch(dead_process(), poll_s=0.01, grace_s=0.05, exit=exit_)
    with watch.training("r1"):  # a long evaluation: no step comes
        watch.start()
        assert exit_.called.wait(10)
    assert exit_.codes == [ORPHAN_EXIT]


def test_a_watch_on_a_living_driver_never_stops_the_run():
    exit_ = Recorder()
    watch = DriverWatch(driver_identity(), poll_s=0.01, grace_s=0.01, exit=exit_).start()
    with watch.training("r1"):
        time.sleep(0.1)  # ten polls
        watch.on_step(None)
    assert not watch.gone.is_set() and not exit_.codes


@pytest.mark.parametrize("case", ["reused pid", "zombie"])
def test_a_reused_pid_or_a_zombie_is_no_living_driver_and_an_idle_worker_exits(case):
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
        watch = DriverWatch(driver, poll_s=0.01, grace_s=60, exit=exit_).start()
        assert exit_.called.wait(10)  # no run in flight: no grace period
        assert watch.gone.is_set()
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
