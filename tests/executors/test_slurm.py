"""`executor.cluster: {type: slurm}` on a real single-node SLURM (.ci/slurm_up.sh starts one): a sweep trains
there, is stopped by SIGTERM with its jobs released, resumes, survives a cancelled job (the run is retried) and
equals the local sweep; and the key's validation, in one line each."""
from __future__ import annotations

import contextlib
import csv
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from fakes import write_spec
from helpers import REPO, python_m

from gptlab.errors import GptlabError
from gptlab.executors import ExecutorConfig, plan_resources
from gptlab.executors.slurm import SlurmConfig
from gptlab.sweep_cli import main as sweep_main

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

SETUP = "run .ci/slurm_up.sh (as root) to start a single-node SLURM on this machine"
JOB_NAME = f"gptlab-test-{os.getpid()}"  # this test's jobs, apart from anyone else's
SLURM_TRAIN = {"max_iters": 300}  # 280 steps after the first checkpoint: time to stop it mid-run
LOSSES = ("status", "best_val_loss", "best_step", "final_val_loss", "final_train_loss", "params", "error")


def slurm_answers() -> tuple[bool, str]:
    """Whether a SLURM with a usable node answers here, and what it (or the shell) said."""
    missing = [c for c in ("sbatch", "squeue", "scancel", "scontrol", "sinfo") if shutil.which(c) is None]
    if missing:
        return False, f"{', '.join(missing)} not on PATH"
    answer = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    usable = answer.returncode == 0 and re.search(r"idle|mix|alloc", answer.stdout) is not None
    return usable, (answer.stderr or answer.stdout).strip()


@contextlib.contextmanager
def slurm_for_tests() -> Iterator[None]:
    """A SLURM that answers, started by the script CI uses (.ci/slurm_up.sh) when none does, and stopped again
    (`slurm_up.sh --down`) when this started it: the README's test command needs nothing started beforehand and
    leaves no daemon running that it started. Where it cannot be started the test fails (it does not skip)."""
    usable, said = slurm_answers()
    started = None
    if not usable:
        started = subprocess.run(["bash", str(REPO / ".ci" / "slurm_up.sh")], capture_output=True, text=True,
                                 timeout=900)
        usable, said = slurm_answers()
        if not usable:
            pytest.fail(f"SLURM does not answer with a usable node ({said}) and .ci/slurm_up.sh could not start one "
                        f"(exit {started.returncode}: {(started.stderr or started.stdout).strip()[-300:]}): {SETUP}")
    try:
        yield
    finally:
        subprocess.run(["scancel", "-n", JOB_NAME], capture_output=True)  # only if a test failed midway
        if started is not None:  # ours: munged, slurmctld and slurmd go down with the tests that needed them
            subprocess.run(["bash", str(REPO / ".ci" / "slurm_up.sh"), "--down"], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def slurm():
    with slurm_for_tests():
        yield


def test_the_tests_stop_the_slurm_they_started_and_leave_one_that_was_running(monkeypatch):
    calls: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: calls.append(list(args)) or
                        subprocess.CompletedProcess(args, 0, "", ""))
    answers = iter([(False, "no node"), (True, "idle")])
    monkeypatch.setitem(globals(), "slurm_answers", lambda: next(answers))
    with slurm_for_tests():
        assert calls[-1][-1].endswith("slurm_up.sh")
    assert calls[-1][-1] == "--down"
    calls.clear()
    monkeypatch.setitem(globals(), "slurm_answers", lambda: (True, "idle"))
    with slurm_for_tests():
        pass
    assert not any("--down" in c for c in calls)  # a SLURM someone else started is left running


@pytest.fixture(autouse=True)
def no_reports(monkeypatch):
    """Reports are built from results/NAME alone (tested elsewhere)."""
    monkeypatch.setattr("gptlab.report.write_report", lambda results_dir, reports_dir, margin=None: reports_dir)


