"""The dry run (`python -m gptlab.sweep SPEC --dry-run`): the runs, the plan and a time estimate, printed; nothing trained.

It shows each run's state, the texts and their split, the planner's own preview of its stages and a
timing from the first steps of one run; nothing is written.

The stages a planner would train are its own `preview()`; the timing is `sweep.estimate`'s, spread over
the workers as the trunks and branches of `sweep.trunks` share their steps.
"""
from __future__ import annotations

import collections
from typing import Any, Callable, TextIO

from gptlab.run.resultsdir import ResultsDir
from gptlab.statuses import FINISHED, STATUSES
from gptlab.sweep.design_notes import arms_allocation, noise_df_warning
from gptlab.sweep.execute import planner_for, warn_other_runs
from gptlab.sweep.kinds import known_runs
from gptlab.sweep.progress import clock
from gptlab.sweep.reuse import Reuse
from gptlab.sweep.runs import Run, SweepSpec
from gptlab.sweep.trunks import branch_starts


def texts_line(spec: SweepSpec) -> str:
    """The texts the runs train on, what each is, and how it is split: one line for the dry run."""
    from gptlab.run.corpora import DATASETS

    seen: dict[str, str] = {}
    for run in spec.runs:
        d = run.config.data
        name = d.path or d.dataset
        if name not in seen:
            what = DATASETS.summary(d.dataset) if not d.path and d.dataset in DATASETS else "a user text"
            val, test = d.val_fraction, d.test_fraction
            split = f"val {val - test:.0%}, test {test:.0%}" if test > 0 else f"val {val:.0%}"
            seen[name] = f"{name} ({what}; train {1 - val:.0%}, {split})"
    return f"{'texts' if len(seen) > 1 else 'text'}: " + "; ".join(seen.values())


def dry_run(spec: SweepSpec, results_dir: ResultsDir, plan_line: str, workers: int, threads: int, stream: TextIO,
            reuse: tuple[ResultsDir, ...] = ()) -> None:
    """The dry run, printed to `stream`: the runs and their states, the plan, a time estimate and the planner's
    preview of its stages; nothing is trained or written."""
    _print_runs(spec, results_dir, stream)
    warn_other_runs(spec, results_dir, stream)
    pending, resumed, reused = _runs_to_train(spec, results_dir, reuse, stream)
    print(plan_line, file=stream)
    print(texts_line(spec), file=stream)
    if arms_allocation(spec):
        print(arms_allocation(spec), file=stream)
    warning = noise_df_warning(spec)
    if warning:
        print(warning, file=stream)
    timed = _Timer(spec, workers, threads, resumed)
    if pending:
        _print_estimate(pending, timed, stream)
    wholes, picked = _preview_cases(spec, results_dir, reused, timed, stream)
    if not wholes:
        wholes = [(len(spec.runs), timed(list(spec.runs)), len(pending), timed(pending))]
    print(bottom_line(wholes, picked), file=stream)


def _print_runs(spec: SweepSpec, results_dir: ResultsDir, stream: TextIO) -> None:
    """The run table: each run's levels (a tuned sweep's: + its settings), seed, id and state in the folder."""
    settings = dict.fromkeys(key for r in spec.runs for key, _ in getattr(r, "setting", ()))  # a tuned sweep's keys
    factors = list(spec.grid) + list(settings)
    header = [*factors, "seed", "run_id", "state"]
    rows = [[*(str(v) for _, v in r.cell + getattr(r, "setting", ())), str(r.seed), r.run_id,
             results_dir.run(r.run_id).state()] for r in spec.runs]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    for line in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip(), file=stream)


def _untrained(results_dir: ResultsDir, run: Run) -> bool:
    """Neither finished nor failed in this sweep's folder (a failed run trains again only with --rerun-failed)."""
    return results_dir.run(run.run_id).state() not in STATUSES


