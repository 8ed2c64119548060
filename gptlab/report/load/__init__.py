"""The report's load step: a sweep's results directory read into one `Results` (`load_results`); no statistics here.

Owns: reading sweep.yaml back as the sweep's own `SweepSpec` (`gptlab.sweep.stored`: a bad one is a one-line
`ReportError`; without one, the factors are summary.csv's other columns), validating the directory (a missing
dir or summary.csv is a `ReportError`; a summary.csv that disagrees with the run folders is read from them
instead, in memory, by `gptlab.run.summary_csv`: nothing is written into results/NAME/), typing factor
levels back to the grid (summary.csv holds them as text: "True", "100", "0.001"), level order, the
baseline, cell labels, run environments, the validation curves of metrics.csv, the equivalence margin (sweep.yaml's,
or the report's `--margin`: `SweepSpec.with_margin`), and the outcome rule applied to the runs (`gptlab.stats.outcome`:
which runs count, the unit, `best_test_loss` or `best_val_loss`), all before the one `Results` is built. A run's status is its own
summary's, judged from its own curve (`gptlab.statuses`): nothing here compares a run with its siblings.
The load step is the only one of the report that reads files: its modules read each run's own files
(`runfiles`, `block_losses`), the unigram ceiling's data (`ceiling`) and the text samples (`samples`), and each
kind of sweep reads what it needs beyond them by its `load` hook (`gptlab.report.kinds`: `Results.kinds`).
"""
from __future__ import annotations

import dataclasses
import io
import logging
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from gptlab.errors import GptlabError
from gptlab.report.kinds import report_kinds
from gptlab.report.load.block_losses import read_test_blocks
from gptlab.report.load.ceiling import unigram_ceiling
from gptlab.report.load.results import ReportError, Results, read_text, text_factors
from gptlab.report.load.runfiles import read_curves, read_run_json
from gptlab.roles import ESTIMATION, SELECTION
from gptlab.run.resultsdir import RUNG, ResultsDir
from gptlab.run.summary_csv import SummaryCheck, check_summary
from gptlab.stats.design import design_cells, effect_label
from gptlab.stats.levels import grid_level, level_key
from gptlab.stats.outcome import (
    BITS_PER_CHAR,
    CHAR_BPC_FACTOR,
    NATS_PER_TOKEN,
    TEST_OUTCOME,
    Outcome,
    in_unit,
    outcome_of,
    role_of,
)
from gptlab.statuses import OK
from gptlab.sweep.runs import SweepSpec
from gptlab.sweep.stored import spec_from_results, unrecorded_spec

__all__ = ["load_results", "Results", "ReportError", "read_text", "run_roles"]
log = logging.getLogger(__name__)
NUMERIC = ["seed", "best_val_loss", "best_step", "final_val_loss", "final_train_loss", "params",
           "params_non_embedding", "tokens_per_sec", "wall_s", "best_val_bpc", "best_test_loss", "best_test_bpc"]
REQUIRED = ["run_id", "seed", "status", "best_val_loss"]
KNOWN = set(NUMERIC) | {"run_id", "status", "error", "stage", "role"}


def run_roles(runs: pd.DataFrame) -> pd.Series:
    """Each row's role (`stats.outcome.role_of`: `role`; `stage` in results from before it; else estimation). Only
    estimation runs are effects'."""
    return pd.Series([role_of(r) for r in runs.to_dict("records")], index=runs.index, dtype=object)


def _read_spec(results_dir: ResultsDir, runs: pd.DataFrame) -> SweepSpec:
    """sweep.yaml as the `SweepSpec` the sweep ran (`sweep.stored`); without one, every column of summary.csv the
    lab does not write is a factor, its levels in order of appearance."""
    try:
        spec = spec_from_results(results_dir)
    except GptlabError as err:
        raise ReportError(str(err)) from None
    if spec is not None:
        return spec
    log.warning("%s missing: factors are inferred from summary.csv", results_dir.sweep_yaml)
    estimation = runs.loc[run_roles(runs) == ESTIMATION, "seed"].dropna()
    return unrecorded_spec(results_dir.path.resolve().name, {c: list(dict.fromkeys(runs[c])) for c in runs.columns
                                                             if c not in KNOWN}, sorted({int(s) for s in estimation}))


