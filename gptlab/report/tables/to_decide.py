"""What would decide each inconclusive effect: `tables/to_decide.csv`, seeds and test split for a CI of +/- the margin.

One row per effect called `inconclusive` (after the tuning check) among the effects the report makes calls on:
a grid's main effects and two-way interactions, an arms design's arms against the baseline (per scale level
where the sweep has `scale:`). The numbers are `stats.to_decide`'s, from the parts of each effect's error its
analysis kept (`Analysis.parts`): the seeds per arm (or cell) at today's test split that give a 95% CI of
+/- the margin (the baseline of an arms design at Dunnett's sqrt(k) per arm seed), the half-width the text
alone leaves, and, where no number of seeds reaches the margin, the least test split and the recommended one
(`data.test_fraction`) with the seeds it would then need.

A tuned sweep's effect that `depends on the picks` (the tuning check, `stats.robustness`) gets a row too:
the cell whose loss left on the table keeps the call from holding (`tuning_cell`), and from that cell's
curve (`tables/lr_curves.csv`, the `tune:` kind's, through its `to_decide` hook) the side where its optimum is
open (`open_side`: low or high, where its CI reaches lr 0 or inf) with the lr one coarse step beyond its window
there (`try_lr`: a selection run there, clearly above the pick, would close it), or, where both sides are closed,
the upper end of the loss its pick may leave (`loss_left_high`: more selection seeds next to the pick narrow it).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Mapping

import pandas as pd

from gptlab.report.fmt import round_frame
from gptlab.report.load import Results
from gptlab.report.tables.scale import slices
from gptlab.stats.arms import ARM, baseline_seed_count
from gptlab.stats.calls import INCONCLUSIVE
from gptlab.stats.effects import Analysis
from gptlab.stats.robustness import DEPENDS
from gptlab.stats.to_decide import Decision, ErrorParts, decide

TO_DECIDE_COLS = ["effect", "estimate", "ci_low", "ci_high", "ci95", "seeds", "seeds_needed", "baseline_seeds_needed",
                  "text_ci95", "test_fraction", "test_fraction_min", "test_fraction_needed", "seeds_at_test_fraction",
                  "baseline_seeds_at_test_fraction", "call", "tuning_cell", "open_side", "try_lr", "loss_left_high"]


def test_fraction(res: Results) -> float:
    """The test split the effects were scored on (`data.test_fraction`; NaN: none, or not one for every run)."""
    if not res.has_test_split:
        return math.nan
    if "data.test_fraction" in res.spec.grid or "data.test_fraction" in res.factors:
        return math.nan
    fraction = float(res.fixed("data.test_fraction"))
    return fraction if fraction > 0 else math.nan


def to_decide_table(res: Results, effects: Analysis | None, main: pd.DataFrame, interactions: pd.DataFrame,
                    arms: pd.DataFrame, at_picks: Callable[[str], Mapping[str, Any]] = lambda cell: {}) -> pd.DataFrame:
    """One row per inconclusive effect and per effect that depends on the picks (see the module docstring): the
    latter's `open_side`, `try_lr` and `loss_left_high` are what `at_picks` gives for its tuning cell (the tuning
    kind's, from that cell's curve)."""
    fraction = test_fraction(res)
    n_arms = len(res.levels.get(ARM, [])) - 1
    rows = []
    for label, r, parts in _inconclusive(res, effects, main, interactions, arms):
        d = decide(parts, res.margin, fraction)
        rows.append({"effect": label, **{k: r[k] for k in ("estimate", "ci_low", "ci_high")},
                     **_numbers(d, n_arms if res.arms else 0), "call": INCONCLUSIVE})
    for label, r in _depending(res, main, arms):
        rows.append({"effect": label, **{k: r[k] for k in ("estimate", "ci_low", "ci_high")}, "call": DEPENDS,
                     **_at_picks(str(r.get("tuning_cell") or ""), at_picks)})
    return round_frame(pd.DataFrame(rows, columns=TO_DECIDE_COLS))


def _depending(res: Results, main: pd.DataFrame, arms: pd.DataFrame) -> Iterator[tuple[str, dict]]:
    """(label, row) of every effect whose call depends on the picks (arms, else the main effects)."""
    if res.arms:
        for r in arms.to_dict("records"):
            if r["call"] == DEPENDS and not isinstance(r.get("scale_factor"), str):
                yield f"{res.label(ARM, r[ARM])} vs {res.label(ARM, r['baseline'])}", r
        return
    for r in main.to_dict("records"):
        if r.get("call") == DEPENDS:
            yield f"{res.label(r['factor'], r['level'])} vs {res.label(r['factor'], r['baseline'])}", r


def _at_picks(cell: str, at_picks: Callable[[str], Mapping[str, Any]]) -> dict:
    """The row's columns for an effect that depends on the picks: its tuning cell, and what `at_picks` says of it."""
    return {"tuning_cell": cell, "open_side": "", "try_lr": math.nan, "loss_left_high": math.nan,
            **(at_picks(cell) if cell else {})}


