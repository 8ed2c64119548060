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
- `tables/lr_curves.csv` (`train.lr` tuned alone): per cell, the loss-against-lr curve fitted near its
  lowest point (`gptlab.stats.lr_curves`): the optimum with its CI, the curvature, and the loss the
  pick leaves on the table; the estimation runs at each pick inform the noise as replicates.

The settings are those of `tune.space` plus every other one the selection runs have (a method such as
refine adds lrs: edge extensions, midpoints), in the space's order (numeric). tuning.csv lists a cell at
an added setting only where it has runs; the fixed-setting effects and the LR sensitivity use the
settings every cell has (the space's, and any added one every cell got), so that cells stay comparable.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gptlab.kinds.tune.load import loaded
from gptlab.kinds.tune.spec import EARLIER_PICK, tune_of, tuned_space
from gptlab.report.fmt import round_frame
from gptlab.report.load import Results, run_roles
from gptlab.report.tables.analyses import design_for
from gptlab.run.config import LR_KEY, TrainConfig  # LR_KEY: the tuned key whose curves lr_curves.csv fits
from gptlab.stats.arms import ARM
from gptlab.stats.effects import analyse
from gptlab.stats.levels import grid_level, level_key, same_level
from gptlab.stats.lr_curves import LR_CURVE_COLS, fit_curves
from gptlab.stats.lr_model import SAYS_NOTHING, lagging
from gptlab.stats.picks import Pairs, SettingRow, Trial, edge_keys, level_number, pairs_text, pick_rows, tuning_columns
from gptlab.statuses import FAILED_TO_TRAIN, OK

SELECTION_LOSS = "best_val_loss"  # validation: the split that chose the checkpoints and the settings
EFFECT_COLS = ["effect", "estimate", "ci_low", "ci_high", "p_adjusted", "call"]
FIXED_COLS = ["setting", *EFFECT_COLS]


@dataclass(frozen=True)
class TuningView:
    """Everything the "Tuned comparison" section shows, rounded for its tables."""

    keys: list[str]  # the tuned keys (tune.space), in order
    settings: list[Pairs]  # every setting of the space, the product of the keys' levels
    seeds: int  # selection seeds per cell and setting
    n_selection: int  # selection runs with a tuned setting (without any: no effects, sensitivity or figure)
    table: pd.DataFrame  # tables/tuning.csv
    effects: pd.DataFrame  # the report's own main effects and interactions (at the picks), labelled as `fixed`'s
    fixed: pd.DataFrame  # tables/fixed_setting_effects.csv
    sensitivity: pd.DataFrame  # tables/lr_sensitivity.csv
    sensitivity_effects: pd.DataFrame  # tables/lr_sensitivity_effects.csv
    ceiling: float  # unigram loss of the validation split (caps the sensitivity's losses)
    extra: list[Pairs] = dataclasses.field(default_factory=list)  # settings outside the space the selection runs have
    curves: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # tables/lr_curves.csv (no rows: none)
    moved: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # tables/earlier_picks.csv (none: no rows)

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        out = {"tuning": self.table, "fixed_setting_effects": self.fixed, "lr_sensitivity": self.sensitivity,
               "lr_sensitivity_effects": self.sensitivity_effects, "lr_curves": self.curves}
        return {**out, "earlier_picks": self.moved} if len(self.moved) else out


def _space(res: Results) -> dict[str, list[Any]] | None:
    return {k: list(v) for k, v in tuned_space(res.spec).items()} or None


def _setting_of(row: dict, space: dict[str, list[Any]]) -> Pairs | None:
    """A summary.csv row's tuned setting, as sweep.yaml's levels where the space has the value, else as a number (or
    text); None when the row has no value for a key."""
    pairs = []
    for key, levels in space.items():
        value = row.get(key)
        if value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == "":
            return None
        level = grid_level(levels, value, None)
        number = level_number(value)
        pairs.append((key, level if level is not None else number if number is not None else str(value).strip()))
    return tuple(pairs)


def _merged(levels: list[Any], found: list[Any]) -> list[Any]:
    """A key's space levels with the other values found inserted in numeric order (ascending or descending as the
    space is; after the space when it is neither)."""
    extra = [v for v in dict.fromkeys(found) if not any(same_level(v, lv) for lv in levels)]
    numbers = [level_number(v) for v in levels + extra]
    if not extra or None in numbers:
        return levels + extra
    ordered = numbers[:len(levels)]
    if ordered == sorted(ordered) or ordered == sorted(ordered, reverse=True):
        return sorted(levels + extra, key=level_number, reverse=len(ordered) > 1 and ordered[0] > ordered[-1])
    return levels + sorted(extra, key=level_number)


def _all_settings(space: dict[str, list[Any]], found: list[Pairs]) -> tuple[list[Pairs], list[Pairs], list[Pairs]]:
    """(the space's settings, the others found, both together), in the order of the keys' merged levels."""
    merged = {k: _merged(levels, [dict(s)[k] for s in found]) for k, levels in space.items()}
    rank = lambda s: tuple(merged[k].index(v) for k, v in s)  # noqa: E731
    settings = [tuple(zip(space, combo)) for combo in itertools.product(*space.values())]
    extra = sorted({s for s in found if s not in settings}, key=rank)
    return settings, extra, sorted(settings + extra, key=rank)


def _pick_rows(trials: list[Trial], cells: list[Pairs], space: dict[str, list[Any]], ordered: list[Pairs],
               settings: list[Pairs], trained: dict[Pairs, Pairs]) -> list[SettingRow]:
    """`stats.picks`' rows, cell by cell, over every setting in order: a cell's edges are those of the space and of
    its own added settings, and a cell has a row at an added setting only where it has runs there. The pick is
    where the cell's estimation runs trained (`trained`: a refining tuner's pick need not be the lowest mean)."""
    rows = []
    for cell in cells:
        mine = [t for t in trials if t.cell == cell]
        sampled = [dict(t.setting) for t in mine if t.status != SAYS_NOTHING]
        own = {k: _merged(levels, [s[k] for s in sampled]) for k, levels in space.items()}
        found = [r for r in pick_rows(mine, [cell], ordered, own) if r.runs or r.setting in settings]
        pick = next((s for s in ordered if _same(s, trained.get(cell))), None)
        if pick is not None:
            found = [dataclasses.replace(r, picked=r.setting == pick,
                                         at_edge=r.setting == pick and bool(edge_keys(r.setting, own))) for r in found]
        rows += found
    return rows


def _same(a: Pairs, b: Pairs | None) -> bool:
    return b is not None and len(a) == len(b) and all(k == kb and same_level(v, vb) for (k, v), (kb, vb) in zip(a, b))


def given_picks(res: Results) -> pd.DataFrame:
    """Each cell's setting as `tune.picks` gave it (sweep.yaml records one entry per cell), with its ok runs at that
    setting; no rows unless the sweep trained given picks."""
    tune = tune_of(res.spec)
    if tune is None or not tune.given:
        return pd.DataFrame()
    rows = []
    for entry in ({**dict(cell), **dict(setting)} for cell, setting in tune.given):
        at = pd.Series(True, index=res.runs.index)
        for key, value in entry.items():
            if key in res.runs:
                at &= res.runs[key].map(level_key) == level_key(value)
        rows.append({**entry, "n_ok": int((at & res.runs["ok"]).sum())})
    return pd.DataFrame(rows)


def tuning_view(res: Results) -> TuningView | None:
    """The section's tables from the selection runs (computed before the effects, whose calls are checked against
    the curves' loss left on the table); `with_effects` adds the report's own; None when the sweep tuned nothing."""
    space = _space(res)
    if space is None:
        return None
    n_seeds = tune_of(res.spec).seeds
    sel = res.selection.copy()
    sel["setting"] = [_setting_of(r, space) for r in sel.to_dict("records")]
    sel = sel[sel["setting"].notna()]
    settings, extra, ordered = _all_settings(space, list(sel["setting"]))
    cells = [tuple((f, c[f]) for f in res.factors) for c in res.cells.to_dict("records")]
    label = {cell: ", ".join(res.label(f, lv) for f, lv in cell) for cell in cells}
    trials = [Trial(cell=tuple((f, r[f]) for f in res.factors), setting=r["setting"], status=r["status"],
                    loss=float(r[SELECTION_LOSS])) for r in sel.to_dict("records")]
    rows = _pick_rows(trials, cells, space, ordered, settings, _trained_picks(res, space, cells))
    table = pd.DataFrame([{**r.to_row(), "cell": label[r.cell]} for r in rows],
                         columns=tuning_columns(res.factors, list(space)))
    ceiling = loaded(res).selection_ceiling if len(sel) else math.nan  # read by the load step
    fixed, sensitivity, sensitivity_effects = pd.DataFrame(columns=FIXED_COLS), pd.DataFrame(), \
        pd.DataFrame(columns=EFFECT_COLS)
    with_runs = Counter(r.setting for r in rows if r.runs)
    common = [s for s in ordered if s in settings or with_runs[s] == len(cells)]  # settings every cell has
    at_common = sel[sel["setting"].map(lambda s: s in common).astype(bool)]
    if len(sel):
        fixed = _fixed_effects(res, at_common, common, n_seeds)
        sensitivity, sensitivity_effects = _sensitivity(res, at_common, cells, label, common, ceiling, n_seeds)
    curves = _curves(res, sel, rows, label, space, ceiling) if list(space) == [LR_KEY] and len(sel) else \
        pd.DataFrame(columns=["cell", *res.factors, *LR_CURVE_COLS])
    return TuningView(keys=list(space), settings=settings, seeds=n_seeds, n_selection=len(sel), table=round_frame(table),
                      effects=pd.DataFrame(columns=EFFECT_COLS), fixed=fixed, sensitivity=sensitivity,
                      sensitivity_effects=sensitivity_effects, ceiling=ceiling, extra=extra, curves=curves,
                      moved=_earlier_picks(res, rows, label))


EARLIER_PICK_COLS = ["cell", "earlier_lr", "runs", "median_loss", "worst_loss", "lagged", "pick_lr"]


def _earlier_picks(res: Results, rows: list[SettingRow], label: dict[Pairs, str]) -> pd.DataFrame:
    """tables/earlier_picks.csv: per cell and earlier pick (`EARLIER_PICK` runs), its runs, their median and worst
    selection loss, whether a run there lagged (`stats.lr_model.lagging`, among the cell's every run) and the pick
    it moved to; no rows when no pick moved."""
    earlier = res.other_roles[run_roles(res.other_roles) == EARLIER_PICK] if len(res.other_roles) else res.other_roles
    if not len(earlier) or LR_KEY not in earlier:
        return pd.DataFrame(columns=EARLIER_PICK_COLS)
    picks = {label[r.cell]: float(dict(r.setting)[LR_KEY]) for r in rows if r.picked}
    every = pd.concat([res.selection, res.runs, earlier], ignore_index=True)
    every = every[every["status"] == OK]
    out = []
    for (cell, lr), g in earlier.groupby(["cell", LR_KEY], sort=False):
        mine = every[every["cell"] == cell]
        points = {float(x): v[SELECTION_LOSS].astype(float).tolist() for x, v in mine.groupby(LR_KEY)}
        losses = g.loc[g["status"] == OK, SELECTION_LOSS].astype(float)
        out.append({"cell": cell, "earlier_lr": float(lr), "runs": len(g), "median_loss": float(losses.median()),
                    "worst_loss": float(losses.max()), "lagged": float(lr) in lagging(points),
                    "pick_lr": picks.get(cell, math.nan)})
    return round_frame(pd.DataFrame(out, columns=EARLIER_PICK_COLS))


def with_effects(view: TuningView, res: Results, main: pd.DataFrame, interactions: pd.DataFrame) -> TuningView:
    """`view` with the report's own `main` effects and `interactions` (at the picks), labelled as the fixed ones."""
    return dataclasses.replace(view, effects=_tuned_effects(res, main, interactions))


def loss_left_high(res: Results, view: TuningView | None) -> dict[tuple[str, ...], tuple[float, ...]] | None:
    """Per cell (its levels, factor order), the loss its pick leaves on the table: (estimate, upper end of its 95%
    CI (inf when unbounded), df of its noise), NaN without a fit; None without lr curves (nothing to check the
    calls against)."""
    if view is None or view.curves.empty:
        return None
    out = {}
    for row in view.curves.to_dict("records"):
        values = (row.get(k) for k in ("loss_left", "loss_left_ci_high", "noise_df"))
        out[tuple(str(row[f]) for f in res.factors)] = tuple(float(x) if x is not None and x == x else math.nan
                                                            for x in values)
    return out


def _trained_picks(res: Results, space: dict[str, list[Any]], cells: list[Pairs]) -> dict[Pairs, Pairs]:
    """Each cell's setting as its estimation runs trained it (the pick that counts, whatever rule chose it)."""
    if not all(k in res.runs for k in space) or res.runs.empty:
        return {}
    out = {}
    for cell in cells:
        mine = res.runs
        for f, lv in cell:
            mine = mine[mine[f] == lv]
        found = {tuple((k, r[k]) for k in space) for r in mine.to_dict("records")}
        if len(found) == 1:
            out[cell] = next(iter(found))
    return out


def _curves(res: Results, sel: pd.DataFrame, rows: list[SettingRow], label: dict[Pairs, str], space: dict[str, list[Any]],
            ceiling: float) -> pd.DataFrame:
    """tables/lr_curves.csv: each cell's loss-against-lr fit (`stats.lr_curves`), the window one step of the space
    wide, every run of the cell a point of its curve (the estimation runs at its pick and at earlier picks,
    `EARLIER_PICK`, included); lrs to 3 significant digits."""
    levels = sorted(x for x in map(level_number, space[LR_KEY]) if x is not None and x > 0)
    step = float(np.median(np.diff(np.log2(levels)))) if len(levels) > 1 else None

    def runs_at(runs: pd.DataFrame, lrs: list[Any]) -> pd.DataFrame:
        lr = pd.to_numeric(pd.Series(lrs, index=runs.index, dtype=object), errors="coerce")
        return pd.DataFrame({"cell": runs["cell"], "lr": lr, "loss": runs[SELECTION_LOSS].astype(float),
                             "status": runs["status"]})[lr > 0]

    selection = runs_at(sel, [dict(s)[LR_KEY] for s in sel["setting"]])
    earlier = res.other_roles[run_roles(res.other_roles) == EARLIER_PICK] if len(res.other_roles) else res.other_roles
    curve_runs = pd.concat([res.runs, earlier], ignore_index=True) if len(earlier) else res.runs
    estimation = runs_at(curve_runs, list(curve_runs[LR_KEY])) if LR_KEY in curve_runs else None
    picks = {label[r.cell]: float(dict(r.setting)[LR_KEY]) for r in rows if r.picked and level_number(dict(r.setting)[LR_KEY])}
    fits = fit_curves(selection, step, ceiling if math.isfinite(ceiling) else math.inf, picks, estimation)
    cell_of = {text: cell for cell, text in label.items()}
    out = fits.frame()
    out = out.assign(**{f: [dict(cell_of[c]).get(f) for c in out["cell"]] for f in res.factors})
    out = out.iloc[sorted(range(len(out)), key=lambda i: list(label.values()).index(out["cell"].iloc[i]))]
    for col in ("pick_lr", "optimum_lr", "optimum_lr_low", "optimum_lr_high", "window_lr_low", "window_lr_high"):
        out[col] = [float(f"{x:.3g}") if math.isfinite(x) else x for x in out[col].astype(float)]
    out[["curvature", "bend", "noise_sd"]] = out[["curvature", "bend", "noise_sd"]].astype(float).round(4)
    return round_frame(out[["cell", *res.factors, *LR_CURVE_COLS]].reset_index(drop=True))


def _effects(res: Results, runs: pd.DataFrame, y: str, calls: bool) -> pd.DataFrame:
    """Main effects and two-way interactions of column `y` over `runs` (one Holm family, called at `res.margin`),
    labelled as the report's."""
    runs = runs[np.isfinite(runs[y].astype(float))]
    if runs.empty or not res.factors:
        return pd.DataFrame(columns=EFFECT_COLS)
    cells = list(map(tuple, runs[res.factors].to_numpy().tolist()))
    a = analyse(runs[y].to_numpy(float), cells, runs["seed"].to_numpy(), design_for(res, runs), res.label, res.margin,
                block_seeds=not res.arms, own_variance=bool(res.arms))
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


def _fixed_effects(res: Results, sel: pd.DataFrame, settings: list[Pairs], n_seeds: int) -> pd.DataFrame:
    """Per setting: what a study run at that setting alone would find (the selection runs there, ok ones)."""
    frames = []
    for setting in settings:
        runs = sel[sel["ok"] & _at(sel, setting)]
        effects = _effects(res, runs, res.outcome, calls=n_seeds >= 2)
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
                 ceiling: float, n_seeds: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """LR sensitivity per cell and selection seed (Wortsman et al. 2023), its mean per cell, and the effects on it."""
    capped = np.where(sel["ok"], np.minimum(sel[SELECTION_LOSS].astype(float), ceiling), np.nan)
    sel = sel.assign(capped=np.where(sel["status"].isin(FAILED_TO_TRAIN), ceiling, capped))
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
                     "n_diverged": int(mine["status"].isin(FAILED_TO_TRAIN).sum())})
    table = round_frame(pd.DataFrame(rows))
    effects = _effects(res, pd.DataFrame(per_seed, columns=[*res.factors, "seed", "lr_sensitivity"]), "lr_sensitivity",
                       calls=n_seeds >= 2)
    return table, round_frame(effects)


