"""The report's analyses of a sweep's runs: which runs enter which analysis, and the tables they give.

Owns the cell and level tables, the effects of any column over any runs (`analyse_runs`, the
report's one way into `gptlab.stats.effects`), effects at every evaluated step, marginal means,
divergence and the ceiling sensitivity analysis, each rounded once with `fmt.round_frame`. Numbers
only: the sentences about them are `sentences`', the bundle of one report is `tables`'.

Which runs count: runs with status "ok" enter the cell means, effects and curves. Runs that
failed to train (`statuses.FAILED_TO_TRAIN`: diverged, collapsed or unstable, from their own curves)
are data too: counted together as `n_diverged`, their rate per cell (Clopper-Pearson 95% CI) is
reported, and a sensitivity analysis repeats the effects with each of them counted at a ceiling
loss (the unigram loss of the validation split, the loss of a model that learned only character
frequencies). Failed runs (crashes: status "failed" or anything else) say nothing about the
architecture and are only listed. A cell with no ok run leaves the design; the effects that
needed it are then reported as not estimable.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Mapping

import numpy as np
import pandas as pd
from scipy import stats as st
from statsmodels.stats.proportion import proportion_confint

from gptlab.report.fmt import round_frame
from gptlab.report.load import Results
from gptlab.stats.calls import ALPHA
from gptlab.stats.design import Design
from gptlab.stats.effects import Analysis, analyse
from gptlab.statuses import FAILED_TO_TRAIN

LN2 = math.log(2.0)


def mean_ci(values: pd.Series) -> tuple[float, ...]:
    """Mean and half-width of its 95% t confidence interval (NaN with fewer than 2 values)."""
    v = pd.Series(values, dtype=float).dropna()
    if v.empty:
        return math.nan, math.nan
    if len(v) < 2:
        return float(v.mean()), math.nan
    if v.nunique() == 1:  # no spread: a zero-width interval (scipy warns on scale 0)
        return float(v.iloc[0]), 0.0
    lo, hi = st.t.interval(1 - ALPHA, len(v) - 1, loc=v.mean(), scale=st.sem(v))
    return float(v.mean()), float((hi - lo) / 2)


def status_counts(runs: pd.DataFrame) -> dict[str, int]:
    """Runs that failed to train (`n_diverged`: diverged, collapsed or unstable) and failed (any other non-ok status)."""
    diverged = runs["status"].isin(FAILED_TO_TRAIN)
    return {"n_diverged": int(diverged.sum()), "n_failed": int((~runs["ok"] & ~diverged).sum())}


def cell_table(res: Results) -> pd.DataFrame:
    """One row per cell, ranked by the mean of the study's outcome (best val or test loss; ok runs only); baseline marked."""
    rows = []
    for cell in res.cells.to_dict("records"):
        runs = res.runs[res.runs["cell"] == cell["cell"]]
        ok = runs[runs["ok"]]
        m, ci = mean_ci(ok["best_val_loss"])
        bpc, bpc_ci = mean_ci(ok["best_val_bpc"]) if ok["best_val_bpc"].notna().all() and len(ok) else (m / LN2, ci / LN2)
        params = runs["params"].dropna()
        rows.append({**{f: cell[f] for f in res.factors}, "cell": cell["cell"], "baseline": bool(cell["is_baseline"]),
                     "best_val_loss": m, "best_val_loss_ci95": ci, "best_val_bpc": bpc,
                     "best_val_bpc_ci95": bpc_ci, "best_step": ok["best_step"].mean(),
                     "final_val_loss": ok["final_val_loss"].mean(),
                     "gap": (ok["final_val_loss"] - ok["final_train_loss"]).mean(),
                     "params": params.iloc[0] if len(params) else math.nan,
                     "tokens_per_sec": ok["tokens_per_sec"].mean(), "wall_s": ok["wall_s"].mean(),
                     "n_seeds": len(ok), "n_runs": len(runs), **status_counts(runs),
                     **(_test_columns(ok) if res.has_test_split else {})})
    df = pd.DataFrame(rows)
    # Ranked on the study's outcome: a sweep with a test split is decided on test loss, so its best cell is too.
    df = df.sort_values(res.outcome, kind="stable", na_position="last").reset_index(drop=True)
    df.insert(0, "rank", pd.array([i + 1 if not math.isnan(v) else None for i, v in enumerate(df[res.outcome])],
                                  dtype="Int64"))
    return round_frame(df)