def _numbers(d: Decision, n_arms: int) -> dict:
    def seeds(n: int | None) -> float:
        return math.nan if n is None else float(n)

    def baseline(n: int | None) -> float:  # an arms design: the baseline's seeds at Dunnett's ratio
        return math.nan if n is None or not n_arms else float(baseline_seed_count(n, n_arms))
    return {"ci95": d.half_width, "seeds": d.seeds, "seeds_needed": seeds(d.seeds_needed),
            "baseline_seeds_needed": baseline(d.seeds_needed), "text_ci95": d.text_half_width,
            "test_fraction": d.test_fraction, "test_fraction_min": d.test_fraction_min,
            "test_fraction_needed": d.test_fraction_needed, "seeds_at_test_fraction": seeds(d.seeds_at_fraction),
            "baseline_seeds_at_test_fraction": baseline(d.seeds_at_fraction)}


def _inconclusive(res: Results, effects: Analysis | None, main: pd.DataFrame, interactions: pd.DataFrame,
                  arms: pd.DataFrame) -> Iterator[tuple[str, dict, ErrorParts]]:
    """(label, the effect's row, its error's parts) of every inconclusive effect that has parts."""
    if res.arms:
        by_level = _slice_parts(res) if res.scale else {}
        for r in arms.to_dict("records"):
            if r["call"] != INCONCLUSIVE:
                continue
            at = r.get("scale_factor") if isinstance(r.get("scale_factor"), str) else ""
            parts = by_level.get((at, str(r["scale_level"]), r[ARM])) if at else _parts_of(effects, ARM, r[ARM])
            label = f"{res.label(ARM, r[ARM])} vs {res.label(ARM, r['baseline'])}"
            if parts is not None:
                yield label + (f" at {res.label(at, r['scale_level'])}" if at else ""), r, parts
        return
    for r in main.to_dict("records"):
        parts = _parts_of(effects, r["factor"], r["level"])
        if r["call"] == INCONCLUSIVE and parts is not None:
            yield f"{res.label(r['factor'], r['level'])} vs {res.label(r['factor'], r['baseline'])}", r, parts
    int_parts = effects.parts.get("int", []) if effects is not None else []
    for r, parts in zip(interactions.to_dict("records"), int_parts):
        if r["call"] == INCONCLUSIVE and parts is not None:
            yield f"{res.label(r['factor_a'], r['level_a'])} x {res.label(r['factor_b'], r['level_b'])}", r, parts


def _parts_of(a: Analysis | None, factor: str, level: str) -> ErrorParts | None:
    """The parts of the main-effects row of `factor`=`level` in `a` (None when it has none)."""
    if a is None:
        return None
    for i, r in enumerate(a.main[["factor", "level"]].itertuples(index=False)):
        if (r.factor, str(r.level)) == (factor, str(level)):
            return a.parts.get("main", [None] * (i + 1))[i]
    return None


def _slice_parts(res: Results) -> dict[tuple[str, str, str], ErrorParts | None]:
    """Each arm's parts in each scale slice, by (scale factor, level, arm): the slices' own analyses."""
    out = {}
    for s, level, _, a in slices(res, None):
        for lv in a.main["level"]:
            out[s, str(level), str(lv)] = _parts_of(a, ARM, lv)
    return out
