"""Loss-against-lr fits near each cell's optimum (`stats.lr_curves`), `tables/lr_curves.csv`, settings outside
`tune.space` in the tuned report, and the isolation plot's fits and edge marker. No training."""
from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from helpers import write_tuned_results
from matplotlib.colors import to_rgb

from gptlab.stats import lr_curves
from gptlab.stats.lr_curves import LR_CURVE_COLS, fit_curves

GRID = [5e-4, 1e-3, 2e-3, 4e-3, 8e-3]


def _curve(lr, optimum: float, c: float, best: float = 1.7, bend: float = 0.0) -> np.ndarray:
    d = np.log2(np.asarray(lr, dtype=float) / optimum)
    return best + c * d * d * np.exp(bend * d)


def _runs(cells: dict[str, dict[float, list[float]]], status: dict[tuple[str, float], str] | None = None) -> pd.DataFrame:
    """cell -> lr -> losses (one run each) as fit_curves' input; `status` marks (cell, lr) runs diverged."""
    rows = [{"cell": cell, "lr": lr, "loss": loss, "status": (status or {}).get((cell, lr), "ok")}
            for cell, by_lr in cells.items() for lr, losses in by_lr.items() for loss in losses]
    return pd.DataFrame(rows)


def _replicates(cell: str, lr: float, losses: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"cell": cell, "lr": lr, "loss": losses, "status": "ok"})


# -- the fit ------------------------------------------------------------------------------------

def test_the_fit_recovers_a_planted_optimum_curvature_and_loss_left():
    optimum, c = 3e-3, 0.03
    lrs = sorted(GRID + [2e-3 * 2 ** 0.5, 4e-3 * 2 ** 0.5])  # refine's midpoints around the pick
    on_curve = float(_curve(4e-3, optimum, c))  # the estimation runs, centred on the curve: the point stays on it
    reps = _replicates("a", 4e-3, [on_curve - 0.002, on_curve, on_curve + 0.002])
    exact = fit_curves(_runs({"a": {lr: [float(_curve(lr, optimum, c))] for lr in lrs}}), step=1.0, replicates=reps)
    fit = exact.fits[0]
    assert fit.n_points == 4 and fit.n_runs == 7  # the lowest point (2.83e-3) and the lrs within one octave of it
    # (4e-3: its selection run and the 3 estimation runs)
    assert fit.optimum_lr == pytest.approx(optimum, rel=1e-3) and fit.curvature == pytest.approx(c, rel=1e-3)
    assert fit.bend == pytest.approx(0, abs=1e-3) and fit.min_loss == pytest.approx(1.7, abs=1e-6)
    truth = float(_curve(2e-3 * 2 ** 0.5, optimum, c) - 1.7)
    assert fit.pick_lr == pytest.approx(2e-3 * 2 ** 0.5) and fit.loss_left == pytest.approx(truth, rel=1e-3)
    assert fit.loss_at(fit.optimum_lr) == pytest.approx(fit.min_loss) and fit.flags == ()
    rng = np.random.default_rng(0)
    noisy = _runs({"a": {lr: list(_curve(lr, optimum, c, bend=0.2) + rng.normal(0, 0.002, 2)) for lr in lrs}})
    fit = fit_curves(noisy, step=1.0, replicates=reps).fits[0]
    truth = float(_curve(fit.pick_lr, optimum, c, bend=0.2) - 1.7)
    assert fit.covers_optimum(optimum) and 2e-3 < fit.optimum_lr_low < fit.optimum_lr_high < 6e-3
    assert fit.curvature == pytest.approx(c, rel=0.3)
    assert fit.loss_left_ci_low <= truth <= fit.loss_left_ci_high < 0.02