@dataclass(frozen=True)
class TuneTables:
    """The numbers of a sweep with `tune:` (`ReportTables.kinds["tune"]`)."""

    view: TuningView | None  # a tuned sweep's picks, fixed-setting effects and LR sensitivity; None for given picks
    given: pd.DataFrame  # each cell's setting given by `tune.picks` (no rows unless the sweep gives picks)

    @property
    def files(self) -> dict[str, pd.DataFrame]:
        """The kind's tables by file name (`tables/NAME.csv`): the given picks, then the tuned comparison's."""
        return {**({"given_picks": self.given} if len(self.given) else {}),
                **(self.view.tables if self.view is not None else {})}


UNTUNED_KEY = LR_KEY  # the nuisance key every earlier study fixed; its default is the untuned setting


def untuned_lr() -> float:
    """The lr an untuned sweep trains at: the run config's default (nanoGPT's shakespeare_char 1e-3)."""
    return TrainConfig().lr


def with_untuned(res: Results, card: pd.DataFrame, tuned: TuningView | None) -> pd.DataFrame:
    """An arms sweep's scorecard with each claim's arm at the untuned setting (`untuned_setting`, `untuned_estimate`:
    the selection runs at the run config's default lr, as the fixed-lr studies trained)."""
    label, untuned = _untuned_effects(res, tuned)
    if not label:
        return card
    scaled = "scale_level" in card
    card = card.copy()
    card["untuned_setting"] = label
    card["untuned_estimate"] = [untuned.get((str(r["arm"]), str(r["scale_level"])) if scaled else (str(r["arm"]),),
                                            math.nan) for r in card.to_dict("records")]
    return card


