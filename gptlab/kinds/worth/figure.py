"""`figures/worth.png` of a `worth:` study: the baseline's loss against length, with each arm placed on it.

One panel per scale level: the baseline's runs of the curve (each seed's points faint, joined by seed),
the per-length means (dots) and the curve through them, against log2 steps; each arm at the steps that
match its loss (a marker in its level colour, its 95% CI a horizontal bar, an open end drawn as an arrow)
and at its loss (with an anchor, the curve's loss at the study's length plus the arm's effect). An arm
beyond the lengths trained is an open marker at that edge with an arrow pointing out: never extrapolated.
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from gptlab.kinds.worth.tables import WorthView
from gptlab.report.figures.figstyle import figsize, level_palette, panel_grid, png_or_none
from gptlab.report.load import Results
from gptlab.stats.arms import ARM

ARROW = 0.25  # log2 steps an edge arrow points out by


def worth_plot(res: Results, view: WorthView | None) -> bytes | None:
    """The figure's PNG; None without a curve to draw."""
    return png_or_none(worth_figure(res, view))


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def worth_figure(res: Results, view: WorthView | None) -> Figure | None:
    """The figure (see the module docstring); None without a curve."""
    if view is None or not len(view.curves):
        return None
    levels = list(dict.fromkeys(view.curves["scale_level"]))
    fig = Figure(figsize=figsize(6.5 * min(len(levels), 2), 4.5 * -(-len(levels) // 2)), layout="constrained")
    axes = panel_grid(fig, len(levels), 2)
    palette = level_palette(res.levels.get(ARM, []), res.baseline.get(ARM, ""))
    for ax, level in zip(axes, levels):
        _panel(ax, view, level, palette)
        ax.set_title(res.label(view.scale_factor, level) if view.scale_factor else "", fontsize="medium")
    handles = [Line2D([], [], color="grey", alpha=0.35, marker=".", label="baseline: one seed"),
               Line2D([], [], color="black", marker="o", label="baseline: mean and curve"),
               Line2D([], [], color="grey", marker="D", linestyle="none", label="arm at its matched steps, 95% CI"),
               Line2D([], [], color="grey", marker="D", markerfacecolor="none", linestyle="none",
                      label="arm beyond the lengths trained")]
    axes[0].legend(handles=handles, fontsize="small", loc="upper right", frameon=False)
    fig.suptitle("The baseline's loss against its steps, each arm placed on it", fontsize="medium")
    return fig


def _panel(ax, view: WorthView, level: str, palette: dict) -> None:
    pts = view.points[view.points["scale_level"] == level]
    curve = view.curves[view.curves["scale_level"] == level]
    x = np.log2(pts["steps"].to_numpy(float))
    for _, seed in pts.assign(x=x).sort_values("x").groupby("seed"):
        ax.plot(seed["x"], seed["loss"], color="grey", alpha=0.35, marker=".", linewidth=0.8)
    means = pts.assign(x=x).groupby("x")["loss"].mean()
    ax.plot(means.index, means.to_numpy(), "o", color="black", markersize=5, zorder=3)
    cx = np.log2(curve["steps"].to_numpy(float))
    ax.plot(cx, curve["loss"].to_numpy(float), color="black", linewidth=1.5, zorder=2)
    lo_x, hi_x = float(cx.min()), float(cx.max())
    table = view.table
    rows = table[table["scale_level"].astype(str) == str(level)] if "scale_level" in table else table
    for r in rows.to_dict("records"):
        _arm(ax, r, palette.get(r["arm"], "grey"), lo_x, hi_x)
    steps = sorted(set(pts["steps"].astype(float)))
    ax.set_xticks(np.log2(steps), [f"{s:g}" for s in steps])
    ax.set_xlim(lo_x - 2 * ARROW, hi_x + 2 * ARROW)
    ax.set(xlabel="training steps (log2)", ylabel="loss")


def _arm(ax, r: dict, colour, lo_x: float, hi_x: float) -> None:
    """One arm: at its matched steps with its CI bar, or at the edge with an arrow out when censored."""
    y, s = _num(r.get("placed_loss")), _num(r.get("study_steps"))
    if not (math.isfinite(y) and s > 0):
        return
    x0 = math.log2(s)
    m = _num(r.get("multiplier"))
    if r.get("censored") in ("above", "below"):
        edge, out = (hi_x, ARROW) if r["censored"] == "above" else (lo_x, -ARROW)
        ax.annotate("", (edge + out, y), (edge, y), arrowprops=dict(arrowstyle="->", color=colour, lw=1.5))
        ax.plot([edge], [y], marker="D", markerfacecolor="none", markeredgecolor=colour, markersize=7, zorder=4)
    elif math.isfinite(m):
        x = x0 + math.log2(m)
        low = lo_x if str(r.get("low_open")) == "True" else x0 + math.log2(max(_num(r["multiplier_low"]), 1e-9))
        high = hi_x if str(r.get("high_open")) == "True" else x0 + math.log2(max(_num(r["multiplier_high"]), 1e-9))
        ax.plot([low, high], [y, y], color=colour, linewidth=2, zorder=3)
        for end, opened, out in ((low, r.get("low_open"), -ARROW), (high, r.get("high_open"), ARROW)):
            if str(opened) == "True":
                ax.annotate("", (end + out, y), (end, y), arrowprops=dict(arrowstyle="->", color=colour, lw=1.5))
        ax.plot([x], [y], marker="D", color=colour, markersize=7, zorder=4)
        edge = x
    else:
        return
    ax.annotate(str(r["arm"]), (edge, y), textcoords="offset points", xytext=(5, 4), fontsize="small", color=colour)
