"""The sentences of `tune:`: what was tuned on how many runs, where a fixed-setting study would have answered
otherwise, the picks on the edge of the space or beyond a stability cliff, the sensitivity's cap and the lr curves'
noise; or, for given picks, who chose them.

`TuneWords` is the report's `Sentences.kinds["tune"]`, from the kind's numbers (`tables.TuneTables`); the picks'
warnings also join the summary's (`tuning_warnings`, the kind's `warnings` hook). The words of the calls' tuning
check (whether each call survives the picks' loss left on the table) are the report's own (`sentences.sweeps`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from gptlab.kinds.tune.spec import tune_of
from gptlab.kinds.tune.tables import TuneTables, TuningView
from gptlab.report.fmt import fmt_loss
from gptlab.report.load import Results
from gptlab.stats.picks import pairs_text


@dataclass(frozen=True)
class TuneWords:
    """The sentences of a sweep with `tune:` (`Sentences.kinds["tune"]`)."""

    tuning_changes: list[str]  # where a study at one fixed setting would have answered otherwise
    tuning_warnings: list[str]  # picks on the edge of the tuned space, settings beyond a stability cliff
    given: str  # who chose the settings of a sweep with given picks ("" otherwise)
    tuned_design: str = ""  # what was tuned, on how many selection runs, and what the effects are on
    tuned_extra: str = ""  # the settings its selection runs have outside the space ("" if none)
    sensitivity_cap: str = ""  # the loss the LR sensitivity caps every loss at
    lr_noise: str = ""  # the lr curves: the noise their CIs use, or why they have none


def words(res: Results, numbers: TuneTables) -> TuneWords:
    """The kind's sentences from its numbers."""
    tuned = numbers.view
    if tuned is None:
        return TuneWords(tuning_changes=[], tuning_warnings=[], given=given_sentence(res, numbers.given))
    return TuneWords(tuning_changes=tuning_changes(tuned), tuning_warnings=tuning_warnings(tuned),
                     given=given_sentence(res, numbers.given), tuned_design=tuned_design(tuned, res),
                     tuned_extra=tuned_extra(tuned), sensitivity_cap=sensitivity_cap(tuned, res.unit),
                     lr_noise=lr_noise(tuned.curves, res.unit))