def _read_summary(results_dir: ResultsDir) -> tuple[pd.DataFrame, SummaryCheck]:
    if not results_dir.path.is_dir():
        raise ReportError(f"results directory not found: {results_dir}")
    check = check_summary(results_dir)  # summary.csv is a cache of the run folders: never trusted over them
    path = results_dir.summary_csv
    if check.text is None and not path.is_file():
        if results_dir.lock_holder.is_file():  # a sweep holds the folder and has not finished a run yet
            raise ReportError(f"{results_dir} has no summary.csv yet: a sweep is training it ({results_dir.holder()}); "
                              "run the report again once its first runs have finished")
        lost = len(check.unplaced) + len(check.others)
        if lost:
            raise ReportError(f"{path} not found, and none of the {lost} finished run folder(s) in {results_dir.runs_dir} "
                              "records its place under this sweep.yaml (place.json); rerun the sweep's command to "
                              "record them again")
        raise ReportError(f"{path} not found: is {results_dir} a sweep's results directory?")
    try:
        source = io.StringIO(check.text) if check.text is not None else path
        runs = pd.read_csv(source, dtype=str, keep_default_na=False)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: unreadable CSV ({exc})") from None
    missing = [c for c in REQUIRED if c not in runs.columns]
    if missing:
        raise ReportError(f"{path}: missing column(s) {', '.join(missing)}")
    if results_dir.rung:  # one rung of a ladder: its rows alone
        runs = runs[runs.get(RUNG, pd.Series("", index=runs.index)) == results_dir.rung].reset_index(drop=True)
    if runs.empty:
        raise ReportError(f"{path}: no runs{f' of rung {results_dir.rung}' if results_dir.rung else ''}")
    for col in NUMERIC:
        runs[col] = pd.to_numeric(runs[col], errors="coerce") if col in runs else np.nan
    if "error" not in runs:
        runs["error"] = ""
    return runs, check


def _levels(spec: SweepSpec, runs: pd.DataFrame) -> dict[str, list[str]]:
    """Level labels per factor in grid order, mapping summary.csv text onto the grid's values."""
    levels: dict[str, list[str]] = {}
    for factor, values in spec.grid.items():
        if factor not in runs:
            raise ReportError(f"summary.csv has no column for grid factor '{factor}'")
        labels = [str(v) for v in values]
        by_key = {level_key(v): lab for v, lab in zip(values, labels)}  # summary.csv's text onto the grid's levels
        mapped = [by_key.get(level_key(raw), raw) for raw in runs[factor]]
        extra = [m for m in dict.fromkeys(mapped) if m not in labels]
        if extra:
            log.warning("factor %s: levels %s are not in the grid; appended", factor, extra)
        runs[factor] = mapped
        levels[factor] = labels + extra
    return levels


def _match(levels: list[str], value: Any) -> str | None:
    return grid_level(levels, value, None)


def _cells(spec: SweepSpec, factors: list[str], levels: dict[str, list[str]],
           runs: pd.DataFrame, cell_label: Callable[[dict[str, str]], str]) -> pd.DataFrame:
    """Every cell of the design in grid order (grid minus exclude, plus any unexpected ones seen)."""
    exclude = [{k: _match(levels.get(k, []), v) for k, v in e.items()} for e in spec.exclude]
    combos = design_cells({f: levels[f] for f in factors}, exclude)
    seen = set(combos)
    combos += [c for c in dict.fromkeys(map(tuple, runs[factors].to_numpy().tolist())) if c not in seen]
    cells = pd.DataFrame(combos, columns=factors) if factors else pd.DataFrame(index=[0])
    cells["cell"] = [cell_label(dict(zip(factors, c))) for c in combos] if factors else ["all runs"]
    return cells


def _with_status(runs: pd.DataFrame, factors: list[str]) -> pd.DataFrame:
    """summary.csv's runs with their status (lower case), `ok` and `cell` label."""
    runs["status"] = runs["status"].str.strip().str.lower()
    runs["ok"] = runs["status"] == OK
    runs["cell"] = [_cell_label(factors, dict(zip(factors, row))) for row in runs[factors].to_numpy().tolist()] \
        if factors else "all runs"
    return runs


def _cell_label(factors: list[str], cell: dict[str, str]) -> str:
    """'norm=post, activation=relu' (`stats.design.effect_label`)."""
    return ", ".join(effect_label(factors, f, cell[f]) for f in factors)


