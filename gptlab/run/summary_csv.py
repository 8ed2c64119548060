"""summary.csv and each run's place.json: their one owner (rows, the only writer, and the check against the run folders).

A row of summary.csv is a run's place in its sweep (run id, seed, factor levels, tuned columns,
role), which the sweep records in the run's `place.json` with the columns, the sweep's stamp and
the files the run read, and the metrics of its `summary.json`. The sweep writes both files, through
`write_summary` alone, after every run. Readers check the file against the run folders first
(`check_summary`), in memory: a file cut short, edited, older than the folders or missing is rebuilt
from them as text, never written back (the report writes nothing into results/NAME/; the next sweep
rewrites the file), so a damaged summary.csv never hides or misreports a run.

The stamp hashes what sweep.yaml says (comments, layout and the `command:` line aside), its `sources:`
included: the sha256 of every plugin and user corpus its runs read. A run trained under another spec,
or under another version of a plugin or corpus, is placed under another stamp and is not this sweep's.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import yaml

from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir, RunSummary
from gptlab.runio import csv_text, parse_yaml, read_mapping, write_csv, write_json

log = logging.getLogger(__name__)

METRIC_FIELDS = ["status", "best_val_loss", "best_step", "final_val_loss", "final_train_loss", "params",
                 "params_non_embedding", "tokens_per_sec", "wall_s", "error", "best_val_bpc"]
# Only in the summary.csv of a sweep with a test split (data.test_fraction > 0 in any run), after the
# others: a sweep without one keeps the exact columns it always had, so readers by position still work.
TEST_FIELDS = ["best_test_loss", "best_test_bpc"]
# From summary.json too, but only in the summary.csv of a sweep whose kind names them among its columns (a ladder's).
KIND_FIELDS = ["started_at"]


def summary_metrics(columns: Sequence[str]) -> list[str]:
    """The columns of summary.csv that come from each run's summary.json (the others: its place in the sweep)."""
    return [c for c in columns if c in METRIC_FIELDS or c in TEST_FIELDS or c in KIND_FIELDS]
CHAR_BPC_FACTOR = 1 / math.log(2)  # a char run's nats/char -> bits/char (best_val_bpc / best_val_loss of a char run)
SOURCES = "sources"  # sweep.yaml's key: sha256 of the plugins and user corpora its runs read (`run.identity`)
UNSTAMPED = ("command",)  # sweep.yaml's keys that say how the sweep was called, not what its runs are


