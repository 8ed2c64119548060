"""The report's figures from hand-built frames (no training, no statistics): what each one draws.

Each figure `X` has a `_draw_X` returning the matplotlib Figure, inspected here (panels, ticks,
legends, the equivalence band); the public functions are checked to return PNG bytes or None.
"""
from __future__ import annotations

import dataclasses
import logging
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex
from matplotlib.patches import Rectangle

from calibration.synthetic import make_results
from gptlab.report import load_results, write_report
from gptlab.report.figures import effect_figures as E
from gptlab.report.figures import figstyle as S
from gptlab.report.figures import run_figures as F
from gptlab.report.tables import analyses

PNG = b"\x89PNG"
MARGIN = 0.02  # not the default: the figures draw the results' own margin (`Results.margin`)
WITH_MARGIN = SimpleNamespace(margin=MARGIN)  # all the forest reads of the results
EFFECT_COLS = ["group", "label", "estimate", "ci_low", "ci_high", "call"]


@pytest.fixture(scope="module")
def res4(tmp_path_factory):
    root = tmp_path_factory.mktemp("res4")
    return load_results(make_results(root, {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"]}, 2,
                                     effects={(("model.norm", "post"),): 0.05}), margin=MARGIN)


@pytest.fixture(scope="module")
def res16(tmp_path_factory):
    root = tmp_path_factory.mktemp("res16")
    grid = {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"],
            "model.position": ["learned", "rope"], "train.warmup_iters": [0, 100]}
    return load_results(make_results(root, grid, 2))


@pytest.fixture(scope="module")
def res3(tmp_path_factory):
    """Two factors, the second with three levels (gelu baseline, relu, swiglu)."""
    root = tmp_path_factory.mktemp("res3")
    return load_results(make_results(root, {"model.norm": ["pre", "post"],
                                            "model.activation": ["gelu", "relu", "swiglu"]}, 2), margin=MARGIN)


def legend_texts(ax) -> list[str]:
    leg = ax.get_legend()
    return [t.get_text() for t in leg.get_texts()] if leg else []


def bands(ax) -> list[tuple[float, float]]:
    """(low, high) of the shaded equivalence bands of an axes (vertical or horizontal)."""
    out = []
    for p in ax.patches:
        if isinstance(p, Rectangle):
            (x0, y0), (x1, y1) = p.get_bbox().get_points()
            out.append((x0, x1) if p.get_transform().contains_branch_seperately(ax.transData)[0] else (y0, y1))
    return out


def visible(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def effects_frame(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    est = np.linspace(-0.05, 0.05, n)
    rng.shuffle(est)
    return pd.DataFrame({"group": ["main effect"] * (n // 2) + ["interaction"] * (n - n // 2),
                         "label": [f"effect {i}" for i in range(n)], "estimate": est,
                         "ci_low": est - 0.003, "ci_high": est + 0.003,
                         "call": ["better" if e < -0.01 else "worse" if e > 0.01 else "equivalent" for e in est]})


# forest -------------------------------------------------------------------------------------------

def test_forest_groups_calls_band_and_skips_nan():
    eff = pd.DataFrame([
        ["main effect", "norm=post vs pre", 0.04, 0.03, 0.05, "worse"],
        ["main effect", "activation=relu vs gelu", -0.02, -0.03, -0.01, "better"],
        ["main effect", "position=rope vs learned", math.nan, math.nan, math.nan, "inconclusive"],
        ["interaction", "norm=post x activation=relu", 0.001, -0.004, 0.006, "equivalent"],
        ["interaction", "norm=post x position=rope", 0.008, -0.002, 0.018, "inconclusive"],
    ], columns=EFFECT_COLS)
    assert E.forest(eff, WITH_MARGIN).startswith(PNG)
    fig = E._draw_forest(eff, WITH_MARGIN)
    axes = visible(fig)
    assert [ax.get_title(loc="left") for ax in axes] == ["main effect (2)", "interaction (2)"]
    assert [t.get_text() for t in axes[0].get_yticklabels()] == ["norm=post vs pre", "activation=relu vs gelu"]
    assert legend_texts(axes[0]) == ["better", "worse", "equivalent", "inconclusive", f"equivalence margin +/- {MARGIN:g}"]
    for ax in axes:
        assert bands(ax) == [pytest.approx((-MARGIN, MARGIN))]
    colours = {to_hex(c.lines[0].get_color()): c.lines[0].get_xdata()[0] for ax in axes for c in ax.containers}
    assert colours == {S.CALL_COLOURS["worse"]: 0.04, S.CALL_COLOURS["better"]: -0.02,
                       S.CALL_COLOURS["equivalent"]: 0.001, S.CALL_COLOURS["inconclusive"]: 0.008}
    assert "only the" not in fig._suptitle.get_text()


def test_forest_draws_an_unadjusted_ci_clear_of_zero_on_an_inconclusive_call_apart():
    """Bars are each effect's unadjusted 95% CI; where one excludes zero but the Holm-adjusted call is inconclusive,
    the bar is dashed, its marker hollow and its label tagged, so that it does not read as a difference."""
    eff = pd.DataFrame([
        ["main effect", "norm=post vs pre", 0.0136, 0.0003, 0.0269, "inconclusive"],
        ["main effect", "activation=relu vs gelu", -0.02, -0.03, -0.01, "better"],
        ["main effect", "tying=untied vs tied", 0.004, -0.002, 0.010, "inconclusive"],
    ], columns=EFFECT_COLS)
    fig = E._draw_forest(eff, WITH_MARGIN)
    ax = visible(fig)[0]
    assert "unadjusted" in fig._suptitle.get_text() and "Holm" in fig._suptitle.get_text()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["norm=post vs pre" + E.UNADJUSTED_TAG, "activation=relu vs gelu", "tying=untied vs tied"]
    styles = {}
    for c in ax.containers:
        _, dashes = c.lines[2][0].get_linestyle()[0]  # (offset, dash sequence): None for a solid line
        styles[float(c.lines[0].get_xdata()[0])] = (bool(dashes), c.lines[0].get_markerfacecolor())
    assert styles[0.0136] == (True, "white")  # dashed, hollow
    assert not styles[-0.02][0] and not styles[0.004][0]
    assert any("unadjusted CI excludes 0" in t for t in legend_texts(ax))


def test_forest_keeps_the_60_largest_of_100():
    eff = effects_frame(100)
    eff.index = [0] * 100  # e.g. tables concatenated without ignore_index
    fig = E._draw_forest(eff, WITH_MARGIN)
    labels = [t.get_text() for ax in visible(fig) for t in ax.get_yticklabels()]
    assert len(labels) == S.MAX_FOREST_ROWS == 60
    kept = eff.set_index("label").loc[labels, "estimate"].abs()
    assert kept.min() >= eff["estimate"].abs().nlargest(60).min()
    assert "60 largest |estimate| of 100" in fig._suptitle.get_text()
    assert fig.get_figheight() <= S.MAX_HEIGHT


def test_forest_none_without_estimates():
    assert E.forest(pd.DataFrame(columns=EFFECT_COLS), WITH_MARGIN) is None
    nan = pd.DataFrame([["main effect", "x", math.nan, math.nan, math.nan, "inconclusive"]], columns=EFFECT_COLS)
    assert E.forest(nan, WITH_MARGIN) is None


# interaction plots ---------------------------------------------------------------------------------

def pair_frame(res) -> pd.DataFrame:
    rows = []
    for i, fa in enumerate(res.factors):
        for fb in res.factors[i + 1:]:
            for ia, la in enumerate(res.levels[fa]):
                for ib, lb in enumerate(res.levels[fb]):
                    m = 1.5 + 0.05 * ia + 0.01 * ib
                    rows.append([fa, la, fb, lb, m, m - 0.004, m + 0.004])
    return pd.DataFrame(rows, columns=["factor_a", "level_a", "factor_b", "level_b", "mean", "ci_low", "ci_high"])


def test_interaction_plots_one_panel_per_pair(res4, res16):
    pm = pair_frame(res4)
    pm.loc[3, "mean"] = math.nan  # norm=post, activation=relu: skipped
    assert E.interaction_plots(pm, res4).startswith(PNG)
    (ax,) = visible(E._draw_interaction_plots(pm, res4))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["pre", "post"]
    assert ax.get_legend().get_title().get_text() == "activation"
    assert legend_texts(ax) == ["gelu (baseline)", "relu"]
    assert ax.get_ylabel() == "mean best val loss"
    gelu, relu = (c.lines[0] for c in ax.containers)
    assert gelu.get_xdata()[0] < 0 < relu.get_xdata()[0] < 0.5  # dodged around x = 0
    assert np.isnan(relu.get_ydata()[1]) and not np.isnan(gelu.get_ydata()).any()
    fig = E._draw_interaction_plots(pair_frame(res16), res16)
    assert len(visible(fig)) == 6
    assert fig.axes[0].get_subplotspec().get_geometry()[:2] == (2, 3)


def test_interaction_plots_none_when_empty(res4):
    assert E.interaction_plots(pair_frame(res4).iloc[:0], res4) is None


# simple effects ------------------------------------------------------------------------------------

def simple_frame(res) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, main = [], []
    for f in res.factors:
        others = [g for g in res.factors if g != f]
        for lv in res.levels[f][1:]:
            main.append([f, lv, 0.02 if lv != "swiglu" else -0.02])
            for combo in pd.MultiIndex.from_product([res.levels[g] for g in others]):
                at = ", ".join(f"{g}={v}" for g, v in zip(others, combo))
                rows.append([f, lv, res.baseline[f], at, 0.02, 0.015, 0.025, "worse"])
    cols = ["factor", "level", "baseline", "at", "estimate", "ci_low", "ci_high", "call"]
    return pd.DataFrame(rows, columns=cols), pd.DataFrame(main, columns=["factor", "level", "estimate"])


def test_simple_effects_panels_labels_main_lines(res3):
    simple, main = simple_frame(res3)
    assert E.simple_effects(simple, main, res3).startswith(PNG)
    norm, act = visible(E._draw_simple_effects(simple, main, res3))
    assert norm.get_title(loc="left") == "norm: post vs pre"
    assert [t.get_text() for t in norm.get_yticklabels()] == ["activation=gelu", "activation=relu", "activation=swiglu"]
    assert [t.get_text() for t in act.get_yticklabels()] == ["norm=pre", "norm=post"]
    assert bands(norm) == [pytest.approx((-MARGIN, MARGIN))]
    dashed = sorted(ln.get_xdata()[0] for ln in act.lines if ln.get_linestyle() == "--")
    assert dashed == [-0.02, 0.02]  # one per level: relu, swiglu
    assert legend_texts(norm)[:4] == list(S.CALL_COLOURS)  # one level: colour by call
    assert legend_texts(act)[:2] == ["activation=relu", "activation=swiglu"]  # several: colour by level
    pal = S.level_palette(res3.levels["model.activation"], "gelu")
    assert {to_hex(c.lines[0].get_color()) for c in act.containers} == {to_hex(pal["relu"]), to_hex(pal["swiglu"])}
    assert {to_hex(c.lines[0].get_color()) for c in norm.containers} == {S.CALL_COLOURS["worse"]}


def test_simple_effects_many_combinations_drop_tick_labels(tmp_path):
    grid = {"model.norm": ["x", "y"], "model.n_layer": [1, 2, 3], "model.n_head": [1, 2, 3], "model.n_embd": [1, 2, 3]}
    res = load_results(make_results(tmp_path, grid, 1))
    simple, main = simple_frame(res)
    ax = visible(E._draw_simple_effects(simple[simple["factor"] == "model.norm"], main, res))[0]
    assert ax.get_yticklabels() == [] and "27 combinations" in ax.get_title(loc="left")


def test_simple_effects_none_when_empty(res3):
    simple, main = simple_frame(res3)
    assert E.simple_effects(simple.iloc[:0], main, res3) is None


# effects by step -----------------------------------------------------------------------------------

def by_step_frame(res, cells: bool = False) -> pd.DataFrame:
    rows = []
    pairs = [("cell", c) for c in res.cells["cell"][1:]] if cells else \
        [(f, lv) for f in res.factors for lv in res.levels[f][1:]]
    for k, (f, lv) in enumerate(pairs):
        for step in range(0, 1001, 250):
            e = 0.001 * (k + 1) * step / 1000
            rows.append([f, lv, step, e, e - 0.002, e + 0.002, "worse" if e > 0.004 else "equivalent"])
    return pd.DataFrame(rows, columns=["factor", "level", "step", "estimate", "ci_low", "ci_high", "call"])


def test_effects_by_step_panels_bands_and_labels(res4):
    data = pd.concat([by_step_frame(res4), by_step_frame(res4, cells=True)])
    assert E.effects_by_step(data, res4).startswith(PNG)
    axes = visible(E._draw_effects_by_step(data, res4))
    assert [ax.get_title() for ax in axes] == ["norm (baseline: pre)", "activation (baseline: gelu)",
                                               "cells vs the baseline cell"]
    assert legend_texts(axes[0]) == ["norm=post (equivalent)", f"equivalence margin +/- {MARGIN:g}"]
    assert len(legend_texts(axes[2])) == 3 + 1  # three cells and the band
    assert bands(axes[1]) == [pytest.approx((-MARGIN, MARGIN))]
    assert sum(isinstance(c, PolyCollection) for c in axes[2].collections) == 3  # a CI band per cell
    assert axes[0].get_xlabel() == "step" and axes[0].get_ylabel() == S.EFFECT_LABEL


def test_effects_by_step_four_panels_a_row_and_short_legends(tmp_path):
    grid = {f"model.{key}": ["a", "b"] for key in ("norm", "activation", "position", "tying", "norm_type")}
    res = load_results(make_results(tmp_path, grid, 1))
    data = pd.concat([by_step_frame(res), by_step_frame(res, cells=True)])
    fig = E._draw_effects_by_step(data, res)
    axes = visible(fig)
    assert len(axes) == 6 and axes[0].get_subplotspec().get_geometry()[:2] == (3, 4)  # 4 + 1 factors, cells
    assert axes[-1].get_title() == "cells vs the baseline cell" and axes[-1].get_subplotspec().colspan == range(4)
    cell_legend = legend_texts(axes[-1])
    assert len(cell_legend) <= S.MAX_LEGEND and "22 smaller effects" in cell_legend  # 31 cells: 9 drawn in colour
    assert E.effects_by_step(data.iloc[:0], res) is None


# validation curves ---------------------------------------------------------------------------------

def level_curves_frame(res) -> pd.DataFrame:
    rows = []
    for f in res.factors:
        for i, lv in enumerate(res.levels[f]):
            for step in range(0, 1001, 125):
                m = 1.5 + 0.02 * i + 2.7 * math.exp(-4 * step / 1000)
                rows.append([f, lv, step, m, m - 0.005, m + 0.005])
    return pd.DataFrame(rows, columns=["factor", "level", "step", "mean", "ci_low", "ci_high"])


@pytest.fixture
def drawn(monkeypatch):
    """The figures handed to `to_png` (so the public functions can be inspected)."""
    figs = []
    monkeypatch.setattr(S, "to_png", lambda fig: figs.append(fig) or PNG)
    return figs


def test_val_curves_sixteen_cells_one_panel_per_factor(res16, drawn):
    curves = level_curves_frame(res16)
    assert F.val_curves(res16, curves) == PNG
    axes = visible(drawn[0])
    assert [ax.get_title() for ax in axes] == ["norm", "activation", "position", "warmup_iters"]
    assert [legend_texts(ax) for ax in axes] == [["pre (baseline)", "post"], ["gelu (baseline)", "relu"],
                                                 ["learned (baseline)", "rope"], ["0 (baseline)", "100"]]
    low, high = axes[0].get_ylim()
    assert all(ax.get_ylim() == (low, high) for ax in axes)  # shared y
    late = curves[curves["step"] >= 500]
    assert low < late["ci_low"].min() and late["ci_high"].max() < high < curves["mean"].max()  # zoomed
    assert "second half" in drawn[0]._suptitle.get_text()


def test_val_curves_sixteen_cells_need_level_curves(res16):
    assert F.val_curves(res16) is None
    assert F.val_curves(res16, level_curves_frame(res16).iloc[:0]) is None


def test_val_curves_four_cells_one_line_per_cell(res4, drawn):
    assert F.val_curves(res4, level_curves_frame(res4)) == PNG
    axes = visible(drawn[0])
    assert len(axes) == 2 and legend_texts(axes[1]) == list(res4.cells["cell"])
    assert F.val_curves(res4).startswith(PNG)


def test_figsize_caps():
    assert S.figsize(100, 100) == (S.MAX_WIDTH, S.MAX_HEIGHT)
    assert S.figsize(1, 1) == (4.0, 2.5)


# -- a numeric factor draws no categorical-units message -------------------------------------------
NUMERIC_GRID = {"model.norm": ["pre", "post"], "train.warmup_iters": [0, 100, 200]}


def test_best_loss_per_level_puts_numeric_levels_on_ticks_without_the_category_axis(tmp_path, caplog, monkeypatch):
    res = load_results(make_results(tmp_path, NUMERIC_GRID, 2))
    drawn = []
    monkeypatch.setattr(F, "to_png", lambda fig: drawn.append(fig) or b"png")
    caplog.set_level(logging.INFO, logger="matplotlib.category")
    assert F.level_effects(res, analyses.level_table(res)) == b"png"
    assert not [r for r in caplog.records if r.name.startswith("matplotlib")], caplog.records
    norm, warmup = drawn[0].axes
    assert [t.get_text() for t in warmup.get_xticklabels()] == ["0", "100", "200"]
    assert [t.get_text() for t in norm.get_xticklabels()] == ["pre", "post"]
    dots = warmup.collections[:3]  # one scatter per level, then the error bars
    for i, level in enumerate(["0", "100", "200"]):
        x, y = dots[i].get_offsets().T
        runs = res.runs[res.runs["train.warmup_iters"] == level]
        assert len(x) == len(runs) and all(abs(x - i) <= 0.1)  # at the level's tick, jittered
        assert sorted(y) == pytest.approx(sorted(runs["best_val_loss"]))


def test_a_report_of_a_numeric_factor_logs_no_category_message(tmp_path, caplog):
    results = make_results(tmp_path, {"train.warmup_iters": [0, 100]}, 2)
    caplog.set_level(logging.INFO, logger="matplotlib.category")
    write_report(results, tmp_path / "report")
    assert (tmp_path / "report" / "figures" / "level_effects.png").is_file()
    assert not [r for r in caplog.records if r.name == "matplotlib.category"], [r.getMessage() for r in caplog.records]


def test_the_figures_bundle_names_each_file_once_in_the_reports_order():
    from gptlab.report.figures import Figures, Png

    figs = Figures.of(forest=b"f", val_curves=b"v", interactions=None).adding(throughput=b"t", level_effects=None)
    assert figs.forest == Png(file="forest.png", data=b"f") and figs.interactions is None and figs.level_effects is None
    assert figs.files() == {"val_curves.png": b"v", "forest.png": b"f", "throughput.png": b"t"}  # the fields' order
    assert list(figs.files()) == [f"{name}.png" for name in figs.present()]
    with pytest.raises(TypeError):
        Figures.of(forest_plot=b"f")  # a figure the bundle has no field for
    kinds = dataclasses.replace(figs, kinds={"seeds": {"precision": Png(file="precision.png", data=b"p")}})
    assert list(kinds.files()) == ["val_curves.png", "forest.png", "throughput.png", "precision.png"]  # each kind's last
