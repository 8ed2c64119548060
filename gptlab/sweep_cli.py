"""`python -m gptlab.sweep SPEC.yaml`: the sweep's command line: train a YAML grid x seeds, resumably, then write the report.

It stands above both rooms it joins: the sweep (`gptlab.sweep`, which knows nothing of reports) and the
report (`gptlab.report`, handed to `execute` as the step that ends a sweep).

The console shows the runs in flight (step, loss, ETA) and one line per finished run on stderr (progress and
logging); the results go to stdout: the verdict of each effect, the runs that did not finish ok, where the
report is and whether to rerun. Each run logs to its own directory. Exit status: 0 when every run finished (ok,
diverged, collapsed or unstable), 1 when some
run failed, 2 on invalid input, 130 when interrupted (rerun the same command to resume).

Interrupted means stopped by Ctrl-C (SIGINT), `kill` (SIGTERM) or a closed terminal (SIGHUP): all
three stop a sweep the same way, and all three exit 130, the status a shell gives Ctrl-C, so one
number tells a script "stopped, resumable". The workers are killed (every file they wrote is
whole), summary.csv is rebuilt and one line says how to resume. Further stop signals are ignored
while that happens. A signal the caller set to be ignored (`nohup`, a background job) stays ignored.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import logging
import shlex
import signal
import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any, Callable, TextIO

from gptlab import report
from gptlab.errors import GptlabError, exit_status, hidden_package
from gptlab.run.resultsdir import ResultsDir
from gptlab.sweep.dry_run import dry_run
from gptlab.sweep.execute import SweepOptions, execute
from gptlab.sweep.kinds import (
    SWEEP_KINDS,
    import_shipped_kinds,
    kind_registries,
    known_runs,
    open_count,
    planned_count,
    planned_range,
)
from gptlab.sweep.planners import AfterRunsStopped
from gptlab.sweep.reuse import check_sources
from gptlab.sweep.runs import SweepSpec
from gptlab.sweep.spec import load_spec, parse_overrides
from gptlab.sweep.summary import write_summary

log = logging.getLogger("gptlab.sweep")


def build_parser() -> argparse.ArgumentParser:
    from gptlab.executors import BACKENDS

    p = argparse.ArgumentParser(
        prog="python -m gptlab.sweep", description="Train every cell of an ablation grid x seeds, then report."
    )
    p.add_argument("spec", nargs="?", help="sweep YAML, e.g. ablations/quick.yaml")
    p.add_argument("--dry-run", action="store_true", help="print the runs and a time estimate, train nothing")
    p.add_argument("--jobs", type=int, metavar="N", help="runs trained at once (overrides executor.n_jobs)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a run setting of base (e.g. train.max_iters=500; "
        "python -m gptlab.train --help lists them) or the seeds (seeds=4)",
    )
    p.add_argument("--results-dir", default="results", help="parent folder of results/NAME (default: results)")
    p.add_argument("--reports-dir", default="reports", help="parent folder of reports/NAME (default: reports)")
    p.add_argument("--rerun-failed", action="store_true", help="train failed runs again (from their last checkpoint)")
    p.add_argument("--reuse", action="append", default=[], metavar="RESULTS_DIR",
                   help="take a run finished in this results folder (same config and seed) instead of training it; "
                        "repeatable")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failed run")
    p.add_argument("--backend", choices=BACKENDS.names(), help="executor backend (overrides executor.backend)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="dask scheduler address, or 'local'")
    p.add_argument("--margin", metavar="NATS", help="equivalence margin for 'equivalent' calls, nats/char "
                   "(overrides report.equivalence_margin; default 0.01)")
    p.add_argument("--list", action="store_true", help="list every registry and its entries, then exit")
    return p


def list_registries(stream: TextIO) -> None:
    """Every registry a sweep's grid can name, by its dotted key, then the kinds of sweep (their top-level keys) and
    the tuning methods, with one line per entry."""
    from gptlab.run.settings_help import registries_by_key

    import_shipped_kinds()  # as validating a spec does: the kinds' keys, and the registries they name
    for key, registry in {**registries_by_key(), "top-level keys": SWEEP_KINDS, **kind_registries()}.items():
        print(f"{key}: {registry.description}", file=stream)
        for name in registry.names():
            print(f"  {name:<14} {registry.summary(name)}", file=stream)


MAX_CALLS = 15  # the calls a finished sweep prints; the report has them all


def report_with_calls(write_report: Callable[..., Path], results_dir: ResultsDir, reports_dir: Path) -> Path:
    """`write_report`, then the report's verdict of each effect (an arms sweep: each arm) on stdout, the answer a
    finished sweep gives before the path of its report."""
    path = Path(write_report(results_dir, reports_dir))
    for name in ("arms.csv", "main_effects.csv"):
        table = path / "tables" / name
        if table.is_file():
            with table.open(newline="") as f:
                verdicts = [row["verdict"] for row in csv.DictReader(f) if row.get("verdict")]
            more = len(verdicts) - MAX_CALLS
            print(f"\ncalls ({table}):" if verdicts else "", file=sys.stdout)
            for line in verdicts[:MAX_CALLS] + ([f"... and {more} more in the report"] if more > 0 else []):
                print(f"  {line}", file=sys.stdout)
            break
    return path


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, `kill`, a closed terminal


def _terminate(signum: int, frame: Any) -> None:
    """Stop the sweep as Ctrl-C does: workers stopped, summary rebuilt, exit 130."""
    # One stop is enough: Ctrl-C pressed again must not break the cleanup (a traceback, a worker
    # left running). `main` restores the handlers once it has returned.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None, *, program: bool = False) -> int:
    """Run the sweep command line (`argv`, else sys.argv) and return its exit status.

    The stop signals' handlers are the caller's again on return, except where `program` (this is
    `python -m gptlab.sweep`) and the sweep was stopped: then they stay ignored, since a Ctrl-C
    pressed again while the interpreter exits would print a traceback from its exit handlers.
    """
    if (hidden := hidden_package()) is not None:  # a bare folder named gptlab shadows the package: nothing would work
        return exit_status(hidden)
    if threading.current_thread() is not threading.main_thread():  # signals belong to the main thread
        return _main(argv)
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:  # ignored by the caller's choice (nohup, a background job)
            signal.signal(sig, _terminate)
    code = None
    try:
        code = _main(argv)
        return code
    finally:
        if not (program and code == 130):
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    out = sys.stderr
    results_dir: ResultsDir | None = None
    spec: SweepSpec | None = None
    try:
        if args.list:
            list_registries(sys.stdout)
            return 0
        if not args.spec:
            raise GptlabError("give a sweep YAML (e.g. ablations/quick.yaml), or --list")
        executor = {
            k: v for k, v in {"n_jobs": args.jobs, "backend": args.backend, "scheduler": args.scheduler}.items() if v is not None
        }
        spec = load_spec(args.spec, parse_overrides(args.set), executor).with_margin(args.margin)  # frozen from here on
        from gptlab.executors import plan_resources
        from gptlab.sweep.preflight import check_folders, preflight

        device, run_bytes = preflight(spec)
        results_dir = ResultsDir(Path(args.results_dir) / spec.name)
        reuse = check_sources(args.reuse, results_dir)
        check_folders(spec, results_dir, Path(args.reports_dir) / spec.name)
        # Planned for the whole sweep, not just what is left, so that a resumed or retrained run
        # gets the same thread count as its siblings: CPU float reductions depend on it.
        plan = plan_resources(len(spec.runs), spec.executor, device, run_bytes)
        if args.dry_run:
            from gptlab.executors import BACKENDS

            plan_line = BACKENDS.get(spec.executor.backend)(spec.executor).describe(plan, dry_run=True)
            dry_run(spec, results_dir, plan_line or plan.describe(), plan.workers, plan.threads, sys.stdout, reuse)
            return 0
        options = SweepOptions(results_dir, Path(args.reports_dir) / spec.name,
                               command="python -m gptlab.sweep " + " ".join(shlex.quote(a) for a in argv),
                               rerun_failed=args.rerun_failed, fail_fast=args.fail_fast, stream=out,
                               results_stream=sys.stdout, reuse=reuse,
                               write_report=partial(report_with_calls, report.write_report))  # looked up
        # now: a test may stand one in
        return execute(spec, plan, options)
    except GptlabError as err:
        return exit_status(err, out)
    except KeyboardInterrupt as stop:
        return _interrupted(stop, args.dry_run, spec, results_dir, out)


def _interrupted(stop: KeyboardInterrupt, dry: bool, spec: SweepSpec | None, results_dir: ResultsDir | None,
                 out: TextIO) -> int:
    """Exit 130 after Ctrl-C (or a signal that stops the sweep as it does), saying what is on disk and how to go on:
    summary.csv rebuilt from the run folders where the sweep had begun."""
    if dry:  # nothing to rebuild: a dry run writes nothing
        with contextlib.suppress(OSError):
            print("\ninterrupted: the dry run stopped; nothing was trained or written", file=out)
        return 130
    if spec is not None and results_dir is not None and results_dir.path.exists():
        rows = write_summary(spec, results_dir, known_runs(spec))  # tuned: the estimation runs too
        low, high = (n + planned_count(spec) for n in planned_range(spec))
        # a range's low end is no ceiling: a refining sweep may be past it when stopped ("345 of 264 to 384" misled)
        finished = (f"{len(rows)} of {high} runs finished" if low == high else f"{len(rows)} runs finished, of the "
                    f"{low} to {high} the sweep trains in all ({open_count(spec)})")
        then = stop.then if isinstance(stop, AfterRunsStopped) else \
            "run the same command again to resume (each run continues from its last checkpoint)"
        with contextlib.suppress(OSError):  # a closed terminal (SIGHUP) cannot show it
            print(f"\ninterrupted: {finished}; {then}", file=out)
    else:  # stopped while the spec was read or before its results folder was made: nothing was written
        with contextlib.suppress(OSError):
            print("\ninterrupted before anything was trained or written; run the same command again to start",
                  file=out)
    return 130