def _stored_spec(results_dir: ResultsDir) -> tuple[dict[str, Any], bytes] | None:
    try:
        data = results_dir.sweep_yaml.read_bytes()
        raw = parse_yaml(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return (raw, data) if isinstance(raw, dict) else None


def sweep_stamp(results_dir: ResultsDir) -> str:
    """A short hash of what results/NAME/sweep.yaml says, its `sources` included ("" when it cannot be read)."""
    stored = _stored_spec(results_dir)
    if stored is None:
        return ""
    content = {k: v for k, v in stored[0].items() if k not in UNSTAMPED}
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _stamps(results_dir: ResultsDir) -> set[str]:
    """The stamps a place of this sweep may carry: its content's, and the hash of its bytes (places recorded
    before content stamps)."""
    stored = _stored_spec(results_dir)
    return set() if stored is None else {sweep_stamp(results_dir), hashlib.sha256(stored[1]).hexdigest()[:16]}


def read_place(folder: RunDir) -> dict[str, Any] | None:
    """The run's place in its sweep (`place.json`: {sweep, columns, row}), None when absent or unreadable."""
    place = read_mapping(folder / RunDir.PLACE)
    ok = place is not None and isinstance(place.get("row"), dict) and isinstance(place.get("columns"), list)
    return place if ok and place["row"].get("run_id") == folder.path.name else None  # not another run's


def write_place(folder: RunDir, place: dict[str, Any]) -> None:
    """Record the run's place (a write only when it changed: the sweep calls this after every run)."""
    if read_place(folder) != json.loads(json.dumps(place, default=str)):
        write_json(folder / RunDir.PLACE, place)


def place_record(place: dict[str, Any], columns: Sequence[str], stamp: str,
                 sources: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What `place.json` holds: the run's place, the file's columns, the sweep's stamp and the files its runs read."""
    return {"sweep": stamp, SOURCES: dict(sources or {}), "columns": list(columns), "row": dict(place)}


def summary_row(place: dict[str, Any], summary: RunSummary, metric_fields: Sequence[str]) -> dict[str, Any]:
    """One row: the run's place (`role` last, as in the file) and its summary's metrics (fields of `RunSummary`)."""
    head = {k: v for k, v in place.items() if k != "role"}
    return {**head, **{k: getattr(summary, k) for k in metric_fields}, "role": place.get("role")}


def write_summary(results_dir: ResultsDir, entries: Sequence[tuple[dict[str, Any], RunSummary]],
                  columns: Sequence[str]) -> list[dict[str, Any]]:
    """Record each run's place (`place.json`) and rewrite summary.csv from `entries` (place, summary): its rows.

    The only writer of either file; the sweep calls it (`gptlab.sweep.summary`) after every run."""
    stored = _stored_spec(results_dir)
    stamp, sources = sweep_stamp(results_dir), (stored[0].get(SOURCES) or {}) if stored else {}
    metrics = summary_metrics(columns)
    rows = []
    for place, summary in entries:
        write_place(results_dir.run(place["run_id"]), place_record(place, columns, stamp, sources))
        rows.append(summary_row(place, summary, metrics))
    write_csv(results_dir.summary_csv, rows, list(columns))
    return rows


def read_rows(results_dir: ResultsDir) -> list[dict[str, str]]:
    """summary.csv's rows as text (empty when it is missing or unreadable)."""
    cached = _cached(results_dir)
    return cached[1] if cached is not None else []


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


@dataclass(frozen=True)
class SummaryCheck:
    """summary.csv checked against the run folders (`check_summary`); nothing is written."""

    text: str | None = None  # summary.csv rebuilt from the run folders, when the file on disk does not stand
    reason: str = ""  # why the file on disk does not stand ("" when it does)
    unplaced: tuple[str, ...] = ()  # finished run folders without a readable place.json and without a row
    others: tuple[str, ...] = ()  # finished run folders placed under another spec, plugin or corpus: not this sweep's


def check_summary(results_dir: ResultsDir) -> SummaryCheck:
    """summary.csv as the run folders give it, in memory, when the file disagrees with them; which folders are not in it.

    Only runs whose folder records its place under this sweep's stamp (`place.json`) are the sweep's: a
    run planned under an edited spec, plugin or corpus is not, and a summary.csv with a row for a run
    that records no place here (results from before `place.json`) stands as it is. Rebuilt rows keep
    their order in the file; runs it lacks follow in run-id order, and rows for folders that are gone
    are dropped.
    """
    places: dict[str, tuple[tuple[dict[str, Any], RunSummary], list[str]]] = {}
    unplaced, others, stamps = [], [], _stamps(results_dir)
    for run_id in results_dir.run_ids():
        folder = results_dir.run(run_id)
        summary = folder.summary()
        if summary is None:  # not finished: no row yet
            continue
        place = read_place(folder)
        if place is None:
            unplaced.append(run_id)
        elif place.get("sweep") in stamps:
            places[run_id] = ({**place["row"], "run_id": run_id}, summary), place["columns"]
        else:
            others.append(run_id)
    cached = _cached(results_dir)
    ids = [r.get("run_id", "") for r in cached[1]] if cached is not None else []
    left = dict(unplaced=tuple(i for i in unplaced if i not in ids), others=tuple(i for i in others if i not in ids))
    if not places or any(i not in places and results_dir.run(i).path.is_dir() for i in ids):
        return SummaryCheck(**left)  # nothing placed here, or a row the folders cannot check: the file is all there is
    columns = max((cols for _, cols in places.values()), key=len)
    metrics = summary_metrics(columns)
    rebuilt = {run_id: row_text(summary_row(place, summary, metrics), columns)
               for run_id, ((place, summary), _) in places.items()}
    if cached is not None:
        header, rows = cached
        if header == columns and len(ids) == len(set(ids)) and {r["run_id"]: r for r in rows} == rebuilt:
            return SummaryCheck(**left)
        reason = _difference(rows, rebuilt, header == columns)
        order = [i for i in dict.fromkeys(ids) if i in rebuilt] + sorted(set(rebuilt) - set(ids))
    else:
        reason, order = "it is missing or unreadable", sorted(rebuilt)
    log.warning("%s disagrees with the run folders (%s): read from them instead", results_dir.summary_csv, reason)
    return SummaryCheck(text=csv_text([rebuilt[i] for i in order], columns), reason=reason, **left)


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
