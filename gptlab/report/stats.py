"""Statistics of a sweep: per-cell summaries, per-level means, main effects and interactions.

Owns every number of the report's tables (rounded with `fmt.round_frame`) and the verdicts.

Which runs count: only runs with status "ok" enter loss, step, gap, throughput and wall-time
statistics and the models. Diverged and failed runs are counted per cell (`n_diverged`,
`n_failed`), listed in the failures table and named in the verdict of each level they belong to.

Model: ordinary least squares (statsmodels) of best_val_loss on treatment-coded factor dummies
(reference = baseline level) plus seed dummies as a blocking term (seeds pair runs: the same seed
sees the same batches in every cell). Main effects come from the additive model
`loss ~ factors + seed`, so every run counts for every factor; two-way interaction contrasts
(loss[a,b] - loss[a,0] - loss[0,b] + loss[0,0]) come from `loss ~ factors + all pairs + seed`.
Columns that are not estimable (excluded or empty cells) are dropped before fitting; the seed
block is dropped when it would leave no residual degrees of freedom. The minimum detectable
effect (80% power, two-sided alpha 0.05) of a contrast is (t_0.975 + t_0.8) * its standard error;
`seeds_needed` = seeds * (mde80 / |estimate|)^2 (standard errors shrink as 1/sqrt(seeds)).
Status "failed" here stands for any status other than ok and diverged.
"""
from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats as st

from gptlab.report.fmt import fmt_loss, fmt_p, round_frame
from gptlab.report.load import Results

ALPHA, POWER = 0.05, 0.8
LN2 = math.log(2.0)


def mean_ci(values: pd.Series) -> tuple[float, float]:
    """Mean and half-width of its 95% t confidence interval (NaN with fewer than 2 values)."""
    v = pd.Series(values, dtype=float).dropna()
    if v.empty:
        return math.nan, math.nan
    if len(v) < 2:
        return float(v.mean()), math.nan
    lo, hi = st.t.interval(1 - ALPHA, len(v) - 1, loc=v.mean(), scale=st.sem(v))
    return float(v.mean()), float((hi - lo) / 2)


def status_counts(runs: pd.DataFrame) -> dict[str, int]:
    """Diverged and failed (any other non-ok status) runs among `runs`."""
    diverged = runs["status"] == "diverged"
    return {"n_diverged": int(diverged.sum()), "n_failed": int((~runs["ok"] & ~diverged).sum())}


def cell_table(res: Results) -> pd.DataFrame:
    """One row per cell, ranked by mean best val loss (ok runs only); baseline marked."""
    rows = []
    for cell in res.cells.to_dict("records"):
        runs = res.runs[res.runs["cell"] == cell["cell"]]
        ok = runs[runs["ok"]]
        m, ci = mean_ci(ok["best_val_loss"])
        params = runs["params"].dropna()
        rows.append({**{f: cell[f] for f in res.factors}, "cell": cell["cell"], "baseline": bool(cell["is_baseline"]),
                     "best_val_loss": m, "best_val_loss_ci95": ci, "best_val_bpc": m / LN2,
                     "best_val_bpc_ci95": ci / LN2, "best_step": ok["best_step"].mean(),
                     "final_val_loss": ok["final_val_loss"].mean(),
                     "gap": (ok["final_val_loss"] - ok["final_train_loss"]).mean(),
                     "params": params.iloc[0] if len(params) else math.nan,
                     "tokens_per_sec": ok["tokens_per_sec"].mean(), "wall_s": ok["wall_s"].mean(),
                     "n_seeds": len(ok), "n_runs": len(runs), **status_counts(runs)})
    df = pd.DataFrame(rows)
    df = df.sort_values("best_val_loss", kind="stable", na_position="last").reset_index(drop=True)
    df.insert(0, "rank", pd.array([i + 1 if not math.isnan(v) else None for i, v in enumerate(df["best_val_loss"])],
                                  dtype="Int64"))
    return round_frame(df)


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


