"""The numbers of an arms sweep (`arms:` in sweep.yaml): each arm against the baseline, and the scorecard.

Owns, for a one-at-a-time design (`gptlab.sweep.arms_spec`):

- `tables/arms.csv`: one row per arm (per scale level with `scale:`): the arm minus the baseline on the
  report's outcome, its CIs, Holm-adjusted p and call, from the same analysis as a grid's effects
  (`stats.effects`, without the seed block: `stats.arms`), its tuning check, run counts and pick, and what
  failure costs it there: the 95% Clopper-Pearson interval of its failure rate among its runs at the pick
  (`failure_rate_low`, `failure_rate_high`, of `n_diverged` failures to train beside `n_ok`), and its effect
  counting every run (`estimate_all_runs` with its CI: a collapsed or unstable run at its own loss, a
  diverged one at the unigram loss of the scored split), from the same model. Its rows per scale level and
  its `pick` are the kinds': `scale:`'s slices and `tune:`'s picks (`gptlab.report.tables.per_level`, `picks`).
- `tables/scorecard.csv`: one row per claim recorded for an arm (`claims:`; an arm without one gets a
  row saying so): the claim beside the arm's tuned effect with its CI, call and tuning check, and the verdict
  (`stats.scorecard`); the kinds add their columns (its effect at the untuned setting, `tune:`'s; its worth,
  `worth:`'s; its transfer to another scale level, `scale:`'s).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from gptlab.report.fmt import round_frame
from gptlab.report.load import Results
from gptlab.report.tables.analyses import analyse_runs
from gptlab.report.tables.scale import effects_by_scale
from gptlab.stats.arms import ARM
from gptlab.stats.calls import DECISIVE
from gptlab.stats.robustness import DEPENDS, ROBUST
from gptlab.stats.scorecard import NOT_TESTED, verdict
from gptlab.statuses import DIVERGED, FAILED_TO_TRAIN, OK

ARMS_COLS = ["arm", "baseline", "estimate", "ci_low", "ci_high", "ci95", "ci90_low", "ci90_high", "p_value",
             "p_adjusted", "call", "text_share", "df", "variance", "tuning", "call_at_picks", "tuning_shift",
             "tuning_cell", "tuning_p", "mde80", "n_ok", "n_ok_baseline",
             "n_diverged", "n_failed", "failure_rate_low", "failure_rate_high", "estimate_all_runs", "ci_low_all_runs",
             "ci_high_all_runs", "pick"]
FAILURE_COST = ["n_ok", "n_diverged", "failure_rate_low", "failure_rate_high", "estimate_all_runs", "ci_low_all_runs",
                "ci_high_all_runs"]  # what failure costs an arm at its pick (after the run counts, before `pick`)
SCALE_COLS = ["scale_factor", "scale_level"]
SCORECARD_COLS = ["arm", "source", "setting", "claim", "direction", "size", "about", "untuned_setting",
                  "untuned_estimate", "estimate", "ci_low", "ci_high", "call", "call_at_picks", "tuning", "verdict", "reason"]


def arms_table(res: Results, main: pd.DataFrame, by_scale: pd.DataFrame, picks: Mapping[tuple[str, ...], str]
               ) -> pd.DataFrame:
    """Each arm against the baseline (per scale level where the sweep has `scale:`: `by_scale`'s rows), its `pick` the
    setting `picks` names for its levels (arm, scale level); empty for a grid."""
    if not res.arms:
        return pd.DataFrame(columns=ARMS_COLS)
    if res.scale:
        rows = by_scale[by_scale["factor"] == ARM].rename(columns={"level": ARM})
        cols = [ARM, "baseline", *SCALE_COLS] + [c for c in ARMS_COLS[2:] if c in rows or c in FAILURE_COST]
        out = rows.reindex(columns=cols).copy()
        out["pick"] = [picks.get((a, str(s)), "") for a, s in zip(out[ARM], out["scale_level"])]
    else:
        rows = main[main["factor"] == ARM].rename(columns={"level": ARM})
        out = rows.reindex(columns=ARMS_COLS).copy()
        out["pick"] = [picks.get((a,), "") for a in out[ARM]]
    return round_frame(with_failure_cost(res, out.reset_index(drop=True)))


def _key(res: Results, r: dict[str, Any]) -> tuple[str, ...]:
    return (str(r[ARM]), str(r["scale_level"])) if res.scale else (str(r[ARM]),)


def with_failure_cost(res: Results, arms: pd.DataFrame) -> pd.DataFrame:
    """`arms` with each arm's failures at its pick (counts and the 95% Clopper-Pearson interval of the rate) and
    its effect counting every run at the pick: the estimate from the same model as `estimate`, its CI the union of
    that model's over every run and of what the failure rates' intervals allow (`_failure_bounds`)."""
    runs = res.runs
    counted = runs["ok"] | runs["status"].isin(FAILED_TO_TRAIN)
    arms = arms.copy()
    rates = {}
    for name in dict.fromkeys([*arms.get("baseline", pd.Series(dtype=str)).astype(str), *arms[ARM].astype(str)]):
        for level in ([None] if not res.scale else list(dict.fromkeys(arms["scale_level"].astype(str)))):
            mine = runs[counted & (runs[ARM].astype(str) == str(name))]
            if level is not None:
                mine = mine[mine[res.scale[0]].astype(str) == level]
            rates[(str(name), level)] = _failure_rate(mine, res.outcome)
    for i, r in arms.iterrows():
        n_ok, n_failed, low, high, _ = rates[(str(r[ARM]), str(r["scale_level"]) if res.scale else None)]
        arms.loc[i, ["n_ok", "n_diverged", "failure_rate_low", "failure_rate_high"]] = [n_ok, n_failed, low, high]
    all_runs = _all_runs_effects(res, runs[counted]) if (~runs.loc[counted, "ok"]).any() else {}
    for i, r in arms.iterrows():
        est, lo, hi = all_runs.get(_key(res, r.to_dict()), (r["estimate"], r["ci_low"], r["ci_high"]))
        level = str(r["scale_level"]) if res.scale else None
        base = str(r["baseline"]) if isinstance(r.get("baseline"), str) else res.spec.arms.baseline
        b_lo, b_hi = _failure_bounds(r, rates[(str(r[ARM]), level)], rates.get((base, level)), res.ceiling)
        arms.loc[i, ["estimate_all_runs", "ci_low_all_runs", "ci_high_all_runs"]] = [
            est, float(np.fmin(lo, b_lo)), float(np.fmax(hi, b_hi))]
    return arms.astype({"n_ok": "Int64", "n_diverged": "Int64"})


def _failure_rate(mine: pd.DataFrame, outcome: str) -> tuple[int, int, float, float, float]:
    """(runs that trained, runs that failed, the failure rate's 95% Clopper-Pearson interval, the trained runs' mean
    loss) of one arm's runs at its pick."""
    n_ok, n_failed = int(mine["ok"].sum()), int((~mine["ok"]).sum())
    low, high = proportion_confint(n_failed, n_ok + n_failed, alpha=0.05, method="beta") \
        if n_ok + n_failed else (math.nan, math.nan)
    ok_mean = float(pd.to_numeric(mine.loc[mine["ok"], outcome], errors="coerce").mean()) if n_ok else math.nan
    return n_ok, n_failed, float(low), float(high), ok_mean


def _failure_bounds(row: pd.Series, arm: tuple, base: tuple | None, ceiling: float) -> tuple[float, float]:
    """What the arm's expected effect counting every run may be, given the effect among the runs that trained (its
    CI) and each side's failure rate (its interval), a failed run counted at the ceiling at worst: the CI's ends
    moved by q (ceiling - the trained runs' mean) for the arm, less the same for the baseline. A handful of runs
    that all trained do not show an arm never fails (0 of 5: a rate up to 0.52), and this says what that allows.
    (nan, nan) where a side has no trained run or the ceiling is unknown."""
    if base is None or not math.isfinite(ceiling) or not all(map(math.isfinite, (arm[4], base[4]))):
        return math.nan, math.nan
    room_arm, room_base = max(ceiling - arm[4], 0.0), max(ceiling - base[4], 0.0)
    low = float(row["ci_low"]) + arm[2] * room_arm - base[3] * room_base
    high = float(row["ci_high"]) + arm[3] * room_arm - base[2] * room_base
    return low, high


def _all_runs_effects(res: Results, runs: pd.DataFrame) -> dict[tuple[str, ...], tuple[float, float, float]]:
    """(arm[, scale level]) -> the arm's effect with every run counted: a failed run at its own loss where it has a
    finite one, a diverged run (or one without a loss) at the ceiling, the unigram loss of the scored split."""
    own = pd.to_numeric(runs[res.outcome], errors="coerce")
    value = np.where(runs["ok"] | ((runs["status"] != DIVERGED) & np.isfinite(own)), own, res.ceiling)
    counted = dataclasses.replace(res, runs=runs.assign(ok=True, status=OK, **{res.outcome: value}))  # all as if ok
    if res.scale:
        rows = effects_by_scale(counted)
        rows = rows[rows["factor"] == ARM].rename(columns={"level": ARM})
        return {_key(res, r): (r["estimate"], r["ci_low"], r["ci_high"]) for r in rows.to_dict("records")}
    a = analyse_runs(counted, counted.runs, res.outcome, blocks=True)
    rows = a.main[a.main["factor"] == ARM].rename(columns={"level": ARM}) if a is not None else pd.DataFrame()
    return {_key(res, r): (r["estimate"], r["ci_low"], r["ci_high"]) for r in rows.to_dict("records")}


def scorecard_table(res: Results, arms: pd.DataFrame) -> pd.DataFrame:
    """Every recorded claim beside its arm's tuned effect, and the verdict; empty for a grid.

    With a scale factor, one row per claim and scale level. A kind of sweep fills or adds its columns through its
    `scorecard` hook (`gptlab.report.kinds`: `tune:` the untuned setting and effect, `scale:` each row's `transfer`,
    `worth:` each arm's worth)."""
    if not res.arms or not len(arms):
        return pd.DataFrame(columns=SCORECARD_COLS)
    claims = res.spec.arms.claims if res.spec.arms is not None else {}
    rows = []
    for effect in arms.to_dict("records"):
        arm = effect[ARM]
        at = {k: effect[k] for k in SCALE_COLS if k in effect}  # one scale factor: (scale_factor, scale_level)
        for claim in claims.get(arm) or [None]:
            direction = claim.direction if claim else None
            about = claim.about if claim else "quality"
            call = str(effect.get("call") or "")  # after the tuning check
            rows.append({"arm": arm, **at, **{k: (getattr(claim, k) if claim else "") for k in
                                              ("source", "setting", "claim", "direction", "size")},
                         "about": about if claim else "", "untuned_setting": "", "untuned_estimate": math.nan,
                         "estimate": effect["estimate"],
                         "ci_low": effect["ci_low"], "ci_high": effect["ci_high"], "call": effect["call"],
                         "call_at_picks": effect.get("call_at_picks", ""), "tuning": effect.get("tuning", ""),
                         "verdict": verdict(direction, about, call, uncertified(effect)),
                         "reason": NOT_TESTED.get(about, "") if claim else ""})
    cols = SCORECARD_COLS[:1] + (SCALE_COLS if res.scale else []) + SCORECARD_COLS[1:]
    return pd.DataFrame(rows, columns=cols)


def uncertified(effect: dict[str, Any]) -> str | None:
    """An effect's call at the picks where the tuning check did not certify its call: the call depends on the picks,
    or it is a decided call whose picks' loss left has no bound (tuning `not checked`); None where it did or nothing was tuned."""
    at = effect.get("call_at_picks")
    if not isinstance(at, str) or not at:  # no tuning check ran (an untuned sweep)
        return None
    call = str(effect.get("call") or "")
    if call == DEPENDS or (call in DECISIVE and effect.get("tuning") != ROBUST):
        return at
    return None


