"""The numbers of a tuned sweep's "Tuned comparison" (`tune:` in sweep.yaml): picks, fixed against tuned, LR sensitivity.

Owns, from the selection runs (`Results.selection`; the estimation runs are `Results.runs`, whose
effects the rest of the report computes as usual, so they are the effects at the tuned optima):

- `tables/tuning.csv`: per cell and tuned setting, the selection runs, mean and SD of their
  selection loss (best val loss), the pick and `at_edge` (`gptlab.stats.picks`, the sweep's rule).
- `tables/fixed_setting_effects.csv`: what a fixed-setting study would have found at each single
  setting (main effects and two-way interactions of the selection runs at that setting, on the
  report's outcome, each setting its own Holm family). With one selection seed a setting has one
  run per cell: estimates only, no CI and no call.
- `tables/lr_sensitivity.csv`: Wortsman et al. (2023)'s LR sensitivity per cell, the mean over the
  tuned settings of (loss - the cell's lowest loss), each loss capped at the unigram loss of the
  validation split and a diverged run counted at it; computed per selection seed and averaged.
  `tables/lr_sensitivity_effects.csv`: the factors' effects on it (calls only with two or more seeds).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gptlab.report.analyses import design_for
from gptlab.report.fmt import round_frame
from gptlab.report.load import CHAR_BPC_FACTOR, Results, _ceiling, _key
from gptlab.stats.effects import analyse
from gptlab.stats.picks import Pairs, Trial, pairs_text, pick_rows, tuning_columns

SELECTION_LOSS = "best_val_loss"  # validation: the split that chose the checkpoints and the settings
EFFECT_COLS = ["effect", "estimate", "ci_low", "ci_high", "p_adjusted", "call"]
FIXED_COLS = ["setting", *EFFECT_COLS]


@dataclass(frozen=True)
class TuningView:
    """Everything the "Tuned comparison" section shows, rounded for its tables."""

    keys: list[str]  # the tuned keys (tune.space), in order
    settings: list[Pairs]  # every tuned setting, the product of the keys' levels
    seeds: int  # selection seeds per cell and setting
    n_selection: int  # selection runs at a setting of the space (without any: no effects, sensitivity or figure)
    table: pd.DataFrame  # tables/tuning.csv
    effects: pd.DataFrame  # the report's own main effects and interactions (at the picks), labelled as `fixed`'s
    fixed: pd.DataFrame  # tables/fixed_setting_effects.csv
    sensitivity: pd.DataFrame  # tables/lr_sensitivity.csv
    sensitivity_effects: pd.DataFrame  # tables/lr_sensitivity_effects.csv
    ceiling: float  # unigram loss of the validation split (caps the sensitivity's losses)

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {"tuning": self.table, "fixed_setting_effects": self.fixed, "lr_sensitivity": self.sensitivity,
                "lr_sensitivity_effects": self.sensitivity_effects}


def _space(res: Results) -> dict[str, list[Any]] | None:
    tune = res.spec.get("tune")
    space = tune.get("space") if isinstance(tune, dict) else None
    return {str(k): list(v) for k, v in space.items()} if isinstance(space, dict) and space else None


def _setting_of(row: dict, space: dict[str, list[Any]]) -> Pairs | None:
    """A summary.csv row's tuned setting, as sweep.yaml's levels (None when a value is not in the space)."""
    pairs = []
    for key, levels in space.items():
        level = next((lv for lv in levels if _key(lv) == _key(row.get(key, ""))), None)
        if level is None:
            return None
        pairs.append((key, level))
    return tuple(pairs)


def given_picks(res: Results) -> pd.DataFrame:
    """Each cell's setting as `tune.picks` gave it (sweep.yaml records one entry per cell), with its ok runs at that
    setting; no rows unless the sweep trained given picks."""
    tune = res.spec.get("tune")
    picks = tune.get("picks") if isinstance(tune, dict) else None
    if not isinstance(picks, list) or not picks:
        return pd.DataFrame()
    rows = []
    for entry in picks:
        at = pd.Series(True, index=res.runs.index)
        for key, value in entry.items():
            if key in res.runs:
                at &= res.runs[key].map(_key) == _key(value)
        rows.append({**entry, "n_ok": int((at & res.runs["ok"]).sum())})
    return pd.DataFrame(rows)


def tuning_view(res: Results, main: pd.DataFrame, interactions: pd.DataFrame, margin: float) -> TuningView | None:
    """The section's tables, with the report's own `main` effects and `interactions`; None when the sweep tuned nothing."""
    space = _space(res)
    if space is None:
        return None
    tune = res.spec["tune"]
    n_seeds = int(tune.get("seeds") or 1)
    settings = [tuple(zip(space, combo)) for combo in itertools.product(*space.values())]
    sel = res.selection.copy()
    sel["setting"] = [_setting_of(r, space) for r in sel.to_dict("records")]
    sel = sel[sel["setting"].notna()]
    cells = [tuple((f, c[f]) for f in res.factors) for c in res.cells.to_dict("records")]
    label = {cell: ", ".join(res.label(f, lv) for f, lv in cell) for cell in cells}
    trials = [Trial(tuple((f, r[f]) for f in res.factors), r["setting"], r["status"], float(r[SELECTION_LOSS]))
              for r in sel.to_dict("records")]
    rows = pick_rows(trials, cells, settings, space)
    table = pd.DataFrame([{**r.to_row(), "cell": label[r.cell]} for r in rows],
                         columns=tuning_columns(res.factors, list(space)))
    ceiling, _ = _ceiling(res.results_dir, sel, per_token=res.unit == "nats/token", split="val") if len(sel) \
        else (math.nan, "")
    ceiling *= CHAR_BPC_FACTOR if res.unit == "bits/char" else 1.0
    fixed, sensitivity, sensitivity_effects = pd.DataFrame(columns=FIXED_COLS), pd.DataFrame(), \
        pd.DataFrame(columns=EFFECT_COLS)
    if len(sel):
        fixed = _fixed_effects(res, sel, settings, n_seeds, margin)
        sensitivity, sensitivity_effects = _sensitivity(res, sel, cells, label, settings, ceiling, n_seeds, margin)
    return TuningView(list(space), settings, n_seeds, len(sel), round_frame(table), _tuned_effects(res, main, interactions),
                      fixed, sensitivity, sensitivity_effects, ceiling)


def _effects(res: Results, runs: pd.DataFrame, y: str, margin: float, calls: bool) -> pd.DataFrame:
    """Main effects and two-way interactions of column `y` over `runs` (one Holm family), labelled as the report's."""
    runs = runs[np.isfinite(runs[y].astype(float))]
    if runs.empty or not res.factors:
        return pd.DataFrame(columns=EFFECT_COLS)
    cells = list(map(tuple, runs[res.factors].to_numpy().tolist()))
    a = analyse(runs[y].to_numpy(float), cells, runs["seed"].to_numpy(), design_for(res, runs), res.label, margin)
    out = [{"effect": f"{res.label(r['factor'], r['level'])} vs {r['baseline']}", **r} for r in a.main.to_dict("records")]
    out += [{"effect": f"{res.label(r['factor_a'], r['level_a'])} x {res.label(r['factor_b'], r['level_b'])}", **r}
            for r in a.interactions.to_dict("records")]
    df = pd.DataFrame(out, columns=EFFECT_COLS)
    if not calls:  # one run per cell: an estimate says nothing about its noise (a pooled model would assume it)
        df[["ci_low", "ci_high", "p_adjusted"]] = math.nan
        df["call"] = ""
    return df


