"""Figures of effects: forest, interactions, simple effects and effects along training, with 95% CIs.

A forest plot of every effect, interaction plots, simple effects per factor, and effects along
training, each with the equivalence band. Every `X(...) -> bytes | None` has a `_draw_X(...) ->
Figure | None` that tests can inspect; the numbers come in as DataFrames of the report's tables
(`tables.ReportTables`), so each figure is a pure function of its inputs.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from gptlab.report.figures import figstyle  # noqa: F401  first: it selects Agg before seaborn loads pyplot
from gptlab.report.figures.figstyle import (
    CALL_COLOURS,
    CALL_MARKERS,
    EFFECT_LABEL,
    MAX_FOREST_ROWS,
    MAX_LEGEND,
    MAX_TICK_LABELS,
    MEAN_LABEL,
    call_handles,
    call_of,
    errorbars,
    factor_palette,
    figsize,
    in_order,
    legend_outside,
    level_text,
    numeric_rows,
    panel_grid,
    png_or_none,
    shade_band,
    short_at,
    wrapped_suptitle,
)
from gptlab.report.load import Results
from gptlab.stats.calls import DIRECTIONAL, INCONCLUSIVE


def forest(effects: pd.DataFrame, res: Results) -> bytes | None:
    """Forest plot of every effect with its 95% CI, one panel per group, the band `res.margin` (None when no estimate)."""
    return png_or_none(_draw_forest(effects, res))


def _draw_forest(effects: pd.DataFrame, res: Results) -> Figure | None:
    """Columns group, label, estimate, ci_low, ci_high, call; at most MAX_FOREST_ROWS rows (largest |estimate|)."""
    if effects is None or effects.empty:
        return None
    data = numeric_rows(effects, ["estimate", "ci_low", "ci_high"], "estimate")
    if data.empty:
        return None
    data["group"] = data["group"].fillna("effects").astype(str)
    n_all = len(data)
    if n_all > MAX_FOREST_ROWS:
        data = data.loc[data.index.isin(data["estimate"].abs().nlargest(MAX_FOREST_ROWS).index)]
    groups = list(dict.fromkeys(data["group"]))
    lines = data["label"].astype(str).str.len() // 70 + 1  # wrapped labels take more height
    sizes = [int(lines[data["group"] == g].sum()) for g in groups]
    fig = Figure(figsize=figsize(10, 0.26 * int(lines.sum()) + 0.55 * len(groups) + 1.3), layout="constrained")
    axes = fig.subplots(len(groups), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": sizes})[:, 0]
    for ax, g in zip(axes, groups):
        rows = data[data["group"] == g]
        y = np.arange(len(rows))
        band = shade_band(ax, res.margin)
        calls = rows["call"].map(call_of).to_numpy()
        only = unadjusted_only(rows).to_numpy()
        for c in CALL_COLOURS:
            for dashed in (False, True):
                m = (calls == c) & (only == dashed)
                if m.any():
                    r = rows[m]
                    errorbars(ax, y[m], r["estimate"], r["ci_low"], r["ci_high"], True, marker=CALL_MARKERS[c],
                              color=CALL_COLOURS[c], markersize=6, **(UNADJUSTED_STYLE if dashed else {}))
        labels = [textwrap.fill(t + (UNADJUSTED_TAG if o else ""), 70) for t, o in zip(rows["label"].astype(str), only)]
        ax.set_yticks(y, labels, fontsize="small")
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_title(f"{g} ({len(rows)})", loc="left", fontsize="medium", fontweight="bold")
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel(EFFECT_LABEL)
    dashed = [Line2D([], [], color=CALL_COLOURS[INCONCLUSIVE], marker=CALL_MARKERS[INCONCLUSIVE],
                     markerfacecolor="white", linestyle="--",
                     label="not better or worse, though its\nunadjusted CI excludes 0" + UNADJUSTED_TAG)] \
        if unadjusted_only(data).any() else []
    legend_outside(axes[0], call_handles() + dashed + [band], "call (Holm-adjusted p)")
    title = ("Every effect on best val loss with its own 95% CI, unadjusted; colour and marker: its call, from the "
             "Holm-adjusted p (negative = lower loss = better)")
    if n_all > MAX_FOREST_ROWS:
        title += f"\nonly the {MAX_FOREST_ROWS} largest |estimate| of {n_all} effects are shown"
    wrapped_suptitle(fig, title)
    return fig


# An effect whose unadjusted 95% CI excludes zero while its Holm-adjusted call is not a difference: drawn dashed and
# hollow, and tagged, so that no bar clear of zero reads as a call the report does not make.
UNADJUSTED_STYLE = {"bar_style": "dashed", "markerfacecolor": "white"}
UNADJUSTED_TAG = " (*)"


def unadjusted_only(rows: pd.DataFrame) -> pd.Series:
    """Per row (estimate, ci_low, ci_high, call): the CI excludes zero but the call is neither better nor worse."""
    lo, hi = (pd.to_numeric(rows[c], errors="coerce") for c in ("ci_low", "ci_high"))
    return ((lo > 0) | (hi < 0)) & ~rows["call"].isin(DIRECTIONAL)


def interaction_plots(pair_means: pd.DataFrame, res: Results) -> bytes | None:
    """Marginal mean best val loss of each pair of levels with 95% CI, one panel per pair of factors."""
    return png_or_none(_draw_interaction_plots(pair_means, res))


def _draw_interaction_plots(pair_means: pd.DataFrame, res: Results) -> Figure | None:
    """Columns factor_a, level_a, factor_b, level_b, mean, ci_low, ci_high; at most 3 panels per row."""
    if pair_means is None or pair_means.empty:
        return None
    data = numeric_rows(pair_means, ["mean", "ci_low", "ci_high"], "mean")
    pairs = list(dict.fromkeys(zip(data["factor_a"], data["factor_b"])))
    if not pairs:
        return None
    ncol = min(3, len(pairs))
    fig = Figure(figsize=figsize(6.0 * ncol, 3.8 * -(-len(pairs) // ncol)), layout="constrained")
    axes = panel_grid(fig, len(pairs), ncol, sharey=True)
    for i, (ax, (fa, fb)) in enumerate(zip(axes, pairs)):
        _interaction_panel(ax, data[(data["factor_a"] == fa) & (data["factor_b"] == fb)], res, fa, fb)
        ax.set_ylabel(MEAN_LABEL if i % ncol == 0 else "")
    wrapped_suptitle(fig, "Interaction plots: mean best val loss of each pair of levels, averaged over the other "
                 "factors (bars: 95% CI; lower is better; parallel lines = no interaction)")
    return fig


def _interaction_panel(ax: Axes, part: pd.DataFrame, res: Results, fa: str, fb: str) -> None:
    """x = levels of fa in grid order, one line per level of fb, dodged so the bars do not overlap."""
    order_a = in_order(part["level_a"], res.levels.get(fa, []))
    order_b = in_order(part["level_b"], res.levels.get(fb, []))
    pal = factor_palette(res, fb, order_b)
    width = min(0.08, 0.4 / len(order_b))
    for j, lb in enumerate(order_b):
        pts = part[part["level_b"] == lb].drop_duplicates("level_a").set_index("level_a").reindex(order_a)
        x = np.arange(len(order_a)) + (j - (len(order_b) - 1) / 2) * width
        errorbars(ax, x, pts["mean"], pts["ci_low"], pts["ci_high"], False, marker="o", color=pal[lb],
                   label=level_text(res, fb, lb))
    ax.set_xticks(range(len(order_a)), order_a)
    ax.set_xlim(-0.5, len(order_a) - 0.5)
    ax.set(title=f"{res.short(fa)} x {res.short(fb)}",
           xlabel=f"{res.short(fa)} (baseline: {res.baseline.get(fa, '?')})")
    ax.grid(axis="y", alpha=0.3)
    legend_outside(ax, ax.get_legend_handles_labels()[0], res.short(fb))


def simple_effects(simple: pd.DataFrame, main: pd.DataFrame, res: Results) -> bytes | None:
    """Each level's effect against its baseline at every combination of the other factors, one panel per factor."""
    return png_or_none(_draw_simple_effects(simple, main, res))