def _test_columns(ok: pd.DataFrame) -> dict[str, float]:
    """The outcome of a sweep with a test split, last in the cells table: mean test loss (and bpc) with CIs."""
    m, ci = mean_ci(ok["best_test_loss"])
    bpc, bpc_ci = mean_ci(ok["best_test_bpc"]) if ok["best_test_bpc"].notna().all() and len(ok) else (m / LN2, ci / LN2)
    return {"best_test_loss": m, "best_test_loss_ci95": ci, "best_test_bpc": bpc, "best_test_bpc_ci95": bpc_ci}


def level_table(res: Results) -> pd.DataFrame:
    """Raw mean best val loss (95% CI over ok runs) and run counts for every level of every factor."""
    rows = []
    for f in res.factors:
        for lvl in res.levels[f]:
            runs = res.runs[res.runs[f] == lvl]
            m, ci = mean_ci(runs.loc[runs["ok"], "best_val_loss"])
            rows.append({"factor": f, "level": lvl, "baseline": lvl == res.baseline[f], "best_val_loss": m,
                         "ci_low": m - ci, "ci_high": m + ci, "n_ok": int(runs["ok"].sum()), "n_runs": len(runs),
                         **status_counts(runs)})
    return round_frame(pd.DataFrame(rows, columns=["factor", "level", "baseline", "best_val_loss", "ci_low",
                                                   "ci_high", "n_ok", "n_runs", "n_diverged", "n_failed"]))


FAILURE_COLS = ["run_id", "cell", "seed", "status", "error", "diverged_step", "best_val_loss", "best_step", "wall_s"]


def failure_table(res: Results) -> pd.DataFrame:
    """Every run whose status is not ok, with its error and (if any) the step where it diverged."""
    bad = res.runs.loc[~res.runs["ok"], FAILURE_COLS].copy()
    order = {c: i for i, c in enumerate(res.cells["cell"])}
    bad = bad.sort_values(["cell", "seed"], key=lambda s: s.map(order) if s.name == "cell" else s)
    return round_frame(bad.reset_index(drop=True))


def design_for(res: Results, runs: pd.DataFrame) -> Design:
    """The design of `runs`: the sweep's factors, levels and baseline, and the cells that have a run."""
    seen = set(map(tuple, runs[res.factors].to_numpy().tolist()))
    cells = tuple(c for c in map(tuple, res.cells[res.factors].to_numpy().tolist()) if c in seen)
    return Design(tuple(res.factors), {f: tuple(res.levels[f]) for f in res.factors}, dict(res.baseline), cells)


