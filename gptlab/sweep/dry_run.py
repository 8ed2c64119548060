"""The dry run (`python -m gptlab.sweep SPEC --dry-run`): the runs, the plan and a time estimate, printed; nothing trained.

It shows each run's state, the texts and their split, the planner's own preview of its stages and a
timing from the first steps of one run; nothing is written.

The stages a planner would train are its own `preview()`; the timing is `sweep.estimate`'s, spread over
the workers as the trunks and branches of `sweep.trunks` share their steps.
"""
from __future__ import annotations

from typing import Any, TextIO

from gptlab.run.resultsdir import ResultsDir
from gptlab.statuses import FINISHED
from gptlab.sweep.execute import planner_for, warn_other_runs
from gptlab.sweep.progress import clock
from gptlab.sweep.reuse import Reuse
from gptlab.sweep.runs import Run, SweepSpec, arms_allocation
from gptlab.sweep.trunks import branch_starts


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
    starts = branch_starts(spec, [*spec.runs, *runs])
    each = [timing.seconds(r.config, starts.get(r.run_id, 0)) for r in runs]
    return max(max(each, default=0.0), sum(each) / max(1, workers))