def _draw_simple_effects(simple: pd.DataFrame, main: pd.DataFrame, res: Results) -> Figure | None:
    """`simple`: factor, level, baseline, at, estimate, ci_low, ci_high, call; `main`: factor, level, estimate."""
    if simple is None or simple.empty:
        return None
    data = numeric_rows(simple, ["estimate", "ci_low", "ci_high"], "estimate")
    factors = in_order(data["factor"], res.factors)
    if not factors:
        return None
    main = main if main is not None and not main.empty else pd.DataFrame(columns=["factor", "level", "estimate"])
    n_at = [min(data.loc[data["factor"] == f, "at"].nunique(), MAX_TICK_LABELS) for f in factors]
    heights = [0.3 * n + 1.2 for n in n_at]
    fig = Figure(figsize=figsize(11, sum(heights) + 1.0), layout="constrained")
    axes = fig.subplots(len(factors), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
    for ax, f in zip(axes, factors):
        _simple_panel(ax, data[data["factor"] == f], main[main["factor"] == f], res, f)
    axes[-1].set_xlabel(EFFECT_LABEL)
    wrapped_suptitle(fig, "Simple effects: each level against its baseline at every combination of the other factors\n"
                 "(bars: 95% CI, unadjusted; colour: the Holm-adjusted call; dashed: the level's main effect averaged "
                 "over the other factors)")
    return fig


def _simple_panel(ax: Axes, rows: pd.DataFrame, main: pd.DataFrame, res: Results, f: str) -> None:
    """y = the `at` combinations; colour by call (one level) or by level with marker by call (several)."""
    rows = rows.assign(at=[short_at(res, a) for a in rows["at"]])
    ats = list(dict.fromkeys(rows["at"]))
    levels = in_order(rows["level"], res.levels.get(f, []))
    several = len(levels) > 1
    pal = factor_palette(res, f, levels)
    width = min(0.25, 0.6 / len(levels))
    band = shade_band(ax, res.margin)
    for j, lv in enumerate(levels):
        pts = rows[rows["level"] == lv]
        y = pts["at"].map({a: i for i, a in enumerate(ats)}).to_numpy() + (j - (len(levels) - 1) / 2) * width
        calls = pts["call"].map(call_of).to_numpy()
        for c in CALL_COLOURS:
            m = calls == c
            if m.any():
                errorbars(ax, y[m], pts["estimate"][m], pts["ci_low"][m], pts["ci_high"][m], True,
                           marker=CALL_MARKERS[c], color=pal[lv] if several else CALL_COLOURS[c], markersize=5)
        avg = pd.to_numeric(main.loc[main["level"] == lv, "estimate"], errors="coerce").dropna()
        if len(avg):
            ax.axvline(float(avg.iloc[0]), ls="--", lw=1.2, color=pal[lv] if several else "black")
    _simple_axes(ax, rows, ats, levels, res, f, band, pal if several else None)


def _simple_axes(ax: Axes, rows: pd.DataFrame, ats: list[str], levels: list[str], res: Results, f: str,
                 band: Patch, pal: dict | None) -> None:
    """Ticks, title and legend (`band`: the margin's entry) of one simple-effects panel (`pal` None: colours are
    calls)."""
    ax.set_ylim(len(ats) - 0.5, -0.5)
    base = str(rows["baseline"].iloc[0]) if "baseline" in rows else res.baseline.get(f, "?")
    title = f"{res.short(f)}: {', '.join(map(str, levels))} vs {base}"
    if len(ats) <= MAX_TICK_LABELS:
        ax.set_yticks(range(len(ats)), ats, fontsize="small")
    else:
        ax.set_yticks([])
        title += f" at {len(ats)} combinations of the other factors (too many to label)"
    ax.set_title(title, loc="left", fontsize="medium", fontweight="bold")
    ax.grid(axis="x", alpha=0.3)
    if pal is None:
        handles = call_handles()
        dashed = Line2D([], [], ls="--", color="black", label="main effect (averaged)")
    else:
        handles = [Line2D([], [], color=pal[lv], marker="s", ls="none", label=f"{res.short(f)}={lv}") for lv in levels]
        handles += call_handles(colour="dimgrey")
        dashed = Line2D([], [], ls="--", color="dimgrey", label="main effect (averaged, level colour)")
    legend_outside(ax, handles + [dashed, band], "level / call" if pal else "call")


def effects_by_step(by_step: pd.DataFrame, res: Results) -> bytes | None:
    """Effects on val loss along training with 95% CI bands, one panel per factor (or per-cell effects)."""
    return png_or_none(_draw_effects_by_step(by_step, res))


def _draw_effects_by_step(by_step: pd.DataFrame, res: Results) -> Figure | None:
    """Columns factor, level, step, estimate, ci_low, ci_high, call; factor "cell" = cells vs the baseline cell.
    At most 4 factor panels a row; the per-cell panel spans the last row."""
    if by_step is None or by_step.empty:
        return None
    data = numeric_rows(by_step, ["step", "estimate", "ci_low", "ci_high"], "estimate")
    factors = in_order(data["factor"], res.factors)
    if not factors:
        return None
    n_fac = len([f for f in factors if f != "cell"])
    ncol = max(1, min(4, n_fac))
    nrow = -(-n_fac // ncol) + ("cell" in factors)
    width = max(6.0 * ncol, 11.0 if "cell" in factors else 0.0)  # room for the cells' legend on the right
    fig = Figure(figsize=figsize(width, 3.8 * nrow), layout="constrained")
    grid = fig.add_gridspec(nrow, ncol)
    axes: list[Axes] = []
    for i, f in enumerate(factors):  # per-cell effects (last) get a row of their own
        spec = grid[-1, :] if f == "cell" else grid[i // ncol, i % ncol]
        axes.append(fig.add_subplot(spec, sharex=axes[0] if axes else None))
        _step_panel(axes[-1], data[data["factor"] == f], res, f)
        axes[-1].set(xlabel="step", ylabel=EFFECT_LABEL if f == "cell" or i % ncol == 0 else "")
    wrapped_suptitle(fig, "Effects on val loss along training, level minus baseline (band: 95% CI, unadjusted; negative = "
                 "better; legend: call at the last step, each step tested alone, not adjusted with the summary's tests)")
    return fig


def _step_panel(ax: Axes, part: pd.DataFrame, res: Results, f: str) -> None:
    """One line per level with its CI band; with more than MAX_LEGEND - 1 levels only the MAX_LEGEND - 3
    largest final effects get a colour, a band and a legend entry, the others are thin grey lines."""
    levels = in_order(part["level"], [] if f == "cell" else res.levels.get(f, []))
    last = part.sort_values("step").groupby("level", sort=False).last()
    top = len(levels) if len(levels) < MAX_LEGEND else MAX_LEGEND - 3
    if top < len(levels):
        levels = sorted(levels, key=lambda lv: -abs(last.loc[lv, "estimate"]))
        pal = dict(zip(levels, [c for i, c in enumerate(sns.color_palette("tab10")) if i != 7]))  # no grey
    else:
        pal = factor_palette(res, f, levels)
    band = shade_band(ax, res.margin, vertical=False)
    for k, lv in enumerate(levels):
        pts = part[part["level"] == lv].sort_values("step")
        if k >= top:
            ax.plot(pts["step"], pts["estimate"], color="lightgrey", lw=0.8, zorder=1)
            continue
        name = lv if f == "cell" else res.label(f, lv)
        ax.plot(pts["step"], pts["estimate"], color=pal[lv], lw=1.6, label=f"{name} ({call_of(last.loc[lv, 'call'])})")
        ax.fill_between(pts["step"], pts["ci_low"], pts["ci_high"], color=pal[lv], alpha=0.2, lw=0)
    handles = ax.get_legend_handles_labels()[0]
    if top < len(levels):
        handles.append(Line2D([], [], color="lightgrey", label=f"{len(levels) - top} smaller effects"))
    ax.set_title("cells vs the baseline cell" if f == "cell"
                 else f"{res.short(f)} (baseline: {res.baseline.get(f, '?')})")
    ax.grid(alpha=0.3)
    legend_outside(ax, handles + [band], "effect (final call)", below=True)