def slurm_executor(tmp_path: Path, **cluster) -> dict:
    # threads 1 here and in the local sweep: a run's CPU losses depend on its thread count
    return {"backend": "dask", "threads": 1, "shared_dir": str(tmp_path / "shared"),
            "cluster": {"type": "slurm", "cores": 1, "memory": "1GB", "walltime": "00:10:00", "jobs": 2,
                        "job_name": JOB_NAME, "log_directory": str(tmp_path / "slurm-logs"), **cluster}}


def read_summary(results: Path) -> dict[str, dict]:
    with open(results / "summary.csv") as f:
        return {row["run_id"]: row for row in csv.DictReader(f)}


def metrics(run: Path) -> list[dict]:
    with open(run / "metrics.csv") as f:
        return [{k: v for k, v in row.items() if k != "elapsed_s"} for row in csv.DictReader(f)]


def our_jobs() -> list[str]:
    out = subprocess.run(["squeue", "-h", "-n", JOB_NAME, "-o", "%i %T"], capture_output=True, text=True, check=True)
    return out.stdout.split("\n")[:-1]


def wait_for(condition, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = condition()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the sweep ended ({proc.returncode}) before {what}:\n{log.read_text() if log else ''}")
        time.sleep(0.02)
    raise AssertionError(f"no {what} within {timeout:.0f} s")


def marker(run: Path) -> dict | None:
    try:
        return yaml.safe_load((run / "running.json").read_text())
    except (OSError, yaml.YAMLError):
        return None


def attempts(run: Path) -> int:
    """How often a run started training: each start logs the run's model first."""
    log = run / "train.log"
    return log.read_text().count("ModelConfig(") if log.exists() else 0


def job_of(pid: int) -> str | None:
    """The SLURM job whose processes include `pid`."""
    for line in our_jobs():
        job = line.split()[0]
        pids = subprocess.run(["scontrol", "listpids", job], capture_output=True, text=True).stdout.split()
        if str(pid) in pids:
            return job
    return None


def test_a_slurm_sweep_stops_releases_resumes_survives_a_cancelled_job_and_equals_the_local_sweep(
        slurm, tmp_path, corpus):
    local = write_spec(tmp_path / "local", corpus, train=SLURM_TRAIN, executor={"backend": "loky", "n_jobs": 2, "threads": 1})
    root = tmp_path / "local"
    assert sweep_main([str(local), "--results-dir", str(root / "results"), "--reports-dir", str(root / "reports")]) == 0

    spec = write_spec(tmp_path / "slurm", corpus, train=SLURM_TRAIN, executor=slurm_executor(tmp_path))
    args = python_m("gptlab.sweep", figures=False) + [str(spec), "--results-dir", str(tmp_path / "results"),
                                                      "--reports-dir", str(tmp_path / "reports")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = tmp_path / "shared" / "t" / "runs"

    # 1. SIGTERM once a run has checkpointed: exit 130, and the sweep's jobs are gone from the queue.
    log1 = tmp_path / "sweep1.log"
    with open(log1, "w") as out:
        proc = subprocess.Popen(args, env=env, stderr=out, stdout=out)
    try:
        wait_for(lambda: list(runs.glob("*/ckpt_last.pt")), 120, "checkpoint", proc, log1)
        assert our_jobs(), "the sweep's jobs should be in the queue while it trains"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=300) == 130, log1.read_text()
    finally:
        proc.kill()
    assert "plan: SLURM jobs on the default partition (2 job(s))" in log1.read_text()
    wait_for(lambda: not our_jobs(), 20, "release of the jobs after SIGTERM")
    before = {run.name: (attempts(run), (marker(run) or {}).get("pid")) for run in runs.iterdir()}
    # a run stopped after its checkpoint resumes from it; the cancelled run below may not have checkpointed yet
    resumable = [run.name for run in runs.iterdir() if (run / "ckpt_last.pt").exists() and not (run / "summary.json").exists()]
    assert resumable, "SIGTERM came after a checkpoint, so at least one unfinished run has one"

    # 2. The same command resumes; one run's job is cancelled while it trains: that run is retried.
    log2 = tmp_path / "sweep2.log"
    with open(log2, "w") as out:
        proc = subprocess.Popen(args, env=env, stderr=out, stdout=out)

    def a_new_attempt_in_flight() -> tuple[Path, int] | None:
        for run in runs.iterdir():
            pid = (marker(run) or {}).get("pid")
            old_attempts, old_pid = before.get(run.name, (0, None))
            if pid and pid != old_pid and attempts(run) > old_attempts:
                return run, pid
        return None

    try:
        killed, pid = wait_for(a_new_attempt_in_flight, 120, "run in flight", proc, log2)
        job = job_of(pid)
        assert job, f"no job of {JOB_NAME} runs process {pid}: {our_jobs()}"
        subprocess.run(["scancel", job], check=True)
        assert proc.wait(timeout=180) == 0, log2.read_text()
    finally:
        proc.kill()
    wait_for(lambda: not our_jobs(), 20, "release of the jobs at the end")

    results, reference = tmp_path / "results" / "t", root / "results" / "t"
    assert attempts(runs / killed.name) >= before.get(killed.name, (0, None))[0] + 2  # cancelled, then retried
    slurm_rows, local_rows = read_summary(results), read_summary(reference)
    assert list(slurm_rows) == list(local_rows) and len(slurm_rows) == 2
    assert {k: {c: r[c] for c in LOSSES} for k, r in slurm_rows.items()} == \
           {k: {c: r[c] for c in LOSSES} for k, r in local_rows.items()}
    assert all(r["status"] == "ok" for r in slurm_rows.values())
    for run_id in slurm_rows:
        assert metrics(results / "runs" / run_id) == metrics(reference / "runs" / run_id)
    for run_id in resumable:
        assert "resumed" in (results / "runs" / run_id / "train.log").read_text(), run_id
    recorded = yaml.safe_load((results / "sweep.yaml").read_text())["executor"]["cluster"]
    assert recorded["type"] == "slurm" and recorded["jobs"] == 2 and recorded["job_name"] == JOB_NAME


# -- validation, no SLURM needed -----------------------------------------------------------------
def executor(**cluster) -> dict:
    return {"backend": "dask", "cluster": {"type": "slurm", **cluster}}


@pytest.mark.parametrize("raw, message", [
    (executor(queue="gpu"), "executor.cluster: unknown key 'queue' (SLURM's 'partition' here); valid: type, partition"),
    (executor(memroy="4GB"), "executor.cluster: unknown key 'memroy' (did you mean 'memory'?)"),
    (executor(**{"cores\n": 2}), "executor.cluster: unknown key 'cores\\n'"),
    ({"backend": "dask", "cluster": {"type": "pbs"}}, "executor.cluster.type: unknown cluster type 'pbs'; valid: slurm"),
    ({"backend": "dask", "cluster": {"cores": 2}}, "executor.cluster.type: missing; valid: slurm"),
    ({"backend": "dask", "cluster": "slurm"}, "executor.cluster: must be a mapping such as {type: slurm"),
    ({"backend": "loky", "cluster": {"type": "slurm"}}, "executor.cluster: only the dask backend uses it"),
    ({"backend": "dask", "scheduler": "local", "cluster": {"type": "slurm"}},
     "executor.cluster: the sweep starts the cluster's own scheduler, so executor.scheduler 'local' contradicts it"),
    ({"backend": "dask", "n_jobs": 4, "cluster": {"type": "slurm"}}, "executor.n_jobs: with a cluster, its jobs are"),
    ({"backend": "dask", "threads": 4, "cluster": {"type": "slurm", "cores": 2}},
     "executor.threads: 4 threads per run, but each SLURM job has executor.cluster.cores 2"),
    (executor(cores=0), "executor.cluster.cores: must be a positive integer"),
    (executor(cores="4"), "executor.cluster.cores: must be a positive integer"),
    (executor(memory=4), "executor.cluster.memory: must be an amount with its unit such as 4GB"),
    (executor(memory="4 gigs"), "executor.cluster.memory: must be an amount with its unit"),
    (executor(walltime=43200), "executor.cluster.walltime: must be a quoted SLURM time such as '12:00:00'"),
    (executor(walltime="2h"), "executor.cluster.walltime: must be a SLURM time such as '30' (minutes)"),
    (executor(walltime="25:99:99"), "executor.cluster.walltime: must be a SLURM time such as '30' (minutes)"),
    (executor(walltime="0"), "executor.cluster.walltime: must be a SLURM time such as '30' (minutes)"),
    (executor(walltime="1-24:00"), "executor.cluster.walltime: must be a SLURM time such as '30' (minutes)"),
    (executor(patience="0"), "executor.cluster.patience: must be a SLURM time such as '30' (minutes)"),
    (executor(patience=3600), "executor.cluster.patience: must be a quoted SLURM time such as '12:00:00'"),
    (executor(jobs=0), "executor.cluster.jobs: must be a positive integer"),
    (executor(jobs=2, max_jobs=4), "executor.cluster.jobs: gives a fixed number of jobs, max_jobs an adaptive one"),
    (executor(min_jobs=5, max_jobs=2), "executor.cluster.min_jobs: 5 is more than max_jobs 2"),
    (executor(max_jobs=10**6), "executor.cluster.max_jobs: must be a positive integer of at most 10,000"),
    (executor(partition="a b"), "executor.cluster.partition: must not contain spaces"),
    (executor(account=""), "executor.cluster.account: must be a non-empty string"),
    (executor(job_extra_directives="--gres=gpu:1"), "executor.cluster.job_extra_directives: must be a list of non-empty"),
    (executor(job_extra_directives=["#SBATCH --gres=gpu:1"]), "each entry is an sbatch option such as --gres=gpu:1"),
    (executor(job_script_prologue=["module load x\nrm -rf /"]), "executor.cluster.job_script_prologue: one line per entry"),
    ({"backend": "dask"}, "or executor.cluster: {type: slurm, ...}"),
])
def test_cluster_keys_are_validated_in_one_line(raw, message):
    with pytest.raises(GptlabError) as err:
        ExecutorConfig.from_mapping(raw)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_valid_cluster_is_kept_and_recorded_as_written():
    raw = executor(partition="gpu", cores=4, memory="16GiB", walltime="1-12:00:00", min_jobs=1, max_jobs=8,
                   job_extra_directives=["--gres=gpu:1"], job_script_prologue=["module load cuda"])
    config = ExecutorConfig.from_mapping(raw)
    assert config.cluster == SlurmConfig(partition="gpu", cores=4, memory="16GiB", walltime="1-12:00:00", min_jobs=1,
                                         max_jobs=8, job_extra_directives=("--gres=gpu:1",),
                                         job_script_prologue=("module load cuda",))
    assert {k: v for k, v in config.to_dict()["cluster"].items() if k not in ("job_name", "patience")} == raw["cluster"]
    assert yaml.safe_load(yaml.safe_dump(config.to_dict())) == config.to_dict()
    assert ExecutorConfig.from_mapping(config.to_dict()) == config  # sweep.yaml reads back as the same config


def test_job_bounds_never_exceed_the_runs():
    assert SlurmConfig().job_bounds(5) == (0, 5)  # adaptive, up to one job per run
    assert SlurmConfig(jobs=3).job_bounds(5) == (3, 3)
    assert SlurmConfig(jobs=8).job_bounds(2) == (2, 2)
    assert SlurmConfig(min_jobs=4, max_jobs=6).job_bounds(3) == (3, 3)
    assert SlurmConfig(min_jobs=1).job_bounds(7) == (1, 7)


def test_a_missing_sbatch_is_one_line_before_anything_is_written(tmp_path, corpus, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    spec = write_spec(tmp_path, corpus, train=SLURM_TRAIN, executor=slurm_executor(tmp_path))
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert err.startswith("error: executor.cluster type slurm needs `sbatch` on PATH") and ".ci/slurm_up.sh" in err
    assert not (tmp_path / "results").exists()


def test_dry_run_shows_the_slurm_plan(tmp_path, corpus, capsys):
    spec = write_spec(
        tmp_path, corpus, executor={"backend": "dask", "cluster": {"type": "slurm", "partition": "gpu", "cores": 2}}
    )
    assert sweep_main([str(spec), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 0
    assert ("plan: SLURM jobs on partition gpu (adaptive, 0 job(s) up to one per run), each 2 core(s), 4GB, "
            "walltime 01:00:00; one run per job at a time, 2 thread(s) per run; stops if no job has started for "
            "01:00:00") in capsys.readouterr().out


@pytest.mark.parametrize("cluster, said", [
    ({"partition": "nosuch"}, "invalid partition specified: nosuch"),
    ({"job_extra_directives": ["--gres=gpu:1"]}, "Invalid generic resource (gres) specification"),
], ids=["partition", "directive"])
def test_a_job_sbatch_refuses_is_one_line_quoting_it_before_any_run(slurm, tmp_path, corpus, capsys, cluster, said):
    spec = write_spec(tmp_path, corpus, train=SLURM_TRAIN, executor=slurm_executor(tmp_path, **cluster))
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: sbatch refuses the sweep's job (exit 1): "), err
    assert said in err[-1] and "check executor.cluster" in err[-1]
    assert not any((tmp_path / "results" / "t" / "runs").glob("*/summary.json")) and not our_jobs()


def test_jobs_that_never_start_stop_the_sweep_after_its_patience_naming_squeue(slurm, tmp_path, corpus, capsys):
    # --begin an hour from now: accepted by sbatch, pending in squeue (reason BeginTime) for the whole test
    spec = write_spec(
        tmp_path,
        corpus,
        train=SLURM_TRAIN,
        executor=slurm_executor(tmp_path, job_extra_directives=["--begin=now+1hour"], patience="0:03"),
    )
    started = time.monotonic()
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "r")])
    waited = time.monotonic() - started
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: no SLURM job of this sweep has started for 0:03"), err
    assert f"squeue -u $USER -n {JOB_NAME}" in err[-1] and "rerun the same command to resume" in err[-1]
    assert 3 <= waited < 60 and not our_jobs()  # the pending jobs were cancelled on the way out


def test_threads_beyond_this_machine_are_refused_by_the_plan(monkeypatch):
    monkeypatch.setattr("gptlab.executors.plan.available_cores", lambda: 2)
    with pytest.raises(GptlabError, match=r"executor.threads: 3 threads per run, but this machine has 2 core\(s\)"):
        plan_resources(4, ExecutorConfig(threads=3), "cpu", 2**20)
    assert plan_resources(4, ExecutorConfig(threads=2), "cpu", 2**20).threads == 2
    assert plan_resources(4, ExecutorConfig(backend="dask", scheduler="local", threads=3), "cpu", 2**20).threads == 3


def test_a_submission_sbatch_refuses_mid_sweep_is_one_line_quoting_it(slurm, tmp_path, corpus, capsys, monkeypatch):
    """`--test-only` passes, the real submission is refused (a queue limit reached meanwhile): one line, not the
    adaptive loop's traceback followed by silence."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text(f"#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --test-only ] && exec {shutil.which('sbatch')} "
                                 "\"$@\"; done\necho 'sbatch: error: QOSMaxSubmitJobPerUserLimit' >&2\nexit 1\n")
    (fake / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    # patience: without the refusal read, the sweep would wait for a job that never comes
    spec = write_spec(tmp_path, corpus, train=SLURM_TRAIN, executor=slurm_executor(tmp_path, patience="0:30"))
    started = time.monotonic()
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and time.monotonic() - started < 60, err
    assert err.strip().splitlines()[-1] == ("error: sbatch refused a job of this sweep: sbatch: error: "
                                            "QOSMaxSubmitJobPerUserLimit; the jobs are cancelled, finished runs are "
                                            "kept; fix executor.cluster (or wait for the queue's limits) and rerun "
                                            "the same command to resume")
