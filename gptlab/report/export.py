"""`python -m gptlab.export results/NAME --tensorboard DIR`: a sweep's curves as TensorBoard event files.

Owns the export's layout. Each estimation run becomes a TensorBoard run `DIR/CELL/seed_N` with the scalars
`train_loss`, `val_loss` and `lr` at every step of its metrics.csv (read through `gptlab.load`, so in
the study's loss unit: as written for a sweep with one tokenizer); every run of another role (a tuned
sweep's `selection` runs, a `worth:` study's `worth` and `worth_tuning` runs) becomes `DIR/ROLE/CELL/RUN_ID`,
its id naming its setting and length, without a mean. Each cell also gets
`DIR/CELL/mean`, the mean over the cell's `ok` estimation seeds (a diverged run's curve is exported but never
averaged, as in the report), and its seed band as two more runs, `DIR/CELL/mean-sd` and
`DIR/CELL/mean+sd`: the mean minus and plus one sample standard deviation across those seeds
(ddof=1; only where a cell has two seeds or more). CELL is the report's cell label with its
separators made path-safe (`norm=post,activation=relu`), so the run filter groups runs by cell
(`activation=relu`), by seed (`seed_0`) or picks the means (`/mean$`). Values are TensorBoard's
plain scalars, 32-bit floats (they read back as metrics.csv's values rounded to float32: TensorBoard's
loader does not show 64-bit scalars); a run's wall time is its `elapsed_s`, so TensorBoard's
"Relative" axis is training time. Non-finite values (a diverged run's
last rows) are left out. Re-exporting replaces the event files of the runs it writes, nothing else.

Needs the `tensorboard` package (`pip install -e ".[tensorboard]"`); torch's `SummaryWriter` writes the files.
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from gptlab.errors import GptlabError, exit_status, hidden_package
from gptlab.roles import ESTIMATION
from gptlab.statuses import OK

log = logging.getLogger(__name__)

TAGS = ("train_loss", "val_loss", "lr")  # the scalars of every exported run
BAND_TAGS = ("train_loss", "val_loss")  # the band runs carry the losses only: lr is the same for every seed
EVENTS = "events.out.tfevents.*"  # the event files a TensorBoard writer creates in a run folder
UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")  # what may not stand in a run folder's name


def _writer_class() -> Callable[..., Any]:
    """torch's SummaryWriter; a missing `tensorboard` package is one line naming the extra to install."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise GptlabError("the TensorBoard export needs the 'tensorboard' package: "
                          "pip install -e \".[tensorboard]\" (or pip install tensorboard)") from None
    return SummaryWriter


def cell_folder(label: str) -> str:
    """A cell label ('norm=post, activation=relu') as a run folder name ('norm=post,activation=relu')."""
    return UNSAFE.sub("_", label.replace(", ", ",")).strip(".") or "cell"


def _folders(cells: list[str]) -> dict[str, str]:
    """Each cell's folder name; two labels that clean to one name get a numbered suffix, never one folder."""
    out: dict[str, str] = {}
    for label in cells:
        name, n = cell_folder(label), 1
        while name in out.values():
            n += 1
            name = f"{cell_folder(label)}_{n}"
        out[label] = name
    return out


