"""`tables/stability.csv`: per cell (or arm), role and tuned setting, how many runs trained, collapsed, diverged, failed.

A run that failed to train (`statuses.FAILED_TO_TRAIN`: diverged; collapsed: stuck on the unigram
plateau to its end; unstable: blew up and did not come back; each judged from its own curve) is a failure of its
setting, never a loss to average: this table counts them where they
happened, selection runs and estimation runs apart, so that an estimation run that failed at a
cell's pick reads as that cell's failure rate there. `n_reclassified` counts the runs whose recorded
status today's rule reads otherwise (`gptlab.run.reclassify`). Numbers only.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from gptlab.report.kinds import report_kinds
from gptlab.report.load import Results
from gptlab.statuses import COLLAPSED, DIVERGED, FAILED_TO_TRAIN, OK, UNSTABLE

COUNTS = ["runs", "n_ok", "n_collapsed", "n_unstable", "n_diverged", "n_failed", "n_reclassified"]
LOST = ("n_collapsed", "n_unstable", "n_diverged")  # the counts of runs that failed to train, in COUNTS' order
ROLE_ORDER = {"selection": 0, "estimation": 1}  # any other role after them


def tuned_keys(res: Results) -> list[str]:
    """The keys the kinds tried runs at (their `setting_keys` hook: a tuned sweep's `tune.space`) that summary.csv has
    columns for; none for an untuned sweep."""
    frames = [f for f in (res.runs, res.selection, res.other_roles) if len(f)]
    keys = dict.fromkeys(k for _, kind in report_kinds(res.spec) for k in kind.setting_keys(res))
    return [k for k in keys if frames and all(k in f for f in frames)]


def stability_columns(keys: list[str]) -> list[str]:
    return ["cell", "role", *keys, *COUNTS]


def stability_table(res: Results) -> pd.DataFrame:
    """One row per cell x role x tuned setting that has runs, in cell order, selection first, settings ascending."""
    keys = tuned_keys(res)
    frames = [f.assign(role=_roles(f, role)) for f, role in ((res.selection, "selection"), (res.runs, "estimation"),
                                                           (res.other_roles, "")) if len(f)]
    if not frames:
        return pd.DataFrame(columns=stability_columns(keys))
    runs = pd.concat(frames, ignore_index=True)
    order = {c: i for i, c in enumerate(res.cells["cell"])}
    rows = []
    for group, mine in runs.groupby(["cell", "role", *keys], sort=False, dropna=False):
        status = mine["status"]
        failed_to_train = status.isin(FAILED_TO_TRAIN)
        rows.append({**dict(zip(["cell", "role", *keys], group)), "runs": len(mine), "n_ok": int((status == OK).sum()),
                     "n_collapsed": int((status == COLLAPSED).sum()),
                     "n_unstable": int((status == UNSTABLE).sum()), "n_diverged": int((status == DIVERGED).sum()),
                     "n_failed": int((~failed_to_train & (status != OK)).sum()),
                     "n_reclassified": int(mine["reclassified"].sum()) if "reclassified" in mine else 0})
    table = pd.DataFrame(rows, columns=stability_columns(keys))
    sort = ["_cell", "_role", *[f"_{k}" for k in keys]]
    table = table.assign(_cell=table["cell"].map(order).fillna(len(order)),
                         _role=table["role"].map(ROLE_ORDER).fillna(len(ROLE_ORDER)),
                         **{f"_{k}": table[k].map(_number) for k in keys})
    return table.sort_values(sort, kind="stable").drop(columns=sort).reset_index(drop=True)


def _roles(frame: pd.DataFrame, role: str) -> pd.Series:
    """The role column of `frame` (`role` where it names one, else the frame's own)."""
    own = frame["role"].astype(str) if "role" in frame else pd.Series("", index=frame.index)
    return pd.Series(role, index=frame.index) if role else own.replace("", "other")


def _number(value: Any) -> float:
    """A setting as a number for sorting (text sorts after every number, in its order of appearance)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.inf