def test_without_the_bend_prior_the_optimum_ci_is_fieller_and_the_prior_only_widens_it():
    losses = {2e-3: [1.808], 4e-3: [1.730], 8e-3: [1.734]}  # results/tuned's gelu, tied window
    reps = _replicates("a", 4e-3, [1.730, 1.732, 1.734, 1.731])
    plain = fit_curves(_runs({"a": losses}), step=1.0, replicates=reps, asymmetry=0.0)
    fit = plain.fits[0]
    at_pick = [1.730, 1.730, 1.732, 1.734, 1.731]  # the selection run and the estimation runs: one point, weight 5
    z, y, w = np.array([-1.0, 0.0, 1.0]), np.array([1.808, np.mean(at_pick), 1.734]), np.array([1.0, 5.0, 1.0])
    b, c = (y[2] - y[0]) / 2, (y[0] + y[2] - 2 * y[1]) / 2
    X = np.column_stack([z ** 0, z, z * z])
    cov = np.linalg.inv(X.T @ (X * w[:, None]))
    q = float(lr_curves.stats.t.ppf(0.975, plain.noise.df)) ** 2 * plain.noise.sd ** 2
    A, B, C = 4 * c * c - 4 * q * cov[2, 2], 4 * b * c - 4 * q * cov[1, 2], b * b - q * cov[1, 1]
    roots = np.sort(np.roots([A, B, C]).real)  # Fieller's interval, in octaves from 4e-3
    assert plain.noise.df == 4 and plain.noise.sd == pytest.approx(np.std(at_pick, ddof=1))
    assert math.log2(fit.optimum_lr / 4e-3) == pytest.approx(-b / (2 * c), abs=1e-9)
    assert math.log2(fit.optimum_lr_low / 4e-3) == pytest.approx(roots[0], abs=0.006)
    assert math.log2(fit.optimum_lr_high / 4e-3) == pytest.approx(roots[1], abs=0.006)
    more = {1e-3: [1.85], 2e-3: [1.808], 2.83e-3: [1.762], 4e-3: [1.730], 5.66e-3: [1.728], 8e-3: [1.734]}
    four = fit_curves(_runs({"a": more}), step=1.0, replicates=reps, asymmetry=0.0).fits[0]  # 2.83e-3 .. 8e-3
    x = np.log2([2.83e-3, 4e-3, 5.66e-3, 8e-3])
    c2, c1, _ = np.polyfit(x, [1.762, np.mean(at_pick), 1.728, 1.734], 2, w=np.sqrt([1, 5, 1, 1]))
    assert four.n_points == 4 and four.bend == 0 and math.log2(four.optimum_lr) == pytest.approx(-c1 / (2 * c2))
    bent = fit_curves(_runs({"a": losses}), step=1.0, replicates=reps).fits[0]
    assert bent.optimum_lr == pytest.approx(fit.optimum_lr) and bent.curvature == pytest.approx(fit.curvature)
    assert bent.optimum_lr_low < fit.optimum_lr_low and bent.optimum_lr_high > fit.optimum_lr_high


def test_the_noise_is_each_cell_s_replicates_and_a_cell_with_too_few_takes_the_pool():
    runs = _runs({"a": {1e-3: [1.80, 1.82], 2e-3: [1.75], 4e-3: [1.74], 8e-3: [1.79]},
                  "b": {lr: [float(_curve(lr, 3e-3, 0.03))] for lr in GRID + [2.83e-3, 5.66e-3]}})
    curves = fit_curves(runs, step=1.0, replicates=_replicates("a", 2e-3, [1.75, 1.76, 1.77]))
    # a: 1 df at 1e-3 (two runs), 3 at 2e-3 (its selection run and 3 estimation runs); b: none (its window's
    # residual is lack of fit, not noise): b takes the pool, a's 4 df
    ss = 0.0002 + float(np.sum((np.array([1.75, 1.75, 1.76, 1.77]) - 1.7575) ** 2))
    assert curves.noise.df == 4 and curves.noise.sd == pytest.approx(math.sqrt(ss / 4))
    a, b = curves.fits
    assert (a.noise_df, b.noise_df) == (4, 4) and "pooled_noise" in b.flags and "pooled_noise" not in a.flags
    assert curves.frame()["noise_df"].tolist() == [4, 4]


