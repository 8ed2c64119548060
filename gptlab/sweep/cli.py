"""`python -m gptlab.sweep SPEC.yaml`: train a YAML grid x seeds, resumably, then write the report.

The console shows the runs in flight (step, loss, ETA) and one line per finished run; each run
logs to its own directory. Exit status: 0 when every run finished (ok or diverged), 1 when some
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
import logging
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from gptlab.errors import GptlabError
from gptlab.model import REGISTRIES
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import FINISHED
from gptlab.sweep.execute import SweepOptions, execute, planner_for, warn_other_runs
from gptlab.sweep.progress import clock
from gptlab.sweep.summary import write_summary
from gptlab.sweep.reuse import Reuse, check_sources
from gptlab.sweep.spec import load_spec, parse_overrides
from gptlab.sweep.runs import Run, SweepSpec, arms_allocation
from gptlab.sweep.trunks import SHARING_BACKENDS, trunk_groups
from gptlab.sweep.tuning import known_runs, planned_range

log = logging.getLogger("gptlab.sweep")


def build_parser() -> argparse.ArgumentParser:
    from gptlab.executors import BACKENDS

    p = argparse.ArgumentParser(prog="python -m gptlab.sweep", description="Train every cell of an ablation grid x seeds, then report.")
    p.add_argument("spec", nargs="?", help="sweep YAML, e.g. ablations/quick.yaml")
    p.add_argument("--dry-run", action="store_true", help="print the runs and a time estimate, train nothing")
    p.add_argument("--jobs", type=int, metavar="N", help="runs trained at once (overrides executor.n_jobs)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a base key, e.g. train.max_iters=500")
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
    """Every registry a sweep's grid can name, by its dotted key, with one line per entry."""
    from gptlab.run.corpora import DATASETS
    from gptlab.run.tokenizers import TOKENIZERS

    registries = {**{f"model.{axis}": registry for axis, registry in REGISTRIES.items()}, "data.dataset": DATASETS,
                  "data.tokenizer": TOKENIZERS}
    for key, registry in registries.items():
        print(f"{key}: {registry.description}", file=stream)
        for name in registry.names():
            print(f"  {name:<14} {registry.summary(name)}", file=stream)


def texts_line(spec: SweepSpec) -> str:
    """The texts the runs train on, what each is, and how it is split: one line for the dry run."""
    from gptlab.run.corpora import DATASETS

    seen: dict[str, str] = {}
    for run in spec.runs:
        d = run.config["data"]
        name = d.get("path") or d["dataset"]
        if name not in seen:
            what = (DATASETS.summary(d["dataset"]) if not d.get("path") and d["dataset"] in DATASETS
                    else "a user text")
            val, test = float(d["val_fraction"]), float(d.get("test_fraction") or 0.0)
            split = f"val {val - test:.0%}, test {test:.0%}" if test > 0 else f"val {val:.0%}"
            seen[name] = f"{name} ({what}; train {1 - val:.0%}, {split})"
    return f"{'texts' if len(seen) > 1 else 'text'}: " + "; ".join(seen.values())


def dry_run(spec: SweepSpec, results_dir: ResultsDir, plan_line: str, workers: int, threads: int, stream: TextIO,
            reuse: tuple[ResultsDir, ...] = ()) -> None:
    from gptlab.run.device import configure_process
    from gptlab.sweep.estimate import time_run

    factors = list(spec.grid) + (list(spec.tune.space) if spec.tune else [])  # a tuned sweep's: + its settings
    header = [*factors, "seed", "run_id", "state"]
    rows = [[*(str(v) for _, v in r.cell + getattr(r, "setting", ())), str(r.seed), r.run_id,
             results_dir.run(r.run_id).state()] for r in spec.runs]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    for line in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip(), file=stream)
    warn_other_runs(spec, results_dir, stream)
    pending = [r for r in spec.runs if results_dir.run(r.run_id).state() not in FINISHED + ("failed",)]
    print(f"\n{len(spec.runs)} runs: {len(spec.runs) - len(pending)} finished, {len(pending)} to train", file=stream)
    reused = Reuse(reuse)
    found = [r for r in pending if reused.find(r.run_id) is not None]
    if reuse:
        print(f"reuse: {len(found)} of the {len(pending)} are finished in {', '.join(str(r.path) for r in reuse)} "
              "(same config and seed): copied, not trained; later stages' runs are looked up as they are planned",
              file=stream)
        pending = [r for r in pending if r not in found]
    print(plan_line, file=stream)
    print(texts_line(spec), file=stream)
    if arms_allocation(spec):
        print(arms_allocation(spec), file=stream)
    timing = None
    if pending:
        configure_process(threads)
        timing = time_run(pending[0].config)
        print(f"estimate: ~{clock(timing.seconds(pending[0].config))} for {pending[0].run_id} (timed from its first "
              f"steps; other runs scaled by their steps), ~{clock(_seconds(spec, pending, timing, workers))} in all",
              file=stream)
    preview = planner_for(spec, stream).preview()  # the planner's stages, e.g. adaptive seeds' min and worst case
    if preview is not None:
        print(preview.intro, file=stream)
        for case in preview.cases:
            left = [r for r in case.runs if results_dir.run(r.run_id).state() not in FINISHED + ("failed",)]
            timed = left + list(case.stand_ins)  # which runs they stand for is known only once an earlier stage ran
            if timing is None and timed:  # a case's runs need not be the spec's (a later stage's)
                configure_process(threads)
                timing = time_run(timed[0].config)
            time = f", ~{clock(_seconds(spec, timed, timing, workers))}" if timing is not None else ""
            chosen = (f", plus {len(case.stand_ins)} whose settings the selection chooses (counted as untrained)"
                      if case.stand_ins else "")
            print(f"  {case.label}, {len(case.runs) + len(case.stand_ins)} runs, {len(left)} to train{chosen}{time}",
                  file=stream)


def _seconds(spec: SweepSpec, runs: list[Run], timing: Any, workers: int) -> float:
    """Wall time of `runs` on `workers`: each run's steps (a shared trunk's branch only its cooldown), spread over the
    workers, and never less than the longest run."""
    every = list({r.run_id: r for r in [*spec.runs, *runs]}.values())  # a finished trunk still starts its branches
    starts = ({run.run_id: b for group in trunk_groups(every) for run, b in group.branches}
              if spec.executor.backend in SHARING_BACKENDS else {})
    each = [timing.seconds(r.config, starts.get(r.run_id, 0)) for r in runs]
    return max(max(each, default=0.0), sum(each) / max(1, workers))

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
        executor = {k: v for k, v in {"n_jobs": args.jobs, "backend": args.backend, "scheduler": args.scheduler}.items() if v is not None}
        spec = load_spec(args.spec, parse_overrides(args.set), executor, margin=args.margin)  # frozen from here on
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
                               rerun_failed=args.rerun_failed, fail_fast=args.fail_fast, stream=out, reuse=reuse)
        return execute(spec, plan, options)
    except GptlabError as err:
        print(f"error: {err}", file=out)
        return 2
    except KeyboardInterrupt:
        if spec is not None and results_dir is not None and results_dir.path.exists():
            rows = write_summary(spec, results_dir, known_runs(spec))  # tuned: the estimation runs too
            low, high = planned_range(spec)
            planned = f"{low} to {high} (adaptive seeds)" if low != high else str(high)
            with contextlib.suppress(OSError):  # a closed terminal (SIGHUP) cannot show it
                print(f"\ninterrupted: {len(rows)} of {planned} runs finished; run the same command "
                      "again to resume (each run continues from its last checkpoint)", file=out)
        return 130
