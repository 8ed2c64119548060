"""What every report figure shares: the Agg backend, sizes, colours, the equivalence band, PNG encoding.

The backend, sizes, colours by call and level, the equivalence band, legends and titles, and PNG
encoding.

Conventions: colours are fixed per cell (curves, throughput, per-cell effects), per level index
(the baseline is always the first colour) and per call (better green, worse red, equivalent blue,
inconclusive grey; markers by call too: better a down triangle, worse an up triangle). Effects are
level minus baseline in the report's loss unit (negative = better), drawn with a line at 0 and the equivalence
band [-margin, +margin] shaded. Figures are `matplotlib.figure.Figure` objects (no pyplot state,
nothing to close, no display needed), sized by `figsize` (capped so that they stay readable).
"""
from __future__ import annotations

import io
import math
import sys
import textwrap
from typing import Iterable

import matplotlib

if "matplotlib.pyplot" not in sys.modules:  # force a non-interactive backend unless a GUI session owns pyplot
    matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from gptlab.report.load import Results  # noqa: E402
from gptlab.stats.calls import BETTER, EQUIVALENT, INCONCLUSIVE, WORSE  # noqa: E402

DPI = 90
# No unit in the labels: the report states it once (nats/char, nats/token, or bits/char when tokenizers mix).
LOSS_LABEL = "val loss"
BEST_LABEL = "best val loss"
MEAN_LABEL = "mean best val loss"
EFFECT_LABEL = "effect on val loss (level - baseline)"
CALL_COLOURS = {BETTER: "#2ca02c", WORSE: "#d62728", EQUIVALENT: "#1f77b4", INCONCLUSIVE: "#7f7f7f"}
CALL_MARKERS = {BETTER: "v", WORSE: "^", EQUIVALENT: "D", INCONCLUSIVE: "o"}
BAND_COLOUR = "#c6dbef"
MAX_WIDTH, MAX_HEIGHT = 24.0, 30.0  # inches
MAX_LEGEND = 12  # entries
MAX_FOREST_ROWS = 60
MAX_TICK_LABELS = 24  # per panel of the simple-effects figure
MAX_CELL_LINES = 8  # val_curves draws one line per cell up to this many cells


def to_png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)  # constrained layout fits the page: no second "tight" pass
    return buf.getvalue()


def png_or_none(fig: Figure | None) -> bytes | None:
    return None if fig is None else to_png(fig)


def figsize(width: float, height: float) -> tuple[float, float]:
    """A figure size in inches, clamped to [4, MAX_WIDTH] x [2.5, MAX_HEIGHT] so the PNG stays readable."""
    return min(max(width, 4.0), MAX_WIDTH), min(max(height, 2.5), MAX_HEIGHT)


