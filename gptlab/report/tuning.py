"""The report's "Tuned comparison" of a tuned sweep (`tune:` in sweep.yaml): picks, fixed against tuned, LR sensitivity.

Owns, from the selection runs (`Results.selection`; the estimation runs are `Results.runs`, whose
effects the rest of the report computes as usual, so they are the effects at the tuned optima):

- `tables/tuning.csv`: per cell and tuned setting, the selection runs, mean and SD of their
  selection loss (best val loss), the pick and `at_edge` (`gptlab.report.picks`, the sweep's rule);
  `figures/isolation.png`, the Tuning Playbook's isolation plot: one curve per cell, picks marked.
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pandas as pd

from gptlab.report.effects import analyse
from gptlab.report.fmt import fmt_loss, round_frame
from gptlab.report.load import CHAR_BPC_FACTOR, Results, _ceiling, _key
from gptlab.report.picks import Pairs, Trial, pairs_text, pick_rows, tuning_columns
from gptlab.report.render import Block, Bullets, Heading, Para, Table

if TYPE_CHECKING:
    from gptlab.report.stats import Statistics

SELECTION_LOSS = "best_val_loss"  # validation: the split that chose the checkpoints and the settings
EFFECT_COLS = ["effect", "estimate", "ci_low", "ci_high", "p_adjusted", "call"]
FIXED_COLS = ["setting", *EFFECT_COLS]
MAX_MD_ROWS = 40


@dataclass
class TuningView:
    """Everything the "Tuned comparison" section shows, rounded for its tables."""

    keys: list[str]  # the tuned keys (tune.space), in order
    settings: list[Pairs]  # every tuned setting, the product of the keys' levels
    seeds: int  # selection seeds per cell and setting
    table: pd.DataFrame  # tables/tuning.csv
    fixed: pd.DataFrame  # tables/fixed_setting_effects.csv
    sensitivity: pd.DataFrame  # tables/lr_sensitivity.csv
    sensitivity_effects: pd.DataFrame  # tables/lr_sensitivity_effects.csv
    ceiling: float  # unigram loss of the validation split (caps the sensitivity's losses)
    figure: bytes | None = None  # figures/isolation.png
    changes: list[str] = field(default_factory=list)  # where a fixed-setting study and the tuned one disagree
    warnings: list[str] = field(default_factory=list)  # picks on the edge of the space

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


def tuning_view(res: Results, st: "Statistics", margin: float) -> TuningView | None:
    """The section's tables, sentences and figure; None when the sweep tuned nothing."""
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
    view = TuningView(list(space), settings, n_seeds, round_frame(table), pd.DataFrame(columns=FIXED_COLS),
                      pd.DataFrame(), pd.DataFrame(columns=EFFECT_COLS), ceiling)
    view.warnings = [f"the pick of {label[r.cell]} ({pairs_text(r.setting)}) lies on the edge of the tuned space: its "
                     f"best setting may lie beyond it, so widen tune.space and rerun" for r in rows if r.at_edge]
    if sel.empty:
        return view
    view.fixed = _fixed_effects(res, sel, settings, n_seeds, margin)
    view.sensitivity, view.sensitivity_effects = _sensitivity(res, sel, cells, label, settings, ceiling, n_seeds, margin)
    view.changes = _changes(view.fixed, _tuned_effects(res, st), n_seeds)
    from gptlab.report.tuning_figure import isolation_plot

    view.figure = isolation_plot(res, view.table, list(space), ceiling)
    return view


def _effects(res: Results, runs: pd.DataFrame, y: str, margin: float, calls: bool) -> pd.DataFrame:
    """Main effects and two-way interactions of column `y` over `runs` (one Holm family), labelled as the report's."""
    from gptlab.report.stats import design_for

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


def _tuned_effects(res: Results, st: "Statistics") -> pd.DataFrame:
    """The report's own main effects and interactions (estimation runs, at each cell's pick), labelled alike."""
    rows = [{"effect": f"{res.label(r['factor'], r['level'])} vs {r['baseline']}", **r} for r in st.main.to_dict("records")]
    rows += [{"effect": f"{res.label(r['factor_a'], r['level_a'])} x {res.label(r['factor_b'], r['level_b'])}", **r}
             for r in st.interactions.to_dict("records")]
    return pd.DataFrame(rows, columns=EFFECT_COLS)


def _changes(fixed: pd.DataFrame, tuned: pd.DataFrame, n_seeds: int) -> list[str]:
    """One sentence per effect whose answer at some single setting differs from the tuned one.

    With calls on both sides (two or more selection seeds): where the call differs. With one
    selection seed the fixed side has no call: where its estimate lies outside the tuned 95% CI.
    """
    out = []
    for t in tuned.to_dict("records"):
        if not math.isfinite(t["estimate"]):
            continue
        ci = (f", 95% CI {fmt_loss(t['ci_low'])} to {fmt_loss(t['ci_high'])}"
              if math.isfinite(t["ci_low"]) else "")
        at = fixed[fixed["effect"] == t["effect"]]
        if n_seeds >= 2:
            moved = [f"{r['call'] or 'no call'} at {r['setting']} ({r['estimate']:+.4f})"
                     for r in at.to_dict("records") if math.isfinite(r["estimate"]) and r["call"] != t["call"]]
            what = "a fixed-setting study would call it"
        else:
            moved = [f"{r['estimate']:+.4f} at {r['setting']}" for r in at.to_dict("records")
                     if math.isfinite(r["estimate"]) and math.isfinite(t["ci_low"])
                     and not t["ci_low"] <= r["estimate"] <= t["ci_high"]]
            what = "a fixed-setting study (one seed, no call) would estimate it outside that CI"
        if moved:
            out.append(f"{t['effect']}: tuned per cell, {t['call'] or 'no call'} ({t['estimate']:+.4f}{ci}); {what}: "
                       f"{', '.join(moved)}.")
    return out


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


