"""The figures of a sweep's runs: validation curves, best val loss per level, throughput, and the forest's rows.

Effect figures live in `effect_figures`, what every figure shares in
`figstyle`, a kind's in its folder (`gptlab/kinds/`); which figures a report gets is the step's own
(`gptlab.report.figures`). Every figure is drawn from
the report's tables (`tables.ReportTables`) and its runs, after the sentences and before the document.

Validation curves: one line per cell with a min-max band over seeds for at most 8 cells, else one
panel per factor with the marginal mean per level and its 95% CI, y zoomed to the second half of
training. Every `X(...) -> bytes | None` returns PNG bytes (None when there is nothing to draw).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from gptlab.report.figures import figstyle  # noqa: F401  first: it selects Agg before seaborn loads pyplot
from gptlab.report.figures.figstyle import (
    BEST_LABEL,
    LOSS_LABEL,
    MAX_CELL_LINES,
    cell_palette,
    factor_palette,
    figsize,
    in_order,
    legend_outside,
    level_palette,
    level_text,
    numeric_rows,
    panel_grid,
    png_or_none,
    to_png,
    wrapped_suptitle,
)
from gptlab.report.load import Results
from gptlab.report.tables import ReportTables
from gptlab.stats.arms import ARM


def val_curves(res: Results, level_curves: pd.DataFrame | None = None) -> bytes | None:
    """Validation loss vs step: one line per cell up to MAX_CELL_LINES cells, else one panel per factor
    drawn from `level_curves` (None when it is missing or empty)."""
    if len(res.cells) > MAX_CELL_LINES:
        return png_or_none(_draw_level_curves(res, level_curves))
    return png_or_none(_draw_cell_curves(res))


def _draw_cell_curves(res: Results) -> Figure | None:
    """One line per cell (mean over ok seeds, band = min-max); whole run and second half."""
    data = res.curves[res.curves["ok"].astype(bool)]
    if data.empty:
        return None
    data = data.astype({"step": float, "val_loss": float})
    fig = Figure(figsize=(13, 4.8), layout="constrained")
    axes = fig.subplots(1, 2)
    late = data[data["step"] >= data["step"].max() / 2]
    pal = cell_palette(res)
    order = [c for c in res.cells["cell"] if c in set(data["cell"])]
    for ax, part, title in ((axes[0], data, "whole run"), (axes[1], late, "second half (zoom)")):
        sns.lineplot(data=part, x="step", y="val_loss", hue="cell", hue_order=order, palette=pal,
                     estimator="mean", errorbar=("pi", 100), ax=ax, legend=ax is axes[1])
        ax.set(title=f"Validation loss, {title}", xlabel="step", ylabel=LOSS_LABEL)
    sns.move_legend(axes[1], "upper left", bbox_to_anchor=(1.02, 1), title="cell (ok runs; band: min-max over seeds)",
                    fontsize="small", title_fontsize="small")
    return fig


def _draw_level_curves(res: Results, level_curves: pd.DataFrame | None) -> Figure | None:
    """One panel per factor: marginal mean val loss per level over step (band: 95% CI), shared y zoomed
    to the second half of training."""
    if level_curves is None or level_curves.empty:
        return None
    data = numeric_rows(level_curves, ["step", "mean", "ci_low", "ci_high"], "mean")
    factors = in_order(data["factor"], res.factors)
    if not factors:
        return None
    ncol = min(3, len(factors))
    fig = Figure(figsize=figsize(6.2 * ncol, 3.6 * -(-len(factors) // ncol)), layout="constrained")
    axes = panel_grid(fig, len(factors), ncol, sharex=True, sharey=True)
    for i, (ax, f) in enumerate(zip(axes, factors)):
        part = data[data["factor"] == f]
        levels = in_order(part["level"], res.levels.get(f, []))
        pal = factor_palette(res, f, levels)
        for lv in levels:
            pts = part[part["level"] == lv].sort_values("step")
            ax.plot(pts["step"], pts["mean"], color=pal[lv], lw=1.6, label=level_text(res, f, lv))
            ax.fill_between(pts["step"], pts["ci_low"], pts["ci_high"], color=pal[lv], alpha=0.2, lw=0)
        ax.set(title=res.short(f), xlabel="step" if i + ncol >= len(factors) else "",
               ylabel=LOSS_LABEL if i % ncol == 0 else "")
        legend_outside(ax, ax.get_legend_handles_labels()[0], res.short(f))
    axes[0].set_ylim(*_late_ylim(data))
    wrapped_suptitle(fig, "Validation loss per level of each factor: marginal mean over the other factors "
                 "(band: 95% CI); y zoomed to the second half of training")
    return fig


def _late_ylim(data: pd.DataFrame) -> tuple[float, float]:
    """y limits covering the means and CIs of the second half of training, plus 15% either side."""
    late = data[data["step"] >= data["step"].max() / 2]
    values = pd.concat([late["mean"], late["ci_low"], late["ci_high"]]).dropna()
    lo, hi = float(values.min()), float(values.max())
    pad = max(0.15 * (hi - lo), 1e-3 * max(abs(hi), 1.0))
    return lo - pad, hi + pad


def level_effects(res: Results, levels: pd.DataFrame) -> bytes | None:
    """Best val loss per level of each factor: ok runs as dots, mean and 95% CI as black bars."""
    if not res.factors:
        return None
    ok = res.runs[res.runs["ok"] & res.runs["best_val_loss"].notna()]
    fig = Figure(figsize=(3.2 * len(res.factors) + 1, 4), layout="constrained")
    axes = fig.subplots(1, len(res.factors), sharey=True, squeeze=False)[0]
    for ax, f in zip(axes, res.factors):
        order = res.levels[f]
        # The levels sit at positions 0..n-1 named by their tick labels, not on matplotlib's category
        # axis: levels such as "0" and "100" would make it log "Using categorical units..." on the
        # console. A jitter from its own seeded generator draws the same picture on every regeneration.
        palette = level_palette(order, res.baseline[f])
        jitter = np.random.default_rng(0)
        for i, level in enumerate(order):
            losses = ok.loc[ok[f] == level, "best_val_loss"].to_numpy(dtype=float)
            ax.scatter(i + jitter.uniform(-0.1, 0.1, len(losses)), losses, s=25, color=palette[level], alpha=0.6,
                       linewidths=0)
        ax.set_xticks(range(len(order)), [str(level) for level in order])
        ax.set_xlim(-0.5, len(order) - 0.5)
        lv = levels[levels["factor"] == f].set_index("level").reindex(order)
        ax.errorbar(range(len(order)), lv["best_val_loss"], fmt="o", color="black", capsize=5,
                    yerr=[lv["best_val_loss"] - lv["ci_low"], lv["ci_high"] - lv["best_val_loss"]])
        ax.set(title=res.short(f), xlabel=f"{res.short(f)} (baseline: {res.baseline[f]})", ylabel=BEST_LABEL)
    fig.suptitle("Best validation loss per level (dots: runs; bars: mean and 95% CI)")
    return to_png(fig)


def throughput(res: Results) -> bytes | None:
    """Training tokens per second per cell (bar: mean over ok seeds, line: +/- 1 sd)."""
    ok = res.runs[res.runs["ok"] & res.runs["tokens_per_sec"].notna()]
    if ok.empty:
        return None
    order = [c for c in res.cells["cell"] if c in set(ok["cell"])]
    fig = Figure(figsize=(8, 0.35 * len(order) + 1.5), layout="constrained")
    ax = fig.subplots()
    sns.barplot(data=ok, x="tokens_per_sec", y="cell", order=order, hue="cell", hue_order=order,
                palette=cell_palette(res), errorbar="sd", legend=False, ax=ax)
    ax.set(title="Training throughput per cell (mean over seeds, +/- 1 sd)", xlabel="tokens / s", ylabel="cell")
    return to_png(fig)


def forest_rows(tables: ReportTables, res: Results) -> pd.DataFrame:
    """Every effect with a CI, for the forest plot: group, label, estimate, ci_low, ci_high, call.

    An arms sweep's are its arms against the baseline (one group per scale level)."""
    parts = []
    if len(tables.arms.columns):
        arms = tables.arms
        at = ([f" at {res.label(f, lv)}" for f, lv in zip(arms["scale_factor"], arms["scale_level"])]
              if "scale_factor" in arms else [""] * len(arms))
        parts.append(arms.assign(group=[f"arms against {b}{a}" for b, a in zip(arms["baseline"], at)],
                                 label=[f"{a}" + (f" ({p})" if p else "") for a, p in zip(arms[ARM], arms["pick"])]))
        main, interactions = tables.main.iloc[:0], tables.interactions.iloc[:0]
    else:
        main, interactions = tables.main, tables.interactions
    if len(main):
        parts.append(main.assign(group="main effect", label=[f"{res.label(f, lv)} vs {b}" for f, lv, b in
                                                           zip(main["factor"], main["level"], main["baseline"])]))
    if len(interactions):
        parts.append(interactions.assign(group="interaction", label=[
            f"{res.label(a, la)} x {res.label(b, lb)}" for a, la, b, lb in
            zip(interactions["factor_a"], interactions["level_a"], interactions["factor_b"], interactions["level_b"])]))
    others = ((tables.higher, "higher-order", "term"), (tables.aliases, "aliased sum", "aliased"),
              (tables.cells_vs_baseline, "cell vs baseline", "cell")) if not len(tables.arms.columns) else ()
    for table, group, col in others:
        if len(table):
            parts.append(table.assign(group=group, label=table[col]))
    cols = ["group", "label", "estimate", "ci_low", "ci_high", "call"]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat([p[cols] for p in parts], ignore_index=True)
    return out.dropna(subset=["ci_low"])
