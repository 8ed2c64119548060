"""A ladder's numbers in the report: each arm's effect at every rung, its trend in compute, the ranking's agreement
between rungs, each arm's pick per rung, and each prediction beside what its rung then measured.

Every rung's effects are the report's own, computed on that rung alone (`RungReport`: its `Results` and
`ReportTables`, the calls and the tuning check included); the trends and the ranking are `gptlab.stats.ladder`'s
over them, never extrapolated beyond the rungs. Numbers only; rounded once, where the files are made.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from gptlab.kinds.ladder.measure import EFFECT, quantity_measured
from gptlab.kinds.ladder.spec import LadderSpec
from gptlab.report.fmt import round_frame
from gptlab.report.kinds import arm_quantities
from gptlab.stats.arms import ARM
from gptlab.stats.ladder import compute_doublings, fit_trend, pooled_dispersion, rank_agreement, trend_call

RUNG_COLS = ["rung", "params", "tokens", "flops", "doublings", "arm", "quantity", "estimate", "ci_low", "ci_high",
             "se", "df", "ratio", "call", "tuning", "pick"]
TREND_COLS = ["arm", "quantity", "rungs", "slope", "slope_low", "slope_high", "slope90_low", "slope90_high", "trend",
              "ratio"]
PREDICTION_COLS = ["rung", "arm", "quantity", "predicted", "pred_low", "pred_high", "measured", "measured_low",
                   "measured_high", "covered", "written_at", "started_after"]
RANK_COLS = ["rung_a", "rung_b", "arms", "tau", "tau_low", "tau_high"]
PICK_COLS = ["rung", "arm", "pick"]


@dataclass(frozen=True)
class RungReport:
    """One rung as the report reads it on its own: its name, its results and its tables (`Results`, `ReportTables`)."""

    name: str
    res: Any
    tables: Any


@dataclass(frozen=True)
class LadderView:
    """The ladder's tables (`tables/NAME.csv` by NAME in `files`), the rung the rest of the report is about."""

    rungs: pd.DataFrame  # rung_effects.csv: every arm at every rung that measured it (its effect, and its worth)
    trends: pd.DataFrame  # trends.csv: each arm's effect (and worth) against compute
    predictions: pd.DataFrame  # predictions.csv: each prediction beside its rung's measurement
    ranks: pd.DataFrame  # rank_agreement.csv: Kendall's tau of the arms' effects between rungs
    picks: pd.DataFrame  # lr_by_rung.csv: each arm's pick (the baseline's too) at every rung
    top: str  # the highest rung measured: the rest of the report is its
    margin: float  # per doubling of compute: the `holds` test of a trend
    ratio_margin: float  # a ratio's (worth's) relative change per doubling: its `holds` test
    unit: str

    def files(self) -> dict[str, pd.DataFrame]:
        return {"rung_effects": round_frame(self.rungs), "trends": round_frame(self.trends),
                "predictions": round_frame(self.predictions), "rank_agreement": round_frame(self.ranks),
                "lr_by_rung": self.picks}


def rung_effects(ladder: LadderSpec, reports: Sequence[RungReport]) -> pd.DataFrame:
    """Every arm's effect against the baseline at every rung, then the quantities the rung's kinds measure of it
    (`ArmQuantity`: `worth:`'s multiplier; a ratio's `se` is of its log), unrounded: the trends are fitted to these."""
    x = dict(zip([r.name for r in ladder.rungs], compute_doublings([r.flops for r in ladder.rungs])))
    rows = []
    for report in reports:
        rung, effects = ladder.rung(report.name), report.tables.effects
        if effects is None:
            continue
        at = {"rung": rung.name, "params": rung.params, "tokens": rung.tokens, "flops": rung.flops,
              "doublings": x[rung.name]}
        arms = report.tables.arms.set_index("arm") if len(report.tables.arms) else pd.DataFrame()
        for (_, row), test in zip(effects.main.iterrows(), effects.tests["main"]):
            if row["factor"] != ARM:
                continue
            arm = str(row["level"])
            said = arms.loc[arm] if arm in arms.index else {}
            rows.append({**at, "arm": arm, "quantity": EFFECT, "estimate": test.estimate, "ci_low": test.ci_low,
                         "ci_high": test.ci_high, "se": test.se, "df": test.df, "ratio": False,
                         "call": said.get("call", ""), "tuning": said.get("tuning", ""), "pick": said.get("pick", "")})
        for q in arm_quantities(report.res, report.tables):
            m = quantity_measured(q)
            rows.append({**at, "arm": q.arm, "quantity": q.quantity, "estimate": q.estimate, "ci_low": q.ci_low,
                         "ci_high": q.ci_high, "se": m.se if m is not None else np.nan, "df": q.df, "ratio": q.ratio,
                         "call": "", "tuning": "", "pick": ""})
    return pd.DataFrame(rows, columns=RUNG_COLS)


