"""The report's figures, drawn with seaborn/matplotlib on the Agg backend and returned as PNG bytes.

Owns every figure of the report and how it looks; the numbers come in as DataFrames (from
`stats`) plus the `Results` of `load` for factor/level order and labels, so each figure is a pure
function of its inputs. Figures: validation curves (one line per cell with a min-max band over
seeds for at most 8 cells, else one panel per factor with the marginal mean per level and its 95%
CI, y zoomed to the second half of training), best val loss per level of each factor, interaction plots (marginal means of each pair of levels
with 95% CI), a forest plot of every effect, simple effects per factor, effects along training, and
throughput per cell.

Conventions: colours are fixed per cell (curves, throughput, per-cell effects), per level index
(the baseline is always the first colour) and per call (better green, worse red, equivalent blue,
inconclusive grey; markers by call too: better a down triangle, worse an up triangle). Effects are
level minus baseline in nats/char (negative = better), drawn with a line at 0 and the equivalence
band [-margin, +margin] shaded. Every `X(...) -> bytes | None` has a `_draw_X(...) -> Figure | None`
that tests can inspect. Figures are `matplotlib.figure.Figure` objects (no pyplot state, nothing to
close, no display needed), sized by `figsize` (capped so that they stay readable).
"""
from __future__ import annotations

import io
import math
import sys
import textwrap
from typing import TYPE_CHECKING, Iterable

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

if TYPE_CHECKING:
    from gptlab.report.stats import Statistics

DPI = 90
LOSS_LABEL = "val loss (nats/char)"
BEST_LABEL = "best val loss (nats/char)"
MEAN_LABEL = "mean best val loss (nats/char)"
EFFECT_LABEL = "effect on val loss (nats/char, level - baseline)"
CALL_COLOURS = {"better": "#2ca02c", "worse": "#d62728", "equivalent": "#1f77b4", "inconclusive": "#7f7f7f"}
CALL_MARKERS = {"better": "v", "worse": "^", "equivalent": "D", "inconclusive": "o"}
BAND_COLOUR = "#c6dbef"
MAX_WIDTH, MAX_HEIGHT = 24.0, 30.0  # inches
MAX_LEGEND = 12  # entries
MAX_FOREST_ROWS = 60
MAX_TICK_LABELS = 24  # per panel of the simple-effects figure
MAX_CELL_LINES = 8  # val_curves draws one line per cell up to this many cells


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)  # constrained layout fits the page: no second "tight" pass
    return buf.getvalue()


def _bytes(fig: Figure | None) -> bytes | None:
    return None if fig is None else _png(fig)


def figsize(width: float, height: float) -> tuple[float, float]:
    """A figure size in inches, clamped to [4, MAX_WIDTH] x [2.5, MAX_HEIGHT] so the PNG stays readable."""
    return min(max(width, 4.0), MAX_WIDTH), min(max(height, 2.5), MAX_HEIGHT)