def test_a_cell_without_df_of_its_own_takes_the_pool_and_says_so():
    runs = _runs({"a": {1e-3: [1.80], 2e-3: [1.75], 4e-3: [1.78]}, "b": {1e-3: [1.80], 2e-3: [1.75], 4e-3: [1.78]}})
    curves = fit_curves(runs, step=1.0, replicates=_replicates("a", 2e-3, [1.75, 1.76, 1.77]))
    a, b = curves.fits
    assert (a.noise_df, b.noise_df) == (3, 3) and "pooled_noise" in b.flags and "pooled_noise" not in a.flags
    assert b.noise_sd == pytest.approx(a.noise_sd) == pytest.approx(np.std([1.75, 1.75, 1.76, 1.77], ddof=1))


def test_an_optimum_between_two_lrs_clearly_above_it_is_confined_and_its_loss_left_finite():
    # flat within the noise around 4e-3 (the curve alone cannot bound it), but 1e-3 and 1.6e-2 are far above
    wide = {1e-3: [1.80], 2e-3: [1.702], 4e-3: [1.700], 8e-3: [1.703], 1.6e-2: [1.80]}
    reps = _replicates("w", 4e-3, [1.700, 1.702, 1.704, 1.701])
    fit = fit_curves(_runs({"w": wide}), step=1.0, replicates=reps).fits[0]
    assert "confined" in fit.flags and "ci_unbounded" not in fit.flags
    assert (fit.optimum_lr_low, fit.optimum_lr_high) == pytest.approx((1e-3, 1.6e-2), rel=0.01)
    assert 0 < fit.loss_left_ci_high < 0.05
    # without the far points the same window is open: an unbounded loss left
    near = {k: v for k, v in wide.items() if 2e-3 <= k <= 8e-3}
    open_fit = fit_curves(_runs({"w": near}), step=1.0, replicates=reps).fits[0]
    assert "ci_unbounded" in open_fit.flags and "against_tried" in open_fit.flags  # bounded against the lrs tried
    assert 0 < open_fit.loss_left_ci_high < math.inf


def test_nope_s_curve_rising_on_both_sides_gets_a_finite_loss_left():
    # results/scorecard's NoPE (nats) on its half-step lattice; replicates at its pick with SD about 0.013
    nope = {1e-3: [2.038], 2 ** -9.5: [2.021], 2e-3: [2.000], 2 ** -8.5: [2.006], 4e-3: [2.063]}
    reps = _replicates("n", 2e-3, [2.000, 2.015, 1.990, 2.008, 1.985])
    fit = fit_curves(_runs({"n": nope}), step=1.0, replicates=reps).fits[0]
    assert fit.optimum_lr_low > 1e-3 and fit.optimum_lr_high < 4e-3
    assert 0 <= fit.loss_left <= fit.loss_left_ci_high < 0.05  # far from the 0.25 that would reach the baseline


def test_no_degrees_of_freedom_give_point_estimates_and_no_cis():
    curves = fit_curves(_runs({"a": {lr: [float(_curve(lr, 3e-3, 0.03))] for lr in GRID}}), step=1.0)
    fit = curves.fits[0]
    assert curves.noise.df == 0 and math.isnan(curves.noise.sd) and "no_noise_estimate" in fit.flags
    assert math.log2(fit.optimum_lr / 3e-3) == pytest.approx(0, abs=1e-9) and fit.curvature == pytest.approx(0.03)
    assert math.isnan(fit.optimum_lr_low) and math.isnan(fit.loss_left_ci_high) and math.isfinite(fit.loss_left)
    assert not fit.covers_optimum(3e-3)