@dataclass
class Effects:
    """Main effects, interactions (rounded tables with verdicts) and the sensitivity summary."""
    main: pd.DataFrame
    interactions: pd.DataFrame
    df_resid: int = 0
    resid_sd: float = math.nan
    seed_block: bool = False
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _design(ok: pd.DataFrame, res: Results, pairs: list[tuple[str, str]], seed_block: bool
            ) -> tuple[pd.DataFrame, dict[str, tuple]]:
    """Treatment-coded design matrix (baseline = reference) and column -> term key."""
    cols: dict[str, np.ndarray] = {"const": np.ones(len(ok))}
    terms: dict[str, tuple] = {}
    dummies: dict[tuple[str, str], np.ndarray] = {}
    for f in res.factors:
        for lvl in res.levels[f]:
            if lvl != res.baseline[f]:
                dummies[f, lvl] = (ok[f] == lvl).to_numpy(float)
                name = f"x{len(cols)}"
                cols[name], terms[name] = dummies[f, lvl], ("main", f, lvl)
    for fa, fb in pairs:
        for (a, la), (b, lb) in itertools.product([k for k in dummies if k[0] == fa],
                                                  [k for k in dummies if k[0] == fb]):
            name = f"x{len(cols)}"
            cols[name], terms[name] = dummies[a, la] * dummies[b, lb], ("int", a, la, b, lb)
    if seed_block:
        for s in sorted(ok["seed"].unique())[1:]:
            cols[f"x{len(cols)}"] = (ok["seed"] == s).to_numpy(float)
    return pd.DataFrame(cols, index=ok.index), terms


def _estimable(X: pd.DataFrame) -> list[str]:
    """Columns kept greedily while they add rank: the others are not estimable from this design."""
    keep: list[str] = []
    for col in X.columns:
        if np.linalg.matrix_rank(X[keep + [col]].to_numpy()) > len(keep):
            keep.append(col)
    return keep


def _fit(ok: pd.DataFrame, res: Results, pairs: list[tuple[str, str]]):
    """OLS on the estimable columns, blocking on seed unless that leaves no residual df.

    Returns (fit, estimable column -> term, seed_block, all columns -> term).
    """
    seed_block = ok["seed"].nunique() > 1
    X, terms = _design(ok, res, pairs, seed_block)
    keep = _estimable(X)
    if seed_block and len(keep) >= len(ok):
        seed_block = False
        X, terms = _design(ok, res, pairs, seed_block)
        keep = _estimable(X)
    with warnings.catch_warnings():  # statsmodels warns when df_resid == 0; handled in _contrast
        warnings.simplefilter("ignore")
        fit = sm.OLS(ok["best_val_loss"].to_numpy(float), X[keep]).fit()
    return fit, {c: t for c, t in terms.items() if c in keep}, seed_block, terms


def _contrast(fit, col: str | None) -> dict[str, float]:
    """Estimate, 95% CI, p and minimum detectable effect of one coefficient (NaN if not estimable)."""
    nan = {k: math.nan for k in ("estimate", "ci_low", "ci_high", "ci95", "p_value", "mde80")}
    if col is None:
        return nan
    est = float(fit.params[col])
    if fit.df_resid < 1:
        return {**nan, "estimate": est}
    se, df = float(fit.bse[col]), fit.df_resid
    half = float(st.t.ppf(1 - ALPHA / 2, df)) * se
    return {"estimate": est, "ci_low": est - half, "ci_high": est + half, "ci95": half,
            "p_value": float(fit.pvalues[col]), "mde80": (st.t.ppf(1 - ALPHA / 2, df) + st.t.ppf(POWER, df)) * se}


def _counts_note(res: Results, f: str, lvl: str) -> str:
    """'; 2 of 6 norm=post runs diverged' (and failed), or '' when every run of the level is ok."""
    runs = res.runs[res.runs[f] == lvl]
    counts = status_counts(runs)
    return "".join(f"; {counts['n_' + s]} of {len(runs)} {res.label(f, lvl)} runs {s}"
                   for s in ("diverged", "failed") if counts["n_" + s])