def _at(runs: pd.DataFrame, setting: Pairs) -> pd.Series:
    """Which runs trained at `setting` (a column of tuples: `==` would compare element by element)."""
    return runs["setting"].map(lambda s: s == setting).astype(bool)


def _fixed_effects(res: Results, sel: pd.DataFrame, settings: list[Pairs], n_seeds: int,
                   margin: float) -> pd.DataFrame:
    """Per setting: what a study run at that setting alone would find (the selection runs there, ok ones)."""
    frames = []
    for setting in settings:
        runs = sel[sel["ok"] & _at(sel, setting)]
        effects = _effects(res, runs, res.outcome, margin, calls=n_seeds >= 2)
        frames.append(effects.assign(setting=pairs_text(setting))[FIXED_COLS])
    frames = [f for f in frames if len(f)]
    return round_frame(pd.concat(frames, ignore_index=True)) if frames else pd.DataFrame(columns=FIXED_COLS)


def _tuned_effects(res: Results, main: pd.DataFrame, interactions: pd.DataFrame) -> pd.DataFrame:
    """The report's own main effects and interactions (estimation runs, at each cell's pick), labelled alike."""
    rows = [{"effect": f"{res.label(r['factor'], r['level'])} vs {r['baseline']}", **r} for r in main.to_dict("records")]
    rows += [{"effect": f"{res.label(r['factor_a'], r['level_a'])} x {res.label(r['factor_b'], r['level_b'])}", **r}
             for r in interactions.to_dict("records")]
    return pd.DataFrame(rows, columns=EFFECT_COLS)


def _sensitivity(res: Results, sel: pd.DataFrame, cells: list[Pairs], label: dict, settings: list[Pairs],
                 ceiling: float, n_seeds: int, margin: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """LR sensitivity per cell and selection seed (Wortsman et al. 2023), its mean per cell, and the effects on it."""
    capped = np.where(sel["ok"], np.minimum(sel[SELECTION_LOSS].astype(float), ceiling), np.nan)
    sel = sel.assign(capped=np.where(sel["status"] == "diverged", ceiling, capped))
    per_seed, rows = [], []
    for cell in cells:
        mine = sel[sel["cell"] == label[cell]]
        values = []
        for seed, runs in mine.groupby("seed"):
            curve = [runs.loc[_at(runs, s), "capped"] for s in settings]
            losses = np.array([c.iloc[0] if len(c) else np.nan for c in curve], dtype=float)
            value = float(np.mean(losses - losses.min())) if np.isfinite(losses).all() else math.nan
            values.append(value)
            per_seed.append({**dict(cell), "seed": seed, "lr_sensitivity": value})
        curve = mine.groupby(mine["setting"].map(settings.index))["capped"].mean()
        best = settings[int(curve.idxmin())] if curve.notna().any() else None
        finite = [v for v in values if math.isfinite(v)]
        rows.append({"cell": label[cell], **dict(cell), "lr_sensitivity": float(np.mean(finite)) if finite else math.nan,
                     "min_loss": float(curve.min()) if curve.notna().any() else math.nan,
                     "best_setting": pairs_text(best) if best else "", "n_seeds": len(values),
                     "n_diverged": int((mine["status"] == "diverged").sum())})
    table = round_frame(pd.DataFrame(rows))
    effects = _effects(res, pd.DataFrame(per_seed, columns=[*res.factors, "seed", "lr_sensitivity"]), "lr_sensitivity",
                       margin, calls=n_seeds >= 2)
    return table, round_frame(effects)
