"""`figures/isolation.png` of a tuned sweep: the Tuning Playbook's isolation plot, drawn from `tables/tuning.csv`.

One curve per cell: the mean selection loss (best val loss of the ok selection runs; bars: their SD
when there are two or more) against the tuned setting, each cell's pick circled (in red when it lies
on the edge of the space), and a setting whose runs all diverged drawn as an x at the unigram loss.
One numeric tuned key spread over a factor of 4 or more is drawn on a log2 axis (a learning rate).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from gptlab.report.figstyle import BEST_LABEL, cell_palette, png_or_none
from gptlab.report.load import Results

EDGE_COLOUR = "#d62728"


def _numeric(values: pd.Series) -> np.ndarray | None:
    x = pd.to_numeric(values, errors="coerce").to_numpy(float)
    return x if np.isfinite(x).all() else None


def isolation_plot(res: Results, table: pd.DataFrame, keys: list[str], ceiling: float) -> bytes | None:
    """The isolation plot's PNG; None when no selection run has a loss."""
    if table.empty or not (table["mean_loss"].notna().any() or table["n_diverged"].gt(0).any()):
        return None
    settings = list(dict.fromkeys(table["setting"]))
    x_of = {s: float(i) for i, s in enumerate(settings)}
    log2 = False
    if len(keys) == 1:
        first = table.drop_duplicates("setting")
        values = _numeric(first[keys[0]])
        if values is not None:
            x_of = dict(zip(first["setting"], values))
            log2 = bool(values.min() > 0 and values.max() / values.min() >= 4)
    fig = Figure(figsize=(9, 5), layout="constrained")
    ax = fig.subplots()
    palette = cell_palette(res)
    for cell, rows in table.groupby("cell", sort=False):
        colour = palette.get(cell, "black")
        x = np.array([x_of[s] for s in rows["setting"]])
        y = rows["mean_loss"].to_numpy(float)
        sd = rows["sd_loss"].to_numpy(float)
        ax.errorbar(x, y, yerr=np.where(np.isfinite(sd), sd, 0.0) if np.isfinite(sd).any() else None,
                    color=colour, marker="o", markersize=4, capsize=3, label=cell)
        lost = (~np.isfinite(y)) & rows["n_diverged"].gt(0).to_numpy()
        if lost.any() and math.isfinite(ceiling):
            ax.scatter(x[lost], np.full(lost.sum(), ceiling), marker="x", color=colour, s=50)
        picked = rows["picked"].astype(bool).to_numpy()
        edge = rows["at_edge"].astype(bool).to_numpy()
        for i in np.flatnonzero(picked & np.isfinite(y)):
            ax.scatter([x[i]], [y[i]], s=180, facecolors="none", linewidths=2,
                       edgecolors=EDGE_COLOUR if edge[i] else colour, zorder=3)
            if edge[i]:
                ax.annotate("edge", (x[i], y[i]), textcoords="offset points", xytext=(6, 8), color=EDGE_COLOUR,
                            fontsize="small")
    if log2:
        ax.set_xscale("log", base=2)
        ticks = sorted(set(x_of.values()))
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
    elif len(keys) != 1 or _numeric(table.drop_duplicates("setting")[keys[0]]) is None:
        ax.set_xticks(list(x_of.values()), [str(s) for s in x_of], rotation=30 if len(settings) > 5 else 0,
                      ha="right" if len(settings) > 5 else "center")
    if math.isfinite(ceiling) and table["n_diverged"].gt(0).any():
        ax.axhline(ceiling, color="grey", linestyle=":", linewidth=1)
    ax.set(xlabel=", ".join(keys), ylabel=f"mean selection {BEST_LABEL}",
           title="Isolation plot: picks circled (red: on the edge); x: every run diverged")
    ax.title.set_fontsize("medium")
    ax.legend(title="cell", fontsize="small", title_fontsize="small", loc="best")
    return png_or_none(fig)
