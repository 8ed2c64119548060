"""The arms' training steps timed side by side, after the runs: what a `worth:` sweep's step costs come from.

An arm's runs cannot tell its time per step against the baseline's: a study's runs are trained hours or days
apart, some again later, on a machine whose speed changes (measured on this lab's 2-core VM: the scorecard
baseline's step took 49 ms one day and 110 ms the next), beside other loads; an arm re-run on a slow day
would look slow. So once every run has finished, the sweep times each estimation cell's config (each arm at
its pick, at each scale level) in one process, alternated: `ROUNDS` rounds, each timing `STEPS` steps of
every cell after `WARMUP` untimed ones, the cells' order rotated from round to round, so that what the machine
does meanwhile falls on every arm alike. A cell is built afresh each round (one model in memory at a time) on
stand-in data of its corpus's vocabulary (`sweep.estimate.build_trainer`: a step costs the same whatever the
ids), on the runs' threads. Written to `results/NAME/step_times.csv` (the cell's factors, `round`,
`seconds_per_step`, `machine`); a rerun that finds the same cells there times nothing again. A stop while
timing raises `StepTimingStopped` (a `sweep.planners.AfterRunsStopped`), so that the command line says the timing,
not a run, was stopped. The file is
read back through its one reader, `ResultsDir.step_times`: a damaged or foreign one (empty, a column missing, a
round twice, a time that is no time) is as good as absent, and the steps are timed again.
"""
from __future__ import annotations

import platform
from typing import Any, Sequence, TextIO

from gptlab.run.config import RunConfig
from gptlab.run.resultsdir import STEP_TIME_COLUMNS, ResultsDir
from gptlab.runio import write_csv
from gptlab.sweep.planners import AfterRunsStopped
from gptlab.sweep.runs import ESTIMATION, Run

ROUNDS = 10  # a CI over rounds paired (df 9): on study 9, 5 rounds gave CIs of about +/-14%
STEPS = 20  # timed steps per cell and round
WARMUP = 3  # untimed first steps of each build (allocations, the optimizer's first step)
COLUMNS = STEP_TIME_COLUMNS  # after the cell's factors; the reader's (`ResultsDir.step_times`)


class StepTimingStopped(AfterRunsStopped):
    """A stop (Ctrl-C, SIGTERM, SIGHUP) while the steps were timed: every run had finished, so the command line says
    that the timing, not a run, was stopped (a rerun trains nothing and times the steps again)."""

    then = "the step timing after them was stopped: run the same command again to time the steps (no run trains again)"


def cells_to_time(planned: Sequence[Run]) -> dict[tuple[tuple[str, Any], ...], RunConfig]:
    """One config per estimation cell (its first estimation run's: the arm at its pick), in the runs' order."""
    cells: dict[tuple[tuple[str, Any], ...], RunConfig] = {}
    for run in planned:
        if getattr(run, "role", ESTIMATION) == ESTIMATION:
            cells.setdefault(run.cell, run.config)
    return cells


def machine(threads: int) -> str:
    """What the times were measured on, never a host name: device, CPU architecture, threads, torch."""
    import torch

    return f"{platform.machine()} CPU, {threads} thread(s), torch {torch.__version__}"


def time_steps(results_dir: ResultsDir, planned: Sequence[Run], threads: int, out: TextIO) -> None:
    """Time every estimation cell's step side by side (see the module's docstring) into step_times.csv."""
    from gptlab.run.device import configure_process, resolve_device
    from gptlab.sweep.estimate import build_trainer, time_train_steps

    cells = cells_to_time(planned)
    factors = [key for key, _ in next(iter(cells))] if cells else []
    path = results_dir.step_times_csv
    if not cells or any(resolve_device(c.train.device).type != "cpu" for c in cells.values()):
        return  # only CPU steps are timed here: on a GPU the runs' timings are those of the card they shared
    kept = results_dir.step_times(factors)  # None: absent, or damaged (the reader says why)
    if kept is not None and {tuple(row[f] for f in factors) for row in kept} == {tuple(str(v) for _, v in cell)
                                                                                 for cell in cells}:
        print(f"step times: kept {path} ({len(cells)} cells)", file=out)
        return  # else (other cells, a damaged file): timed again
    print(f"step times: each of {len(cells)} cells' training step, {ROUNDS} rounds of {STEPS} steps, alternated",
          file=out)
    configure_process(threads)
    keys, rows, where = list(cells), [], machine(threads)
    try:
        for r in range(ROUNDS):
            for cell in keys[r % len(keys):] + keys[: r % len(keys)]:  # rotated: no cell always first or last
                trainer = build_trainer(cells[cell], stand_in=True)
                rows.append({**dict(cell), "round": r, "seconds_per_step": time_train_steps(trainer, STEPS, WARMUP),
                             "machine": where})
                del trainer
    except KeyboardInterrupt:
        raise StepTimingStopped from None
    write_csv(path, rows, [*factors, *COLUMNS])
    print(f"step times: {path}", file=out)
