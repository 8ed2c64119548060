"""`figures/isolation.png` of a tuned sweep: the Tuning Playbook's isolation plot, drawn from `tables/tuning.csv`.

One curve per cell: the mean selection loss (best val loss of the ok selection runs; bars: their SD
when there are two or more) against the tuned setting, each cell's pick circled (a black square when
it lies on the edge of the space: black is no cell's colour), and a setting whose runs all diverged or collapsed
drawn as an x at the unigram loss. One numeric tuned key spread over a factor of 4 or more is drawn
on a log2 axis (a learning rate). With `tables/lr_curves.csv`'s rows, each cell's fitted curve is drawn
dashed over its window, and its fitted optimum as a diamond at the fitted minimum with a horizontal
bar over the optimum's 95% CI (an unbounded side runs to the plot's sampled range, ending in an arrow).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from gptlab.report.figures.figstyle import BEST_LABEL, cell_palette, png_or_none
from gptlab.report.load import Results

EDGE_COLOUR = "black"  # a pick on the edge of the space: no cell is drawn in black (tab10 and tab20 have none)


def _numeric(values: pd.Series) -> np.ndarray | None:
    x = pd.to_numeric(values, errors="coerce").to_numpy(float)
    return x if np.isfinite(x).all() else None


def isolation_plot(res: Results, table: pd.DataFrame, keys: list[str], ceiling: float,
                   curves: pd.DataFrame | None = None) -> bytes | None:
    """The isolation plot's PNG; None when no selection run has a loss."""
    return png_or_none(isolation_figure(res, table, keys, ceiling, curves))


def isolation_figure(res: Results, table: pd.DataFrame, keys: list[str], ceiling: float,
                     curves: pd.DataFrame | None = None) -> Figure | None:
    """The isolation plot (`curves`: lr_curves.csv's rows, drawn on a log2 lr axis only); None without a loss."""
    if table.empty or not (table["mean_loss"].notna().any() or table["n_diverged"].gt(0).any()):
        return None
    settings, x_of, log2 = _x_positions(table, keys)
    fig = Figure(figsize=(9, 5), layout="constrained")
    ax = fig.subplots()
    palette = cell_palette(res)
    for cell, rows in table.groupby("cell", sort=False):
        _draw_cell(ax, rows, [x_of[s] for s in rows["setting"]], palette.get(cell, "black"), cell, ceiling)
    fitted = log2 and curves is not None and len(curves) > 0
    if fitted:
        _draw_fits(ax, curves, palette, min(x_of.values()), max(x_of.values()))
    _x_axis(ax, table, keys, settings, x_of, log2)
    if math.isfinite(ceiling) and table["n_diverged"].gt(0).any():
        ax.axhline(ceiling, color="grey", linestyle=":", linewidth=1)
    ax.set(xlabel=", ".join(keys), ylabel=f"mean selection {BEST_LABEL}",
           title="Isolation plot: picks circled (a black square: on the edge); x: every run diverged or did not learn"
           + ("\ndashed: the fit near each optimum; diamond and bar: fitted optimum and its 95% CI" if fitted else ""))
    ax.title.set_fontsize("medium")
    ax.legend(handles=_legend_handles(ax, table, fitted), title="cell", fontsize="small", title_fontsize="small",
              loc="best")
    return fig


def _x_positions(table: pd.DataFrame, keys: list[str]) -> tuple[list, dict, bool]:
    """The tuned settings in order, each one's x (its value, for one numeric key; else its place), and whether the
    axis is log2 (one numeric key spread over a factor of 4 or more: a learning rate)."""
    settings = list(dict.fromkeys(table["setting"]))
    x_of = {s: float(i) for i, s in enumerate(settings)}
    log2 = False
    if len(keys) == 1:
        first = table.drop_duplicates("setting")
        values = _numeric(first[keys[0]])
        if values is not None:
            x_of = dict(zip(first["setting"], values))
            log2 = bool(values.min() > 0 and values.max() / values.min() >= 4)
    return settings, x_of, log2


