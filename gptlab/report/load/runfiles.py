"""What the report reads from each run's own folder: metrics.csv and summary.json.

metrics.csv gives the curves (the report's validation points, and every row for the notebook API);
summary.json (through `RunDir.summary()`, which applies the `collapsed` rule to old summaries) the step a run
diverged at, its bits-per-character factor, its environment and whether it was reclassified. The load step's
`load_results` reads the sweep's own files (sweep.yaml, summary.csv) and calls these.
"""
from __future__ import annotations

import io
import logging
from pathlib import Path

import pandas as pd

from gptlab.errors import first_line
from gptlab.report.load.results import Results
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir, RunSummary
from gptlab.stats.outcome import bpc_factor
from gptlab.statuses import OK

log = logging.getLogger(__name__)

CURVE_COLS = ["step", "train_loss", "val_loss", "lr", "grad_norm", "tokens", "elapsed_s"]  # metrics.csv's
CURVE_LOSSES = ("train_loss", "val_loss")  # converted with the runs' losses when a sweep mixes tokenizers


def read_metrics(path: Path, columns: list[str] | None = None) -> pd.DataFrame | None:
    """A run's metrics.csv (those `columns`), or None where there is none or it cannot be read (with a warning).

    The file is written whole (atomically), so a last line without its newline means it was cut short
    afterwards (a full disk, a copy that stopped): that partial row, whose last number may be cut too, is
    left out with a warning rather than read as a value."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("%s: unreadable (%s); its curve is left out", path, exc)
        return None
    if raw and not raw.endswith(b"\n"):
        log.warning("%s ends in a partial row (the file was cut short): that row is left out", path)
        raw = raw[:raw.rfind(b"\n") + 1]
    try:
        return pd.read_csv(io.BytesIO(raw), usecols=columns)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        if raw.strip():
            log.warning("%s: unreadable (%s); its curve is left out", path, first_line(exc))
        return None


def read_curves(results_dir: ResultsDir, runs: pd.DataFrame) -> pd.DataFrame:
    """Validation points (rows with a val_loss) of every run that has a metrics.csv, in the runs' unit."""
    frames = []
    for run in runs.itertuples():
        m = read_metrics(results_dir.run(run.run_id) / RunDir.METRICS, ["step", "val_loss"])
        if m is None:
            continue
        m["val_loss"] = pd.to_numeric(m["val_loss"], errors="coerce")
        m = m.dropna(subset=["val_loss"])
        m["val_loss"] *= run.loss_scale
        frames.append(m.assign(run_id=run.run_id, cell=run.cell, seed=run.seed, ok=run.ok))
    cols = ["step", "val_loss", "run_id", "cell", "seed", OK]  # `ok`: the column named after the status
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def read_all_curves(res: Results) -> pd.DataFrame:
    """Every run's metrics.csv (`res.every_run`: each role's, not the estimation runs' alone), labelled with its run,
    cell, factor levels, seed, status and role, losses in `res.unit`.

    A run without a metrics.csv (it failed before its first row) has no rows; an unreadable one is
    left out with a warning, as the report does.
    """
    labels = ["run_id", "cell", *res.factors, "seed", "status", "role"]
    frames = []
    for run in res.every_run.to_dict("records"):
        metrics = read_metrics(res.results_dir.run(run["run_id"]) / RunDir.METRICS)
        if metrics is None:
            continue
        metrics = metrics.reindex(columns=CURVE_COLS).apply(pd.to_numeric, errors="coerce")
        for col in CURVE_LOSSES:  # the runs' unit: only a sweep mixing tokenizers has a scale other than 1
            metrics[col] = metrics[col] * run.get("loss_scale", 1.0)
        frames.append(metrics.assign(**{k: run[k] for k in labels})[labels + CURVE_COLS])
    if not frames:
        return pd.DataFrame(columns=labels + CURVE_COLS)
    curves = pd.concat(frames, ignore_index=True)
    curves["seed"] = curves["seed"].astype("Int64")
    curves["step"] = curves["step"].astype("Int64")
    return curves


def read_run_json(results_dir: ResultsDir, runs: pd.DataFrame) -> dict[str, list[str]]:
    """Set `diverged_step`, `val_bpc_factor` and `reclassified` on `runs` and return the environment values seen.

    Each summary.json is read through `RunDir.summary()`, so a run recorded as ok before the `collapsed` rule and
    that did not learn (`gptlab.run.reclassify`) gets its status `collapsed` and its note here, whatever an older
    summary.csv says; `reclassified` marks those runs (the report counts them)."""
    env: dict[str, list[str]] = {}
    diverged, factors, reclassified = [], [], []
    for i, run_id in zip(runs.index, runs["run_id"]):
        summary = results_dir.run(run_id).summary() or RunSummary()  # missing, unreadable or not JSON: nothing
        diverged.append(summary.diverged_step)
        factors.append(bpc_factor(summary.val_bpc_factor))  # none recorded: a char run's (from before tokenizers)
        reclassified.append(bool(summary.reclassified))
        if summary.reclassified and str(runs.at[i, "status"]).strip().lower() == OK:
            runs.at[i, "status"], runs.at[i, "error"] = summary.status, summary.error or ""
        for key, value in (summary.environment or {}).items():
            env.setdefault(key, [])
            if str(value) not in env[key]:
                env[key].append(str(value))
    runs["diverged_step"] = pd.to_numeric(pd.Series(diverged, index=runs.index, dtype=object), errors="coerce")
    runs["val_bpc_factor"] = pd.to_numeric(pd.Series(factors, index=runs.index, dtype=object), errors="coerce")
    runs["reclassified"] = pd.Series(reclassified, index=runs.index, dtype=bool)
    return env
