"""The per-cell pick of a tuned sweep: one rule, used by the sweep (to plan) and the report (to show).

Owns `tuning.csv`'s rows: per grid cell and tuned setting, the selection runs, the mean and SD of
their selection loss (`best_val_loss`: validation only, the test split chooses nothing), which
setting each cell picks and whether that pick lies on the edge of the space. Pure Python (no
pandas), so the sweep's planner (`gptlab.kinds.tune.tuning`) and the report (`gptlab.kinds.tune.tables`)
decide with the same code from the same summaries.

The rule: a cell's pick is its setting with the lowest mean selection loss over the runs that
trained (status ok), among the settings on the trained side of the cell's stability cliff
(`stats.lr_model`, where one numeric key is tuned: those beyond are `beyond_cliff` and never picked).
A run that did not train (diverged, collapsed) counts as an infinite loss: a setting with one is
picked only when every setting of the cell has one (then the fewest such runs, then the lowest mean
of the ok runs); a failed run (a crash) says nothing and is skipped. Ties go to the setting listed first. A pick is
`at_edge` when, for some tuned key
with numeric levels, its value is the smallest or largest level of that key (the best setting may
lie beyond the space: widen it); keys with non-numeric levels have no edge.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from gptlab.stats.lr_model import SAYS_NOTHING, beyond, cliff_edge, trained
from gptlab.statuses import FAILED_TO_TRAIN

Pairs = tuple[tuple[str, Any], ...]  # (dotted key, value) pairs, in grid or tune.space order
# tuning.csv (results/NAME/ and the report's tables/): one row per cell and setting, in grid x space order.
TUNING_COLS = ["cell", "setting", "runs", "n_ok", "n_diverged", "mean_loss", "sd_loss", "picked", "at_edge",
               "beyond_cliff"]


@dataclass(frozen=True)
class Trial:
    """One finished selection run, as the pick needs it."""

    cell: Pairs  # the grid cell, (factor, level) pairs
    setting: Pairs  # the tuned setting, (key, value) pairs in tune.space order
    status: str  # ok | diverged | collapsed | failed (a failed run is a run that says nothing; it is skipped)
    loss: float  # best_val_loss (the selection loss); ignored unless status is ok


def short_names(keys: Sequence[str]) -> dict[str, str]:
    """Each dotted key without its section ("model.norm" -> "norm") unless two keys share that tail."""
    tails = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: t if tails.count(t) == 1 else k for k, t in zip(keys, tails)}


def pairs_text(pairs: Pairs, names: Mapping[str, str] | None = None) -> str:
    """'activation=gelu, tying=tied' (short names unless `names` says otherwise)."""
    names = names or short_names([k for k, _ in pairs])
    return ", ".join(f"{names.get(k, k)}={_value_text(v)}" for k, v in pairs)


def _value_text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def level_number(value: Any) -> float | None:
    """A level as a number (None for text and booleans): how picks and the report read numeric levels."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def edge_keys(setting: Pairs, space: Mapping[str, Sequence[Any]]) -> list[str]:
    """The tuned keys of `setting` whose value is the smallest or largest (numeric) level of the space."""
    edges = []
    for key, value in setting:
        numbers = [level_number(v) for v in space[key]]
        x = level_number(value)
        if x is not None and None not in numbers and len(numbers) > 1 and x in (min(numbers), max(numbers)):
            edges.append(key)
    return edges