def test_flags_edge_concave_diverged_too_few_and_unbounded():
    reps = _replicates("edge", 8e-3, [1.70, 1.706, 1.712])
    runs = _runs({"edge": {lr: [float(_curve(lr, 2e-2, 0.03))] for lr in GRID},  # optimum beyond the grid
                  "concave": {1e-3: [1.70], 2e-3: [1.72], 4e-3: [1.71]},
                  "diverged": {lr: [float(_curve(lr, 2e-3, 0.04))] for lr in GRID},
                  "few": {1e-3: [1.8], 2e-3: [1.7], 4e-3: [9.9]},
                  "flat": {1e-3: [1.7010], 2e-3: [1.7000], 4e-3: [1.7004]}},  # convex, but within the noise
                 status={("diverged", 4e-3): "diverged", ("few", 4e-3): "diverged"})
    fits = {f.cell: f for f in fit_curves(runs, step=1.0, replicates=reps).fits}
    assert "edge" in fits["edge"].flags and fits["edge"].pick_lr == 8e-3
    assert "optimum_outside_window" in fits["edge"].flags and fits["edge"].optimum_lr > 8e-3
    assert fits["edge"].n_points == 3 and fits["edge"].window_lr_low == pytest.approx(2e-3)  # widened to 3 lrs
    concave = fits["concave"]  # no optimum: its loss left is bounded against the lrs tried alone
    assert concave.flags[-2:] == ("not_convex", "against_tried") and math.isnan(concave.optimum_lr)
    assert 0 < concave.loss_left_ci_high < math.inf
    d = fits["diverged"]
    assert "diverged_nearby" in d.flags and d.n_points == 3  # 4e-3 left out; widened to the nearer side's 5e-4 (a tie)
    assert (d.window_lr_low, d.window_lr_high) == pytest.approx((5e-4, 2e-3)) and d.optimum_lr == pytest.approx(2e-3)
    assert fits["few"].flags == ("too_few_points",) and fits["few"].n_points == 0
    flat = fits["flat"]
    assert "ci_unbounded" in flat.flags and flat.optimum_lr_low == 0.0 and "against_tried" in flat.flags
    assert 0 < flat.loss_left_ci_high < math.inf


def test_a_cell_s_pick_follows_stats_picks_and_losses_are_capped():
    runs = _runs({"a": {1e-3: [1.9], 2e-3: [1.75, 1.70], 4e-3: [1.72], 8e-3: [5.0]}},
                 status={})
    runs.loc[(runs["lr"] == 2e-3) & (runs["loss"] == 1.70), "status"] = "diverged"  # rules 2e-3 out of the pick
    fit = fit_curves(runs, step=1.0, ceiling=3.0).fits[0]
    assert fit.pick_lr == 4e-3 and "diverged_nearby" in fit.flags
    assert fit.n_runs == 3  # 2e-3's ok run, 4e-3, and 8e-3 (capped at 3.0); the diverged one left out


# -- the report -----------------------------------------------------------------------------------

SPACE = [1e-3, 2e-3, 4e-3, 8e-3]
MIDPOINTS = [2e-3 * 2 ** 0.5, 4e-3 * 2 ** 0.5]  # refine's, around gelu's first pick (4e-3)
EXTENSION = 1.6e-2  # refine's, beyond relu's edge pick (8e-3)
OPTIMA = {"gelu": 3e-3, "relu": 1.1e-2}


def _refined_results(tmp_path: Path, corpus: Path) -> Path:
    """A refined tuned sweep written by hand: gelu has midpoints (its pick moves to one), relu an edge extension."""
    results = tmp_path / "results" / "refined"
    wobble = [0.001, -0.0008, 0.0004, -0.0003, 0.0006, -0.0005, 0.0002]
    rows, picks = [], {"gelu": MIDPOINTS[0], "relu": 8e-3}
    for act, extra in (("gelu", MIDPOINTS), ("relu", [EXTENSION])):
        for i, lr in enumerate(SPACE + extra):
            loss = float(_curve(lr, OPTIMA[act], 0.03 if act == "gelu" else 0.02)) + wobble[i]
            rows.append({"run_id": f"{act}-{lr:.5g}_s1000000", "seed": 1000000, "model.activation": act, "train.lr": lr,
                         "stage": "selection", "status": "ok", "best_val_loss": loss, "best_test_loss": loss + 0.002,
                         "wall_s": 1.0})
        for seed, noise in enumerate([0.003, -0.002, 0.0]):
            loss = float(_curve(picks[act], OPTIMA[act], 0.03)) + noise
            rows.append({"run_id": f"{act}_s{seed}", "seed": seed, "model.activation": act, "train.lr": picks[act],
                         "stage": "estimation", "status": "ok", "best_val_loss": loss, "best_test_loss": loss + 0.002,
                         "wall_s": 1.0})
    return write_tuned_results(results, rows, {"space": {"train.lr": SPACE}, "seeds": 1, "method": "refine"}, corpus)


