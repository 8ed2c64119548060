"""The report's sentences about the sweep as a whole: its header, best cell and baseline, counts of calls and of failed runs.

Owns the header's lines (how to reproduce the sweep and the report, its factors, seeds, text, unit,
outcome, runs, compute and environment), the summary's best cell and baseline, the counts of each
call in the tables the summary does not list, the failed runs' count, and what a table too long for
the page says instead of its rows (`too_long`).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gptlab.report.fmt import fmt_loss
from gptlab.report.kinds import report_kinds
from gptlab.report.load import Results
from gptlab.report.tables import ReportTables
from gptlab.stats.calls import DIRECTIONAL


def header(res: Results) -> list[str]:
    """The header's lines: the sweep's command, factors, seeds, text, loss unit, outcome, runs, compute, environment."""
    spec, runs = res.spec, res.runs
    every = pd.concat([t for t in (res.selection, runs, res.other_roles) if len(t)]) if len(runs) else runs
    total = float(pd.to_numeric(every["wall_s"], errors="coerce").sum())
    rel = f"{res.results_dir.path.resolve().parent.name}/{res.results_dir.path.resolve().name}"
    items = [f"**Reproduce the sweep**: `{spec.command or f'python -m gptlab.sweep ablations/{res.name}.yaml'}`",
             f"**Regenerate this report**: `python -m gptlab.report {rel}`"]
    for f in res.factors:
        lv = ", ".join(f"**{lvl}** (baseline)" if lvl == res.baseline[f] else lvl for lvl in res.levels[f])
        items.append(f"**Factor** `{f}`: {lv}")
    seeds = next((text for _, kind in report_kinds(spec) if (text := kind.header_seeds(res)) is not None),
                 ", ".join(map(str, spec.seeds)))  # a kind that decided the seeds says them (adaptive: and its rule)
    items.append(f"**Seeds**: {seeds}")
    for e in spec.exclude:
        items.append("**Excluded cell**: " + ", ".join(f"{k}={v}" for k, v in e.items()))
    if spec.plugins:
        items.append(f"**Plugins**: {', '.join(spec.plugins)}")
    items.append(text_item(res))
    mixes = "trains on several texts" if res.corpora else "mixes tokenizers"
    items.append(f"**Loss unit**: {res.unit}" + (f" (the sweep {mixes}: every loss is converted to bits per "
                                                 "character, the validation split's summed NLL / characters / ln 2)"
                                                 if res.unit == "bits/char" else ""))
    if res.has_test_split:
        items.append("**Outcome**: the test loss at the best validation step (`best_test_loss`; in bits/char "
                     "`best_test_bpc`): validation chose each checkpoint, the test split chose nothing. Every "
                     "effect and call is on it; `best_val_loss` columns, the levels table and the curves are "
                     "validation losses")
    items += [runs_item(res), f"**Total compute**: {total:.1f} s ({total / 3600:.2f} h, sum of wall_s over all "
                              f"{len(every)} runs)"]
    if res.environment:
        items.append("**Environment**: " + "; ".join(f"{k} {', '.join(v)}" for k, v in res.environment.items()))
    return items


def _statuses(runs: pd.DataFrame) -> str:
    return ", ".join(f"{n} {s}" for s, n in runs["status"].value_counts().items())


def runs_item(res: Results) -> str:
    """How many runs the sweep trained, by role: a tuned sweep's selection runs count too, apart from the estimation
    runs that every effect is on."""
    runs, cells = res.runs, len(res.cells)
    if not len(res.selection) and not len(res.other_roles):
        return f"**Runs**: {len(runs)} ({_statuses(runs)}) in {cells} cells"
    parts = [f"{len(res.selection)} selection"] if len(res.selection) else []
    parts += [f"{len(runs)} estimation"] + ([f"{len(res.other_roles)} other"] if len(res.other_roles) else [])
    total = len(res.selection) + len(runs) + len(res.other_roles)
    selection = (f"; the selection runs ({_statuses(res.selection)}) chose each cell's setting"
                 if len(res.selection) else "")
    return (f"**Runs**: {total} ({', '.join(parts)}): every effect is on the {len(runs)} estimation runs "
            f"({_statuses(runs)}) in {cells} cells{selection}")


def text_item(res: Results) -> str:
    """The text(s) the runs trained and were scored on, and how each is split (`data.split_points`)."""
    val, test = float(res.fixed("data.val_fraction")), float(res.fixed("data.test_fraction"))
    split = (f"the first {1 - val:.0%} trains, the next {val - test:.0%} validates, the last {test:.0%} tests"
             if test > 0 else f"the first {1 - val:.0%} trains, the last {val:.0%} validates")
    if res.corpora:
        key = res.corpora[0]
        return f"**Texts** (`{key}`): {', '.join(res.levels[key])}; each split by characters alike: {split}"
    name = res.fixed("data.path") or res.fixed("data.dataset")
    return f"**Text**: {name}, split by characters: {split}"


def best_and_baseline(res: Results, cells: pd.DataFrame) -> list[str]:
    """The summary's first lines: the best cell and the baseline cell, with their losses on the study's outcome (from
    `tables.cells`, ranked on it); one line when the baseline is the best cell."""
    items = []
    loss, bpc = res.outcome, res.outcome.replace("_loss", "_bpc")
    ranked = cells.dropna(subset=[loss])
    base = cells[cells["baseline"]]
    base = base.iloc[0] if len(base) and not math.isnan(base.iloc[0][loss]) else None
    if len(ranked):
        best = ranked.iloc[0]
        also = " (the baseline is also the best cell)" if base is not None and base["cell"] == best["cell"] else ""
        items.append(f"Best cell: **{best['cell']}**{also}, {res.outcome_label} {fmt_loss(best[loss])} {res.unit} "
                     f"({fmt_loss(best[bpc])} bits/char) over {best['n_seeds']} seed(s).")
        if also:
            return items
    if base is not None:
        items.append(f"Baseline: {base['cell']}, {fmt_loss(base[loss])} {res.unit} (rank {base['rank']}).")
    return items


def lead(res: Results) -> str:
    """The line under the title: what every effect is, and where the provenance is (its counts are there too)."""
    arm = " (or arm)" if res.arms else ""
    return (f"Every effect below is on the {res.outcome_label} in {res.unit}, a level{arm} minus its baseline: negative "
            "= lower loss = better. How the sweep was run (commands, factors, seeds, runs, fixed settings) and how to "
            "rerun it: \"How this was run\", near the end.")


def count_calls(table: pd.DataFrame, what: str) -> str:
    """'Two-way interactions: 3 inconclusive, 1 better' ("" for a table without rows)."""
    if not len(table):
        return ""
    kinds = np.where(table["estimate"].isna(), "not estimable", table["call"].fillna("").replace("", "no call"))
    counts = pd.Series(kinds).value_counts()
    return f"{what}: " + ", ".join(f"{n} {c}" for c, n in counts.items())


def call_counts(tables: ReportTables) -> list[str]:
    """The summary's counts of each call among the interactions, higher-order contrasts and simple effects (none
    for an arms sweep; no simple effects for a sweep of one factor, where they are its main effects)."""
    return [c for c in (count_calls(tables.interactions, "Two-way interactions"),
                        count_calls(tables.higher, "Higher-order contrasts"),
                        count_calls(tables.simple, "Simple effects") if tables.simple_apart else "")
            if c and not len(tables.arms.columns)]


def failures(res: Results, table: pd.DataFrame) -> str:
    """How many runs did not finish ok (`tables.failures`), and what became of them."""
    if len(table):
        return (f"{len(table)} of {len(res.runs)} runs did not finish ok; they are left out of the "
                "effects above (see Divergence for the sensitivity analysis). `best_val_loss` is the best "
                "value reached before diverging.")
    return f"None: all {len(res.runs)} runs finished ok."


def too_long(df: pd.DataFrame, what: str, csv: str, calls: bool = True) -> str:
    """What a table too long for the page says instead of its rows: how many, (how many called,) where they are."""
    if not calls:
        return f"{len(df)} {what}: too many to list here; see `tables/{csv}`."
    called = int(df["call"].isin(DIRECTIONAL).sum()) if "call" in df else 0
    return f"{len(df)} {what} ({called} called better or worse): too many to list here; see `tables/{csv}`."