def _in_unit(runs: pd.DataFrame, unit: str) -> pd.DataFrame:
    """`runs` with every loss in `unit` and `loss_scale`, what each run's own nats are multiplied by (`in_unit`)."""
    losses = pd.DataFrame([in_unit(r, unit) for r in runs.to_dict("records")], index=runs.index)
    return runs.assign(**{c: losses[c] for c in losses.columns})


def _ceiling(results_dir: ResultsDir, runs: pd.DataFrame, outcome: Outcome) -> tuple[float, str]:
    """The unigram ceiling of the split the outcome is on, in the outcome's unit (a char unigram model's in bits)."""
    ceiling, note = unigram_ceiling(results_dir, runs, per_token=outcome.unit == NATS_PER_TOKEN,
                                    split="test" if outcome.column == TEST_OUTCOME else "val")
    return (ceiling * CHAR_BPC_FACTOR if outcome.unit == BITS_PER_CHAR else ceiling), note


def _baseline(spec: SweepSpec, levels: dict[str, list[str]]) -> dict[str, str]:
    """Each factor's baseline level label (sweep.yaml's, else its first level)."""
    baseline = {}
    for f in levels:
        lab = _match(levels[f], spec.baseline[f]) if f in spec.baseline else levels[f][0]
        if lab is None:
            raise ReportError(f"sweep.yaml: baseline {f}={spec.baseline[f]} is not a level of the grid")
        baseline[f] = lab
    return baseline


def load_results(results_dir: ResultsDir | Path | str, margin: Any = None, spec: SweepSpec | None = None) -> Results:
    """Read results/NAME/ (see docs/CONTRACTS.md) into one `Results`, built once. `margin` (the report's `--margin`)
    replaces sweep.yaml's equivalence margin (`SweepSpec.with_margin`). A folder at a ladder's rung
    (`ResultsDir.at_rung`) reads that rung's runs alone (summary.csv's `rung`), with `spec` in place of sweep.yaml's
    where given (the rung's own sweep); a kind may narrow the report of the whole folder to such a part
    (`ReportKind.scope`: a ladder's top rung). Raises `ReportError` when it is not one (and `GptlabError` for a bad
    margin, before any run's files are read)."""
    results_dir = ResultsDir(results_dir)
    runs, check = _read_summary(results_dir)
    if spec is None:
        spec = _read_spec(results_dir, runs).with_margin(margin)
        for _, kind in report_kinds(spec):
            scoped = kind.scope(spec, results_dir, runs)
            if scoped is not None:
                spec, results_dir = scoped
                runs, check = _read_summary(results_dir)
    levels = _levels(spec, runs)
    factors, baseline = list(levels), _baseline(spec, levels)
    environment = read_run_json(results_dir, runs)  # first: it reads each run's status under today's rule
    runs = _with_status(runs, factors)
    cells = _cells(spec, factors, levels, runs, partial(_cell_label, factors))
    cells["is_baseline"] = [all(r[f] == baseline[f] for f in factors) for _, r in cells.iterrows()]
    outcome = outcome_of(runs.to_dict("records"), several_texts=bool(text_factors(factors, levels)))
    runs = _in_unit(runs, outcome.unit)
    role = run_roles(runs)  # a method's own roles (neither selection nor estimation) go to other_roles
    selection, estimation, other_roles = (runs[m].reset_index(drop=True) for m in (
        role == SELECTION, role == ESTIMATION, ~role.isin([SELECTION, ESTIMATION])))
    if outcome.mixed:
        log.warning("%d of %d runs have a test loss: effects are on the validation loss", outcome.tested,
                    outcome.measured)
    test_blocks = read_test_blocks(results_dir, estimation, outcome.column, outcome.unit)
    curves = read_curves(results_dir, estimation)
    ceiling, ceiling_note = _ceiling(results_dir, estimation, outcome)
    res = Results(results_dir=results_dir, name=spec.name, spec=spec, factors=factors, levels=levels, baseline=baseline,
                  runs=estimation, cells=cells, curves=curves, environment=environment, ceiling=ceiling,
                  ceiling_note=ceiling_note, unit=outcome.unit, outcome=outcome.column,
                  discussion=read_text(results_dir.discussion_md) if results_dir.discussion_md.is_file() else None,
                  selection=selection, other_roles=other_roles, every_run=runs.assign(role=role), test_blocks=test_blocks,
                  summary_check=check)
    return dataclasses.replace(res, kinds={key: kind.load(res) for key, kind in report_kinds(spec)})  # last: a kind
    # reads what it needs of the rest