def _md(df: pd.DataFrame, csv: str, what: str) -> list[Block]:
    if len(df) <= MAX_MD_ROWS:
        return [Table(df)]
    return [Para(f"{len(df)} {what}: too many to list here; see `tables/{csv}`.")]


def tuning_section(view: TuningView | None, res: Results, st: "Statistics",
                   fig: Callable[[str, str], list[Block]]) -> list[Block]:
    """The "Tuned comparison" section's blocks (none for a sweep that tuned nothing)."""
    if view is None:
        return []
    keys = ", ".join(f"`{k}`" for k in view.keys)
    sel = res.selection
    blocks: list[Block] = [Heading("Tuned comparison"), Para(
        f"Every cell's {keys} was tuned on its own selection runs: {len(view.settings)} settings x {view.seeds} "
        f"seed(s) per cell (seeds 1,000,000 and up; {len(sel)} runs, {float(sel['wall_s'].sum()):.0f} s of compute, "
        "not counted in the header). Each cell's pick is the setting with the lowest mean best val loss (a setting "
        "with a diverged run only when every setting has one). The estimation runs (seeds "
        f"{', '.join(map(str, res.seeds))}) then trained at each cell's pick; they alone make every effect, interaction "
        f"and call above, on the {res.outcome_label}: the effects at the tuned optima. The selection runs never "
        "enter them. Table: `tables/tuning.csv`.")]
    if view.warnings:
        blocks.append(Bullets([f"Warning: {w}" for w in view.warnings]))
    picked = view.table[view.table["picked"].astype(bool)]
    blocks += _md(picked[["cell", "setting", "runs", "n_diverged", "mean_loss", "sd_loss", "at_edge"]],
                  "tuning.csv", "picks")
    blocks += fig("isolation.png", "Selection loss against the tuned setting, one curve per cell, picks circled")
    blocks += [Heading("Fixed setting against tuned", 3), Para(
        "What a study run at one setting for every cell would have found: the same main effects and two-way "
        f"interactions ({res.outcome_label}, {res.unit}), from the selection runs at that setting alone, each setting its "
        "own Holm family. " + ("With one selection seed a setting has one run per cell: estimates only, no CI and no "
                               "call. " if view.seeds < 2 else "") + "Table: `tables/fixed_setting_effects.csv`.")]
    blocks += _md(_side_by_side(view, _tuned_effects(res, st)), "fixed_setting_effects.csv", "effects")
    blocks.append(Bullets(view.changes or ["No effect's answer at a single setting differs from the tuned one."]))
    space = "learning rates" if view.keys == ["train.lr"] else "settings of the tuned space"
    cap = f"{fmt_loss(view.ceiling)} {res.unit}" if math.isfinite(view.ceiling) else "unknown (dataset not found)"
    blocks += [Heading("LR sensitivity", 3), Para(
        f"Wortsman et al. (2023): the mean over the tuned {space} of the loss minus the cell's lowest loss, every "
        f"loss capped at the unigram loss of the validation split ({cap}) and a diverged run counted at it; per "
        "selection seed, then averaged. Lower = more tolerant. Tables: `tables/lr_sensitivity.csv`, "
        "`tables/lr_sensitivity_effects.csv` (the factors' effects on it" + (
            "; one selection seed: estimates only, no calls)." if view.seeds < 2 else ")."))]
    blocks += _md(view.sensitivity.drop(columns=list(res.factors), errors="ignore"), "lr_sensitivity.csv", "cells")
    if len(view.sensitivity_effects):
        blocks += _md(view.sensitivity_effects, "lr_sensitivity_effects.csv", "effects")
    return blocks


def _side_by_side(view: TuningView, tuned: pd.DataFrame) -> pd.DataFrame:
    """One row per effect: the tuned estimate, CI and call, then the estimate (and call) at each single setting."""
    out = tuned.rename(columns={"estimate": "tuned_estimate", "ci_low": "tuned_ci_low", "ci_high": "tuned_ci_high",
                                "call": "tuned_call"})[["effect", "tuned_estimate", "tuned_ci_low", "tuned_ci_high",
                                                        "tuned_call"]]
    for setting in dict.fromkeys(view.fixed["setting"]):
        at = view.fixed[view.fixed["setting"] == setting].set_index("effect")
        text = [f"{at.at[e, 'estimate']:+.4f}" + (f" ({at.at[e, 'call']})" if at.at[e, "call"] else "")
                if e in at.index and math.isfinite(at.at[e, "estimate"]) else "n/a" for e in out["effect"]]
        out[f"at {setting}"] = text
    return out
