"""Fault-injection campaign: SIGKILL a sweep's driver or one of its workers at random moments.

A small sweep (2 cells x 2 seeds, dropout on, an evaluation and checkpoint every 50 steps) is
trained once without interruption, as the reference. Then, for `--kills` rounds, the same sweep is
started in a fresh process, and at a random moment (seeded) either the driver or one of its
worker processes gets SIGKILL; the sweep is rerun right away, and killed again, and so on. Whenever
a sweep completes, its results are compared with the reference and a new results folder starts.
At the end the last folder is completed by a plain rerun and compared too.

What is compared: the set of runs and their status in `summary.csv`, the loss columns of
`summary.csv`, and every row of every `metrics.csv` except the wall-clock column `elapsed_s`.
Printed: kills delivered (driver / worker), kills survived, runs lost, loss values changed.

    python benchmarks/fault_injection.py [--kills 20] [--seed 0] [--keep DIR]
"""
from __future__ import annotations

import argparse
import csv
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from helpers import make_corpus  # noqa: E402  (the test suite's small corpus with learnable structure)

LOSS_COLUMNS = ("status", "best_val_loss", "best_step", "final_val_loss", "final_train_loss")
NAME = "faults"  # results/NAME inside each --results-dir
METRIC_COLUMNS = ("step", "train_loss", "val_loss", "lr", "grad_norm", "tokens")


def write_spec(folder: Path, corpus: Path, max_iters: int) -> Path:
    spec = {
        "name": NAME,
        "base": {
            "model": {"n_layer": 2, "n_head": 2, "n_embd": 48, "block_size": 48, "dropout": 0.1},
            "train": {"max_iters": max_iters, "batch_size": 8, "lr": 3e-3, "min_lr": 3e-4, "warmup_iters": 10,
                      "eval_interval": 50, "log_interval": 25, "device": "cpu"},
            "data": {"dataset": "faults", "path": str(corpus)},
        },
        "grid": {"model.norm": ["pre", "post"]},
        "seeds": 2,
        "executor": {"backend": "loky", "n_jobs": 2, "threads": 1},
    }
    path = folder / "faults.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def sweep_command(spec: Path, results: Path, reports: Path) -> list[str]:
    return [sys.executable, "-m", "gptlab.sweep", str(spec), "--results-dir", str(results),
            "--reports-dir", str(reports)]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def compare(reference: Path, candidate: Path) -> tuple[int, int]:
    """(runs lost, loss values changed) of `candidate`'s results against `reference`'s."""
    ref_rows = {r["run_id"]: r for r in read_csv(reference / "summary.csv")}
    path = candidate / "summary.csv"
    got_rows = {r["run_id"]: r for r in read_csv(path)} if path.exists() else {}
    lost = sum(1 for run_id, row in ref_rows.items()
               if run_id not in got_rows or got_rows[run_id]["status"] != row["status"])
    changed = 0
    for run_id, row in ref_rows.items():
        got = got_rows.get(run_id)
        if got is None:
            continue
        changed += sum(got[c] != row[c] for c in LOSS_COLUMNS)
        ref_metrics = read_csv(reference / "runs" / run_id / "metrics.csv")
        got_path = candidate / "runs" / run_id / "metrics.csv"
        got_metrics = read_csv(got_path) if got_path.exists() else []
        changed += abs(len(ref_metrics) - len(got_metrics))
        for a, b in zip(ref_metrics, got_metrics):
            changed += sum(a[c] != b[c] for c in METRIC_COLUMNS)
    return lost, changed


def children(pid: int) -> list[int]:
    """The training worker processes of the sweep whose driver is `pid`."""
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)
                if any("popen_loky" in part for part in p.cmdline())]  # loky's workers, not its trackers
    except psutil.NoSuchProcess:
        return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs to deliver (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments and targets")
    parser.add_argument("--max-iters", type=int, default=400, help="steps per run (default 400)")
    parser.add_argument("--keep", metavar="DIR", help="keep the work folder here instead of a temp folder")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gptlab-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    corpus = make_corpus(work / "corpus.txt", n_chars=60_000)
    spec = write_spec(work, corpus, args.max_iters)

    tick = time.perf_counter()
    reference = work / "reference"
    subprocess.run(sweep_command(spec, reference, work / "reports"), env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sweep_s = time.perf_counter() - tick
    print(f"reference sweep: {sweep_s:.1f} s", flush=True)

    delivered = {"driver": 0, "worker": 0}
    rounds, lost, changed, folder_index, failures = 0, 0, 0, 0, 0
    folder = work / f"round{folder_index}"
    while sum(delivered.values()) < args.kills:
        proc = subprocess.Popen(sweep_command(spec, folder, work / "reports"), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        moment = rng.uniform(0.5, 0.8 * sweep_s)
        target = rng.choice(["driver", "worker"])
        deadline = time.perf_counter() + moment
        while time.perf_counter() < deadline and proc.poll() is None:
            time.sleep(0.05)
        if proc.poll() is None:
            workers = children(proc.pid)
            if target == "worker" and workers:
                os.kill(rng.choice(workers), signal.SIGKILL)
            else:
                target = "driver"
                os.kill(proc.pid, signal.SIGKILL)
            delivered[target] += 1
            print(f"kill {sum(delivered.values()):>2}: {target} at {moment:.1f} s", flush=True)
        _, err = proc.communicate()
        if proc.returncode not in (0, -signal.SIGKILL, 1):
            failures += 1
            print(f"  sweep exited {proc.returncode}: {err.decode(errors='replace').strip().splitlines()[-1:]}")
        if proc.returncode == 0:  # the sweep completed in this attempt: check it, start a new folder
            round_lost, round_changed = compare(reference / NAME, folder / NAME)
            lost, changed, rounds = lost + round_lost, changed + round_changed, rounds + 1
            folder_index += 1
            folder = work / f"round{folder_index}"
    # Finish the last folder with plain reruns (orphaned workers of a killed driver may still hold runs).
    for _ in range(5):
        if subprocess.run(sweep_command(spec, folder, work / "reports"), env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            break
    round_lost, round_changed = compare(reference / NAME, folder / NAME)
    lost, changed, rounds = lost + round_lost, changed + round_changed, rounds + 1
    survived = sum(delivered.values()) - failures
    print(f"\nkills delivered: {sum(delivered.values())} ({delivered['driver']} driver, {delivered['worker']} worker); "
          f"kills survived: {survived}; completed sweeps compared: {rounds}")
    print(f"runs lost: {lost}; loss values changed: {changed} (summary.csv and every metrics.csv row, "
          f"against an uninterrupted sweep)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if lost == 0 and changed == 0 and failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