def test_the_report_writes_lr_curves_and_keeps_settings_outside_the_space(tmp_path, corpus, no_figures):
    from gptlab.report import write_report

    out = write_report(_refined_results(tmp_path, corpus), tmp_path / "report")
    tuning = pd.read_csv(out / "tables" / "tuning.csv")
    gelu, relu = (tuning[tuning["model.activation"] == a] for a in ("gelu", "relu"))
    assert gelu["train.lr"].tolist() == pytest.approx(sorted(SPACE + MIDPOINTS))  # numeric order, own lrs only
    assert relu["train.lr"].tolist() == pytest.approx(SPACE + [EXTENSION])
    assert gelu.loc[gelu["picked"], "train.lr"].tolist() == pytest.approx([MIDPOINTS[0]])  # a pick outside the space
    assert relu.loc[relu["picked"], "train.lr"].tolist() == [8e-3]
    assert not tuning["at_edge"].any()  # relu tried one step beyond 8e-3
    curves = pd.read_csv(out / "tables" / "lr_curves.csv")
    assert list(curves.columns) == ["cell", "model.activation", *LR_CURVE_COLS]
    assert curves["cell"].tolist() == ["activation=gelu", "activation=relu"]
    row = curves.iloc[0]
    assert row["pick_lr"] == pytest.approx(2.83e-3) and row["n_points"] == 4 and row["noise_df"] == 3  # its own: 1 + 2
    assert row["optimum_lr_low"] <= OPTIMA["gelu"] <= row["optimum_lr_high"]
    assert 0 <= row["loss_left_ci_low"] <= row["loss_left"] <= row["loss_left_ci_high"]
    assert curves.iloc[1]["window_lr_high"] == pytest.approx(EXTENSION)
    fixed = pd.read_csv(out / "tables" / "fixed_setting_effects.csv")
    assert sorted(fixed["setting"].unique()) == sorted(f"lr={lr:g}" for lr in SPACE)  # the settings both cells have
    md = (out / "report.md").read_text()
    assert "### Loss against lr near each optimum" in md and "`tables/lr_curves.csv`" in md
    assert "also have 3 setting(s) outside the space" in md and "lr=0.0160" not in md


def test_the_isolation_plot_draws_fits_and_an_edge_marker_no_cell_uses(tmp_path, corpus):
    from gptlab.kinds.tune.figure import EDGE_COLOUR, isolation_figure
    from gptlab.report.figures.figstyle import cell_palette
    from gptlab.report.load import load_results
    from gptlab.report.tables import compute_tables

    for n in (4, 12, 20):  # tab10, then tab20
        palette = cell_palette(SimpleNamespace(cells=pd.DataFrame({"cell": [f"c{i}" for i in range(n)]})))
        assert to_rgb(EDGE_COLOUR) not in {to_rgb(c) for c in palette.values()}
    res = load_results(_refined_results(tmp_path, corpus))
    view = compute_tables(res).kinds["tune"].view
    fig = isolation_figure(res, view.table, view.keys, view.ceiling, view.curves)
    ax = fig.axes[0]
    legend = dict(zip((t.get_text() for t in ax.get_legend().get_texts()), ax.get_legend().legend_handles))
    assert to_rgb(legend["pick on the edge"].get_markeredgecolor()) == to_rgb(EDGE_COLOUR)
    assert {"fitted curve", "fitted optimum, 95% CI", "activation=gelu", "activation=relu"} <= set(legend)
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 2 and min(dashed[0].get_xdata()) == pytest.approx(2e-3)
    assert ax.get_xscale() == "log"