def _out_dir(path: Path) -> Path:
    """DIR, created if needed; not a folder or not writable is a `GptlabError` naming it."""
    if path.exists() and not path.is_dir():
        raise GptlabError(f"--tensorboard {path}: exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GptlabError(f"--tensorboard {path}: cannot create it ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise GptlabError(f"--tensorboard {path}: not writable")
    return path


def cell_bands(curves: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per step, the mean of the `ok` runs and the mean -/+ one sample sd, per tag, as runs `mean`, `mean-sd`,
    `mean+sd` (one frame each: step, elapsed_s and a column per tag).

    A mean is kept only at steps where every `ok` seed of the cell has a value, so each point
    averages the same seeds; the band needs two seeds or more.
    """
    ok = curves[curves["status"] == OK]
    n_runs = ok["run_id"].nunique()
    if not n_runs:
        return {}
    by_step = ok.groupby("step", sort=True)
    mean, sd, count = by_step[list(TAGS)].mean(), by_step[list(TAGS)].std(ddof=1), by_step[list(TAGS)].count()
    mean = mean.where(count == n_runs)
    elapsed = by_step["elapsed_s"].mean()
    runs = {"mean": mean.assign(elapsed_s=elapsed)}
    if n_runs >= 2:
        runs["mean-sd"] = (mean[list(BAND_TAGS)] - sd[list(BAND_TAGS)]).assign(elapsed_s=elapsed)
        runs["mean+sd"] = (mean[list(BAND_TAGS)] + sd[list(BAND_TAGS)]).assign(elapsed_s=elapsed)
    return {name: frame.reset_index() for name, frame in runs.items()}


def _write_run(writer_class: Callable[..., Any], folder: Path, frame: pd.DataFrame, tags: tuple[str, ...]) -> int:
    """One TensorBoard run: `tags` of `frame` at its steps (finite values only); returns the points written."""
    for old in folder.glob(EVENTS):  # a re-export replaces this run's curves rather than adding to them
        old.unlink()
    written = 0
    writer = writer_class(log_dir=str(folder))
    try:
        for row in frame.to_dict("records"):
            wall = row.get("elapsed_s")
            wall = float(wall) if wall is not None and math.isfinite(wall) else None
            for tag in tags:
                value = row.get(tag)
                if value is None or pd.isna(value) or not math.isfinite(float(value)):
                    continue
                writer.add_scalar(tag, float(value), int(row["step"]), walltime=wall)
                written += 1
    finally:
        writer.close()
    return written


def export_tensorboard(results_dir: Path | str, out_dir: Path | str) -> list[Path]:
    """Write `results_dir`'s curves under `out_dir` (see the module docstring); return the run folders written.

    Everything is checked before the first file is written: the results folder (a `ReportError`),
    the `tensorboard` package and `out_dir` (`GptlabError`s).
    """
    from gptlab.report.load import load_results
    from gptlab.report.study import Study
    study = Study(results=load_results(results_dir))
    curves = study.curves
    writer_class = _writer_class()
    out = _out_dir(Path(out_dir))
    folders, written, points = _folders(list(dict.fromkeys(study.runs["cell"]))), [], 0
    for (role, cell), at in curves.groupby(["role", "cell"], sort=False):
        if role == ESTIMATION:
            runs = _estimation_runs(out / folders[cell], at)
        else:  # no mean: a role's runs of one cell differ in more than their seed (a setting, a length)
            runs = [(out / cell_folder(str(role)) / folders[cell] / str(run_id), run, TAGS)
                    for run_id, run in at.groupby("run_id", sort=False)]
        for folder, frame, tags in runs:
            points += _write_run(writer_class, folder, frame, tags)
            written.append(folder)
    log.info("%d TensorBoard runs (%d points) written to %s", len(written), points, out)
    return written


def _estimation_runs(base: Path, at: pd.DataFrame) -> list[tuple[Path, pd.DataFrame, tuple[str, ...]]]:
    """One cell's estimation runs as `seed_N` (a repeated seed also by run id), then its mean and seed band."""
    runs, names = [], {}
    for run_id, run in at.groupby("run_id", sort=False):
        name = f"seed_{run['seed'].iloc[0]}"
        names[name] = names.get(name, 0) + 1
        if names[name] > 1:  # the same cell and seed twice (a repeated run): keep both, by run id
            name = f"{name}-{run_id}"
        runs.append((base / name, run, TAGS))
    return runs + [(base / name, frame, TAGS if name == "mean" else BAND_TAGS) for name, frame in cell_bands(at).items()]


def main(argv: list[str] | None = None) -> int:
    if (hidden := hidden_package()) is not None:  # a bare folder named gptlab shadows the package: nothing would work
        return exit_status(hidden)
    parser = argparse.ArgumentParser(prog="python -m gptlab.export",
                                     description="Export a sweep's curves (every run, and each cell's mean "
                                     "with its seed band) for TensorBoard.")
    parser.add_argument("results_dir", type=Path, help="a sweep's results directory, e.g. results/quick")
    parser.add_argument("--tensorboard", type=Path, required=True, metavar="DIR",
                        help="where to write the event files (DIR/CELL/seed_N, DIR/CELL/mean, mean-sd, mean+sd; "
                        "DIR/ROLE/CELL/RUN_ID for the runs of other roles)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        runs = export_tensorboard(args.results_dir, args.tensorboard)
    except (GptlabError, OSError) as exc:  # an OSError: e.g. the disk filled while writing
        return exit_status(exc)
    print(f"{len(runs)} TensorBoard runs in {args.tensorboard}; view them with: tensorboard --logdir {args.tensorboard}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