def _draw_cell(ax, rows: pd.DataFrame, xs: list[float], colour: str, cell: str, ceiling: float) -> None:
    """One cell's curve: mean selection loss (SD bars) at each setting, the points beyond the stability cliff apart,
    the settings whose runs all failed as an x at the unigram loss, and its pick circled (a square on the edge)."""
    x = np.array(xs)
    y = rows["mean_loss"].to_numpy(float)
    sd = rows["sd_loss"].to_numpy(float)
    cut = rows["beyond_cliff"].fillna(False).astype(bool).to_numpy() if "beyond_cliff" in rows else \
        np.zeros(len(rows), bool)  # beyond the stability cliff: shown apart, never joined to the curve
    ax.errorbar(x[~cut], y[~cut], yerr=np.where(np.isfinite(sd), sd, 0.0)[~cut] if np.isfinite(sd).any() else None,
                color=colour, marker="o", markersize=4, capsize=3, label=cell)
    if (cut & np.isfinite(y)).any():
        ax.scatter(x[cut], y[cut], marker="v", s=45, facecolors="none", edgecolors=colour, zorder=3)
    lost = (~np.isfinite(y)) & rows["n_diverged"].gt(0).to_numpy()
    if lost.any() and math.isfinite(ceiling):
        ax.scatter(x[lost], np.full(lost.sum(), ceiling), marker="x", color=colour, s=50)
    picked = rows["picked"].astype(bool).to_numpy()
    edge = rows["at_edge"].astype(bool).to_numpy()
    for i in np.flatnonzero(picked & np.isfinite(y)):
        ax.scatter([x[i]], [y[i]], s=180, facecolors="none", linewidths=2, marker="s" if edge[i] else "o",
                   edgecolors=EDGE_COLOUR if edge[i] else colour, zorder=3)
        if edge[i]:
            ax.annotate("edge", (x[i], y[i]), textcoords="offset points", xytext=(6, 8), color=EDGE_COLOUR,
                        fontsize="small")


def _x_axis(ax, table: pd.DataFrame, keys: list[str], settings: list, x_of: dict, log2: bool) -> None:
    """A log2 axis ticked at the settings, or the settings' names at their places (a key that is not one number)."""
    if log2:
        ax.set_xscale("log", base=2)
        ticks = sorted(set(x_of.values()))
        ax.set_xticks(ticks, [f"{t:.3g}" for t in ticks])
        ax.minorticks_off()
    elif len(keys) != 1 or _numeric(table.drop_duplicates("setting")[keys[0]]) is None:
        ax.set_xticks(list(x_of.values()), [str(s) for s in x_of], rotation=30 if len(settings) > 5 else 0,
                      ha="right" if len(settings) > 5 else "center")


def _legend_handles(ax, table: pd.DataFrame, fitted: bool) -> list:
    """The cells' lines, then the markers' meanings: a pick, one on the edge, beyond the cliff, the fits."""
    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], linestyle="none", marker="o", markerfacecolor="none", markeredgecolor="grey",
                       markersize=9, label="pick"),
                Line2D([], [], linestyle="none", marker="s", markerfacecolor="none", markeredgecolor=EDGE_COLOUR,
                       markeredgewidth=2, markersize=9, label="pick on the edge")]
    if "beyond_cliff" in table and table["beyond_cliff"].fillna(False).astype(bool).any():
        handles.append(Line2D([], [], linestyle="none", marker="v", markerfacecolor="none", markeredgecolor="grey",
                              markersize=7, label="beyond the stability cliff (out of picks, fits and noise)"))
    if fitted:
        handles += [Line2D([], [], color="grey", linestyle="--", label="fitted curve"),
                    Line2D([], [], color="grey", marker="D", markeredgecolor=EDGE_COLOUR, label="fitted optimum, 95% CI")]
    return handles


def _draw_fits(ax, curves: pd.DataFrame, palette: dict, x_min: float, x_max: float) -> None:
    """Each cell's fitted curve over its window (dashed), and its optimum with the 95% CI as a horizontal bar."""
    for row in curves.to_dict("records"):
        opt, c, m, bend = (float(row.get(k, math.nan)) for k in ("optimum_lr", "curvature", "min_loss", "bend"))
        if not all(map(math.isfinite, (opt, c, m, bend))):
            continue
        colour = palette.get(row["cell"], "grey")
        lr = np.geomspace(float(row["window_lr_low"]), float(row["window_lr_high"]), 60)
        d = np.log2(lr / opt)
        ax.plot(lr, m + c * d * d * np.exp(bend * d), color=colour, linestyle="--", linewidth=1.2, zorder=2)
        low, high = float(row["optimum_lr_low"]), float(row["optimum_lr_high"])
        if not (math.isnan(low) or math.isnan(high)):  # NaN: no CI (no noise estimate)
            lo, hi = max(low, x_min), min(high, x_max)
            ax.plot([lo, hi], [m, m], color=colour, linewidth=2, zorder=3)
            for end, bound, marker in ((lo, low, "<"), (hi, high, ">")):
                if not x_min <= bound <= x_max:  # unbounded, or beyond the sampled range
                    ax.plot([end], [m], marker=marker, color=colour, markersize=6, zorder=3)
        ax.scatter([opt], [m], marker="D", s=40, color=colour, edgecolors=EDGE_COLOUR, linewidths=0.8, zorder=4)
