"""`train_population(configs, run_dirs)`: a population's members trained into their own run folders, as lone runs.

Every member stays one ordinary run: its folder gets what `train_run` writes for a lone run (config.yaml,
metrics.csv at every row, ckpt_last.pt and ckpt_best.pt at every evaluation, through `member_trainer_state`,
so they are lone checkpoints; train.log, sample.txt, test_blocks.csv, summary.json), its summary is
`run_summary`'s of a lone `Trainer` holding the member's final state. A member that diverges is recorded at
its row as its lone run is, while the others go on; one that does not learn is `collapsed` by the same rule.

Resuming: members whose last checkpoints are at one step (all at step 0 for a fresh population) resume as
a population (`Population.resume`); a member at another step (a run trained alone before, a population
member whose last evaluation did not reach disk) finishes alone from its own checkpoint (`train_run`),
after the population, once the folder locks are released. Timing: a member's `wall_s`, `eval_s`,
`tokens_per_sec` and `compile_s` are its share (1/K) of the population's, so that a sweep's sums stay
true; `population` in its summary names the members and gives the whole population's wall time.
"""
from __future__ import annotations

import contextlib
import logging
import math
import time
from collections import Counter
from typing import Any, Sequence

from gptlab.errors import hidden_package
from gptlab.run.config import RunConfig
from gptlab.run.data import load_run_dataset
from gptlab.run.device import resolve_device
from gptlab.run.population import Population
from gptlab.run.population_cache import STEP_CACHE
from gptlab.run.rundir import RunDir, RunSummary
from gptlab.run.runner import (
    PROGRESS_EVERY_S,
    check_same_tokenizer,
    logging_to_file,
    resume_state,
    run_summary,
    train_run,
    write_sample,
)
from gptlab.run.trainer import Outcome, Trainer
from gptlab.runio import remove_temp_files
from gptlab.statuses import OK

log = logging.getLogger("gptlab.train")


class MemberWriter:
    """Writes each member's rows, checkpoints and progress into its folder, as `RunDirWriter` does for a lone run."""

    def __init__(self, folders: Sequence[RunDir], compile_before: Sequence[float]) -> None:
        self.folders, self.compile_before = list(folders), list(compile_before)
        self.compile_start = STEP_CACHE.compile_s()
        self.last_progress = -math.inf

    def compile_s(self, k: int, size: int) -> float:
        """Member k's compile seconds: those of its earlier attempts and its share of this process's compiles."""
        return self.compile_before[k] + (STEP_CACHE.compile_s() - self.compile_start) / size

    def on_rows(self, population: Population, step: int, is_eval: bool) -> None:
        for k, member in enumerate(population.members):
            if not member.rows or member.rows[-1]["step"] != step:
                continue  # stopped at an earlier row
            self.folders[k].write_metrics(member.rows)
            if is_eval and member.training:  # a lone run that diverges writes no checkpoint at its last row
                state = population.member_trainer_state(k)
                state["compile_s"] = self.compile_s(k, population.size)
                self.folders[k].save_checkpoint(state, best=member.best_step == step)

    def on_step(self, population: Population) -> None:
        now = time.monotonic()
        if now - self.last_progress < PROGRESS_EVERY_S:
            return
        self.last_progress = now
        for folder, member in zip(self.folders, population.members):
            if member.training:
                last = member.rows[-1] if member.rows else {}
                folder.write_progress({
                    "run_id": member.run_id, "step": population.step, "max_iters": member.cfg.train.max_iters,
                    "train_loss": last.get("train_loss"),
                    "best_val_loss": member.best_val_loss if math.isfinite(member.best_val_loss) else None,
                    "train_s": round(population.train_s / population.size, 3),
                    "eval_s": round(population.eval_s / population.size, 3), "time": time.time(),
                    "population": population.size})