def panel_grid(fig: Figure, n: int, ncol: int, **kw) -> list[Axes]:
    """n panels in rows of at most `ncol`; unused slots hidden, x tick labels kept on each column's last panel."""
    ncol = max(1, min(ncol, n))
    axes = fig.subplots(-(-n // ncol), ncol, squeeze=False, **kw).ravel()
    for i, ax in enumerate(axes):
        ax.set_visible(i < n)
        if i < n and i + ncol >= n:
            ax.tick_params(labelbottom=True)
    return list(axes[:n])


def in_order(values: Iterable, known: Iterable) -> list:
    """Known values (grid order) that occur in `values`, then the others in order of appearance."""
    seen = list(dict.fromkeys(values))
    return [v for v in known if v in seen] + [v for v in seen if v not in set(known)]


def call_of(value) -> str:
    """The call word, unknown or missing values counted as inconclusive."""
    return value if value in CALL_COLOURS else INCONCLUSIVE


def numeric_rows(df: pd.DataFrame, cols: list[str], need: str) -> pd.DataFrame:
    """Copy of `df` with `cols` as floats and rows whose `need` is NaN dropped."""
    df = df.reset_index(drop=True)  # a concatenated frame may repeat index labels
    for c in cols:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    return df[df[need].notna()]


def errorbars(ax: Axes, pos, est, lo, hi, horizontal: bool, bar_style: str = "solid", **kw) -> None:
    """Error bars from CI bounds (a missing or inverted bound draws no bar on that side); `bar_style`: the bars'
    line style ("dashed": an interval drawn apart from the others)."""
    est, lo, hi = (np.asarray(v, dtype=float) for v in (est, lo, hi))
    err = np.nan_to_num(np.clip([est - lo, hi - est], 0, None))
    if horizontal:
        bars = ax.errorbar(est, pos, xerr=err, linestyle="none", capsize=3, **kw)
    else:
        bars = ax.errorbar(pos, est, yerr=err, capsize=3, **kw)
    for line in bars.lines[2]:
        line.set_linestyle(bar_style)


def shade_band(ax: Axes, margin: float, vertical: bool = True) -> Patch:
    """Zero line and the shaded equivalence band [-margin, margin] (vertical: effect on x); the band's legend entry."""
    if margin and math.isfinite(margin):
        span = ax.axvspan if vertical else ax.axhspan
        span(-margin, margin, color=BAND_COLOUR, alpha=0.6, lw=0, zorder=0)
    (ax.axvline if vertical else ax.axhline)(0, color="black", lw=0.8, zorder=1)
    return Patch(facecolor=BAND_COLOUR, alpha=0.6, label=f"equivalence margin +/- {margin:g}")


def call_handles(colour: str | None = None) -> list[Line2D]:
    """Legend entries for the four calls (colour by call unless one colour is given)."""
    return [Line2D([], [], linestyle="none", marker=CALL_MARKERS[c], color=colour or CALL_COLOURS[c], label=c)
            for c in CALL_COLOURS]


def legend_outside(ax: Axes, handles: list, title: str, below: bool = False) -> None:
    """A legend outside the axes (right, or below when short), at most MAX_LEGEND entries (the title says when cut)."""
    if len(handles) > MAX_LEGEND:
        title = f"{title} (first {MAX_LEGEND} of {len(handles)})"
        handles = handles[:MAX_LEGEND]
    longest = max((len(h.get_label()) for h in handles), default=1)
    below = below and len(handles) <= 4 and longest <= 40  # a long legend goes to the right
    where = dict(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=max(1, min(3, 80 // (longest + 6)))) \
        if below else dict(loc="upper left", bbox_to_anchor=(1.02, 1))
    ax.legend(handles=handles, title=title, fontsize="small", title_fontsize="small", frameon=False, **where)


def wrapped_suptitle(fig: Figure, text: str) -> None:
    """Figure title wrapped to the figure's width (about 11 characters per inch)."""
    width = int(fig.get_figwidth() * 11)
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in text.split("\n")))


def short_at(res: Results, text: str) -> str:
    """'model.activation=gelu, model.position=learned' -> 'activation=gelu, position=learned'."""
    parts = [p.partition("=") for p in str(text).split(", ")]
    return ", ".join(res.label(k, v) if sep and k in res.factors else k + sep + v for k, sep, v in parts)


def level_text(res: Results, factor: str, level: str) -> str:
    """'post', or 'pre (baseline)' for the factor's baseline level."""
    return f"{level} (baseline)" if res.baseline.get(factor) == level else str(level)


def factor_palette(res: Results, factor: str, levels: list[str]) -> dict:
    """Level colours as in `level_palette`; per-cell effects ("cell") use the cell colours."""
    if factor == "cell":
        pal = cell_palette(res)
        extra = [lv for lv in levels if lv not in pal]
        return {**pal, **dict(zip(extra, sns.color_palette("husl", len(extra))))}
    known = res.levels.get(factor, [])
    every = known + [lv for lv in levels if lv not in known]
    return level_palette(every, res.baseline.get(factor, every[0]))


def cell_palette(res: Results) -> dict[str, tuple]:
    """One colour per cell, in grid order."""
    cells = list(res.cells["cell"])
    colours = sns.color_palette("tab10" if len(cells) <= 10 else "tab20", len(cells))
    return dict(zip(cells, colours))


def level_palette(levels: list[str], baseline: str) -> dict[str, tuple]:
    """Baseline first colour, other levels the next ones in grid order (same for every factor)."""
    ordered = [baseline] + [lv for lv in levels if lv != baseline]
    return dict(zip(ordered, sns.color_palette("deep", len(ordered))))
