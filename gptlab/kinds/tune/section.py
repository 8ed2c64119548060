"""The report's section of `tune:`: the tuned comparison (or the settings given per cell), after the effects.

The picks (`tables/tuning.csv`) with the isolation plot, what a study at one fixed setting would have found
against the tuned effects, the LR sensitivity, and the loss-against-lr fits near each optimum; for given picks,
who chose each cell's setting. Its numbers are the kind's (`tables.TuneTables`), its sentences the kind's
(`sentences.TuneWords`), its figure the kind's (`figures/isolation.png`).
"""
from __future__ import annotations

import math

import pandas as pd

from gptlab.kinds.tune.sentences import TuneWords
from gptlab.kinds.tune.spec import KEY
from gptlab.kinds.tune.tables import TuneTables, TuningView
from gptlab.report.document.blocks import Block, Bullets, Heading, Para, Table, image
from gptlab.report.document.sections import MAX_MD_ROWS
from gptlab.report.figures import Figures
from gptlab.report.load import Results
from gptlab.report.sentences import Sentences
from gptlab.report.sentences.overview import too_long
from gptlab.report.tables import ReportTables
from gptlab.run.config import LR_KEY


def tuning_section(res: Results, tables: ReportTables, words: Sentences, figs: Figures) -> list[Block]:
    """The "Tuned comparison" section's blocks, or "Settings given per cell" for given picks (none for a sweep that
    tuned nothing)."""
    numbers: TuneTables = tables.kinds[KEY]
    said: TuneWords = words.kinds[KEY]
    view, given = numbers.view, numbers.given
    if len(given):
        return [Heading("Settings given per cell"), Para(said.given), Table(given)]
    if view is None:
        return []
    blocks: list[Block] = [Heading("Tuned comparison"), Para(f"{said.tuned_design} Table: `tables/tuning.csv`.")]
    blocks += [Para(said.tuned_extra)] if said.tuned_extra else []
    if said.tuning_warnings:
        blocks.append(Bullets([f"Warning: {w}" for w in said.tuning_warnings]))
    picked = view.table[view.table["picked"].astype(bool)]
    blocks += _md(picked[["cell", "setting", "runs", "n_diverged", "mean_loss", "sd_loss", "at_edge"]],
                  "tuning.csv", "picks")
    blocks += image(figs.kinds.get(KEY, {}).get("isolation"),
                    "Selection loss against the tuned setting, one curve per cell, picks circled")
    blocks += [Heading("Fixed setting against tuned", 3), Para(
        "What a study run at one setting for every cell would have found: the same main effects and two-way "
        f"interactions ({res.outcome_label}, {res.unit}), from the selection runs at that setting alone, each setting its "
        "own Holm family. " + ("With one selection seed a setting has one run per cell: estimates only, no CI and no "
                               "call. " if view.seeds < 2 else "") + "Table: `tables/fixed_setting_effects.csv`.")]
    blocks += _md(_side_by_side(view), "fixed_setting_effects.csv", "effects")
    blocks.append(Bullets(said.tuning_changes or ["No effect's answer at a single setting differs from the tuned one."]))
    space = "learning rates" if view.keys == [LR_KEY] else "settings of the tuned space"
    blocks += [Heading("LR sensitivity", 3), Para(
        f"Wortsman et al. (2023): the mean over the tuned {space} of the loss minus the cell's lowest loss, every "
        f"loss capped at the unigram loss of the validation split ({said.sensitivity_cap}) and a run that diverged "
        "or collapsed counted at it; per "
        "selection seed, then averaged. Lower = more tolerant. Tables: `tables/lr_sensitivity.csv`, "
        "`tables/lr_sensitivity_effects.csv` (the factors' effects on it" + (
            "; one selection seed: estimates only, no calls)." if view.seeds < 2 else ")."))]
    blocks += _md(view.sensitivity.drop(columns=list(res.factors), errors="ignore"), "lr_sensitivity.csv", "cells")
    if len(view.sensitivity_effects):
        blocks += _md(view.sensitivity_effects, "lr_sensitivity_effects.csv", "effects")
    return blocks + _curves_blocks(view, res, said)


def _curves_blocks(view: TuningView, res: Results, words: TuneWords) -> list[Block]:
    """The loss-against-lr fits near each cell's optimum (`tables/lr_curves.csv`), with what they are."""
    curves = view.curves
    if not len(curves):
        return []
    return [Heading("Loss against lr near each optimum", 3), Para(
        "Per cell, a curve fitted to the mean selection loss (capped at the unigram loss; runs that diverged or "
        "collapsed left out) at "
        "the cell's lowest lr and every lr within one step of the space from it: m + c d^2 exp(a d), d = "
        "log2(lr / optimum), a parabola bent by a, which has a N(0, 0.25^2) prior (real curves are bent so); with three "
        "points the fit is the parabola, and the prior widens the CIs by the bias a bent curve gives it. `optimum_lr` "
        "is the fitted optimum with its 95% CI (0 or inf: unbounded); `curvature` is c, the loss added one octave "
        f"from it ({res.unit} per octave^2); `min_loss` the fitted minimum; `loss_left` the loss the pick leaves on "
        "the table, the fitted curve at the pick minus its minimum, with its 95% CI. The CIs are profile-likelihood "
        f"intervals with {words.lr_noise}. Flags say where to read with care (`edge`: the lowest point at the end of the lrs "
        "tried; `ci_unbounded`; `optimum_outside_window`: an extrapolation; `confined`: a side's CI ends at a tried lr "
        "clearly above the lowest point, between which and the other side's the optimum lies; `against_tried`: the "
        "optimum's CI is unbounded, so `loss_left_ci_high` bounds what the pick leaves against every lr tried, jointly, "
        "from all the cell's runs there, not against a minimum beyond them). Table: "
        "`tables/lr_curves.csv`.")] + \
        _md(curves[["cell", "pick_lr", "optimum_lr", "optimum_lr_low", "optimum_lr_high", "curvature", "min_loss",
                    "loss_left", "loss_left_ci_low", "loss_left_ci_high", "flags"]], "lr_curves.csv", "cells")


def _side_by_side(view: TuningView) -> pd.DataFrame:
    """One row per effect: the tuned estimate, CI and call, then the estimate (and call) at each single setting."""
    out = view.effects.rename(columns={"estimate": "tuned_estimate", "ci_low": "tuned_ci_low", "ci_high": "tuned_ci_high",
                                "call": "tuned_call"})[["effect", "tuned_estimate", "tuned_ci_low", "tuned_ci_high",
                                                        "tuned_call"]]
    for setting in dict.fromkeys(view.fixed["setting"]):
        at = view.fixed[view.fixed["setting"] == setting].set_index("effect")
        text = [f"{at.at[e, 'estimate']:+.4f}" + (f" ({at.at[e, 'call']})" if at.at[e, "call"] else "")
                if e in at.index and math.isfinite(at.at[e, "estimate"]) else "n/a" for e in out["effect"]]
        out[f"at {setting}"] = text
    return out


def _md(df: pd.DataFrame, csv: str, what: str) -> list[Block]:
    """A tuning table, or a pointer to its CSV when it is long."""
    if len(df) <= MAX_MD_ROWS:
        return [Table(df)]
    return [Para(too_long(df, what, csv, calls=False))]