def train_population(configs: Sequence[RunConfig], run_dirs: Sequence[Any],
                     run_ids: Sequence[str] | None = None, callbacks: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Train the runs of `configs` (one architecture, `check_population`'s rule) in their folders; their summaries.

    A finished run's summary is returned as is. `callbacks` join the population's (a worker's driver watch:
    its `on_step` may raise to stop it; every file written by then is whole, and a rerun resumes)."""
    if (hidden := hidden_package()) is not None:  # as `train_run`: refused before the population trains
        raise hidden
    cfgs = list(configs)
    folders = [RunDir(d) for d in run_dirs]
    ids = list(run_ids) if run_ids is not None else [f.path.name for f in folders]
    summaries: dict[int, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        for folder in folders:  # the lone runs' lock: no other trainer writes these folders meanwhile
            stack.enter_context(folder.exclusive())
        todo = []
        for k, folder in enumerate(folders):
            finished = folder.finished_summary()
            if finished is not None:
                summaries[k] = finished.to_dict()
            else:
                todo.append(k)
        alone = _train_locked(cfgs, folders, ids, todo, callbacks, summaries, stack) if todo else []
    for k in alone:  # a member whose checkpoint is at another step than the population's finishes alone
        summaries[k] = train_run(cfgs[k], folders[k].path, run_id=ids[k], callbacks=callbacks)
    return [summaries[k] for k in range(len(folders))]


def _train_locked(cfgs: list[RunConfig], folders: list[RunDir], ids: list[str], todo: list[int],
                  callbacks: Sequence[Any], summaries: dict[int, dict[str, Any]],
                  stack: contextlib.ExitStack) -> list[int]:
    """Train the members `todo` (their folders locked) into `summaries`; the members left to train alone."""
    for k in todo:
        folders[k].claim(cfgs[k])
        remove_temp_files(folders[k].path, (RunDir.LAST, RunDir.BEST, RunDir.METRICS, RunDir.PROGRESS, RunDir.SAMPLE))
    for k in todo:
        stack.enter_context(logging_to_file(folders[k]))  # the population's records go to every member's train.log
    device = resolve_device(cfgs[todo[0]].train.device)
    dataset = load_run_dataset(cfgs[todo[0]].data)
    dataset.check_fits(cfgs[todo[0]].model.block_size, f"data {cfgs[todo[0]].data.path or cfgs[todo[0]].data.dataset}")
    states = {k: resume_state(folders[k], device) for k in todo}
    for k, state in states.items():
        if state is not None:
            check_same_tokenizer(state, dataset.tokenizer, folders[k])
    steps = {k: state["step"] if state is not None else 0 for k, state in states.items()}
    step = Counter(steps.values()).most_common(1)[0][0]  # the step most members resume from (0: a fresh start)
    members = [k for k in todo if steps[k] == step]
    alone = [k for k in todo if steps[k] != step]
    if len(members) < 2:  # nothing to batch: every member trains as a lone run
        return todo
    if alone:
        log.info("runs %s resume from other steps than the population's %d: they finish alone",
                 ", ".join(ids[k] for k in alone), step)
    population = Population([cfgs[k] for k in members], dataset, device, [ids[k] for k in members])
    if step > 0:
        population.resume([states[k] for k in members])
    compile_before = [float(states[k].get("compile_s", 0.0)) if states[k] is not None else 0.0 for k in members]
    writer = MemberWriter([folders[k] for k in members], compile_before)
    population.callbacks = [writer, *callbacks]
    population.run()
    for i, k in enumerate(members):
        summaries[k] = _member_summary(population, i, folders[k], writer.compile_s(i, population.size))
    return alone


def _member_summary(population: Population, k: int, folder: RunDir, compile_s: float) -> dict[str, Any]:
    """Member k's files at the end (sample, test blocks, summary.json) as a lone run writes them; its summary."""
    member = population.members[k]
    outcome = member.outcome or Outcome(OK, None)
    trainer = Trainer(member.cfg, population.dataset, population.device, (), member.run_id)
    trainer.load_state_dict(population.member_trainer_state(k))
    trainer.step = member.rows[-1]["step"] if member.rows else population.step  # a diverged member stopped there
    share = population.size
    trainer.elapsed_s, trainer.train_s, trainer.eval_s = (population.elapsed_s / share, population.train_s / share,
                                                          population.eval_s / share)
    trainer.compile_s = compile_s
    write_sample(folder)
    if member.best_test_blocks is not None:
        folder.write_test_blocks(member.best_test_blocks)
    summary = run_summary(trainer, outcome)
    summary["population"] = {"size": population.size, "members": [m.run_id for m in population.members],
                             "wall_s": round(population.elapsed_s, 3)}
    folder.write_summary(summary)
    record = RunSummary.from_mapping(summary)
    log.info("run %s finished in a population of %d: %s, best val %s at step %s", member.run_id, population.size,
             record.status, record.best_val_loss, record.best_step)
    return summary