def analyse_runs(res: Results, runs: pd.DataFrame, y: str, endpoint: bool = True,
                 blocks: bool = False, loss_left: Mapping[tuple[str, ...], tuple[float, ...]] | None = None
                 ) -> Analysis | None:
    """Effects of column `y` over `runs` (rows with a finite value), called at `res.margin`; None when no run has one.

    `blocks`: the CIs count the test text's blocks too when the results have them (`y` is then the test
    loss, or a value that replaces it, such as the ceiling of a diverged run, counted in every block).
    `loss_left`: a tuned sweep's per-cell loss its pick leaves on the table, (estimate, upper end of its 95% CI)
    (the tuning kind's, `ReportKind.loss_left`): every call is checked against it (`stats.robustness`).
    """
    runs = runs[np.isfinite(runs[y].astype(float))]
    if runs.empty or not res.factors:
        return None
    cells = list(map(tuple, runs[res.factors].to_numpy().tolist()))
    first = res.error_seeds  # adaptive seeds: the error of the first round alone (Stein; docs/SEEDS_AND_TUNING.md
    first_round = res.first_seeds(runs, first).to_numpy() if first is not None else None  # says why even at the max)
    text = res.test_blocks.for_runs(runs["run_id"], runs[y]) if blocks else None
    design = design_for(res, runs)
    left = None if loss_left is None else np.array([loss_left.get(tuple(c), (np.nan,) * 3) for c in design.cells],
                                                   float).reshape(len(design.cells), 3)
    a = analyse(runs[y].to_numpy(float), cells, runs["seed"].to_numpy(), design, res.label,
                res.margin, endpoint, error_mask=first_round, blocks=text, loss_left=left,
                block_seeds=not res.arms,  # arms: the baseline's extra seeds have no partner,
                own_variance=bool(res.arms))  # and each arm keeps its own variance (`stats.arms`)
    if left is None:
        return a
    names = [", ".join(res.label(f, lv) for f, lv in zip(design.factors, c)) for c in design.cells]
    name = lambda i: names[int(i)] if i == i else ""  # noqa: E731 (NaN: no cell to name)
    return dataclasses.replace(a, **{f: getattr(a, f).assign(tuning_cell=getattr(a, f)["tuning_cell"].map(name))
                                     for f in ("main", "interactions", "higher", "simple", "cells_vs_baseline",
                                               "aliases") if "tuning_cell" in getattr(a, f)})


def with_counts(res: Results, main: pd.DataFrame) -> pd.DataFrame:
    """Add n_ok, n_ok_baseline, n_diverged, n_failed per level to the main-effects table."""
    main = main.copy()
    extra = []
    for r in main.to_dict("records"):
        runs, base = res.runs[res.runs[r["factor"]] == r["level"]], res.runs[res.runs[r["factor"]] == r["baseline"]]
        extra.append({"n_ok": int(runs["ok"].sum()), "n_ok_baseline": int(base["ok"].sum()), **status_counts(runs)})
    return pd.concat([main.reset_index(drop=True), pd.DataFrame(extra, columns=["n_ok", "n_ok_baseline",
                                                                             "n_diverged", "n_failed"])], axis=1)


BY_STEP_COLS = ["factor", "level", "step", "estimate", "ci_low", "ci_high", "p_value", "p_adjusted", "call"]
CURVE_COLS = ["factor", "level", "step", "mean", "ci_low", "ci_high"]