def _main_verdict(r: dict, a: str, b: str) -> str:
    if math.isnan(r["estimate"]):
        return f"{a} vs {b}: not estimable (no successful runs at this level)"
    if math.isnan(r["p_value"]):
        return f"{a} vs {b}: difference {r['estimate']:+.4f} nats/char, untestable (no residual degrees of freedom)"
    if r["p_value"] < ALPHA:
        word = "worse" if r["estimate"] > 0 else "better"
        return (f"{a} is {word} than {b} by {fmt_loss(abs(r['estimate']))} +/- {fmt_loss(r['ci95'])} nats/char "
                f"(p {fmt_p(r['p_value'])})")
    return f"{a} vs {b}: no detectable difference (p {fmt_p(r['p_value'])})"


def _int_verdict(r: dict, a: str, b: str) -> str:
    if math.isnan(r["estimate"]):
        return f"{a} x {b}: not estimable (that combination is excluded or has no successful runs)"
    if math.isnan(r["p_value"]):
        return f"{a} x {b}: interaction {r['estimate']:+.4f} nats/char, untestable (no residual degrees of freedom)"
    if r["p_value"] < ALPHA:
        word = "worse" if r["estimate"] > 0 else "better"
        return (f"{a} x {b}: not additive; together they are {word} by {fmt_loss(abs(r['estimate']))} +/- "
                f"{fmt_loss(r['ci95'])} nats/char than the sum of their separate effects (p {fmt_p(r['p_value'])})")
    return f"{a} x {b}: no detectable interaction (p {fmt_p(r['p_value'])})"


MAIN_COLS = ["factor", "level", "baseline", "estimate", "ci_low", "ci_high", "ci95", "p_value", "mde80",
             "seeds_needed", "n_ok", "n_ok_baseline", "n_diverged", "n_failed", "verdict"]
INT_COLS = ["factor_a", "level_a", "factor_b", "level_b", "estimate", "ci_low", "ci_high", "ci95", "p_value",
            "mde80", "seeds_needed", "verdict"]
_LATE = ("seeds_needed", "verdict")  # columns added after rounding


def effects(res: Results) -> Effects:
    """Main effects (additive model) and two-way interactions (pairwise model), with verdicts."""
    ok = res.runs[res.runs["ok"] & res.runs["best_val_loss"].notna()]
    pairs = [(a, b) for a, b in itertools.combinations(res.factors, 2)
             if len(res.levels[a]) > 1 and len(res.levels[b]) > 1]
    if ok.empty or not res.factors:
        return Effects(pd.DataFrame(columns=MAIN_COLS), pd.DataFrame(columns=INT_COLS),
                       warnings=["No successful runs or no factors: no effects to estimate."] if res.factors else [])
    fit, terms, seed_block, _ = _fit(ok, res, [])
    col_of = {t: c for c, t in terms.items()}
    main = []
    for f in res.factors:
        base = res.baseline[f]
        for lvl in (lv for lv in res.levels[f] if lv != base):
            r = _contrast(fit, col_of.get(("main", f, lvl)))
            main.append({"factor": f, "level": lvl, "baseline": base, **r,
                         "n_ok": int((ok[f] == lvl).sum()), "n_ok_baseline": int((ok[f] == base).sum()),
                         **status_counts(res.runs[res.runs[f] == lvl])})
    main_df = round_frame(pd.DataFrame(main, columns=[c for c in MAIN_COLS if c not in _LATE]))
    main_df["verdict"] = [_main_verdict(r, res.label(r["factor"], r["level"]), res.label(r["factor"], r["baseline"]))
                          + _counts_note(res, r["factor"], r["level"]) + _counts_note(res, r["factor"], r["baseline"])
                          for r in main_df.to_dict("records")]
    inter = []
    if pairs:
        ifit, iterms, _, all_terms = _fit(ok, res, pairs)
        icol = {t: c for c, t in iterms.items()}
        for t in (t for t in all_terms.values() if t[0] == "int"):
            inter.append({"factor_a": t[1], "level_a": t[2], "factor_b": t[3], "level_b": t[4],
                          **_contrast(ifit, icol.get(t))})
    int_df = round_frame(pd.DataFrame(inter, columns=[c for c in INT_COLS if c not in _LATE]))
    int_df["verdict"] = [_int_verdict(r, res.label(r["factor_a"], r["level_a"]), res.label(r["factor_b"], r["level_b"]))
                         for r in int_df.to_dict("records")]
    out = Effects(main_df, int_df, int(fit.df_resid), math.sqrt(fit.scale) if fit.df_resid >= 1 else math.nan,
                  seed_block)
    n_seeds = int(ok["seed"].nunique())
    for table in (out.main, out.interactions):
        table.insert(table.columns.get_loc("mde80") + 1, "seeds_needed", _seeds_needed(table, n_seeds))
    out.notes, out.warnings = _sensitivity(res, out)
    return out


