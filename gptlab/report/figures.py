"""The report's figures, drawn with seaborn on the Agg backend and returned as PNG bytes.

Owns: validation curves per cell (band = min-max over seeds), best val loss per level of each
factor (runs + mean and 95% CI from `stats.level_table`), one interaction heatmap per pair of
factors, and throughput per cell. Colours are fixed per cell (curves, throughput) and per level
index (level plot: the baseline is always the first colour). Figures are built on
`matplotlib.figure.Figure` objects (no pyplot state, nothing to close, no display needed).
"""
from __future__ import annotations

import io
import itertools
import sys

import matplotlib

if "matplotlib.pyplot" not in sys.modules:  # force a non-interactive backend unless a GUI session owns pyplot
    matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from gptlab.report.load import Results  # noqa: E402

DPI = 90
LOSS_LABEL = "val loss (nats/char)"
BEST_LABEL = "best val loss (nats/char)"


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return buf.getvalue()


def cell_palette(res: Results) -> dict[str, tuple]:
    """One colour per cell, in grid order."""
    cells = list(res.cells["cell"])
    colours = sns.color_palette("tab10" if len(cells) <= 10 else "tab20", len(cells))
    return dict(zip(cells, colours))


def level_palette(levels: list[str], baseline: str) -> dict[str, tuple]:
    """Baseline first colour, other levels the next ones in grid order (same for every factor)."""
    ordered = [baseline] + [lv for lv in levels if lv != baseline]
    return dict(zip(ordered, sns.color_palette("deep", len(ordered))))


def val_curves(res: Results) -> bytes | None:
    """Validation loss vs step, one line per cell (mean over ok seeds, band = min-max)."""
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
    return _png(fig)


def level_effects(res: Results, levels: pd.DataFrame) -> bytes | None:
    """Best val loss per level of each factor: ok runs as dots, mean and 95% CI as black bars."""
    if not res.factors:
        return None
    ok = res.runs[res.runs["ok"] & res.runs["best_val_loss"].notna()]
    fig = Figure(figsize=(3.2 * len(res.factors) + 1, 4), layout="constrained")
    axes = fig.subplots(1, len(res.factors), sharey=True, squeeze=False)[0]
    for ax, f in zip(axes, res.factors):
        order = res.levels[f]
        sns.stripplot(data=ok, x=f, y="best_val_loss", order=order, hue=f, hue_order=order,
                      palette=level_palette(order, res.baseline[f]), alpha=0.6, legend=False, ax=ax)
        lv = levels[levels["factor"] == f].set_index("level").reindex(order)
        ax.errorbar(range(len(order)), lv["best_val_loss"], fmt="o", color="black", capsize=5,
                    yerr=[lv["best_val_loss"] - lv["ci_low"], lv["ci_high"] - lv["best_val_loss"]])
        ax.set(title=res.short(f), xlabel=f"{res.short(f)} (baseline: {res.baseline[f]})", ylabel=BEST_LABEL)
    fig.suptitle("Best validation loss per level (dots: runs; bars: mean and 95% CI)")
    return _png(fig)


def interactions(res: Results) -> bytes | None:
    """Mean best val loss for every pair of levels of every pair of factors (heatmaps)."""
    pairs = [(a, b) for a, b in itertools.combinations(res.factors, 2)
             if len(res.levels[a]) > 1 and len(res.levels[b]) > 1]
    ok = res.runs[res.runs["ok"] & res.runs["best_val_loss"].notna()]
    if not pairs or ok.empty:
        return None
    ncol = min(3, len(pairs))
    nrow = -(-len(pairs) // ncol)
    fig = Figure(figsize=(4.3 * ncol, 3.4 * nrow), layout="constrained")
    axes = fig.subplots(nrow, ncol, squeeze=False).ravel()
    for ax, (a, b) in zip(axes, pairs):
        table = ok.groupby([a, b])["best_val_loss"].mean().unstack(b)
        table = table.reindex(index=res.levels[a], columns=res.levels[b]).astype(float)
        sns.heatmap(table, annot=True, fmt=".4f", cmap="viridis_r", ax=ax, annot_kws={"size": 8},
                    cbar_kws={"label": BEST_LABEL})
        ax.set(title=f"{res.short(a)} x {res.short(b)}", xlabel=res.short(b), ylabel=res.short(a))
    for ax in axes[len(pairs):]:
        ax.set_visible(False)
    fig.suptitle("Mean best val loss by pair of factors (lower is better)")
    return _png(fig)


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
    return _png(fig)


def make_figures(res: Results, levels: pd.DataFrame) -> dict[str, bytes]:
    """All figures that apply to these results: file name -> PNG bytes."""
    figs = {"val_curves.png": val_curves(res), "level_effects.png": level_effects(res, levels),
            "interactions.png": interactions(res), "throughput.png": throughput(res)}
    return {name: png for name, png in figs.items() if png is not None}