def by_step(res: Results) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Main effects (full factorial) or cells against the baseline (other designs) at every evaluated
    step, each step its own Holm family; and marginal mean val loss per level per step."""
    curves = res.curves[res.curves["ok"].astype(bool)]
    if curves.empty or not res.factors:
        return pd.DataFrame(columns=BY_STEP_COLS), pd.DataFrame(columns=CURVE_COLS)
    info = res.runs.set_index("run_id")[res.factors]
    rows, level_rows = [], []
    for step, at in curves.groupby("step", sort=True):
        runs = at.join(info, on="run_id")
        a = analyse_runs(res, runs, "val_loss", endpoint=False)
        if a is None or not a.fit.has_error:
            continue
        for r in a.main.to_dict("records") if a.design.full_factorial else []:
            rows.append({**r, "step": step})
        for r in a.cells_vs_baseline.to_dict("records"):
            rows.append({**r, "factor": "cell", "level": r["cell"], "step": step})
        for f in res.factors:
            for lv in res.levels[f]:
                t = a.fit.test(_level_weights(a.design, f, lv))
                level_rows.append({"factor": f, "level": lv, "step": step, "mean": t.estimate,
                                   "ci_low": t.ci_low, "ci_high": t.ci_high})
    return (round_frame(pd.DataFrame(rows, columns=BY_STEP_COLS)),
            round_frame(pd.DataFrame(level_rows, columns=CURVE_COLS)))


def _level_weights(design: Design, factor: str, level: str) -> np.ndarray | None:
    """Marginal mean of a level: equal weights over the other factors (or over its cells with data)."""
    c = design.marginal({factor: level})
    if c is not None:
        return c
    i = design.factors.index(factor)
    has = np.array([cell[i] == level for cell in design.cells], dtype=float)
    return has / has.sum() if has.sum() else None


PAIR_COLS = ["factor_a", "level_a", "factor_b", "level_b", "mean", "ci_low", "ci_high"]


def pair_means(res: Results, a: Analysis | None) -> pd.DataFrame:
    """Marginal mean best val loss of every pair of levels of every pair of factors (full factorials)."""
    rows = []
    if a is not None and a.design.full_factorial and a.fit.has_error:
        for i, fa in enumerate(res.factors):
            for fb in res.factors[i + 1:]:
                for la in res.levels[fa]:
                    for lb in res.levels[fb]:
                        t = a.fit.test(a.design.marginal({fa: la, fb: lb}))
                        rows.append({"factor_a": fa, "level_a": la, "factor_b": fb, "level_b": lb,
                                     "mean": t.estimate, "ci_low": t.ci_low, "ci_high": t.ci_high})
    return pd.DataFrame(rows, columns=PAIR_COLS)


DIVERGENCE_COLS = ["cell", "n_runs", "n_ok", "n_diverged", "n_failed", "divergence_rate", "rate_ci_low",
                   "rate_ci_high"]


def divergence_table(res: Results) -> pd.DataFrame:
    """Divergence rate per cell among runs that did not crash, with a Clopper-Pearson 95% CI."""
    rows = []
    for cell in res.cells["cell"]:
        runs = res.runs[res.runs["cell"] == cell]
        counts = status_counts(runs)
        n = int(runs["ok"].sum()) + counts["n_diverged"]
        lo, hi = proportion_confint(counts["n_diverged"], n, alpha=ALPHA, method="beta") if n else (math.nan,) * 2
        rows.append({"cell": cell, "n_runs": len(runs), "n_ok": int(runs["ok"].sum()), **counts,
                     "divergence_rate": counts["n_diverged"] / n if n else math.nan,
                     "rate_ci_low": lo, "rate_ci_high": hi})
    return round_frame(pd.DataFrame(rows, columns=DIVERGENCE_COLS))


SENSITIVITY_COLS = ["effect", "estimate", "call", "estimate_at_ceiling", "ci_low_at_ceiling",
                    "ci_high_at_ceiling", "call_at_ceiling"]


def sensitivity(res: Results, a: Analysis | None) -> pd.DataFrame:
    """Main effects (or cells against the baseline) again, with every run that failed to train at the ceiling loss."""
    diverged = res.runs["status"].isin(FAILED_TO_TRAIN)
    if not diverged.any() or not math.isfinite(res.ceiling):  # no ceiling without the dataset (sentences say so)
        return pd.DataFrame(columns=SENSITIVITY_COLS)
    runs = res.runs[res.runs["ok"] | diverged].copy()
    runs["loss_at_ceiling"] = np.where(runs["ok"], runs[res.outcome], res.ceiling)
    b = analyse_runs(res, runs, "loss_at_ceiling", endpoint=False, blocks=True)
    rows = []
    for table in ("main", "cells_vs_baseline"):
        before = getattr(a, table) if a is not None else pd.DataFrame()
        after = getattr(b, table)
        for r in after.to_dict("records"):
            name = r["cell"] if table == "cells_vs_baseline" else res.label(r["factor"], r["level"])
            key = (lambda x: x["cell"] == r["cell"]) if table == "cells_vs_baseline" else \
                (lambda x: (x["factor"] == r["factor"]) & (x["level"] == r["level"]))
            old = before[key(before)] if len(before) else before
            rows.append({"effect": name, "estimate": old["estimate"].iloc[0] if len(old) else math.nan,
                         "call": old["call"].iloc[0] if len(old) else "",
                         "estimate_at_ceiling": r["estimate"], "ci_low_at_ceiling": r["ci_low"],
                         "ci_high_at_ceiling": r["ci_high"], "call_at_ceiling": r["call"]})
    return round_frame(pd.DataFrame(rows, columns=SENSITIVITY_COLS))