@dataclass(frozen=True)
class SettingRow:
    """One cell at one tuned setting: its selection runs, summarised, and whether the cell picks it."""

    cell: Pairs  # the grid cell
    setting: Pairs  # the tuned setting
    runs: int  # selection runs that finished (trained or not: every status but failed)
    n_ok: int  # of them, finished ok
    n_diverged: int  # of them, failed to train (statuses.FAILED_TO_TRAIN)
    mean_loss: float  # mean selection loss of the ok runs (NaN without one)
    sd_loss: float  # their sample SD (NaN with fewer than two)
    picked: bool  # the cell's pick
    at_edge: bool  # picked, and on the edge of the space in some tuned key
    beyond_cliff: bool = False  # beyond the cell's stability cliff (`stats.lr_model`): in the record, never in a pick

    def rank(self) -> tuple[int, float]:
        """What the pick minimises: runs that did not train first (an infinite loss), then the mean loss."""
        return self.runs - self.n_ok, self.mean_loss if math.isfinite(self.mean_loss) else math.inf

    def to_row(self, cell_names: Mapping[str, str] | None = None) -> dict[str, Any]:
        """This row as tuning.csv writes it, with one column per grid factor and per tuned key too."""
        return {"cell": pairs_text(self.cell, cell_names), **dict(self.cell), "setting": pairs_text(self.setting),
                **dict(self.setting), "runs": self.runs, "n_ok": self.n_ok, "n_diverged": self.n_diverged,
                "mean_loss": _blank(self.mean_loss), "sd_loss": _blank(self.sd_loss), "picked": self.picked,
                "at_edge": self.at_edge, "beyond_cliff": self.beyond_cliff}


def _blank(x: float) -> float | None:
    """None (an empty CSV field, as summary.csv writes a missing value) for NaN."""
    return x if math.isfinite(x) else None


def tuning_columns(factors: Sequence[str], keys: Sequence[str]) -> list[str]:
    """tuning.csv's columns: cell, the grid factors, setting, the tuned keys, then the summaries."""
    return ["cell", *factors, "setting", *keys, *TUNING_COLS[2:]]


def pick_rows(trials: Iterable[Trial], cells: Sequence[Pairs], settings: Sequence[Pairs],
              space: Mapping[str, Sequence[Any]]) -> list[SettingRow]:
    """Every cell x setting (in the given orders) with its trials summarised and each cell's pick marked."""
    by_key: dict[tuple[Pairs, Pairs], list[Trial]] = {}
    for trial in trials:
        if trial.status != SAYS_NOTHING:
            by_key.setdefault((trial.cell, trial.setting), []).append(trial)
    rows: list[SettingRow] = []
    xs = [_octave(s) for s in settings]
    for cell in cells:
        mine = []
        for setting in settings:
            found = by_key.get((cell, setting), [])
            losses = [t.loss for t in found if trained(t.status) and math.isfinite(t.loss)]
            mine.append(SettingRow(cell, setting, len(found), len(losses), sum(t.status in FAILED_TO_TRAIN for t in found),
                                   statistics.fmean(losses) if losses else math.nan,
                                   statistics.stdev(losses) if len(losses) > 1 else math.nan, False, False))
        if None not in xs:
            edge = cliff_edge((x, t.loss, trained(t.status)) for x, s in zip(xs, settings)
                              for t in by_key.get((cell, s), []))
            mine = [replace(r, beyond_cliff=beyond(x, edge)) for r, x in zip(mine, xs)]
        open_ = [i for i, r in enumerate(mine) if not r.beyond_cliff]
        best = min(open_, key=lambda i: mine[i].rank()) if open_ else None  # min keeps the first of ties
        for i, row in enumerate(mine):
            picked = i == best and row.n_ok > 0  # no run trained anywhere: no pick (the cell is not estimable)
            rows.append(replace(row, picked=picked, at_edge=picked and bool(edge_keys(row.setting, space))))
    return rows


def _octave(setting: Pairs) -> float | None:
    """log2 of a setting's one positive numeric value (where the cliff rule applies), else None."""
    x = level_number(setting[0][1]) if len(setting) == 1 else None
    return math.log2(x) if x is not None and x > 0 and math.isfinite(x) else None


def picks(rows: Sequence[SettingRow]) -> dict[Pairs, SettingRow]:
    """Each cell's picked row."""
    return {r.cell: r for r in rows if r.picked}
