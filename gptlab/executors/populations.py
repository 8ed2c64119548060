"""`executor.population`: which of a stage's runs train as one population, and a worker's task for a population.

The driver side: `population_size` resolves the key (`off`: 1; `auto`: `AUTO_SIZES` for the device, none today;
N: at most N members), `group_tasks` splits the tasks into units: runs that may share a population
(`check_population`'s rule: one `ModelConfig`, data section and `SHARED_TRAIN` settings; e.g. an arm's
selection lrs and seeds, a cell's seeds) in groups of at most that size, as even as the count allows, and
every other run alone; only runs the sweep planned as members (`RunConfig.population`, in their ids:
`base.plans_members`) are batched. Shared trunks stay lone runs (a trunk writes into its branches' folders from its own
loop; a branch resumes from its trunk's state). Under `auto`, runs with `model.dropout > 0` stay alone too:
a member's dropout masks are not its lone run's (docs/GPU.md); a number batches them, a note says so. A run
with `train.cuda_graphs` always trains alone: a population's step is compiled without CUDA graphs.

The worker side: `execute_group` trains a unit, a lone run through `execute_run`, a population through
`train_population`; a population that raises as a whole (not a member's divergence: that is a result) is
retried as lone runs, each resuming from its own checkpoint, so each records its own outcome.
"""
from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import Any, Sequence

from gptlab.errors import first_line
from gptlab.executors.base import AUTO_SIZES, ExecutorConfig, RunResult, Task
from gptlab.executors.worker import ORPHAN_EXIT, RunStopped, execute_run, gpu_slot, watch_driver
from gptlab.run.population import population_key
from gptlab.run.resultsdir import GPU_SLOTS, ResultsDir
from gptlab.run.rundir import RunDir

log = logging.getLogger("gptlab.executors.populations")

Unit = tuple[Task, ...]  # what one worker trains at once: one lone run, or the members of one population


def population_size(executor: ExecutorConfig, device: str) -> int:
    """The most members per population (1: every run alone) for this sweep's key on `device` (cpu, cuda, mps)."""
    if executor.population == "off":
        return 1
    if executor.population == "auto":
        return AUTO_SIZES.get(device, 1)
    return int(executor.population)


def batched_members(executor: ExecutorConfig, device: str) -> int:
    """The most runs one worker holds at once (what its memory plan counts): `population_size` on the loky backend,
    1 on dask, which trains every run alone."""
    return population_size(executor, device) if executor.backend == "loky" else 1


def population_note(executor: ExecutorConfig, device: str) -> str:
    """One line on what `executor.population` does here ('' when it is off)."""
    size = population_size(executor, device)
    if executor.population == "auto" and size == 1:
        return (f"executor.population auto: lone runs on {device} (populations are not measured faster there: "
                "docs/GPU.md)")
    if size > 1:
        return (f"populations of up to {size} runs of one architecture trained as one batched model "
                "(executor.population)" + ("" if executor.population == "auto" else
                                           "; with model.dropout > 0 a member's masks are not its lone run's"))
    return ""


def trains_with_trunk(task: Task) -> bool:
    """A shared trunk (it hands its state to branches) or a branch started from one: it trains alone."""
    folder = RunDir(task.run_dir)
    return bool(folder.branches()) or folder.branched_from() is not None


def group_tasks(tasks: Sequence[Task], size: int, auto: bool = False) -> list[Unit]:
    """The units of `tasks`: populations of at most `size` runs planned as members (`base.plans_members`) that may
    share one, and lone runs; in task order. A run planned alone is never batched: its id is its lone run's."""
    if size <= 1:
        return [(task,) for task in tasks]
    by_key: dict[tuple[Any, ...], list[Task]] = {}
    units: list[Unit] = []
    for task in tasks:
        key = None if not task.config.population or trains_with_trunk(task) else population_key(task.config, auto)
        if key is None:
            units.append((task,))
        else:
            by_key.setdefault(key, []).append(task)
    for members in by_key.values():
        count = math.ceil(len(members) / size)  # as even as the count allows: 7 at size 3 are 3, 2, 2
        bounds = [round(i * len(members) / count) for i in range(count + 1)]
        units.extend(tuple(members[a:b]) for a, b in zip(bounds, bounds[1:]))
    return units


def execute_group(unit: Unit) -> list[RunResult]:
    """Train one unit in this process (a worker's task): a lone run, or a population; one result per run."""
    if len(unit) == 1:
        return [execute_run(unit[0])]
    from gptlab.plugins import import_plugins
    from gptlab.run.device import configure_process
    from gptlab.run.identity import check_run_identity
    from gptlab.run.population_run import train_population

    first = unit[0]
    started = time.perf_counter()
    watch = watch_driver(tuple(first.driver)) if first.driver else None
    folders = [RunDir(task.run_dir) for task in unit]
    configs = [task.config for task in unit]
    try:
        with contextlib.ExitStack() as stack:
            for task, folder in zip(unit, folders):
                if watch:
                    stack.enter_context(watch.training(task.run_id))
                stack.enter_context(folder.running())
            try:
                configure_process(first.threads)
                import_plugins(list(first.plugins), list(first.search_path))
                for task, folder in zip(unit, folders):
                    if not folder.finished_summary():
                        check_run_identity(task.run_id, task.config, task.plugins)
                if first.gpus > 1:
                    results = ResultsDir.holding(folders[0].path)
                    slots = results.gpu_slots if results is not None else folders[0].path.parent / GPU_SLOTS
                    gpu = stack.enter_context(gpu_slot(slots, first.gpus, first.runs_per_gpu))
                    configs = [c.with_settings({"train.device": f"cuda:{gpu}"}) for c in configs]
                summaries = train_population(configs, [f.path for f in folders], [t.run_id for t in unit],
                                             callbacks=[watch] if watch else [])
            except Exception as err:  # the population as a whole: its members train alone, each to its own outcome
                log.warning("a population of %d runs failed (%s: %s); training its runs alone", len(unit),
                            type(err).__name__, first_line(err))
                summaries = None
    except RunStopped:  # the driver is gone: nobody waits for a result; the folders' locks and markers are released
        assert watch is not None  # only a watch raises it
        watch.exit(ORPHAN_EXIT)
        raise
    if summaries is None:
        return [execute_run(task) for task in unit]
    seconds = (time.perf_counter() - started) / len(unit)
    return [RunResult(task.run_id, summary, seconds) for task, summary in zip(unit, summaries)]
