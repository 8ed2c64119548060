"""Training a validated sweep: `execute(spec, plan, options)` reads as plan, train, finish.

Plan: `planner_for` picks the spec's planner (`gptlab.sweep.planners`). Train: `train_stages` asks
it for stages and trains each (`train`) until it is done or a stage does not finish. Finish:
`finish` writes summary.csv for every planned run and the report once, picks the exit status, and prints
the share of training time spent compiling (`compile_line`, the comment above it says how it is counted).
The planners never import this module. No CLI objects here: the command line
(`gptlab.sweep_cli`) turns its flags into `SweepOptions`.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence, TextIO

from gptlab.executors import BACKENDS, Backend, Resources, RunResult, Task
from gptlab.run.identity import check_unchanged, sweep_sources
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir, RunSummary
from gptlab.run.summary_csv import SOURCES
from gptlab.runio import write_yaml
from gptlab.statuses import FAILED, FAILED_TO_TRAIN, FINISHED, OK
from gptlab.sweep.design_notes import arms_allocation, noise_df_warning
from gptlab.sweep.kinds import after_runs, known_runs, with_kind_stages
from gptlab.sweep.lock import SweepLock
from gptlab.sweep.planners import FinishedRuns, FixedSeeds, Planner, Stage, stage_finished
from gptlab.sweep.progress import Progress
from gptlab.sweep.reuse import Reuse
from gptlab.sweep.runs import Run, SweepSpec
from gptlab.sweep.summary import write_summary
from gptlab.sweep.trunks import with_shared_trunks

ReportWriter = Callable[..., Path]  # write_report(results_dir, reports_dir) -> reports/NAME (the margin: sweep.yaml's)


@dataclass(frozen=True)
class SweepOptions:
    """How one invocation trains a sweep (the CLI's flags, as data)."""

    results_dir: ResultsDir  # results/NAME (a path is taken as one)
    reports_dir: Path  # reports/NAME
    command: str = ""  # how to reproduce, recorded in sweep.yaml
    rerun_failed: bool = False  # train failed runs again (from their last checkpoint)
    fail_fast: bool = False  # stop at the first failed run
    progress_every_s: float | None = None  # seconds between live progress looks (None: the default)
    stream: TextIO = field(default=sys.stderr, compare=False)  # where progress and logging go
    results_stream: TextIO | None = field(default=None, compare=False)  # where the results go: the runs that did not
    # finish ok, where the report is, whether to rerun (the command line: stdout); None: `stream`
    reuse: tuple[ResultsDir, ...] = ()  # results folders whose finished runs are taken, not trained (`sweep.reuse`)
    write_report: ReportWriter | None = field(default=None, compare=False)  # (results, reports) -> the report's
    # folder: the command line's `gptlab.report.write_report` (the sweep knows no report); None: summary.csv only

    def __post_init__(self) -> None:
        object.__setattr__(self, "results_dir", ResultsDir(self.results_dir))  # frozen: the one write, normalising


def runs_to_train(runs: list[Run], results_dir: ResultsDir, rerun_failed: bool) -> list[Run]:
    """Pending and partial runs, and failed ones when asked to rerun them."""
    wanted = ("pending", "partial", *((FAILED,) if rerun_failed else ()))
    return [r for r in runs if results_dir.run(r.run_id).state() in wanted]


def execute(spec: SweepSpec, plan: Resources, options: SweepOptions) -> int:
    """Train what is left of `spec` with `plan`, rebuild summary.csv, write the report; the exit status."""
    backend = BACKENDS.get(spec.executor.backend)(spec.executor)
    if runs_to_train(spec.runs, options.results_dir, options.rerun_failed):
        backend.check()  # an unreachable scheduler fails before anything is written
    with SweepLock(options.results_dir, options.command):
        return _execute_locked(spec, plan, options, backend)


def other_finished_runs(spec: SweepSpec, results_dir: ResultsDir) -> list[RunDir]:
    """Finished runs in results/NAME/runs/ that this spec does not name (the spec changed since)."""
    named = {r.run_id for r in known_runs(spec)}  # a tuned sweep: every possible estimation run too
    return results_dir.finished_runs(skip=named)


def rerun_failed_note(spec: SweepSpec, results_dir: ResultsDir) -> str | None:
    """The line `--rerun-failed` prints when no run of the sweep's folder failed (None when one did): after an
    interrupt it resumes the unfinished runs, as a plain rerun would, and must not seem to have rerun a failure."""
    states = [results_dir.run(r.run_id).state() for r in known_runs(spec)]  # a tuned sweep: its later stages too
    if FAILED in states:
        return None
    partial = states.count("partial")
    resumed = f"; resuming the {partial} unfinished run(s) from their last checkpoints" if partial else ""
    return f"--rerun-failed: no failed run to rerun{resumed}"


def warn_other_runs(spec: SweepSpec, results_dir: ResultsDir, out: TextIO) -> None:
    others = other_finished_runs(spec, results_dir)
    if others:
        print(f"note: {len(others)} finished run(s) in {results_dir.runs_dir} are not in this spec (it changed since "
              "they ran); they stay on disk, out of summary.csv and the report", file=out)


def planner_for(spec: SweepSpec, out: TextIO) -> Planner:
    """One stage of every run, under the spec's kinds' stages (`sweep.kinds`: adaptive seeds' rounds, a tuning
    method's, which plans the whole sweep, then `worth:`'s lengths), every stage split into trunks then branches
    where wsd lengths share trunks."""
    return with_shared_trunks(spec, with_kind_stages(FixedSeeds(spec.runs, spec.name), spec, out), out)


def data_paths(spec: SweepSpec) -> list[str | None]:
    """Each planned run's user corpus (`data.path`), None for a named corpus."""
    return [run.config.data.path for run in spec.runs]


def _execute_locked(spec: SweepSpec, plan: Resources, options: SweepOptions, backend: Backend) -> int:
    options.results_dir.remove_sweep_temp_files()  # a sweep killed mid-write left them; the lock is ours now
    warn_other_runs(spec, options.results_dir, options.stream)
    note = rerun_failed_note(spec, options.results_dir) if options.rerun_failed else None
    if note:
        print(note, file=options.stream)
    sources = sweep_sources(spec.plugins, data_paths(spec))  # in sweep.yaml: a place stamped under it names them
    write_yaml(options.results_dir.sweep_yaml, {**spec.to_dict(), SOURCES: sources, "command": options.command})
    for line in (arms_allocation(spec), noise_df_warning(spec)):
        if line:
            print(line, file=options.stream)
    planned = train_stages(spec, planner_for(spec, options.stream), plan, options, backend)
    return finish(spec, planned, options, plan.threads)


def train_stages(spec: SweepSpec, planner: Planner, plan: Resources, options: SweepOptions,
                 backend: Backend) -> tuple[Run, ...]:
    """Train the planner's stages until it is done or a stage does not finish; every run planned by then."""
    planned: tuple[Run, ...] = ()
    paths = data_paths(spec)
    sources = sweep_sources(spec.plugins, paths)  # the files the next stages must still find unchanged
    stage = planner.next_stage(FinishedRuns(options.results_dir))
    while stage is not None:
        planned = stage.planned
        rows = train(spec, stage, plan, options, backend)
        if not stage_finished(stage, rows):  # a planner decides only from finished runs
            if stage.unfinished:
                print(stage.unfinished, file=options.stream)
            break
        check_unchanged(sources, spec.plugins, paths)
        stage = planner.next_stage(FinishedRuns(options.results_dir, tuple(rows)))
    return planned


def train(spec: SweepSpec, stage: Stage, plan: Resources, options: SweepOptions, backend: Backend) -> list[RunSummary]:
    """Train what is left of `stage.runs` (live progress); summary.csv then holds the rows of `stage.planned`."""
    out, results_dir, runs = options.stream, options.results_dir, list(stage.runs)
    if options.reuse:
        taken = Reuse(options.reuse).adopt([r.run_id for r in runs], results_dir)
        if taken:
            print(f"{stage.title}: reused {len(taken)} finished run(s) with the same config and seed from "
                  f"{', '.join(str(r.path) for r in options.reuse)}", file=out)
    todo = runs_to_train(runs, results_dir, options.rerun_failed)
    for run in todo:
        results_dir.run(run.run_id).clear_failure()  # a failed run the user asked to rerun
    seeds, cells = max(1, len({r.seed for r in runs})), max(1, len({r.cell for r in runs}))
    settings = len(runs) // (cells * seeds)  # a tuned sweep's selection trains each cell at several settings
    shape = (
        f"{cells} cells x {settings} settings x {seeds} seeds" if settings > 1 else f"{len(runs) // seeds} cells x {seeds} seeds"
    )
    if len(runs) != cells * max(settings, 1) * seeds:  # an uneven stage (a refining tuner's round)
        shape = f"{cells} cells"
    print(f"{stage.title}: {len(runs)} runs ({shape}), "
          f"{len(runs) - len(todo)} already finished, {len(todo)} to train", file=out)
    plan_line = backend.describe(plan)
    if plan_line:
        print(plan_line, file=out)
    tasks = [Task(r.run_id, r.config, str(results_dir.run(r.run_id).path.resolve()), plan.threads,
                  tuple(spec.plugins), tuple(spec.search_path), plan.gpus, spec.executor.runs_per_gpu) for r in todo]
    planned = list(stage.planned)
    with Progress(runs, todo, results_dir, plan.workers, out, options.progress_every_s, stage=stage.tag) as progress:

        def on_result(result: RunResult) -> None:
            progress.finished(result)
            write_summary(spec, results_dir, planned)

        backend.run(tasks, plan, on_result, fail_fast=options.fail_fast)
    rows = write_summary(spec, results_dir, planned)
    summaries = [s for s in (results_dir.run(r.run_id).summary() for r in todo) if s]
    host, gpu = [s.peak_rss_mb for s in summaries if s.peak_rss_mb], [s.peak_gpu_mb for s in summaries if s.peak_gpu_mb]
    planned = f"planned {plan.run_bytes / 2**20:.0f} MiB " + ("per run" if plan.members == 1 else
                                                            f"per worker, a population of up to {plan.members} runs")
    if gpu:  # on CUDA the plan is of GPU memory; the host's is the process's (CUDA context, compiler)
        print(f"peak GPU memory per run: {max(gpu):.0f} MiB ({planned}); peak host memory per worker: "
              f"{max(host):.0f} MiB", file=out)
    elif host:
        print(f"peak resident memory per worker: {max(host):.0f} MiB ({planned})", file=out)
    return rows


def finish(spec: SweepSpec, planned: Sequence[Run], options: SweepOptions, threads: int = 1) -> int:
    """Rebuild summary.csv for every planned run, print what did not finish ok, let each kind do its work after the
    runs (when every planned run finished), write the report; the exit status."""
    out, results_dir = options.results_stream or options.stream, options.results_dir
    rows = write_summary(spec, results_dir, list(planned))
    not_ok = [r for r in rows if r.status != OK]
    missing = len(planned) - len(rows)
    if not missing and not any(r.status == FAILED for r in rows):
        after_runs(spec, results_dir, planned, threads, options.stream)
    if not_ok:
        lost = sum(r.status in FAILED_TO_TRAIN for r in not_ok)  # results (exit 0), kept out of every statistic
        print(f"\n{len(not_ok)} run(s) did not finish ok" + (f" ({lost} did not train: diverged, collapsed or unstable; "
              "results, left out of every pick and effect)" if lost else "") + ":", file=out)
        for row in not_ok:
            folder = results_dir.run(row.run_id)
            log_file = folder / (RunDir.ERROR if row.status not in FINISHED else RunDir.LOG)
            print(f"  {row.status:<8} {row.run_id}  {row.error or ''}  log: {log_file}", file=out)
    compiled = compile_line([s for s in (results_dir.run(r.run_id).summary() for r in planned) if s])
    if compiled:
        print(compiled, file=options.stream)  # a diagnostic, beside the progress: stdout keeps the results
    if options.write_report is None:
        print(f"summary: {results_dir.summary_csv}", file=out)
    else:
        path = options.write_report(results_dir, options.reports_dir)  # its margin: sweep.yaml's, the spec's
        print(f"report: {Path(path) / 'report.md'}", file=out)
    failed = sum(r.status == FAILED for r in rows)
    if failed:
        print(f"{failed} run(s) failed; fix the cause and rerun with --rerun-failed", file=out)
        return 1
    if missing:
        print(f"{missing} run(s) were not trained (stopped early); rerun to continue", file=out)
        return 1
    return 0


# -- the compile share: one line at the end of the sweep ---------------------------------------------------------
# The share of a sweep's training wall time spent compiling: one line at the end of the sweep.
#
# Each run records `compile_s` in its summary.json: the seconds of its first steps through `torch.compile`
# (a lone run's compiled forward, `Trainer.compile_s`; a population member's share of its worker's compiled
# population step, `StepCache.compile_s`), which its `wall_s` includes. The share is their sum over the sum of
# `wall_s`, over the sweep's runs that record it: the fraction of the workers' training time that went into
# compiling, whatever the number of workers. Without `train.compile` (off by default on CPU) it is 0.

def compile_share(summaries: Sequence[RunSummary]) -> tuple[float, float, int]:
    """(compile seconds, wall seconds, runs) over the summaries that record their compile time."""
    timed = [s for s in summaries if isinstance(s.compile_s, (int, float)) and isinstance(s.wall_s, (int, float))]
    return sum(s.compile_s for s in timed), sum(s.wall_s for s in timed), len(timed)


def compile_line(summaries: Sequence[RunSummary]) -> str | None:
    """The sweep's compile share in one line; None when no run records it (runs of before the field)."""
    compile_s, wall_s, runs = compile_share(summaries)
    if not runs:
        return None
    if compile_s == 0:
        return f"compile: 0 s of {wall_s:.0f} s of training over {runs} run(s): no run was compiled (train.compile off)"
    return (f"compile: {compile_s:.0f} s of {wall_s:.0f} s of training over {runs} run(s) "
            f"({100 * compile_s / wall_s:.0f}% of the workers' time)")