def _seeds_needed(table: pd.DataFrame, n_seeds: int) -> pd.Series:
    """Seeds for 80% power at each observed effect size (standard errors scale as 1/sqrt(seeds))."""
    ratio = (table["mde80"] / table["estimate"].abs().where(table["estimate"] != 0)) ** 2
    return pd.Series([max(2, math.ceil(n_seeds * r)) if not math.isnan(r) else None for r in ratio.astype(float)],
                     index=table.index, dtype="Int64")


def _sensitivity(res: Results, eff: Effects) -> tuple[list[str], list[str]]:
    """(notes, warnings) about seeds, residual degrees of freedom and effects too small to detect."""
    notes, warns = [], []
    n_seeds = res.runs.loc[res.runs["ok"], "seed"].nunique()
    if n_seeds < 2:
        warns.append("Only one seed: seed-to-seed noise cannot be separated from the effects; "
                     "run at least 3 seeds before trusting these p-values.")
    if eff.df_resid < 1:
        warns.append("No residual degrees of freedom: confidence intervals and p-values cannot be computed. Add seeds.")
        return notes, warns
    if eff.df_resid < 10:
        warns.append(f"Only {eff.df_resid} residual degrees of freedom: confidence intervals are wide.")
    for what, table in (("main effect", eff.main), ("interaction", eff.interactions)):
        if not len(table) or table["mde80"].isna().all():
            continue
        mde = table["mde80"].max()
        notes.append(f"Residual SD {fmt_loss(eff.resid_sd)} nats/char over {n_seeds} seed(s): the smallest {what} "
                     f"detectable with 80% power at alpha {ALPHA} is about {fmt_loss(mde)} nats/char.")
        label = (lambda r: res.label(r["factor"], r["level"])) if what == "main effect" else \
            (lambda r: f"{res.label(r['factor_a'], r['level_a'])} x {res.label(r['factor_b'], r['level_b'])}")
        weak = table[(table["p_value"] >= ALPHA) & (table["estimate"].abs() < table["mde80"])]
        if len(weak):
            names = "; ".join(f"{label(r)} {fmt_loss(r['estimate'])} (~{r['seeds_needed']} seeds needed)"
                              for r in weak.to_dict("records")) if what == "main effect" else \
                f"{len(weak)} of {len(table)} (see seeds_needed in the interactions table)"
            warns.append(f"Too few seeds to rule out small {what}s ('no detectable' is not 'none'): non-significant "
                         f"{what}s below the detectable {fmt_loss(mde)}: {names}.")
        lucky = table[(table["p_value"] < ALPHA) & (table["estimate"].abs() < table["mde80"])]
        for r in lucky.to_dict("records"):
            warns.append(f"{label(r)} is significant but smaller than the detectable {fmt_loss(mde)}: "
                         "at this power a significant estimate is likely exaggerated; confirm with more seeds.")
    return notes, warns


FAILURE_COLS = ["run_id", "cell", "seed", "status", "error", "diverged_step", "best_val_loss", "best_step", "wall_s"]


def failure_table(res: Results) -> pd.DataFrame:
    """Every run whose status is not ok, with its error and (if any) the step where it diverged."""
    bad = res.runs.loc[~res.runs["ok"], FAILURE_COLS].copy()
    order = {c: i for i, c in enumerate(res.cells["cell"])}
    bad = bad.sort_values(["cell", "seed"], key=lambda s: s.map(order) if s.name == "cell" else s)
    return round_frame(bad.reset_index(drop=True))