def _runs_to_train(spec: SweepSpec, results_dir: ResultsDir, reuse: tuple[ResultsDir, ...],
                   stream: TextIO) -> tuple[list[Run], dict[str, int], Reuse]:
    """The spec's runs left to train (neither in the folder nor found by `--reuse`), the steps the interrupted ones
    resume from, and the `--reuse` folders' finished runs; each count printed."""
    pending = [r for r in spec.runs if _untrained(results_dir, r)]
    print(f"\n{len(spec.runs)} runs: {len(spec.runs) - len(pending)} finished, {len(pending)} to train", file=stream)
    resumed = {r.run_id: step for r in pending if (folder := results_dir.run(r.run_id)).state() == "partial"
               and (step := folder.resume_step())}  # an interrupted run trains only the steps it has left
    if resumed:
        print(f"{len(resumed)} of them resume from their last checkpoint (steps {_span(sorted(resumed.values()))}): "
              "only their remaining steps are in the estimates", file=stream)
    reused = Reuse(reuse)
    found = [r for r in pending if reused.find(r.run_id) is not None]
    if reuse:
        print(f"reuse: {len(found)} of the {len(pending)} are finished in {', '.join(str(r.path) for r in reuse)} "
              "(same config and seed): copied, not trained; later stages' runs are looked up as they are planned",
              file=stream)
        pending = [r for r in pending if r not in found]
    return pending, resumed, reused


class _Timer:
    """Seconds a list of runs takes on the sweep's workers (None when there is nothing to time): the first run of each
    model size asked (a ladder's rungs differ in it) is timed, once, and every run of that size is scaled from it."""

    def __init__(self, spec: SweepSpec, workers: int, threads: int, resumed: dict[str, int]) -> None:
        from gptlab.run.device import resolve_device

        self.spec, self.workers, self.threads, self.resumed = spec, workers, threads, resumed
        self.timing: Any = None  # the first timing (the estimate's line)
        self.timings: dict[tuple[Any, ...], Any] = {}  # by model size
        # the sweep trains `workers` runs at once; on a CPU they slow each other down, so the timed run has company
        on_cpu = resolve_device(spec.base_config.train.device).type == "cpu"
        self.companions = workers - 1 if on_cpu else 0  # a GPU's runs_per_gpu: timed alone (said below)

    def __call__(self, runs: list[Run]) -> float | None:
        from gptlab.run.device import configure_process
        from gptlab.sweep.estimate import time_run

        for run in runs:
            size = _size(run)
            if size not in self.timings:
                configure_process(self.threads)
                self.timings[size] = time_run(run.config, companions=self.companions, threads=self.threads)
                self.timing = self.timing or self.timings[size]
        if self.timing is None:
            return None
        return _seconds(self.spec, runs, lambda run: self.timings[_size(run)], self.workers, self.resumed)


def _size(run: Run) -> tuple[Any, ...]:
    """What a step's time depends on most: the model's layers, width and context, and the batch."""
    m, t = run.config.model, run.config.train
    return m.n_layer, m.n_embd, m.n_head, m.block_size, t.batch_size


def _print_estimate(pending: list[Run], timed: _Timer, stream: TextIO) -> None:
    """The time estimate of the runs left to train, from the first one's timed steps, and the compiles it counts."""
    timed(pending)
    companions = timed.companions
    beside = (f" beside {companions} other run{'s' if companions > 1 else ''} training, as the sweep's workers will"
              if companions else " alone")
    print(f"estimate: ~{clock(timed.timing.seconds(pending[0].config))} for {pending[0].run_id} (timed from its first "
          f"steps{beside}; other runs scaled by their steps), ~{clock(timed(pending))} in all", file=stream)
    compiling = compile_line(pending, timed.workers)
    if compiling:
        print(compiling, file=stream)


def _preview_cases(spec: SweepSpec, results_dir: ResultsDir, reused: Reuse, timed: _Timer,
                   stream: TextIO) -> tuple[list[tuple[int, float | None, int, float | None]], bool]:
    """The planner's preview of its stages, each way the sweep may end printed with its runs and time; the ways
    that end the whole sweep (for `bottom_line`), and whether a stand-in was counted as trained (`picked`: its cell
    and role have a later run finished on disk)."""
    preview = planner_for(spec, stream).preview()  # the planner's stages, e.g. adaptive seeds' min and worst case
    picked = False
    wholes = []  # (runs from scratch, their time, runs to train with what is on disk, their time) per way it may end
    if preview is None:
        return wholes, picked
    print(preview.intro, file=stream)
    on_disk = _later_on_disk(spec, results_dir, reused)
    for case in preview.cases:
        left = [r for r in case.runs if _untrained(results_dir, r) and reused.find(r.run_id) is None]  # --reuse copies the rest
        time = timed(left + list(case.stand_ins))  # which runs stand-ins are is known once an earlier stage ran
        chosen = (f", plus {len(case.stand_ins)} whose settings the selection chooses (counted as untrained)"
                  if case.stand_ins else "")
        print(f"  {case.label}, {len(case.runs) + len(case.stand_ins)} runs, {len(left)} to train{chosen}"
              + (f", ~{clock(time)}" if time is not None else ""), file=stream)
        if case.whole:
            every = list(case.runs) + list(case.stand_ins)
            found = collections.Counter(on_disk)
            todo = left + [r for r in case.stand_ins if not _take(found, r)]
            picked = picked or len(todo) < len(left) + len(case.stand_ins)
            wholes.append((len(every), timed(every), len(todo), timed(todo)))
    return wholes, picked


