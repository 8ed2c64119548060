"""Runs finished in another results folder, taken instead of trained (`--reuse results/OTHER`).

A run's identity is its config and seed, hashed into the last part of its id (`RunConfig.run_hash`): two
folders whose ids end in the same `_s{seed}_{hash}` hold the same run, whatever label the cell had in
the sweep that trained it (a spec that adds a scale factor renames every cell, not one run). So a sweep
given `--reuse` copies such a finished run (ok or diverged) into its own `runs/` under its own id instead
of training it again: files are hard-linked where the disk allows, copied otherwise, into a temporary
folder renamed into place (an interruption leaves no half-copied run), and the copy's summary.json
records its new id and where it came from (`reused_from`). Failed and unfinished runs are never taken.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterable, Sequence

from gptlab.errors import GptlabError
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir
from gptlab.runio import write_json
from gptlab.statuses import FINISHED


def identity(run_id: str) -> str:
    """The part of a run id that names the run itself: `_s{seed}_{hash}` (the label before it names the cell)."""
    head, sep, tail = run_id.rpartition("_s")
    return sep + tail if sep else run_id


def run_label(run_id: str) -> str:
    """The part of a run id before its identity: the cell and any setting or length ('nanogpt-0.004-wsd8000')."""
    head, sep, _ = run_id.rpartition("_s")
    return head if sep else run_id


def check_sources(sources: Sequence[str | os.PathLike[str]], own: ResultsDir) -> tuple[ResultsDir, ...]:
    """The `--reuse` folders as results folders, or one error naming the first that is not one."""
    out = []
    for raw in sources:
        folder = ResultsDir(raw)
        if not folder.runs_dir.is_dir():
            raise GptlabError(f"--reuse: {folder.path} is not a sweep's results folder (it has no runs/ folder)")
        if folder.path.resolve() == own.path.resolve():
            raise GptlabError(f"--reuse: {folder.path} is this sweep's own results folder; name another one")
        out.append(folder)
    return tuple(out)


class Reuse:
    """The finished runs of some results folders, by identity, and the copying of one into a sweep's own."""

    def __init__(self, sources: Iterable[ResultsDir]) -> None:
        self.sources = tuple(sources)
        self._index: dict[str, RunDir] | None = None

    def _finished(self) -> dict[str, RunDir]:
        if self._index is None:  # read lazily, once: a sweep without pending runs never lists the folders
            self._index = {}
            for source in self.sources:
                for folder in source.finished_runs():
                    self._index.setdefault(identity(folder.path.name), folder)
        return self._index

    def find(self, run_id: str) -> RunDir | None:
        """A finished run elsewhere with the identity of `run_id`, or None."""
        return self._finished().get(identity(run_id)) if self.sources else None

    def adopt(self, run_ids: Iterable[str], results_dir: ResultsDir) -> list[str]:
        """Copy every run of `run_ids` that has no folder in `results_dir` and is finished elsewhere; the ids copied."""
        taken = []
        for run_id in run_ids:
            target = results_dir.run(run_id)
            if target.path.exists() and {f.name for f in target.path.iterdir()} - {RunDir.BRANCHES}:
                continue  # a run started or finished here (a shared trunk's branch points alone are no run yet)
            source = self.find(run_id)
            if source is None:
                continue
            copy_run(source, target.path, run_id)
            taken.append(run_id)
        return taken


def copy_run(source: RunDir, dest: Path, run_id: str) -> None:
    """`source` into `dest` (absent, or holding only the branch points this sweep recorded for a shared trunk), as
    run `run_id`: linked or copied into a temporary folder, renamed into place. The source's own branch points
    (they name its sweep's runs) are not copied; this sweep's are kept."""
    summary = source.summary()
    if not summary or summary.status not in FINISHED:
        raise GptlabError(f"--reuse: {source.path} is not a finished run")
    scratch = dest.parent / f".reuse-{dest.name}"
    shutil.rmtree(scratch, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:  # another disk, or links not allowed
            shutil.copy2(src, dst)

    live = shutil.ignore_patterns(RunDir.LOCK, RunDir.RUNNING, RunDir.PROGRESS, RunDir.BRANCHES)  # not the result's
    shutil.copytree(source.path, scratch, copy_function=link_or_copy, ignore=live)
    summary_path = scratch / RunDir.SUMMARY
    os.unlink(summary_path)  # a hard link: writing through it would rewrite the source's summary
    write_json(summary_path, {**summary.to_dict(), "run_id": run_id, "reused_from": str(source.path.resolve())})
    if dest.exists():  # a trunk's folder with this sweep's branch points: they move in with the run
        for name in os.listdir(dest):
            os.replace(dest / name, scratch / name)
        dest.rmdir()
    os.replace(scratch, dest)