def picks_text(tuned: TuningView | None) -> dict[tuple[str, ...], str]:
    """Each arm's (and scale level's) picked setting as text ("lr=0.004"), from tuning.csv: an arms sweep's `pick`."""
    if tuned is None or not len(tuned.table):
        return {}
    table = tuned.table[tuned.table["picked"].astype(bool)]
    factors = [c for c in table.columns if c == ARM or c.startswith(("train.", "model.", "data."))]
    factors = [c for c in factors if c not in tuned.keys]
    return {tuple(str(r[f]) for f in factors): str(r["setting"]) for r in table.to_dict("records")}


def _untuned_effects(res: Results, tuned: TuningView | None) -> tuple[str, dict[tuple[str, ...], float]]:
    """("lr=0.001", (arm, scale levels...) -> the arm's mean minus the baseline's over the ok selection runs at the
    untuned lr, at the same scale levels); ("", {}) where the selection never trained at it.

    With one selection seed these are single-run differences: estimates without a CI, as in the fixed-lr studies."""
    sel = res.selection
    if tuned is None or tuned.keys != [UNTUNED_KEY] or not len(sel) or UNTUNED_KEY not in sel or len(res.scale) > 1:
        return "", {}
    lr = untuned_lr()
    at = sel[sel["ok"] & pd.to_numeric(sel[UNTUNED_KEY], errors="coerce").map(lambda v: math.isclose(v, lr))]
    if not len(at):
        return "", {}
    means = at.groupby([ARM, *res.scale])[res.outcome].mean()
    out = {}
    for key, value in means.items():
        key = key if isinstance(key, tuple) else (key,)
        base = means.get(key if not res.scale else (res.baseline[ARM], *key[1:]))
        if base is None and not res.scale:
            base = means.get(res.baseline[ARM])
        if base is not None and key[0] != res.baseline[ARM]:
            out[tuple(map(str, key))] = round(float(value - base), 4)
    return f"lr={lr:g}", out


