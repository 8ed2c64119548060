"""The curve model the tuner and the report share (`stats.lr_model`), tested from both sides.

Real numbers from study 8 (results/scorecard/tuning.csv, nats/char): SwiGLU trained at every lr (its runs
above 8e-3 are far higher, still descending: points of its curve, not a cliff); post-LN collapsed to the
unigram loss at 4e-3 (a run that did not train: the cliff); NoPE's curve is smooth and rises on both sides.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from calibration.refine_sim import CLIFF_WORLDS, LATTICE, Curve, Noise, Tuner, World, cliff_scores, simulate, summarise
from gptlab.stats import lr_model
from gptlab.stats.lr_curves import fit_curves
from gptlab.stats.lr_model import MIN_OWN_DF, NoiseSums, beyond, cliff_edge, closed_sides, noise_of
from gptlab.stats.picks import Trial, pick_rows, picks
from gptlab.stats.refine import (
    BEATEN,
    Lattice,
    RefineRule,
    cliff,
    decide,
    decide_all,
    judge,
    noise_sums,
    open_sides,
    pooled_sigma,
)

SWIGLU = {5e-4: 1.827607565650009, 1e-3: 1.7625156023573787, 2e-3: 1.7179991360552378, 4e-3: 1.701333782697635,
          5.65685e-3: 1.7041314834780505, 8e-3: 1.6850406037474117, 1.13137e-2: 2.4315047316511964,
          1.6e-2: 2.4911794958142157}
POST_LN = {5e-4: 2.070857437599742, 1e-3: 1.909603928226005, 1.41421e-3: 1.833757264222206, 2e-3: 1.7669978154182486,
           2.82843e-3: 1.7278185466518812, 4e-3: 3.332662868624589, 8e-3: 2.1418031038823546}
NOPE = {1e-3: 2.038, 1.41421e-3: 2.021, 2e-3: 2.000, 2.82843e-3: 2.006, 4e-3: 2.063}  # the numbers
LATTICE_8 = Lattice((5e-4, 1e-3, 2e-3, 4e-3, 8e-3))


def runs_of(curve: dict[float, float], status: dict[float, str] | None = None) -> list[tuple[float, float, bool]]:
    return [(math.log2(lr), y, (status or {}).get(lr, "ok") == "ok") for lr, y in curve.items()]


def half_steps(curve: dict[float, float]) -> dict[int, list[float]]:
    return {round(2 * math.log2(lr / 5e-4)): [y] for lr, y in curve.items()}


# -- the cliff: what runs did, never their loss ----------------------------------------------------------------


def test_a_high_loss_of_a_run_that_trained_is_a_point_of_the_curve_not_a_cliff():
    assert math.isinf(cliff_edge(runs_of(SWIGLU)))  # 2.43 at 1.13e-2: far above 1.685, but it trained
    assert math.isinf(cliff_edge(runs_of(NOPE)))
    bits = {lr: y / math.log(2) for lr, y in SWIGLU.items()}
    assert cliff_edge(runs_of(bits, {1.13137e-2: "unstable"})) == pytest.approx(math.log2(1.13137e-2))


def test_a_run_that_did_not_train_is_the_far_side_of_a_cliff_only_above_the_best():
    curve = {5e-4: 1.9, 1e-3: 1.8, 2e-3: 1.7, 4e-3: 1.75, 8e-3: 1.8}
    assert cliff_edge(runs_of(curve, {4e-3: "collapsed"})) == pytest.approx(math.log2(4e-3))  # 8e-3 beyond too
    assert math.isinf(cliff_edge(runs_of(curve, {5e-4: "diverged"})))  # below the best: no cliff
    # a run failed at the lowest mean's lr: the cliff starts there, the reference moves down
    mixed = runs_of(curve) + [(math.log2(2e-3), math.inf, False)]
    assert cliff_edge(mixed) == pytest.approx(math.log2(2e-3))
    assert lr_model.trained("ok") and not lr_model.trained("collapsed") and not lr_model.trained("diverged")


def test_post_ln_s_collapse_and_everything_above_it_are_beyond():
    assert math.isinf(cliff_edge(runs_of(POST_LN)))  # 3.33 as a loss alone says nothing
    edge = cliff_edge(runs_of(POST_LN, {4e-3: "collapsed"}))
    assert edge == pytest.approx(math.log2(4e-3)) and beyond(math.log2(8e-3), edge)


# -- the noise: replicates, the cell's own once it has enough --------------------------------------------------


def test_the_noise_is_the_cell_s_replicates_never_a_fit_s_residuals():
    bent = {0: [1.9], 2: [1.75], 4: [1.70, 1.71], 6: [1.76], 8: [1.95]}  # lack of fit at a bend: no df
    assert noise_sums(bent) == NoiseSums(pytest.approx(0.00005), 1)
    assert noise_of(NoiseSums(0.00005, 1), NoiseSums(0.001, 10)) == (pytest.approx(0.01), 10, True)  # too few: pool
    own = NoiseSums(0.0009 * MIN_OWN_DF, MIN_OWN_DF)
    assert noise_of(own, NoiseSums(0.001, 10)) == (pytest.approx(0.03), MIN_OWN_DF, False)
    assert noise_of(NoiseSums(), NoiseSums())[1] == 0 and math.isnan(noise_of(NoiseSums(), NoiseSums())[0])


def test_tuner_and_report_give_a_cell_the_same_noise():
    obs = {0: [2.08], 2: [2.04], 3: [2.02], 4: [2.00, 2.06, 2.00, 2.06, 2.01], 5: [2.01], 6: [2.06], 8: [2.18]}
    decision, = decide_all([obs], LATTICE_8, RefineRule())[0]
    frame = pd.DataFrame([{"cell": "nope", "lr": LATTICE_8.value(k), "loss": y, "status": "ok"}
                          for k, ys in obs.items() for y in ys])
    fit = fit_curves(frame, step=1.0).fits[0]
    assert decision.noise_df == fit.noise_df == 4 and decision.noise_sd == pytest.approx(fit.noise_sd)


# -- the closed sides: one test for the tuner and the report ---------------------------------------------------


def test_closed_sides_close_at_a_clearly_higher_lr_or_a_failure():
    means = {0.0: (1.80, 1), 1.0: (1.70, 2), 2.0: (1.701, 1)}
    assert closed_sides(means, 1.0, 0.01, 10) == (0.0, math.inf)
    assert closed_sides(means, 1.0, 0.01, 10, shut=[3.0]) == (0.0, 3.0)
    assert closed_sides(means, 1.0, math.nan, 0) == (-math.inf, math.inf)  # no noise: nothing is closed


def test_the_tuner_closes_a_curve_exactly_where_the_report_finds_it_open():
    # NoPE-like: flat within noise on the low side, clearly higher on the high side
    obs = {0: [2.005], 2: [2.004], 3: [2.003], 4: [2.00, 2.03, 1.97, 2.01], 5: [2.02], 6: [2.06], 8: [2.18]}
    frame = pd.DataFrame([{"cell": "c", "lr": LATTICE_8.value(k), "loss": y, "status": "ok"}
                          for k, ys in obs.items() for y in ys])
    fit = fit_curves(frame, step=1.0).fits[0]
    sd, df = fit.noise_sd, fit.noise_df
    d = decide(obs, LATTICE_8, RefineRule(max_runs_per_cell=20), sd, df=df)
    assert open_sides({k: (float(np.mean(v)), len(v)) for k, v in obs.items()}, sd, df, -4, 12, sorted(obs)) == (-2,)
    assert d.reason == "close" and d.add == (-2,)
    assert "ci_unbounded" in fit.flags and fit.optimum_lr_high < math.inf  # open below, closed above


# -- the grid pick and tuning.csv ------------------------------------------------------------------------------


def test_the_grid_pick_flags_runs_beyond_the_cliff_and_never_picks_them():
    cell, key = (("arm", "swiglu"),), "train.lr"
    trials = [Trial(cell, ((key, lr),), "ok", y) for lr, y in SWIGLU.items()]
    rows = pick_rows(trials, [cell], [((key, lr),) for lr in SWIGLU], {key: list(SWIGLU)})
    assert not any(r.beyond_cliff for r in rows)  # every run trained: no cliff, 8e-3 the lowest mean
    assert dict(picks(rows)[cell].setting)[key] == 8e-3
    trials[-2:] = [Trial(cell, ((key, lr),), "unstable", y) for lr, y in list(SWIGLU.items())[-2:]]
    rows = pick_rows(trials, [cell], [((key, lr),) for lr in SWIGLU], {key: list(SWIGLU)})
    assert [dict(r.setting)[key] for r in rows if r.beyond_cliff] == [1.13137e-2, 1.6e-2]
    assert rows[-1].to_row()["beyond_cliff"] is True
    # a collapsed run is a run that did not train: its lr ranks behind every lr whose runs all trained
    trials = [Trial(cell, ((key, 1e-3),), "ok", 1.8), Trial(cell, ((key, 2e-3),), "collapsed", math.nan),
              Trial(cell, ((key, 2e-3),), "ok", 1.6), Trial(cell, ((key, 4e-3),), "ok", 1.75)]
    rows = pick_rows(trials, [cell], [((key, lr),) for lr in (1e-3, 2e-3, 4e-3)], {key: [1e-3, 2e-3, 4e-3]})
    assert dict(picks(rows)[cell].setting)[key] == 1e-3 and [r.beyond_cliff for r in rows] == [False, True, True]


# -- the lr curves' window -------------------------------------------------------------------------------------


def _frame(curves: dict[str, dict[float, float]], status: dict | None = None) -> pd.DataFrame:
    return pd.DataFrame([{"cell": c, "lr": lr, "loss": y, "status": (status or {}).get((c, lr), "ok")}
                         for c, curve in curves.items() for lr, y in curve.items()])


def test_a_rounded_half_step_stays_in_the_window():
    # 1.41421e-3 is 1.000005 octaves from 2.82843e-3: one coarse step, as the lattice means it
    smooth = {lr: 1.7 + 0.03 * math.log2(lr / 2.82843e-3) ** 2 for lr in (1.41421e-3, 2e-3, 2.82843e-3, 4e-3, 5.65685e-3)}
    fit = fit_curves(_frame({"a": smooth}), step=1.0).fits[0]
    assert fit.n_points == 5 and (fit.window_lr_low, fit.window_lr_high) == pytest.approx((1.41421e-3, 5.65685e-3))


def test_lr_curves_leave_the_cliff_out_of_the_fit_and_the_noise():
    failed = {("swiglu", 1.13137e-2): "unstable", ("swiglu", 1.6e-2): "unstable", ("post_ln", 4e-3): "collapsed"}
    curves = fit_curves(_frame({"swiglu": SWIGLU, "post_ln": POST_LN}, failed), step=1.0)
    fits = {f.cell: f for f in curves.fits}
    assert fits["swiglu"].window_lr_high == pytest.approx(8e-3) and "beyond_cliff" in fits["swiglu"].flags
    post = fits["post_ln"]
    assert (post.window_lr_low, post.window_lr_high) == pytest.approx((1.41421e-3, 2.82843e-3)) and post.n_points == 3
    assert "beyond_cliff" in post.flags and post.pick_lr == 2.82843e-3
    # SwiGLU's window: 4e-3 .. 8e-3, 3 points, no residual df; post-LN's 3 points: no noise from either
    assert curves.noise.df == 0


# -- refine: picks on points that trained ----------------------------------------------------------------------


def test_refine_leaves_a_cliff_out_of_its_fit_its_noise_and_its_next_runs():
    obs = {**half_steps(SWIGLU), 9: [math.inf], 10: [math.inf]}  # blew up there (`unstable`): did not train
    assert cliff(obs, LATTICE_8.octaves) == 9
    d = judge(obs, 0.0133, octaves=LATTICE_8.octaves, df=10)
    assert d.pick == 8 and d.window == (6, 7, 8) and d.cliff == 9
    assert noise_sums(obs) == NoiseSums()  # one run per lr: no replicate, no noise
    nxt = decide(obs, LATTICE_8, RefineRule(), 0.0133, df=10)
    assert nxt.reason == "replicate" and set(nxt.add) <= {6, 7, 8} and 8 in nxt.add  # nothing at or past 9
    assert pooled_sigma([obs, {k: [v[0], v[0] + 0.01] for k, v in obs.items()}])[0] == pytest.approx(
        math.sqrt(6 * 0.005 ** 2 * 2 / 6))  # replicates below the cliff only: 6 lrs, 6 df


def test_a_fit_s_minimum_beaten_by_a_tried_point_beyond_the_noise_is_not_the_pick():
    obs = {2: [1.9], 4: [1.70], 5: [1.65], 6: [1.66], 7: [1.60], 8: [1.75]}  # the quadratic's minimum: 6
    beaten = judge(obs, 0.005)
    assert (beaten.pick, beaten.beaten) == (7, 6)  # 1.66 vs 1.60: 8.5 SEs of the difference at noise 0.005
    within = judge(obs, 0.1)  # 0.06 is 0.4 SEs at noise 0.1: the fit stands
    assert (within.pick, within.beaten) == (6, None)
    assert 0.06 > BEATEN * 0.005 * math.sqrt(2) and 0.06 < BEATEN * 0.1 * math.sqrt(2)


# -- refine: closing every curve -------------------------------------------------------------------------------


FLAT_ABOVE = {0: [1.9], 2: [1.8], 3: [1.75], 4: [1.70], 5: [1.7005], 6: [1.701], 8: [1.702]}


def test_a_side_within_noise_of_the_pick_is_extended_one_coarse_step_beyond_its_farthest_point():
    d = decide(FLAT_ABOVE, LATTICE_8, RefineRule(), 0.01, df=10)
    assert (d.reason, d.add) == ("close", (10,))  # the low side rises 0.05 (clearly); the high side is flat
    assert decide(FLAT_ABOVE, LATTICE_8, RefineRule(), math.nan).reason == "replicate"  # no noise: seeds first
    assert decide(FLAT_ABOVE, LATTICE_8, RefineRule(), 1e-5, df=10).reason != "close"  # tiny noise: 1.7005 clearly above
    flat_to_the_bound = {**FLAT_ABOVE, 10: [1.703], 12: [1.7035]}
    assert decide(flat_to_the_bound, LATTICE_8, RefineRule(max_runs_per_cell=20), 0.01, df=10).reason != "close"
    spent = RefineRule(confidence=0.99, max_runs_per_cell=7, tolerance=0.0)
    assert decide(FLAT_ABOVE, LATTICE_8, spent, 0.01, df=10).reason == "budget"  # the budget ends the closing too


def test_open_sides_step_half_a_step_where_a_coarse_one_is_out_of_bounds_and_never_past_a_cliff():
    finite = {4: (1.70, 1), 5: (1.701, 1), 6: (1.702, 1)}
    assert open_sides(finite, 0.01, 10, 0, 7, [4, 5, 6]) == (2, 7)  # high: 8 is out of bounds, 7 is not
    assert open_sides(finite, 0.01, 10, 0, 6, [4, 5, 6]) == (2,)  # a cliff at 7: the high side is closed by it
    assert open_sides(finite, 0.0001, 10, 0, 12, [4, 5, 6]) == (2,)  # high side clearly above at tiny noise
    assert open_sides({3: (1.8, 1), **finite}, 0.0001, 10, 0, 12, [3, 4, 5, 6]) == ()  # and now the low side


# -- the simulation's cliff ------------------------------------------------------------------------------------


def test_simulated_runs_fail_beyond_the_cliff_with_a_rising_probability():
    c = Curve(1.73, 2e-3, 0.02, cliff=0.5, cliff_width=1.0)
    assert c.failure(2e-3) == 0 and c.failure(2e-3 * 2 ** 1.0) == pytest.approx(0.5) and c.failure(2e-2) == 1
    world = World(cliff=(0.5, 1.5))
    rng = np.random.default_rng(0)
    curves, noise = world.draw(rng), Noise.draw(world, rng, 4)
    assert all(0.5 <= cv.cliff <= 1.5 for cv in curves)
    far = [noise.run(curves[0], 0, 12, r) for r in range(4)]  # 3.2e-2: every run fails there
    assert not any(math.isfinite(y) for y in far)  # a run that failed did not train: no loss
    assert [noise.run(cv, 0, 0, 0) for cv in World().draw(np.random.default_rng(5))] == \
        [noise.run(cv, 0, 0, 0) for cv in World().draw(np.random.default_rng(5))]


def test_cliff_scores_count_failed_runs_in_a_fit_and_good_lrs_cut():
    cv = Curve(1.73, 2e-3, 0.02, cliff=0.0, cliff_width=0.5)
    world = World(cliff=(0.0, 0.0), cliff_width=0.5)
    noise = Noise.draw(world, np.random.default_rng(1), 2)
    k_best = 4  # 2e-3
    obs = [{k: [noise.run(cv, 0, k, 0)] for k in (0, 2, 4, 5, 6)}]
    failed_at_6 = noise.failed(cv, 0, 6, 0)  # one octave above: always fails
    tried, in_fit, cut, unstable = cliff_scores([cv], noise, obs, [k_best], [(2, 4, 6)])
    assert failed_at_6 and in_fit == (True,) and tried == (0.0,) and unstable == (False,)
    assert cliff_scores([cv], noise, obs, [k_best], [(2, 4)])[1] == (False,)
    assert cut == (False,)  # the cut starts at a failed lr, never at 0 .. 4


def test_refine_keeps_cliff_runs_out_of_its_fits_in_a_small_simulation():
    world = CLIFF_WORLDS["c': a cliff 0-0.5 octaves above each optimum, failures certain 0.5 beyond"]
    out = simulate(world, 6, (Tuner("refine", rule=RefineRule(tolerance=0.001)),), rng_seed=3)
    s = summarise("refine", out["refine"])
    assert s.cliff_in_fit == 0 and s.wrongly_cut == 0 and s.runs_mean <= RefineRule().max_runs_per_cell
    assert s.regret_tried_median <= s.regret_median + 1e-12 and LATTICE.octaves == 0.5


# -- the report ------------------------------------------------------------------------------------------------


def test_the_report_shows_swiglu_s_cliff_apart_and_keeps_it_out_of_the_pick_and_the_curve(tmp_path, corpus):
    import yaml

    from gptlab.kinds.tune.figure import isolation_figure
    from gptlab.kinds.tune.sentences import tuning_warnings
    from gptlab.report.load import load_results
    from gptlab.report.tables import compute_tables
    from gptlab.run.resultsdir import SUMMARY_CSV
    from gptlab.run.rundir import RunDir

    results = tmp_path / "results" / "cliff"
    rows = [{"run_id": f"swiglu-{lr:.6g}", "seed": 1000000, "model.activation": "swiglu", "train.lr": lr,
             "stage": "selection", "status": "ok" if lr < 1e-2 else "unstable", "best_val_loss": y,
             "best_test_loss": y, "wall_s": 1.0}
            for lr, y in SWIGLU.items()]
    rows += [{"run_id": f"swiglu_s{s}", "seed": s, "model.activation": "swiglu", "train.lr": 8e-3, "stage": "estimation",
              "status": "ok", "best_val_loss": 1.685 + e, "best_test_loss": 1.685 + e, "wall_s": 1.0}
             for s, e in enumerate([0.004, -0.003, 0.0])]
    results.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(results / SUMMARY_CSV, index=False)
    sweep = {"name": "cliff", "grid": {"model.activation": ["swiglu"]}, "seeds": [0, 1, 2],
             "tune": {"space": {"train.lr": [5e-4, 1e-3, 2e-3, 4e-3, 8e-3]}, "seeds": 1, "method": "refine"}}
    (results / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    folder = RunDir(results / "runs" / rows[0]["run_id"]).path
    folder.mkdir(parents=True)
    config = {"data": {"dataset": "tiny", "path": str(corpus), "val_fraction": 0.1, "test_fraction": 0.05}}
    (folder / RunDir.CONFIG).write_text(yaml.safe_dump(config))
    res = load_results(results)
    view = compute_tables(res).kinds["tune"].view
    table = view.table
    assert table.loc[table["beyond_cliff"].astype(bool), "train.lr"].tolist() == pytest.approx([1.13137e-2, 1.6e-2])
    assert table.loc[table["picked"].astype(bool), "train.lr"].tolist() == [8e-3]
    assert view.curves.iloc[0]["window_lr_high"] == pytest.approx(8e-3)
    assert "beyond_cliff" in view.curves.iloc[0]["flags"]
    (warning,) = [w for w in tuning_warnings(view) if "stability cliff" in w]
    assert "lr=0.0113137, lr=0.016" in warning
    ax = isolation_figure(res, table, view.keys, view.ceiling, view.curves).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "beyond the stability cliff (out of picks, fits and noise)" in labels
    joined = [line for line in ax.get_lines() if len(line.get_xdata()) == len(SWIGLU) - 2]
    assert joined and max(joined[0].get_xdata()) == pytest.approx(8e-3)  # the curve stops at the cliff


def test_a_side_with_an_lr_where_nothing_trained_is_closed():
    finite = {4: (1.70, 1), 5: (1.701, 1), 6: (1.702, 1)}
    assert open_sides(finite, 0.01, 10, 0, 12, [2, 4, 5, 6]) == (8,)  # 2 collapsed (too small to learn): closed


def test_refine_csv_says_where_a_tried_point_overruled_the_fit_and_where_the_cliff_is():
    from types import SimpleNamespace

    from gptlab.kinds.tune.refine import REFINE_COLS, Refine
    from gptlab.stats.refine import CellDecision

    planner = SimpleNamespace(lattice=LATTICE_8)
    text = Refine._decision(planner, CellDecision(pick=8, beaten=6, reason="replicate"))
    assert text == "replicate; lowest mean taken: the fit's minimum 0.004 was above 0.008 by more than 2 SEs"
    assert Refine._decision(planner, CellDecision(pick=8, reason="confident")) == "confident"
    assert REFINE_COLS[-1] == "cliff_lr"


# -- the pick once every run is read: a lagging seed is a risk its lr carries -----------------------------------


def test_a_seed_far_above_its_siblings_lags_and_moves_the_pick_to_a_neighbour_where_none_did():
    from gptlab.stats.lr_model import lagging
    from gptlab.stats.refine import risk_free_pick

    swiglu = {k: v for k, v in half_steps(SWIGLU).items() if k <= 8}
    swiglu[8] = [1.685, 1.701, 1.699, 2.427, 1.699, 1.726]  # study 8: its estimation seed 2 lagged from step 500
    assert lagging({k: v for k, v in swiglu.items()}) == {8}
    assert risk_free_pick(swiglu, 8, LATTICE_8.octaves) == 6  # 4e-3: 1.701; 8e-3's six runs average 1.823
    # post-LN's seed 0 at 2.83e-3 lagged too (1.900), but every run counted its lr is still the lowest: it stays
    post_ln = {4: [1.767, 1.794, 1.754, 1.773, 1.763, 1.777], 5: [1.728, 1.900, 1.720, 1.733, 1.732, 1.735, 1.747],
               3: [1.834]}
    assert lagging(post_ln) == {5} and risk_free_pick(post_ln, 5, LATTICE_8.octaves) == 5
    calm = {**swiglu, 8: [1.685, 1.701, 1.699, 1.712, 1.699, 1.726]}
    assert lagging(calm) == set() and risk_free_pick(calm, 8, LATTICE_8.octaves) == 8  # no lag: the pick stays