def test_an_open_curve_bounds_its_picks_loss_left_against_the_lrs_tried():
    """Issue 54: where the optimum's CI is unbounded the loss the pick leaves was inf whatever the effect (study 8's
    NoPE); it is bounded against every lr tried instead (flag against_tried), by hand here."""
    from scipy import stats as st

    from gptlab.stats.lr_curves import TRIED, tried_bound

    lrs = [5e-4, 1e-3, 1.41421e-3, 2e-3, 2.82843e-3, 4e-3, 8e-3]
    means = [2.0764, 2.0382, 2.0212, 1.9958, 2.0057, 2.0626, 2.175]  # study 8's NoPE selection runs
    runs = pd.DataFrame({"cell": "nope", "lr": lrs, "loss": means, "status": "ok"})
    estimation = pd.DataFrame({"cell": "nope", "lr": 2e-3, "loss": [2.03, 2.05, 1.99, 2.06, 2.02], "status": "ok"})
    fit = fit_curves(runs, step=1.0, picks={"nope": 2e-3}, replicates=estimation).fits[0]
    assert TRIED in fit.flags and math.isfinite(fit.loss_left_ci_high)
    sd, df = fit.noise_sd, fit.noise_df
    at_pick = (1.9958 + 2.03 + 2.05 + 1.99 + 2.06 + 2.02) / 6
    q = st.t.ppf(1 - 0.025 / 6, df)
    by_hand = max(at_pick - m + q * sd * math.sqrt(1 + 1 / 6) for m in means if m != 1.9958)
    assert fit.loss_left_ci_high == pytest.approx(by_hand, rel=1e-9)
    ok = runs.assign(x=np.log2(runs["lr"]), capped=runs["loss"])
    assert tried_bound(ok, math.log2(2e-3), math.nan, 0) == math.inf  # no noise: no bound
    assert tried_bound(ok, math.log2(3e-3), 0.02, 4) == math.inf  # no run at the pick


def test_a_pick_next_to_a_cliff_is_bounded_by_the_slope_towards_it_not_by_the_lrs_tried_alone():
    # post-LN on Austen (study 9): falling towards 2e-3, where the run collapsed; nothing tried in between
    runs = _runs({"p": {5e-4: [1.94], 7.07e-4: [1.85], 1e-3: [1.766, 1.756, 1.785, 1.761, 1.742, 1.766],
                        1.41421e-3: [1.707, 1.692, 1.685, 1.724, 1.683, 1.71], 2e-3: [3.3], 4e-3: [3.3]}},
                 status={("p", 2e-3): "collapsed", ("p", 4e-3): "collapsed"})
    fit = fit_curves(runs, step=1.0, picks={"p": 1.41421e-3}).fits[0]
    assert "against_tried" in fit.flags
    points = {math.log2(1e-3): (1.7627, 6), math.log2(1.41421e-3): (1.7002, 6)}
    sd, df = fit.noise_sd, fit.noise_df
    q = float(lr_curves.stats.t.ppf(0.975, df))
    slope = (1.7627 - 1.7002 + q * sd * math.sqrt(2 / 6)) / 0.5  # per octave, its upper end
    assert fit.loss_left_ci_high == pytest.approx(slope * 0.5, rel=0.02)  # the half octave up to the cliff
    assert lr_curves.gap_bound(points, math.log2(1.41421e-3), [], sd, df) == 0.0  # no failure next to it: no gap
    lonely = {math.log2(1.41421e-3): (1.7002, 6)}
    assert lr_curves.gap_bound(lonely, math.log2(1.41421e-3), [1.0], sd, df) == math.inf  # no neighbour: no slope


def test_a_wall_in_the_window_is_a_lack_of_fit_and_the_bound_falls_back_on_the_lrs_tried():
    # study 8's sinusoidal: smooth to 5.66e-3, then a jump at 8e-3 that trained (2.09 against 1.85): a parabola
    # near the optimum cannot have it, so its profile's bound is not trusted alone
    smooth = {2e-3: [1.868], 2.82843e-3: [1.852, 1.855, 1.840, 1.861, 1.849], 4e-3: [1.847], 5.65685e-3: [1.891]}
    wall = {**smooth, 8e-3: [2.093]}
    plain = fit_curves(_runs({"a": {**smooth, 8e-3: [1.96]}}), step=1.0).fits[0]
    walled = fit_curves(_runs({"a": wall}), step=1.0).fits[0]
    assert "lack_of_fit" not in plain.flags and "lack_of_fit" in walled.flags and "against_tried" in walled.flags
    runs = _runs({"a": wall}).assign(x=lambda f: np.log2(f["lr"]), capped=lambda f: f["loss"])
    assert walled.loss_left_ci_high >= lr_curves.tried_bound(runs, math.log2(walled.pick_lr), walled.noise_sd,
                                                            walled.noise_df) - 1e-12