def open_curve(res: Results, curves: pd.DataFrame | None, cell: str) -> dict:
    """What would decide an effect whose call depends on the picks, from its tuning cell's curve: the cell's open side
    and the lr one coarse step beyond its window there, else its loss left's end (what-would-decide's columns)."""
    out: dict[str, Any] = {}
    mine = curves[curves["cell"] == cell] if curves is not None and len(curves) and cell else pd.DataFrame()
    if not len(mine):
        return out
    c = mine.iloc[0]
    step = 2.0 ** _step(res)
    if not float(c["optimum_lr_low"]) > 0:
        return {**out, "open_side": "low", "try_lr": float(f"{float(c['window_lr_low']) / step:.3g}")}
    if not math.isfinite(float(c["optimum_lr_high"])):
        return {**out, "open_side": "high", "try_lr": float(f"{float(c['window_lr_high']) * step:.3g}")}
    return {**out, "loss_left_high": float(c["loss_left_ci_high"])}


def _step(res: Results) -> float:
    """The coarse step of the tuned lrs, in octaves (1: a factor 2, the lab's default)."""
    lrs = sorted(float(v) for v in tuned_space(res.spec).get(LR_KEY, ()) if float(v) > 0)
    return float(np.median(np.diff(np.log2(lrs)))) if len(lrs) > 1 else 1.0
