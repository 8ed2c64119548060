"""A results folder's sweep.yaml read back into the `SweepSpec` the sweep ran (`spec_from_results`), planning nothing.

The sweep writes `SweepSpec.to_dict()` there with records of its own (`command`, `sources`). This reads
it with the sweep file's strict loader, turns an arms sweep's stored form back into the form a sweep
YAML gives (the stored `grid` is the one it ran: `arm` x the scale keys), and validates it as the sweep
did, its plugins imported as the sweep imported them, without planning a run: nothing is built or
written. A file that is not one (an unknown key, a bad value, a schema this version does not know) is
one `GptlabError` that names the file and the key. A folder without sweep.yaml gets `unrecorded_spec`.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gptlab.errors import GptlabError, shown
from gptlab.executors.base import ExecutorConfig
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.summary_csv import SOURCES
from gptlab.stats.arms import ARM
from gptlab.stats.calls import DEFAULT_MARGIN
from gptlab.sweep.loader import read_spec_file
from gptlab.sweep.runs import ReportSettings, SweepSpec
from gptlab.sweep.spec import validate_spec

COMMAND = "command"  # sweep.yaml's record of the command line that ran the sweep
RECORDS = (COMMAND, SOURCES)  # what the sweep adds to its spec in sweep.yaml: records of the run, not settings


def spec_from_results(results_dir: ResultsDir | Path | str) -> SweepSpec | None:
    """results/NAME/sweep.yaml as the validated `SweepSpec` its sweep ran (no runs planned), its `command` recorded;
    None where the folder has no sweep.yaml."""
    path = ResultsDir(results_dir).sweep_yaml
    if not path.exists():
        return None
    raw = read_spec_file(path, "a sweep.yaml holds the mapping a sweep wrote (name, base, grid, ...)")
    command = raw.get(COMMAND) or ""
    try:
        if not isinstance(command, str):
            raise GptlabError(f"{COMMAND}: must be the command line that ran the sweep, got {shown(command)}")
        _check_plugin_files(raw.get("plugins"))
        spec = validate_spec(_as_written(raw), path, {}, {}, plan=False)
    except GptlabError as err:
        raise GptlabError(f"{path}: {err}") from None
    return dataclasses.replace(spec, command=command)


def _check_plugin_files(entries: Any) -> None:
    """A plugin file the sweep imported, gone since: say so with its path, before validation would look for it
    relative to the results folder (the sweep stored it absolute)."""
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, str) and entry.endswith(".py") and Path(entry).is_absolute() and not Path(entry).is_file():
            raise GptlabError(f"plugins: the file {entry}, which the sweep imported, is gone; reading the sweep's spec "
                              "imports its plugins as the sweep did: put it back there")


def unrecorded_spec(name: str, grid: dict[str, list[Any]], seeds: list[int]) -> SweepSpec:
    """The spec of a results folder without sweep.yaml, as far as its runs show it: their grid and seeds, every
    other setting the default (no base, plugins, exclusions or rules)."""
    baseline = {factor: levels[0] for factor, levels in grid.items()}
    return SweepSpec(name=name, description="", plugins=[], base={}, grid=grid, seeds=seeds, exclude=[],
                     baseline=baseline, executor=ExecutorConfig(), report=ReportSettings(DEFAULT_MARGIN))


def _as_written(stored: dict[str, Any]) -> dict[str, Any]:
    """The stored spec as a sweep YAML gives it: the records dropped; for an arms sweep the grid it ran dropped,
    its arms in that grid's order, its scale keys given their levels from it and its baseline named by its arm;
    a claim's empty `setting` (written for a claim that has none) dropped."""
    raw = {k: v for k, v in stored.items() if k not in RECORDS}
    if "arms" not in raw or not isinstance(raw.get("grid"), dict):
        return raw
    grid, arms = raw.pop("grid"), raw["arms"]
    if isinstance(arms, dict) and isinstance(grid.get(ARM), list):  # the grid's order is the one it ran
        raw["arms"] = {**{n: arms[n] for n in grid[ARM] if n in arms}, **arms}
    if isinstance(raw.get("scale"), list):
        raw["scale"] = {key: grid.get(key) for key in raw["scale"]}
    if isinstance(raw.get("baseline"), dict):
        raw["baseline"] = raw["baseline"].get(ARM)
    if isinstance(raw.get("claims"), dict):
        raw["claims"] = {arm: [_claim(c) for c in claims] if isinstance(claims, list) else _claim(claims)
                         for arm, claims in raw["claims"].items()}
    return raw


def _claim(claim: Any) -> Any:
    return {k: v for k, v in claim.items() if (k, v) != ("setting", "")} if isinstance(claim, dict) else claim
