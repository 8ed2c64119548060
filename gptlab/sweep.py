"""`python -m gptlab.sweep SPEC.yaml`: train a YAML grid x seeds, resumably, then write the report.

The console shows sweep-level progress only (a bar, one line per finished run); each run logs
to its own directory. Exit status: 0 when every run finished (ok or diverged), 1 when some run
failed, 2 on invalid input, 130 when interrupted (rerun the same command to resume).
"""
from __future__ import annotations

import argparse
import logging
import shlex
import signal
import threading
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from gptlab.errors import GptlabError
from gptlab.model import REGISTRIES
from gptlab.results import FINISHED, run_dir, run_state, write_summary
from gptlab.runio import read_json, write_yaml
from gptlab.spec import SweepSpec, cell_label, load_spec, parse_overrides

log = logging.getLogger("gptlab.sweep")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gptlab.sweep", description="Train every cell of an ablation grid x seeds, then report.")
    p.add_argument("spec", nargs="?", help="sweep YAML, e.g. ablations/quick.yaml")
    p.add_argument("--dry-run", action="store_true", help="print the runs and a time estimate, train nothing")
    p.add_argument("--jobs", type=int, metavar="N", help="runs trained at once (overrides executor.n_jobs)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a base key, e.g. train.max_iters=500")
    p.add_argument("--results-dir", default="results", help="parent folder of results/NAME (default: results)")
    p.add_argument("--reports-dir", default="reports", help="parent folder of reports/NAME (default: reports)")
    p.add_argument("--rerun-failed", action="store_true", help="train failed runs again (from their last checkpoint)")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failed run")
    p.add_argument("--backend", choices=["loky", "dask"], help="executor backend (overrides executor.backend)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="dask scheduler address, or 'local'")
    p.add_argument("--margin", metavar="NATS", help="equivalence margin for 'equivalent' calls, nats/char "
                   "(overrides report.equivalence_margin; default 0.01)")
    p.add_argument("--list", action="store_true", help="list every registry and its entries, then exit")
    return p


def list_registries(stream: TextIO) -> None:
    for axis, registry in REGISTRIES.items():
        print(f"model.{axis}: {registry.description}", file=stream)
        for name in registry.names():
            print(f"  {name:<14} {registry.summary(name)}", file=stream)


class Progress:
    """A bar of finished runs out of the total with ETA, and one line per finished run."""

    def __init__(self, total: int, done: int, stream: TextIO) -> None:
        self.total, self.done, self.stream = total, done, stream
        self.start, self.finished_here = time.perf_counter(), 0

    def update(self, spec: SweepSpec, result: dict[str, Any]) -> None:
        self.done += 1
        self.finished_here += 1
        summary = result["summary"]
        run = next(r for r in spec.runs if r.run_id == result["run_id"])
        best = summary.get("best_val_loss")
        loss = f"best val {best:.4f}" if isinstance(best, float) else "no val loss"
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.finished_here * (self.total - self.done)
        filled = round(20 * self.done / self.total)
        print(f"[{self.done:>{len(str(self.total))}}/{self.total}] {cell_label(run.cell)} seed {run.seed}: "
              f"{summary['status']}, {loss}, {result['seconds']:.1f} s  "
              f"|{'#' * filled}{'.' * (20 - filled)}| elapsed {_clock(elapsed)}, ETA {_clock(eta)}",
              file=self.stream, flush=True)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def check_datasets(spec: SweepSpec) -> None:
    """Resolve every dataset the runs need (downloading if allowed) before anything is trained."""
    from gptlab.data import load_dataset

    for data in {tuple(sorted(r.config["data"].items())) for r in spec.runs}:
        d = dict(data)
        load_dataset(d["dataset"], d["path"], d["val_fraction"])


def dry_run(spec: SweepSpec, results_dir: Path, plan_line: str, workers: int, threads: int, stream: TextIO) -> None:
    import torch

    from gptlab.train import estimate_run_seconds

    factors = list(spec.grid)
    header = [*factors, "seed", "run_id", "state"]
    rows = [[*map(str, r.factors.values()), str(r.seed), r.run_id, run_state(results_dir, r)] for r in spec.runs]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    for line in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip(), file=stream)
    pending = [r for r in spec.runs if run_state(results_dir, r) not in FINISHED + ("failed",)]
    print(f"\n{len(spec.runs)} runs: {len(spec.runs) - len(pending)} finished, {len(pending)} to train", file=stream)
    print(plan_line, file=stream)
    if pending:
        torch.set_num_threads(threads)
        per_run = estimate_run_seconds(pending[0].config)
        waves = -(-len(pending) // workers)
        print(f"estimate: ~{_clock(per_run)} per run (timed from the first steps of {pending[0].run_id}), "
              f"~{_clock(per_run * waves)} in all", file=stream)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # `kill` stops a sweep as Ctrl-C does: workers stopped, summary rebuilt


def main(argv: list[str] | None = None) -> int:
    if threading.current_thread() is not threading.main_thread():  # signals belong to the main thread
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.command = "python -m gptlab.sweep " + " ".join(shlex.quote(a) for a in argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    out = sys.stderr
    results_dir: Path | None = None
    spec: SweepSpec | None = None
    try:
        if args.margin is not None:
            from gptlab.report.calls import check_margin

            args.margin = check_margin(args.margin, "--margin")
        if args.list:
            list_registries(sys.stdout)
            return 0
        if not args.spec:
            raise GptlabError("give a sweep YAML (e.g. ablations/quick.yaml), or --list")
        executor = {k: v for k, v in {"n_jobs": args.jobs, "backend": args.backend, "scheduler": args.scheduler}.items() if v is not None}
        spec = load_spec(args.spec, parse_overrides(args.set), executor)
        if args.margin is not None:
            spec.report["equivalence_margin"] = args.margin  # sweep.yaml records the margin actually used
        check_datasets(spec)
        results_dir = Path(args.results_dir) / spec.name
        from gptlab.executors import estimate_run_bytes, plan_resources
        from gptlab.train import resolve_device

        device = resolve_device(spec.runs[0].config["train"]["device"]).type
        states = {r.run_id: run_state(results_dir, r) for r in spec.runs}
        todo = [r for r in spec.runs if states[r.run_id] in ("pending", "partial")
                or (args.rerun_failed and states[r.run_id] == "failed")]
        # Planned for the whole sweep, not just what is left, so that a resumed or retrained run
        # gets the same thread count as its siblings: CPU float reductions depend on it.
        plan = plan_resources(len(spec.runs), spec.executor, device, max(estimate_run_bytes(r.config) for r in spec.runs))
        if args.dry_run:
            dry_run(spec, results_dir, plan.describe(), plan.workers, plan.threads, sys.stdout)
            return 0
        return execute(spec, results_dir, Path(args.reports_dir) / spec.name, todo, plan, args, out)
    except GptlabError as err:
        print(f"error: {err}", file=out)
        return 2
    except KeyboardInterrupt:
        if spec is not None and results_dir is not None and results_dir.exists():
            rows = write_summary(spec, results_dir)
            print(f"\ninterrupted: {len(rows)} of {len(spec.runs)} runs finished; run the same command "
                  "again to resume (each run continues from its last checkpoint)", file=out)
        return 130


def execute(spec: SweepSpec, results_dir: Path, reports_dir: Path, todo: list, plan: Any,
            args: argparse.Namespace, out: TextIO) -> int:
    from gptlab.executors.local import run_local

    if spec.executor["backend"] == "dask" and todo:
        from gptlab.executors.dask_backend import check_scheduler

        check_scheduler(spec.executor)  # an unreachable scheduler fails before anything is written
    results_dir.mkdir(parents=True, exist_ok=True)
    write_yaml(results_dir / "sweep.yaml", {**spec.to_dict(), "command": args.command})
    for run in todo:
        folder = run_dir(results_dir, run)
        if (folder / "summary.json").exists():  # a failed run the user asked to rerun
            (folder / "summary.json").unlink()
            (folder / "error.txt").unlink(missing_ok=True)
    skipped = len(spec.runs) - len(todo)
    print(f"sweep {spec.name}: {len(spec.runs)} runs ({len(spec.runs) // len(spec.seeds)} cells x {len(spec.seeds)} seeds), "
          f"{skipped} already finished, {len(todo)} to train", file=out)
    if spec.executor["backend"] != "dask":  # the dask backend logs its plan once it sees the cluster
        print(plan.describe(), file=out)
    progress = Progress(len(spec.runs), skipped, out)

    def on_result(result: dict[str, Any]) -> None:
        progress.update(spec, result)
        write_summary(spec, results_dir)

    tasks = [{"run_id": r.run_id, "config": r.config, "run_dir": str(run_dir(results_dir, r).resolve()),
              "threads": plan.threads, "plugins": spec.plugins, "search_path": spec.search_path,
              "gpus": plan.gpus, "runs_per_gpu": spec.executor["runs_per_gpu"]} for r in todo]
    if spec.executor["backend"] == "dask":
        from gptlab.executors.dask_backend import run_dask

        run_dask(tasks, plan, spec.executor, on_result, fail_fast=args.fail_fast)
    else:
        run_local(tasks, plan, on_result, fail_fast=args.fail_fast)
    rows = write_summary(spec, results_dir)
    peaks = [read_json(run_dir(results_dir, r) / "summary.json").get("peak_rss_mb") for r in todo
             if (run_dir(results_dir, r) / "summary.json").exists()]
    peaks = [p for p in peaks if p]
    if peaks:
        print(f"peak resident memory per worker: {max(peaks):.0f} MiB "
              f"(planned {plan.run_bytes / 2**20:.0f} MiB per run)", file=out)
    return finish(spec, results_dir, reports_dir, rows, out)


def finish(spec: SweepSpec, results_dir: Path, reports_dir: Path, rows: list[dict[str, Any]], out: TextIO) -> int:
    """Print what did not finish ok, write the report, and choose the exit status."""
    not_ok = [r for r in rows if r["status"] != "ok"]
    missing = len(spec.runs) - len(rows)
    if not_ok:
        print(f"\n{len(not_ok)} run(s) did not finish ok:", file=out)
        for row in not_ok:
            folder = results_dir / "runs" / row["run_id"]
            log_file = folder / ("error.txt" if row["status"] == "failed" else "train.log")
            print(f"  {row['status']:<8} {row['run_id']}  {row.get('error') or ''}  log: {log_file}", file=out)
    try:
        from gptlab.report import write_report
    except ImportError:
        print(f"summary: {results_dir / 'summary.csv'}", file=out)
    else:
        path = write_report(results_dir, reports_dir, margin=spec.report["equivalence_margin"])
        print(f"report: {Path(path) / 'report.md'}", file=out)
    failed = sum(r["status"] == "failed" for r in rows)
    if failed:
        print(f"{failed} run(s) failed; fix the cause and rerun with --rerun-failed", file=out)
        return 1
    if missing:
        print(f"{missing} run(s) were not trained (stopped early); rerun to continue", file=out)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