def effects_only(table: pd.DataFrame) -> pd.DataFrame:
    """rung_effects.csv's rows of the arms' effects (the ranking and the figure are of those)."""
    return table[table["quantity"] == EFFECT]


def trends(effects: pd.DataFrame, ladder: LadderSpec) -> pd.DataFrame:
    """Each arm's effect (and each other quantity) against log2 compute: its slope per doubling with CIs, and the
    call on it (2+ rungs) at the ladder's margin per doubling (a ratio's: on its log, at `ratio_margin`: a slope
    inside +/- log(1 + ratio_margin)); the dispersion the arms' together, per quantity (`pooled_dispersion`)."""
    parts = []
    for (arm, quantity), part in effects.groupby(["arm", "quantity"], sort=False):
        ratio = bool(part["ratio"].iloc[0])
        y = np.log(part["estimate"].astype(float).where(part["estimate"] > 0)) if ratio else part["estimate"]
        parts.append((arm, quantity, ratio, part, y))
    dispersion = {q: pooled_dispersion((p["doublings"], y, p["se"]) for _, q2, _, p, y in parts if q2 == q)
                  for q in {q for _, q, _, _, _ in parts}}
    rows = []
    for arm, quantity, ratio, part, y in parts:
        try:
            trend = fit_trend(part["doublings"], y, part["se"], part["df"], dispersion[quantity])
        except ValueError:
            continue
        margin = math.log1p(ladder.ratio_margin) if ratio else ladder.margin
        rows.append({"arm": arm, "quantity": quantity, "rungs": trend.rungs, "slope": trend.slope,
                     "slope_low": trend.slope_low, "slope_high": trend.slope_high, "slope90_low": trend.slope90_low,
                     "slope90_high": trend.slope90_high, "trend": trend_call(trend, margin), "ratio": ratio})
    return pd.DataFrame(rows, columns=TREND_COLS)


def rank_table(effects: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Kendall's tau of the arms' effects between each rung and the next, and between the lowest and the top."""
    effects = effects_only(effects)
    rungs = [r for r in order if r in set(effects["rung"])]
    pairs = list(zip(rungs, rungs[1:])) + ([(rungs[0], rungs[-1])] if len(rungs) > 2 else [])
    rows = []
    for a, b in pairs:
        ea, eb = (effects[effects["rung"] == r].set_index("arm") for r in (a, b))
        arms = [arm for arm in ea.index if arm in eb.index]
        if len(arms) < 2:
            continue
        agree = rank_agreement(ea.loc[arms, "estimate"], ea.loc[arms, "se"], eb.loc[arms, "estimate"],
                               eb.loc[arms, "se"])
        rows.append({"rung_a": a, "rung_b": b, "arms": agree.arms, "tau": agree.tau, "tau_low": agree.low,
                     "tau_high": agree.high})
    return pd.DataFrame(rows, columns=RANK_COLS)


def prediction_table(predictions: pd.DataFrame, effects: pd.DataFrame, started: dict[str, list[str]]) -> pd.DataFrame:
    """Each prediction of predictions.csv beside its rung's measurement (of its quantity: the effect, or a kind's);
    `covered`: the measured value lies in the prediction interval; `started_after`: how many of the rung's runs
    started after the prediction was written."""
    if predictions.empty:
        return pd.DataFrame(columns=PREDICTION_COLS)
    measured = effects.set_index(["rung", "arm", "quantity"])
    rows = []
    for _, p in predictions.iterrows():
        key = (str(p["rung"]), str(p["arm"]), str(p.get("quantity") or EFFECT))
        m = measured.loc[key] if key in measured.index else None
        value = float(m["estimate"]) if m is not None else np.nan
        times = started.get(key[0], [])
        after = sum(bool(t) and t >= str(p["written_at"]) for t in times)
        rows.append({**{c: p[c] for c in ("rung", "arm", "quantity", "predicted", "pred_low", "pred_high")},
                     "measured": value, "measured_low": m["ci_low"] if m is not None else np.nan,
                     "measured_high": m["ci_high"] if m is not None else np.nan,
                     "covered": "" if m is None else "yes" if p["pred_low"] <= value <= p["pred_high"] else "no",
                     "written_at": p["written_at"], "started_after": f"{after} of {len(times)}"})
    return pd.DataFrame(rows, columns=PREDICTION_COLS)


def pick_table(reports: Sequence[RungReport], keys: Sequence[str]) -> pd.DataFrame:
    """Each arm's pick at every rung: the tuned settings of its estimation runs (`keys`: the tuned keys)."""
    rows = []
    for report in reports:
        runs = report.res.runs
        for arm, part in runs.groupby(ARM, sort=False):
            text = "; ".join(f"{k.split('.')[-1]}={v}" for k in keys if k in part
                             for v in dict.fromkeys(part[k].astype(str)))
            rows.append({"rung": report.name, "arm": arm, "pick": text})
    return pd.DataFrame(rows, columns=PICK_COLS)
