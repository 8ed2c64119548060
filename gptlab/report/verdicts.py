"""The report's sentences about effects: one per call, changes along training, design and model notes.

Owns the wording that turns a rounded table row into a verdict. Every sentence follows the row's
`call` (see `calls`): a difference is claimed only for `better`/`worse`, "no difference" only
for `equivalent` (TOST within the margin), and everything else is said to be inconclusive.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from gptlab.report.fmt import fmt_loss, fmt_p
from gptlab.report.models import FORMULAS, HETERO_P

if TYPE_CHECKING:
    from gptlab.report.effects import Analysis
    from gptlab.report.load import Results
    from gptlab.report.stats import Statistics

MAX_SENTENCES = 15  # called effects given a sentence in the summary; the tables hold the rest


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _ci(r: dict, level: int = 95) -> str:
    lo, hi = (r["ci_low"], r["ci_high"]) if level == 95 else (r["ci90_low"], r["ci90_high"])
    return f"{level}% CI {fmt_loss(lo)} to {fmt_loss(hi)}"


def _decided(r: dict, what: str, margin: float, unit: str = "nats/char") -> str:
    """Shared tail of a verdict for the four calls (`what` names the difference an inconclusive one lacks)."""
    if r["call"] in ("better", "worse"):
        return (f"by {fmt_loss(abs(r['estimate']))} {unit} ({_ci(r)}; Holm-adjusted p "
                f"{fmt_p(r['p_adjusted'])})")
    if r["call"] == "equivalent":
        return (f"equivalent within +/-{margin:g} {unit} (estimate {fmt_loss(r['estimate'])}, {_ci(r, 90)})")
    return (f"inconclusive (estimate {fmt_loss(r['estimate'])}, {_ci(r)}): neither {what} nor equivalence "
            f"within +/-{margin:g} is shown")


def _counts(r: dict, res: Results) -> str:
    out = ""
    for lvl in (r["level"], r["baseline"]):
        runs = res.runs[res.runs[r["factor"]] == lvl]
        for s, n in (("diverged", (runs["status"] == "diverged").sum()),
                     ("failed", (~runs["ok"] & (runs["status"] != "diverged")).sum())):
            if n:
                out += f"; {n} of {len(runs)} {res.label(r['factor'], lvl)} runs {s}"
    return out


def _spread(r: dict, simple: pd.DataFrame | None) -> str:
    """'; its simple effects range from ... (6 worse, 1 better, 1 inconclusive)' when their calls disagree."""
    if simple is None or not len(simple) or not r["kind"].startswith("averaged"):
        return ""
    rows = simple[(simple["factor"] == r["factor"]) & (simple["level"] == r["level"])]
    calls_ = rows["call"].fillna("").replace("", "no call")
    if len(set(calls_) & {"better", "worse"}) == 0 or set(calls_) == {r["call"]}:
        return ""
    counts = ", ".join(f"{n} {c}" for c, n in calls_.value_counts().items())
    return (f"; its simple effects range from {fmt_loss(rows['estimate'].min())} to {fmt_loss(rows['estimate'].max())}"
            f" ({counts}): see Simple effects")


def main(r: dict, res: Results, margin: float, simple: pd.DataFrame | None = None) -> str:
    """Verdict of one main-effects row (rounded); `simple` adds the spread of its simple effects."""
    a, b = res.label(r["factor"], r["level"]), res.label(r["factor"], r["baseline"])
    where = "" if r["kind"].startswith("averaged") else " at the baseline of the other factors"
    if _nan(r["estimate"]):
        return f"{a} vs {b}: {r['alias'] or 'not estimable'}" + _counts(r, res)
    if _nan(r["p_value"]):
        return f"{a} vs {b}{where}: {fmt_loss(r['estimate'])} {res.unit}, no error estimate (no call)" + _counts(r, res)
    if r["call"] in ("better", "worse"):
        text = f"{a} is {r['call']} than {b}{where} " + _decided(r, "a difference", margin, res.unit)
    else:
        text = f"{a} vs {b}{where}: " + _decided(r, "a difference", margin, res.unit)
    return text + _spread(r, simple) + _counts(r, res)


def interaction(r: dict, res: Results, margin: float) -> str:
    """Verdict of one two-way interaction row (rounded)."""
    pair = f"{res.label(r['factor_a'], r['level_a'])} x {res.label(r['factor_b'], r['level_b'])}"
    if _nan(r["estimate"]):
        return f"{pair}: not estimable: {r['alias'] or 'a cell it needs has no data'}"
    if _nan(r["p_value"]):
        return f"{pair}: interaction {fmt_loss(r['estimate'])} {res.unit}, no error estimate (no call)"
    if r["call"] in ("better", "worse"):
        return (f"{pair}: not additive; together they are {r['call']} than the sum of their separate effects "
                + _decided(r, "", margin, res.unit))
    return f"{pair}: " + ("additive, " if r["call"] == "equivalent" else "") + \
        _decided(r, "an interaction", margin, res.unit)


def quoted(r: dict, form: str = "full") -> str:
    """A table row as a discussion quotes it (`quotes`): '-0.0630 (95% CI -0.0710 to -0.0550, better)'.

    Effects carry their sign (+ included); a cell or level row gives its mean loss and 95% CI. `form`
    "estimate" gives the number alone.
    """
    if "estimate" in r:
        def num(x: float) -> str:
            return f"{'+' if x > 0 else ''}{fmt_loss(x)}"
        est, lo, hi, call = num(r["estimate"]), r.get("ci_low"), r.get("ci_high"), r.get("call")
        call = call if isinstance(call, str) and call else "no call"
    else:  # cells (mean +/- half-width) and levels (mean, CI): losses, no sign
        num = fmt_loss
        est, half = num(r["best_val_loss"]), r.get("best_val_loss_ci95")
        lo, hi = (r["best_val_loss"] - half, r["best_val_loss"] + half) if "ci_low" not in r else (r["ci_low"],
                                                                                                   r["ci_high"])
        call = f"{r['n_seeds']} seeds" if "n_seeds" in r else f"{r['n_ok']} runs"
    if form == "estimate":
        return est
    if _nan(lo) or _nan(hi):
        return f"{est} (no error estimate, {call})"
    return f"{est} (95% CI {num(lo)} to {num(hi)}, {call})"


def schedule_note(res: Results) -> list[str]:
    """A sentence when `train.max_iters` is a factor: its levels change the learning-rate schedule too."""
    fixed = ((res.spec.get("base") or {}).get("train") or {}).get("lr_decay_iters") is not None
    if "train.max_iters" not in res.factors or fixed:
        return []
    return ["`train.max_iters` is confounded with the learning-rate schedule: it also sets where the decay ends "
            "(`train.lr_decay_iters` defaults to it), so its levels differ in schedule as well as in length, and "
            "an effect that changes with it may follow either."]


def called(stats: Statistics, res: Results) -> list[str]:
    """Sentences for every effect called better or worse, largest first (at most MAX_SENTENCES)."""
    items: list[tuple[float, str]] = []
    for table, col in ((stats.main, "verdict"), (stats.interactions, "verdict")):
        for r in table.to_dict("records") if len(table) else []:
            if r["call"] in ("better", "worse"):
                items.append((abs(r["estimate"]), r[col]))
    for table, name, what in ((stats.higher, "term", "interaction of {order} factors"),
                              (stats.aliases, "aliased", "aliased sum"),
                              (stats.cells_vs_baseline, "cell", "cell against the baseline cell")):
        for r in table.to_dict("records") if len(table) else []:
            if r["call"] in ("better", "worse"):
                label = what.format(**r) if "{" in what else what
                if name == "cell" and r["changes"] == 1:  # the same contrast as a main-effects row
                    continue
                items.append((abs(r["estimate"]), f"{r[name]} ({label}): {r['call']} "
                              + _decided(r, "", stats.margin, res.unit)))
    items.sort(key=lambda x: -x[0])
    out = [text for _, text in items[:MAX_SENTENCES]]
    if len(items) > MAX_SENTENCES:
        out.append(f"... and {len(items) - MAX_SENTENCES} more effects called better or worse (see the tables).")
    return out


def trajectories(by_step: pd.DataFrame, res: Results) -> list[str]:
    """One sentence per effect whose call changes along training in a way that matters.

    Said when a called difference (better or worse) meets another decisive call along training
    (the other sign, or equivalent), or when a called difference is gone by the last evaluation.
    Moves between `equivalent` and `inconclusive` alone are not news. An effect called the same
    way at every step gets a sentence when its size changes by TREND_RATIO or more.
    """
    out = []
    for (factor, level), g in by_step.groupby(["factor", "level"], sort=False):
        g = g.sort_values("step")
        calls_ = list(g["call"].fillna(""))
        decisive = [c for c in calls_ if c in ("better", "worse", "equivalent")]
        differ = [c for c in decisive if c != "equivalent"]
        lost = bool(differ) and calls_[-1] != differ[-1]  # a difference that is gone by the end
        name = level if factor == "cell" else res.label(factor, level)
        if not (len(set(decisive)) > 1 and differ) and not lost:
            trend = _trend(g, calls_)
            if trend:
                out.append(f"{name}: {trend}.")
            continue
        segments: list[list] = []
        for step, c, est in zip(g["step"], calls_, g["estimate"]):
            if segments and segments[-1][0] == c:
                segments[-1][2], segments[-1][4] = step, est
            else:
                segments.append([c or "no call", step, step, est, est])
        parts = [f"{c} at step{'s' if a != b else ''} {a}{'-' + str(b) if a != b else ''} "
                 f"({fmt_loss(e0)}{' to ' + fmt_loss(e1) if a != b else ''})" for c, a, b, e0, e1 in segments]
        flips = {"better", "worse"} <= set(decisive)
        out.append(f"{name}: {'changes sign' if flips else 'changes call'} along training: " + ", ".join(parts) + ".")
    return out


TREND_RATIO = 1.5  # a called effect whose size changes by this factor along training gets a sentence


def _trend(g: pd.DataFrame, calls_: list[str]) -> str:
    """'grows from -0.0279 at step 250 to -0.0626 at step 2000' for an effect called the same way throughout."""
    called = [(s, e) for s, c, e in zip(g["step"], calls_, g["estimate"]) if c in ("better", "worse")]
    if len(called) < 2 or len(set(calls_)) != 1:
        return ""
    (s0, e0), (s1, e1) = called[0], called[-1]
    ratio = abs(e1) / abs(e0) if e0 else math.inf
    if 1 / TREND_RATIO < ratio < TREND_RATIO:
        return ""
    word = "grows" if ratio > 1 else "shrinks"
    return f"{calls_[0]} throughout; the effect {word} from {fmt_loss(e0)} at step {s0} to {fmt_loss(e1)} at step {s1}"


def sensitivity(table: pd.DataFrame, n_diverged: int, ceiling: float, unit: str = "nats/char",
                split: str = "validation") -> list[str]:
    changed = table[table["call"].fillna("") != table["call_at_ceiling"].fillna("")]
    head = (f"Counting the {n_diverged} diverged run(s) at the ceiling loss {fmt_loss(ceiling)} {unit} (unigram "
            f"loss of the {split} split) instead of leaving them out: ")
    if changed.empty:
        return [head + "no call changes."]
    return [head + "; ".join(f"{r['effect']} {r['call'] or 'not estimable'} -> {r['call_at_ceiling']} "
                             f"({fmt_loss(r['estimate_at_ceiling'])})" for r in changed.to_dict("records")) + "."]


def design_notes(res: Results, a: Analysis | None, margin: float) -> tuple[list[str], list[str]]:
    """(notes, warnings) about the model, its error, the design's gaps and the precision reached."""
    notes: list[str] = [f"Equivalence margin: +/-{margin:g} {res.unit} (`report.equivalence_margin` or `--margin`)."]
    if math.isfinite(res.ceiling):
        split = "test" if res.has_test_split else "validation"
        notes.append(f"Unigram loss of the {split} split (the ceiling at which diverged runs are counted in the "
                     f"sensitivity analysis): {fmt_loss(res.ceiling)} {res.unit}.")
    warns: list[str] = mixed_code(res)
    if a is None:
        return notes, warns + ["No successful runs or no factors: no effects to estimate."]
    fit, d = a.fit, a.design
    notes.append(f"Model: `{FORMULAS[fit.kind]}`" + (f", {fit.df:g} residual degrees of freedom, residual SD "
                                                      f"{fmt_loss(fit.resid_sd)} {res.unit}" if fit.has_error else "")
                 + (f"; seed blocking {'on' if fit.seed_block else 'off'}" if fit.kind in ("pure", "welch") else "")
                 + f"; {a.n_tests} distinct tests in the Holm family.")
    if fit.kind == "pure" and fit.bartlett_p < HETERO_P:
        warns.append(f"Cell variances differ (Bartlett p {fmt_p(fit.bartlett_p)}), but a cell has a single ok run, so "
                     "per-cell variances cannot be used: CIs assume equal variances and may be too narrow.")
    elif fit.kind == "pure" and not _nan(fit.bartlett_p):
        notes.append(f"Equal cell variances kept (Bartlett p {fmt_p(fit.bartlett_p)}; per-cell variances are used "
                     f"below p = {HETERO_P:g}).")
    if fit.kind == "welch":
        warns.append(f"Cell variances differ (Bartlett p {fmt_p(fit.bartlett_p)}): every CI uses per-cell variances "
                     "with Welch-Satterthwaite degrees of freedom.")
    if fit.kind == "pooled":
        warns.append(f"No pure error (one ok run per cell): CIs, p-values and calls ASSUME that every interaction "
                     f"of three or more factors is zero; their {fit.df:g} degrees of freedom are pooled as error "
                     "and no higher-order term is tested.")
    ok = res.runs[res.runs["ok"] & np.isfinite(res.runs[res.outcome].astype(float))]
    if fit.kind == "none" and ok.groupby("cell").size().max() > 1:
        warns.append("No error estimate: the runs of each cell have identical losses, so no variation is left to "
                     "estimate an error from. Estimates only, no CIs, p-values or calls.")
    elif fit.kind == "none":
        warns.append("No error estimate (one ok run per cell and fewer than three factors): estimates only, "
                     "no CIs, p-values or calls. Run at least 2 seeds.")
    unusable = res.runs[res.runs["ok"] & ~np.isfinite(res.runs[res.outcome].astype(float))]
    if len(unusable):
        warns.append(f"{len(unusable)} ok run(s) without a finite {res.outcome} left out of every analysis: "
                     + ", ".join(map(str, unusable["run_id"][:5])) + (", ..." if len(unusable) > 5 else "") + ".")
    if fit.kind in ("pure", "welch"):
        single = [c for c, n in ok.groupby("cell").size().items() if n == 1]
        if single:
            warns.append(f"{len(single)} cell(s) with a single ok run ({'; '.join(single[:5])}"
                         f"{'; ...' if len(single) > 5 else ''}): their error is assumed to equal the pooled one.")
    dead = [c for c in res.cells["cell"] if c not in set(ok["cell"])]
    excluded = len(d.grid) - len(res.cells)
    if dead:
        lost = [f"{res.label(r['factor'], r['level'])}" for r in a.main.to_dict("records") if _nan(r["estimate"])]
        warns.append(f"{len(dead)} cell(s) with no ok run: {'; '.join(dead)}. Averaged effects need every cell"
                     + (f"; not estimable: {', '.join(lost)}" if lost else "") + ".")
    if not d.full_factorial:
        notes.append(f"Not a full factorial ({excluded} cell(s) excluded by the sweep, {len(dead)} without an ok "
                     "run): each level's effect is its simple effect against the baseline cell (from the cell that "
                     "differs from the baseline in that factor alone), every cell is compared with the baseline "
                     "cell, and terms the cells cannot separate are reported as aliased.")
    if a.higher_joint is not None:
        F, df1, df2, p = a.higher_joint
        notes.append(f"Interactions of three or more factors, jointly: F({df1}, {df2:g}) = {F:.2f}, p {fmt_p(p)}.")
    main = a.main.dropna(subset=["ci95"])
    if len(main):
        need = main["seeds_needed"].max()
        notes.append(f"Precision: main-effect 95% CIs are +/-{fmt_loss(main['ci95'].max())} {res.unit} at "
                     f"{ok['seed'].nunique()} seed(s); a half-width of the margin ({margin:g}) needs "
                     + (f"{int(need)} seeds per cell (`seeds_needed`, from this error)." if not _nan(need)
                        else "more than 10,000 seeds per cell."))
    if ok["seed"].nunique() < 2:
        warns.append("Only one seed: seed-to-seed noise cannot be separated from the effects.")
    return notes, warns


def mixed_code(res: Results) -> list[str]:
    """A warning when the runs were trained by different gptlab versions or commits."""
    seen = {key: res.environment.get(key, []) for key in ("gptlab", "git_commit")}
    mixed = {key: values for key, values in seen.items() if len(values) > 1}
    if not mixed:
        return []
    what = "; ".join(f"{'versions' if key == 'gptlab' else 'commits'} {', '.join(values)}" for key, values in mixed.items())
    return [f"The runs were trained by different code ({what}): a difference between cells may come from the "
            "code rather than the design. Rerun the sweep into a new results folder with one version."]