def tuning_changes(view: TuningView) -> list[str]:
    """One sentence per effect whose answer at some single setting differs from the tuned one.

    With calls on both sides (two or more selection seeds): where the call differs. With one
    selection seed the fixed side has no call: where its estimate lies outside the tuned 95% CI.
    """
    fixed, n_seeds = view.fixed, view.seeds
    out = []
    for t in view.effects.to_dict("records"):
        if not math.isfinite(t["estimate"]):
            continue
        ci = (f", 95% CI {fmt_loss(t['ci_low'])} to {fmt_loss(t['ci_high'])}, unadjusted"
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


def tuning_warnings(view: TuningView) -> list[str]:
    """A warning per cell whose pick lies on the edge of the tuned space (`tuning.csv`'s `at_edge`), and per cell
    with settings beyond its stability cliff (`beyond_cliff`)."""
    rows = view.table.to_dict("records")
    out = [f"the pick of {r['cell']} ({r['setting']}) lies on the edge of the tuned space: its best setting may lie "
           "beyond it, so widen tune.space and rerun" for r in rows if r["at_edge"]]
    cut: dict[str, list[str]] = {}
    for r in rows:
        if r.get("beyond_cliff") in (True,):  # a numpy bool compares equal
            cut.setdefault(r["cell"], []).append(str(r["setting"]))
    out += [f"{cell}: {', '.join(settings)} lie beyond a stability cliff (a run there did not train, and every "
            "higher lr is beyond it too): kept in `tables/tuning.csv` (`beyond_cliff`), left out of the pick, the lr "
            "curve and the noise" for cell, settings in cut.items()]
    return out + [_moved(r) for r in view.moved.to_dict("records")]


def _moved(r: dict) -> str:
    """Why a cell's pick is not where its estimation runs of an earlier pick are (tables/earlier_picks.csv)."""
    why = (f": a seed there lagged ({fmt_loss(r['worst_loss'])} against a median of {fmt_loss(r['median_loss'])}), a "
           "risk that lr carries: every run counted, the pick's mean is lower") if r["lagged"] else ""
    return (f"{r['cell']}: its pick is lr={r['pick_lr']:g}, not lr={r['earlier_lr']:g}, an earlier pick{why}; the "
            f"{r['runs']} estimation runs at lr={r['earlier_lr']:g} stay points of its lr curve and enter no effect "
            "(`tables/earlier_picks.csv`)")


def given_sentence(res: Results, given: pd.DataFrame) -> str:
    """Who chose the settings of a sweep with given picks (`tune.picks`), or "" for other sweeps."""
    if not len(given):
        return ""
    keys = [c for c in given.columns if c not in res.factors and c != "n_ok"]
    who = tune_of(res.spec).picked_by or "not recorded (`tune.picked_by` is empty)"
    return (f"Each cell's {', '.join(f'`{k}`' for k in keys)} was given by the sweep (`tune.picks`), not tuned here: "
            f"no selection runs, so nothing in this report chose it. Chosen by: {who}. The effects below compare the "
            "cells each at its own setting; they are the effects at those settings, only as good as that choice.")


def tuned_design(view: TuningView, res: Results) -> str:
    """What a tuned sweep tuned, on how many selection runs, and what its effects are on."""
    keys = ", ".join(f"`{k}`" for k in view.keys)
    sel = res.selection
    return (
        f"Every cell's {keys} was tuned on its own selection runs: {len(view.settings)} settings x {view.seeds} "
        f"seed(s) per cell (seeds 1,000,000 and up; {len(sel)} runs, {float(sel['wall_s'].sum()):.0f} s of compute, "
        "counted in the header's runs and compute). Each cell's pick is the setting with the lowest mean best val "
        "loss (a setting "
        "with a run that diverged or did not learn only when every setting has one). The estimation runs (seeds "
        f"{', '.join(map(str, res.seeds))}) then trained at each cell's pick; they alone make every effect, interaction "
        f"and call above, on the {res.outcome_label}: the effects at the tuned optima. The selection runs never "
        "enter them."
    )


def tuned_extra(view: TuningView) -> str:
    """The settings outside the tuned space the selection runs have ("" when none)."""
    if not view.extra:
        return ""
    return (f"The selection runs also have {len(view.extra)} setting(s) outside the space, at which some cells trained "
            f"(as a tuning method such as refine adds them): {', '.join(pairs_text(s) for s in view.extra[:12])}"
            f"{', ...' if len(view.extra) > 12 else ''}. `tables/tuning.csv`, the pick and the figure include them; the "
            "fixed-setting effects and the LR sensitivity use only the settings every cell trained at.")


def sensitivity_cap(view: TuningView, unit: str) -> str:
    """The loss the LR sensitivity caps every loss at: the selection runs' unigram loss, or why it is unknown."""
    return f"{fmt_loss(view.ceiling)} {unit}" if math.isfinite(view.ceiling) else "unknown (dataset not found)"


def lr_noise(curves: pd.DataFrame, unit: str) -> str:
    """The noise the lr curves' CIs are computed with (`tables/lr_curves.csv`), or why they have none."""
    if not len(curves):
        return ""
    df = curves["noise_df"].astype(float)
    sd, df = curves["noise_sd"].astype(float)[df > 0], df[df > 0]  # cells with a noise estimate
    pooled = int(curves["flags"].fillna("").astype(str).str.contains("pooled_noise").sum())
    return (f"each cell's own SD of one selection run ({sd.min():.4f} to {sd.max():.4f} {unit}, {int(df.min())} to "
            f"{int(df.max())} df: seeds repeated at one lr, the estimation runs at its pick among them, and its fit's "
            "spare points" + (f"; {pooled} cell(s) without df of their own use the pool over the cells, flag "
                              "`pooled_noise`" if pooled else "") + "), with t quantiles (docs/STATISTICS.md)"
            if len(df) else
            "no noise estimate (no cell has two runs at one lr and no fit has a spare point): no CIs")