def _later_on_disk(spec: SweepSpec, results_dir: ResultsDir, reused: Reuse) -> collections.Counter:
    """(cell, role) -> how many of a tuned sweep's possible later runs (beyond its first stage) are finished on disk,
    here or in a `--reuse` folder: the runs its stand-ins stand for, whose settings only the selection will name."""
    first = {r.run_id for r in spec.runs}
    return collections.Counter((r.cell, getattr(r, "role", "")) for r in known_runs(spec) if r.run_id not in first
                               and (results_dir.run(r.run_id).state() in FINISHED or reused.find(r.run_id) is not None))


def _take(found: collections.Counter, run: Run) -> bool:
    """Whether a finished run on disk of `run`'s cell and role is left to count it as trained (and count it)."""
    key = (run.cell, getattr(run, "role", ""))
    if found[key] <= 0:
        return False
    found[key] -= 1
    return True


def _span(values: list[Any], show: Any = str) -> str:
    low, high = min(values), max(values)
    return show(low) if low == high else f"{show(low)} to {show(high)}"


def bottom_line(wholes: list[tuple[int, float | None, int, float | None]], picked: bool = False) -> str:
    """The dry run's last line: the whole sweep from scratch (runs, time), and what is left to train with what is on
    disk, each a range over the ways the sweep may end. `picked`: a tuned sweep's later runs finished on disk were
    counted for the runs its selection will choose (`_later_on_disk`)."""
    def about(times: list[float | None]) -> str:
        known = [t for t in times if t is not None]
        return f", about {_span(known, clock)}" if known and max(known) > 0 else ""

    total, scratch, todo, left = ([w[i] for w in wholes] for i in range(4))
    nothing = max(todo) == 0
    many = f"at most {max(todo)}" if picked else _span(todo)  # the selection may choose fewer than the worst case
    disk = ("nothing to train" if nothing else f"{many} to train{about([max(left)] if picked else left)}") + (
        " (counting the finished runs on disk of each cell's later stages as those its selection will choose)"
        if picked else "")
    return f"\nfrom scratch: {_span(total)} runs{about(scratch)}; with what is on disk: {disk}"


def _seconds(spec: SweepSpec, runs: list[Run], timing: Callable[[Run], Any], workers: int,
             resumed: dict[str, int] | None = None) -> float:
    """Wall time of `runs` on `workers`: each run's steps (a shared trunk's branch only its cooldown, a partial run
    only those after its last checkpoint, `resumed`) and each worker's compiles (`estimate.compiles`), spread over
    the workers, and never less than the longest run."""
    from gptlab.sweep.estimate import FIRST_COMPILE_S, compile_seconds, compiles

    starts = branch_starts(spec, [*spec.runs, *runs])
    resumed = resumed or {}
    each = [timing(r).seconds(r.config, max(starts.get(r.run_id, 0), resumed.get(r.run_id, 0))) for r in runs]
    n_compiles = compiles([r.config for r in runs], workers)
    first = FIRST_COMPILE_S if n_compiles else 0.0
    return max(max(each, default=0.0) + first, (sum(each) + compile_seconds(n_compiles, workers)) / max(1, workers))


def compile_line(runs: list[Run], workers: int) -> str | None:
    """One line on the compiles the estimates count, and the figure they are counted at; None where none compiles."""
    from gptlab.sweep.estimate import FIRST_COMPILE_S, NEXT_COMPILE_S, compile_seconds, compiles

    n = compiles([r.config for r in runs], workers)
    if not n:
        return None
    return (f"compile: train.compile on: about {clock(compile_seconds(n, workers) / max(1, workers))} a worker ({n} "
            f"compiles: {FIRST_COMPILE_S:g} s a worker's first architecture, {NEXT_COMPILE_S:g} s each further one, as "
            "benchmarks/compile_reuse.py measured the tests' tiny model on a 2-core CPU, cold caches), in the estimates")