def _grid(fig: Figure, n: int, ncol: int, **kw) -> list[Axes]:
    """n panels in rows of at most `ncol`; unused slots hidden, x tick labels kept on each column's last panel."""
    ncol = max(1, min(ncol, n))
    axes = fig.subplots(-(-n // ncol), ncol, squeeze=False, **kw).ravel()
    for i, ax in enumerate(axes):
        ax.set_visible(i < n)
        if i < n and i + ncol >= n:
            ax.tick_params(labelbottom=True)
    return list(axes[:n])


def _order(values: Iterable, known: Iterable) -> list:
    """Known values (grid order) that occur in `values`, then the others in order of appearance."""
    seen = list(dict.fromkeys(values))
    return [v for v in known if v in seen] + [v for v in seen if v not in set(known)]


def _call(value) -> str:
    """The call word, unknown or missing values counted as inconclusive."""
    return value if value in CALL_COLOURS else "inconclusive"


def _numeric(df: pd.DataFrame, cols: list[str], need: str) -> pd.DataFrame:
    """Copy of `df` with `cols` as floats and rows whose `need` is NaN dropped."""
    df = df.reset_index(drop=True)  # a concatenated frame may repeat index labels
    for c in cols:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    return df[df[need].notna()]


def _errorbars(ax: Axes, pos, est, lo, hi, horizontal: bool, **kw) -> None:
    """Error bars from CI bounds (a missing or inverted bound draws no bar on that side)."""
    est, lo, hi = (np.asarray(v, dtype=float) for v in (est, lo, hi))
    err = np.nan_to_num(np.clip([est - lo, hi - est], 0, None))
    if horizontal:
        ax.errorbar(est, pos, xerr=err, linestyle="none", capsize=3, **kw)
    else:
        ax.errorbar(pos, est, yerr=err, capsize=3, **kw)


def _band(ax: Axes, margin: float, vertical: bool = True) -> None:
    """Zero line and the shaded equivalence band [-margin, margin] (vertical: effect on x)."""
    if margin and math.isfinite(margin):
        span = ax.axvspan if vertical else ax.axhspan
        span(-margin, margin, color=BAND_COLOUR, alpha=0.6, lw=0, zorder=0)
    (ax.axvline if vertical else ax.axhline)(0, color="black", lw=0.8, zorder=1)


def _band_label(margin: float) -> str:
    return f"equivalence margin +/- {margin:g}"


def _band_handle(margin: float) -> Patch:
    return Patch(facecolor=BAND_COLOUR, alpha=0.6, label=_band_label(margin))


def _call_handles(colour: str | None = None) -> list[Line2D]:
    """Legend entries for the four calls (colour by call unless one colour is given)."""
    return [Line2D([], [], linestyle="none", marker=CALL_MARKERS[c], color=colour or CALL_COLOURS[c], label=c)
            for c in CALL_COLOURS]


def _legend(ax: Axes, handles: list, title: str, below: bool = False) -> None:
    """A legend outside the axes (right, or below when short), at most MAX_LEGEND entries (the title says when cut)."""
    if len(handles) > MAX_LEGEND:
        title = f"{title} (first {MAX_LEGEND} of {len(handles)})"
        handles = handles[:MAX_LEGEND]
    longest = max((len(h.get_label()) for h in handles), default=1)
    below = below and len(handles) <= 4 and longest <= 40  # a long legend goes to the right
    where = dict(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=max(1, min(3, 80 // (longest + 6)))) \
        if below else dict(loc="upper left", bbox_to_anchor=(1.02, 1))
    ax.legend(handles=handles, title=title, fontsize="small", title_fontsize="small", frameon=False, **where)


def _suptitle(fig: Figure, text: str) -> None:
    """Figure title wrapped to the figure's width (about 11 characters per inch)."""
    width = int(fig.get_figwidth() * 11)
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in text.split("\n")))


def _short_at(res: Results, text: str) -> str:
    """'model.activation=gelu, model.position=learned' -> 'activation=gelu, position=learned'."""
    parts = [p.partition("=") for p in str(text).split(", ")]
    return ", ".join(res.label(k, v) if sep and k in res.factors else k + sep + v for k, sep, v in parts)


def _level_text(res: Results, factor: str, level: str) -> str:
    """'post', or 'pre (baseline)' for the factor's baseline level."""
    return f"{level} (baseline)" if res.baseline.get(factor) == level else str(level)


def _palette(res: Results, factor: str, levels: list[str]) -> dict:
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


def val_curves(res: Results, level_curves: pd.DataFrame | None = None) -> bytes | None:
    """Validation loss vs step: one line per cell up to MAX_CELL_LINES cells, else one panel per factor
    drawn from `level_curves` (None when it is missing or empty)."""
    if len(res.cells) > MAX_CELL_LINES:
        return _bytes(_draw_level_curves(res, level_curves))
    return _bytes(_draw_cell_curves(res))


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
    data = _numeric(level_curves, ["step", "mean", "ci_low", "ci_high"], "mean")
    factors = _order(data["factor"], res.factors)
    if not factors:
        return None
    ncol = min(3, len(factors))
    fig = Figure(figsize=figsize(6.2 * ncol, 3.6 * -(-len(factors) // ncol)), layout="constrained")
    axes = _grid(fig, len(factors), ncol, sharex=True, sharey=True)
    for i, (ax, f) in enumerate(zip(axes, factors)):
        part = data[data["factor"] == f]
        levels = _order(part["level"], res.levels.get(f, []))
        pal = _palette(res, f, levels)
        for lv in levels:
            pts = part[part["level"] == lv].sort_values("step")
            ax.plot(pts["step"], pts["mean"], color=pal[lv], lw=1.6, label=_level_text(res, f, lv))
            ax.fill_between(pts["step"], pts["ci_low"], pts["ci_high"], color=pal[lv], alpha=0.2, lw=0)
        ax.set(title=res.short(f), xlabel="step" if i + ncol >= len(factors) else "",
               ylabel=LOSS_LABEL if i % ncol == 0 else "")
        _legend(ax, ax.get_legend_handles_labels()[0], res.short(f))
    axes[0].set_ylim(*_late_ylim(data))
    _suptitle(fig, "Validation loss per level of each factor: marginal mean over the other factors "
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
        state = np.random.get_state()  # seaborn jitters with the global generator: seed it so that a
        np.random.seed(0)               # regenerated report draws the same picture, then restore it
        try:
            sns.stripplot(data=ok, x=f, y="best_val_loss", order=order, hue=f, hue_order=order,
                          palette=level_palette(order, res.baseline[f]), alpha=0.6, legend=False, ax=ax)
        finally:
            np.random.set_state(state)
        lv = levels[levels["factor"] == f].set_index("level").reindex(order)
        ax.errorbar(range(len(order)), lv["best_val_loss"], fmt="o", color="black", capsize=5,
                    yerr=[lv["best_val_loss"] - lv["ci_low"], lv["ci_high"] - lv["best_val_loss"]])
        ax.set(title=res.short(f), xlabel=f"{res.short(f)} (baseline: {res.baseline[f]})", ylabel=BEST_LABEL)
    fig.suptitle("Best validation loss per level (dots: runs; bars: mean and 95% CI)")
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


def forest(effects: pd.DataFrame, margin: float) -> bytes | None:
    """Forest plot of every effect with its 95% CI, one panel per group (None when no estimate)."""
    return _bytes(_draw_forest(effects, margin))


def _draw_forest(effects: pd.DataFrame, margin: float) -> Figure | None:
    """Columns group, label, estimate, ci_low, ci_high, call; at most MAX_FOREST_ROWS rows (largest |estimate|)."""
    if effects is None or effects.empty:
        return None
    data = _numeric(effects, ["estimate", "ci_low", "ci_high"], "estimate")
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
        _band(ax, margin)
        calls = rows["call"].map(_call).to_numpy()
        for c in CALL_COLOURS:
            m = calls == c
            if m.any():
                r = rows[m]
                _errorbars(ax, y[m], r["estimate"], r["ci_low"], r["ci_high"], True, marker=CALL_MARKERS[c],
                           color=CALL_COLOURS[c], markersize=6)
        ax.set_yticks(y, [textwrap.fill(t, 70) for t in rows["label"].astype(str)], fontsize="small")
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_title(f"{g} ({len(rows)})", loc="left", fontsize="medium", fontweight="bold")
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel(EFFECT_LABEL)
    _legend(axes[0], _call_handles() + [_band_handle(margin)], "call")
    title = "Every effect on best val loss with its 95% CI (negative = lower loss = better)"
    if n_all > MAX_FOREST_ROWS:
        title += f"\nonly the {MAX_FOREST_ROWS} largest |estimate| of {n_all} effects are shown"
    _suptitle(fig, title)
    return fig


def interaction_plots(pair_means: pd.DataFrame, res: Results) -> bytes | None:
    """Marginal mean best val loss of each pair of levels with 95% CI, one panel per pair of factors."""
    return _bytes(_draw_interaction_plots(pair_means, res))


def _draw_interaction_plots(pair_means: pd.DataFrame, res: Results) -> Figure | None:
    """Columns factor_a, level_a, factor_b, level_b, mean, ci_low, ci_high; at most 3 panels per row."""
    if pair_means is None or pair_means.empty:
        return None
    data = _numeric(pair_means, ["mean", "ci_low", "ci_high"], "mean")
    pairs = list(dict.fromkeys(zip(data["factor_a"], data["factor_b"])))
    if not pairs:
        return None
    ncol = min(3, len(pairs))
    fig = Figure(figsize=figsize(6.0 * ncol, 3.8 * -(-len(pairs) // ncol)), layout="constrained")
    axes = _grid(fig, len(pairs), ncol, sharey=True)
    for i, (ax, (fa, fb)) in enumerate(zip(axes, pairs)):
        _interaction_panel(ax, data[(data["factor_a"] == fa) & (data["factor_b"] == fb)], res, fa, fb)
        ax.set_ylabel(MEAN_LABEL if i % ncol == 0 else "")
    _suptitle(fig, "Interaction plots: mean best val loss of each pair of levels, averaged over the other "
                 "factors (bars: 95% CI; lower is better; parallel lines = no interaction)")
    return fig


def _interaction_panel(ax: Axes, part: pd.DataFrame, res: Results, fa: str, fb: str) -> None:
    """x = levels of fa in grid order, one line per level of fb, dodged so the bars do not overlap."""
    order_a = _order(part["level_a"], res.levels.get(fa, []))
    order_b = _order(part["level_b"], res.levels.get(fb, []))
    pal = _palette(res, fb, order_b)
    width = min(0.08, 0.4 / len(order_b))
    for j, lb in enumerate(order_b):
        pts = part[part["level_b"] == lb].drop_duplicates("level_a").set_index("level_a").reindex(order_a)
        x = np.arange(len(order_a)) + (j - (len(order_b) - 1) / 2) * width
        _errorbars(ax, x, pts["mean"], pts["ci_low"], pts["ci_high"], False, marker="o", color=pal[lb],
                   label=_level_text(res, fb, lb))
    ax.set_xticks(range(len(order_a)), order_a)
    ax.set_xlim(-0.5, len(order_a) - 0.5)
    ax.set(title=f"{res.short(fa)} x {res.short(fb)}",
           xlabel=f"{res.short(fa)} (baseline: {res.baseline.get(fa, '?')})")
    ax.grid(axis="y", alpha=0.3)
    _legend(ax, ax.get_legend_handles_labels()[0], res.short(fb))


def simple_effects(simple: pd.DataFrame, main: pd.DataFrame, res: Results, margin: float) -> bytes | None:
    """Each level's effect against its baseline at every combination of the other factors, one panel per factor."""
    return _bytes(_draw_simple_effects(simple, main, res, margin))


def _draw_simple_effects(simple: pd.DataFrame, main: pd.DataFrame, res: Results, margin: float) -> Figure | None:
    """`simple`: factor, level, baseline, at, estimate, ci_low, ci_high, call; `main`: factor, level, estimate."""
    if simple is None or simple.empty:
        return None
    data = _numeric(simple, ["estimate", "ci_low", "ci_high"], "estimate")
    factors = _order(data["factor"], res.factors)
    if not factors:
        return None
    main = main if main is not None and not main.empty else pd.DataFrame(columns=["factor", "level", "estimate"])
    n_at = [min(data.loc[data["factor"] == f, "at"].nunique(), MAX_TICK_LABELS) for f in factors]
    heights = [0.3 * n + 1.2 for n in n_at]
    fig = Figure(figsize=figsize(11, sum(heights) + 1.0), layout="constrained")
    axes = fig.subplots(len(factors), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
    for ax, f in zip(axes, factors):
        _simple_panel(ax, data[data["factor"] == f], main[main["factor"] == f], res, f, margin)
    axes[-1].set_xlabel(EFFECT_LABEL)
    _suptitle(fig, "Simple effects: each level against its baseline at every combination of the other factors\n"
                 "(bars: 95% CI; dashed: the level's main effect averaged over the other factors)")
    return fig


def _simple_panel(ax: Axes, rows: pd.DataFrame, main: pd.DataFrame, res: Results, f: str, margin: float) -> None:
    """y = the `at` combinations; colour by call (one level) or by level with marker by call (several)."""
    rows = rows.assign(at=[_short_at(res, a) for a in rows["at"]])
    ats = list(dict.fromkeys(rows["at"]))
    levels = _order(rows["level"], res.levels.get(f, []))
    several = len(levels) > 1
    pal = _palette(res, f, levels)
    width = min(0.25, 0.6 / len(levels))
    _band(ax, margin)
    for j, lv in enumerate(levels):
        pts = rows[rows["level"] == lv]
        y = pts["at"].map({a: i for i, a in enumerate(ats)}).to_numpy() + (j - (len(levels) - 1) / 2) * width
        calls = pts["call"].map(_call).to_numpy()
        for c in CALL_COLOURS:
            m = calls == c
            if m.any():
                _errorbars(ax, y[m], pts["estimate"][m], pts["ci_low"][m], pts["ci_high"][m], True,
                           marker=CALL_MARKERS[c], color=pal[lv] if several else CALL_COLOURS[c], markersize=5)
        avg = pd.to_numeric(main.loc[main["level"] == lv, "estimate"], errors="coerce").dropna()
        if len(avg):
            ax.axvline(float(avg.iloc[0]), ls="--", lw=1.2, color=pal[lv] if several else "black")
    _simple_axes(ax, rows, ats, levels, res, f, margin, pal if several else None)


def _simple_axes(ax: Axes, rows: pd.DataFrame, ats: list[str], levels: list[str], res: Results, f: str,
                 margin: float, pal: dict | None) -> None:
    """Ticks, title and legend of one simple-effects panel (`pal` None: colours are calls)."""
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
        handles = _call_handles()
        dashed = Line2D([], [], ls="--", color="black", label="main effect (averaged)")
    else:
        handles = [Line2D([], [], color=pal[lv], marker="s", ls="none", label=f"{res.short(f)}={lv}") for lv in levels]
        handles += _call_handles(colour="dimgrey")
        dashed = Line2D([], [], ls="--", color="dimgrey", label="main effect (averaged, level colour)")
    _legend(ax, handles + [dashed, _band_handle(margin)], "level / call" if pal else "call")


def effects_by_step(by_step: pd.DataFrame, res: Results, margin: float) -> bytes | None:
    """Effects on val loss along training with 95% CI bands, one panel per factor (or per-cell effects)."""
    return _bytes(_draw_effects_by_step(by_step, res, margin))


def _draw_effects_by_step(by_step: pd.DataFrame, res: Results, margin: float) -> Figure | None:
    """Columns factor, level, step, estimate, ci_low, ci_high, call; factor "cell" = cells vs the baseline cell.
    At most 4 factor panels a row; the per-cell panel spans the last row."""
    if by_step is None or by_step.empty:
        return None
    data = _numeric(by_step, ["step", "estimate", "ci_low", "ci_high"], "estimate")
    factors = _order(data["factor"], res.factors)
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
        _step_panel(axes[-1], data[data["factor"] == f], res, f, margin)
        axes[-1].set(xlabel="step", ylabel=EFFECT_LABEL if f == "cell" or i % ncol == 0 else "")
    _suptitle(fig, "Effects on val loss along training, level minus baseline (band: 95% CI; negative = better; "
                 "legend: call at the last step)")
    return fig


def _step_panel(ax: Axes, part: pd.DataFrame, res: Results, f: str, margin: float) -> None:
    """One line per level with its CI band; with more than MAX_LEGEND - 1 levels only the MAX_LEGEND - 3
    largest final effects get a colour, a band and a legend entry, the others are thin grey lines."""
    levels = _order(part["level"], [] if f == "cell" else res.levels.get(f, []))
    last = part.sort_values("step").groupby("level", sort=False).last()
    top = len(levels) if len(levels) < MAX_LEGEND else MAX_LEGEND - 3
    if top < len(levels):
        levels = sorted(levels, key=lambda lv: -abs(last.loc[lv, "estimate"]))
        pal = dict(zip(levels, [c for i, c in enumerate(sns.color_palette("tab10")) if i != 7]))  # no grey
    else:
        pal = _palette(res, f, levels)
    _band(ax, margin, vertical=False)
    for k, lv in enumerate(levels):
        pts = part[part["level"] == lv].sort_values("step")
        if k >= top:
            ax.plot(pts["step"], pts["estimate"], color="lightgrey", lw=0.8, zorder=1)
            continue
        name = lv if f == "cell" else res.label(f, lv)
        ax.plot(pts["step"], pts["estimate"], color=pal[lv], lw=1.6, label=f"{name} ({_call(last.loc[lv, 'call'])})")
        ax.fill_between(pts["step"], pts["ci_low"], pts["ci_high"], color=pal[lv], alpha=0.2, lw=0)
    handles = ax.get_legend_handles_labels()[0]
    if top < len(levels):
        handles.append(Line2D([], [], color="lightgrey", label=f"{len(levels) - top} smaller effects"))
    ax.set_title("cells vs the baseline cell" if f == "cell"
                 else f"{res.short(f)} (baseline: {res.baseline.get(f, '?')})")
    ax.grid(alpha=0.3)
    _legend(ax, handles + [_band_handle(margin)], "effect (final call)", below=True)


def make_figures(res: Results, levels: pd.DataFrame, st: "Statistics") -> dict[str, bytes]:
    """All figures that apply to these results: file name -> PNG bytes."""
    from gptlab.report.stats import forest_rows
    figs = {"val_curves.png": val_curves(res, st.level_curves), "level_effects.png": level_effects(res, levels),
            "forest.png": forest(forest_rows(st, res), st.margin),
            "interactions.png": interaction_plots(st.pair_means, res),
            "simple_effects.png": simple_effects(st.simple, st.main, res, st.margin),
            "effects_by_step.png": effects_by_step(st.by_step, res, st.margin),
            "throughput.png": throughput(res)}
    return {name: png for name, png in figs.items() if png is not None}
