"""summary.csv, a cache of the run folders: its rows, and its rebuild when it disagrees with them.

A row of summary.csv is a run's place in its sweep (run id, seed, factor levels, tuned columns,
role), which the sweep records in the run's `place.json` with the columns and a stamp of the
sweep.yaml it planned under, and the metrics of its `summary.json`.
The sweep writes the file after every run (`gptlab.sweep.summary`); the report checks it against
the run folders before trusting it and rebuilds it from them when it disagrees (a file cut short,
edited, or older than the folders), so a damaged summary.csv never hides or misreports a run.
"""
from __future__ import annotations

import csv
import hashlib
import io
import logging
import math
from typing import Any, Sequence

from gptlab.errors import GptlabError
from gptlab.run.resultsdir import ResultsDir
from gptlab.runio import write_csv

log = logging.getLogger(__name__)

METRIC_FIELDS = ["status", "best_val_loss", "best_step", "final_val_loss", "final_train_loss", "params",
                 "params_non_embedding", "tokens_per_sec", "wall_s", "error", "best_val_bpc"]
# Only in the summary.csv of a sweep with a test split (data.test_fraction > 0 in any run), after the
# others: a sweep without one keeps the exact columns it always had, so readers by position still work.
TEST_FIELDS = ["best_test_loss", "best_test_bpc"]
CHAR_BPC_FACTOR = 1 / math.log(2)  # a char run's nats/char -> bits/char (best_val_bpc / best_val_loss of a char run)


def sweep_stamp(results_dir: ResultsDir) -> str:
    """A short hash of results/NAME/sweep.yaml: a place recorded under another spec is not this sweep's."""
    try:
        return hashlib.sha256(results_dir.sweep_yaml.read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


def place_record(place: dict[str, Any], columns: Sequence[str], stamp: str) -> dict[str, Any]:
    """What `place.json` holds: the run's place, the file's columns and the sweep's stamp."""
    return {"sweep": stamp, "columns": list(columns), "row": dict(place)}


def summary_row(place: dict[str, Any], summary: dict[str, Any], metric_fields: Sequence[str]) -> dict[str, Any]:
    """One row: the run's place (`role` last, as in the file) and its summary's metrics."""
    head = {k: v for k, v in place.items() if k != "role"}
    return {**head, **{k: summary.get(k) for k in metric_fields}, "role": place.get("role")}


def row_text(row: dict[str, Any], columns: Sequence[str]) -> dict[str, str]:
    """A row as summary.csv holds it: every value as the CSV writer writes it."""
    buffer = io.StringIO()
    csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n").writerow(
        {k: "" if row.get(k) is None else row.get(k) for k in columns})
    return dict(zip(columns, next(csv.reader([buffer.getvalue()]))))


def _cached(results_dir: ResultsDir) -> tuple[list[str], list[dict[str, str]]] | None:
    """summary.csv's header and rows as text, or None when it is missing or unreadable."""
    try:
        text = results_dir.summary_csv.read_text(encoding="utf-8")
        reader = csv.DictReader(io.StringIO(text))
        rows = [dict(r) for r in reader]
        return list(reader.fieldnames or []), rows
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


def rebuild_if_stale(results_dir: ResultsDir) -> str | None:
    """Rebuild summary.csv from the run folders when it disagrees with them; why it was rebuilt, else None.

    Only runs whose folder records its place under this sweep.yaml (`place.json`, written by the
    sweep since this check exists) are the sweep's: a run planned under an edited spec is not, and a
    summary.csv with a row for a run that records no place is left as it is.
    Rows keep their order in the file; runs it lacks follow in run-id order, and rows for
    folders that are gone are dropped.
    """
    places: dict[str, tuple[dict[str, Any], list[str]]] = {}
    stamp = sweep_stamp(results_dir)
    for run_id in results_dir.run_ids():
        folder = results_dir.run(run_id)
        place = folder.place()
        summary = folder.summary() if place is not None and place.get("sweep") == stamp else None
        if summary is not None:
            places[run_id] = ({**place["row"], "run_id": run_id}, summary), place["columns"]
    if not places:
        return None
    columns = max((cols for _, cols in places.values()), key=len)
    metric_fields = [c for c in columns if c in METRIC_FIELDS or c in TEST_FIELDS]
    rebuilt = {run_id: row_text(summary_row(place, summary, metric_fields), columns)
               for run_id, ((place, summary), _) in places.items()}
    cached = _cached(results_dir)
    if cached is not None:
        header, rows = cached
        ids = [r.get("run_id", "") for r in rows]
        if any(run_id not in places and results_dir.run(run_id).path.is_dir() for run_id in ids):
            return None  # a run from before places were recorded: the file is all there is
        if header == columns and len(ids) == len(set(ids)) and \
                {r["run_id"]: r for r in rows} == rebuilt:
            return None
        reason = _difference(rows, rebuilt, header == columns)
        order = [i for i in dict.fromkeys(ids) if i in rebuilt] + sorted(set(rebuilt) - set(ids))
    else:
        reason, order = "it is missing or unreadable", sorted(rebuilt)
    try:
        write_csv(results_dir.summary_csv, [rebuilt[i] for i in order], columns)
    except OSError as exc:
        raise GptlabError(f"{results_dir.summary_csv} disagrees with the run folders ({reason}) and cannot be "
                          f"rebuilt ({exc.strerror or exc}); make {results_dir} writable and run again") from None
    log.warning("%s disagreed with the run folders (%s): rebuilt from them", results_dir.summary_csv, reason)
    return reason


def _difference(rows: list[dict[str, str]], rebuilt: dict[str, dict[str, str]], same_header: bool) -> str:
    """What is wrong with the cached rows, in a few words."""
    ids = [r.get("run_id", "") for r in rows]
    missing = len(set(rebuilt) - set(ids))
    if missing:
        return f"{missing} finished run(s) missing from it"
    if not same_header:
        return "its columns differ"
    changed = sum(r != rebuilt.get(r.get("run_id", "")) for r in rows)
    return f"{changed} row(s) differ from their run's summary.json" if changed else "repeated or stale rows"
