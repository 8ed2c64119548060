"""The text's share of the error (`gptlab.stats.text_share`): the seed x block model, its calibration by simulation
with planted arm x block interactions (`text_share_sim`), and the report that uses it when runs keep test blocks."""
from __future__ import annotations

import csv
import dataclasses
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from calibration.synthetic import make_results
from calibration.text_share_sim import DESIGN, TextScenario, calibrate_text, simulate_blocks
from gptlab.report import write_report
from gptlab.report.load import load_results
from gptlab.report.load.block_losses import BlockLosses, read_test_blocks
from gptlab.report.tables import compute_tables
from gptlab.run.resultsdir import ResultsDir
from gptlab.stats.design import Design
from gptlab.stats.effects import analyse
from gptlab.stats.models import fit_cells
from gptlab.stats.text_share import Blocks, text_error

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

LN2 = math.log(2)


def label(f: str, lv: str) -> str:
    return f"{f}={lv}"


def two_cells() -> Design:
    return Design(("a",), {"a": ("0", "1")}, {"a": "0"}, (("0",), ("1",)))


# -- the model -------------------------------------------------------------------------------------------------------
def test_two_cells_with_paired_seeds_is_the_crossed_seed_by_block_anova():
    rng = np.random.default_rng(1)
    S, B = 4, 12
    Y = rng.normal(0, 0.01, (2 * S, B)) + rng.normal(0, 0.02, (2, 1, B)).repeat(S, axis=1).reshape(2 * S, B)
    cells, seeds = [("0",)] * S + [("1",)] * S, np.tile(np.arange(S), 2)
    blocks = Blocks(Y, np.ones_like(Y))
    a = analyse(blocks.run_losses, cells, seeds, two_cells(), label, 0.01, blocks=blocks)
    row = a.main.iloc[0]
    D = Y[S:] - Y[:S]  # the contrast for seed s on block b
    grand, by_seed, by_block = D.mean(), D.mean(axis=1), D.mean(axis=0)
    ms_seed = B * ((by_seed - grand) ** 2).sum() / (S - 1)
    ms_block = S * ((by_block - grand) ** 2).sum() / (B - 1)
    ms_err = ((D - by_seed[:, None] - by_block[None, :] + grand) ** 2).sum() / ((S - 1) * (B - 1))
    var = (ms_seed + ms_block - ms_err) / (S * B)
    assert ms_block > 2 * ms_err  # the planted interaction is there
    terms = [ms_seed / (S * B), ms_block / (S * B), ms_err / (S * B)]
    df = var ** 2 / (terms[0] ** 2 / (S - 1) + terms[1] ** 2 / (B - 1) + terms[2] ** 2 / ((S - 1) * (B - 1)))
    assert row["estimate"] == pytest.approx(grand, abs=1e-12)
    se = (row["ci_high"] - row["estimate"]) / float(st.t.ppf(0.975, df))
    assert se ** 2 == pytest.approx(var, rel=1e-9)
    assert row["text_share"] == pytest.approx((ms_block - ms_err) / (S * B) / var, rel=1e-9)


def test_the_model_recovers_planted_components():
    sc = TextScenario(seeds=12, inter_sd=0.01, n_blocks=400, err_sd=0.012)
    blocks, cells, seeds = simulate_blocks(sc, np.random.default_rng(2))
    index = {c: i for i, c in enumerate(DESIGN.cells)}
    idx = np.array([index[c] for c in cells])
    fit = fit_cells(blocks.run_losses, idx, seeds, DESIGN)
    text = text_error(blocks, idx, seeds, DESIGN, fit)
    assert text.sd_err == pytest.approx(sc.err_sd, rel=0.03)
    main = DESIGN.interaction((("activation", "relu"),))
    interaction = DESIGN.interaction((("activation", "relu"), ("tying", "untied")))
    # each cell's block deviations have SD inter_sd: a main effect's vary with SD inter_sd, the interaction's with 2x
    assert text.variance(main) / text.sum_w2 == pytest.approx(sc.inter_sd ** 2, rel=0.25)
    assert text.variance(interaction) / text.sum_w2 == pytest.approx(4 * sc.inter_sd ** 2, rel=0.25)
    assert text.sum_w2 == pytest.approx(1 / 400)
    assert fit.resid_sd == pytest.approx(math.hypot(sc.run_sd, sc.err_sd / 20), rel=0.3)  # blocks average out e


def test_no_planted_interaction_gives_a_text_share_near_zero():
    sc = TextScenario(seeds=12, inter_sd=0.0, n_blocks=400)
    blocks, cells, seeds = simulate_blocks(sc, np.random.default_rng(3))
    a = analyse(blocks.run_losses, cells, seeds, DESIGN, label, 0.01, blocks=blocks)
    assert (a.main["text_share"] < 0.1).all() and (a.interactions["text_share"] < 0.1).all()
    assert a.text.sd_err == pytest.approx(sc.err_sd, rel=0.03)


def test_the_estimate_is_the_seed_models_and_one_row_joint_test_is_its_test():
    blocks, cells, seeds = simulate_blocks(TextScenario(inter_sd=0.02), np.random.default_rng(4))
    plain = analyse(blocks.run_losses, cells, seeds, DESIGN, label, 0.01)
    both = analyse(blocks.run_losses, cells, seeds, DESIGN, label, 0.01, blocks=blocks)
    assert np.allclose(plain.main["estimate"], both.main["estimate"], atol=1e-12)
    assert "text_share" not in plain.main and list(both.main.columns).index("text_share") == \
        list(both.main.columns).index("call") + 1
    assert (both.main["ci95"] > plain.main["ci95"]).all()
    c = DESIGN.interaction((("activation", "relu"),))
    t = both.text.test(both.fit.test(c), c)
    F, rank, df2, p = both.text.joint(both.fit, c[None, :])
    assert rank == 1 and F == pytest.approx((t.estimate / t.se) ** 2, rel=1e-9)
    assert df2 == pytest.approx(t.df, rel=1e-9) and p == pytest.approx(t.p_value, rel=1e-6)


def test_three_factors_test_their_higher_order_term_jointly_with_the_text():
    fac = {"a": ("0", "1"), "b": ("0", "1"), "c": ("0", "1")}
    design = Design(tuple(fac), fac, {f: "0" for f in fac}, tuple(itertools.product(*fac.values())))
    rng = np.random.default_rng(9)
    cells = [c for c in design.cells for _ in range(3)]
    seeds = np.tile(np.arange(3), len(design.cells))
    deviation = {c: rng.normal(0, 0.03, 20) for c in design.cells}
    Y = np.array([1.5 + deviation[c] + rng.normal(0, 0.005) + rng.normal(0, 0.01, 20) for c in cells])
    blocks = Blocks(Y, np.ones_like(Y))
    plain = analyse(blocks.run_losses, cells, seeds, design, label, 0.01)
    both = analyse(blocks.run_losses, cells, seeds, design, label, 0.01, blocks=blocks)
    F0, _, _, p0 = plain.higher_joint
    F1, rank, df2, p1 = both.higher_joint
    assert rank == 1 and F1 < F0 and p1 > p0 and df2 != plain.higher_joint[2]  # the text is in its denominator
    assert both.higher["text_share"].iloc[0] > 0.5


def test_a_run_without_blocks_counts_at_its_value_in_every_block(tmp_path):
    res = load_results(planted(tmp_path, inter_sd=0.01))
    runs = res.runs.iloc[:3]
    values = pd.Series([9.0, 9.0, 9.0])
    blocks = res.test_blocks.for_runs(pd.Series(["missing", runs["run_id"][1], runs["run_id"][2]]), values)
    assert blocks.losses[0] == pytest.approx(np.full(20, 9.0)) and blocks.run_losses[0] == pytest.approx(9.0)
    assert blocks.losses[1] == pytest.approx(res.test_blocks.losses.loc[runs["run_id"][1]].to_numpy())
    assert BlockLosses().for_runs(runs["run_id"], runs["best_test_loss"]) is None


def test_unequal_blocks_are_weighted_by_their_tokens():
    Y = np.array([[1.0, 2.0, 4.0], [2.0, 2.0, 2.0]])
    blocks = Blocks(Y, np.array([[1, 1, 2], [3, 3, 3]]))
    assert blocks.run_losses == pytest.approx([2.75, 2.0])
    assert blocks.weights.sum(axis=1) == pytest.approx([1, 1])
    with pytest.raises(ValueError):
        Blocks(Y[:, :1], np.ones((2, 1)))


def test_seeds_that_link_no_other_cell_turn_seed_blocking_off():
    # the last cell's seeds are none of the others': its mean at the average seed is not estimable with seed dummies
    y = np.array([1.0, 1.1, 1.2, 2.0, 2.1, 2.2, 3.0, 3.3, 3.6])
    idx = np.repeat([0, 1, 2], 3)
    design = Design(("a",), {"a": ("0", "1", "2")}, {"a": "0"}, (("0",), ("1",), ("2",)))
    fit = fit_cells(y, idx, np.array([0, 1, 2, 0, 1, 2, 3, 4, 5]), design)
    assert not fit.seed_block and fit.means == pytest.approx([1.1, 2.1, 3.3])
    shared = fit_cells(y, idx, np.array([0, 1, 2, 0, 1, 2, 1, 2, 3]), design)  # linked through seeds 1, 2
    assert shared.seed_block


# -- the calibration (a small version of benchmarks/text_share_calibration.py) ---------------------------------------
@pytest.mark.parametrize("inter_sd", [0.0, 0.02])
def test_the_ci_widens_with_an_arm_by_block_interaction_and_not_without(inter_sd):
    cal = calibrate_text(TextScenario(3, inter_sd), 30, rng_seed=5)
    ratio = cal["seeds x blocks"].half_width / cal["seeds only"].half_width
    if inter_sd:
        assert ratio > 1.2 and cal["seeds x blocks"].text_share > 0.4
    else:
        assert ratio < 1.05 and cal["seeds x blocks"].text_share < 0.1


def test_a_small_simulation_covers_where_the_seed_only_ci_does_not():
    cal = calibrate_text(TextScenario(5, 0.02), 100, rng_seed=6)
    both, seeds = cal["seeds x blocks"], cal["seeds only"]
    assert 0.92 <= both.coverage <= 0.98, both
    assert both.false_calls <= 0.05 and both.n_null == 4 * 100
    assert seeds.coverage < 0.85 and seeds.false_calls > 0.08  # what counting the seeds alone misses


@pytest.mark.parametrize("layout", ["unpaired", "disjoint", "single"])
def test_seeds_not_shared_by_every_cell_and_a_cell_with_one_seed(layout):
    cal = calibrate_text(TextScenario(3, 0.01, layout=layout), 60, rng_seed=7)
    assert 0.9 <= cal["seeds x blocks"].coverage <= 0.99, cal["seeds x blocks"]


def test_the_paired_bootstrap_undercovers_with_three_seeds():
    cal = calibrate_text(TextScenario(3, 0.0), 50, rng_seed=8, bootstrap=199)
    assert cal["bootstrap"].coverage < 0.9 and cal["bootstrap"].n_intervals == 100
    assert cal["seeds x blocks"].coverage > 0.92


# -- the report ------------------------------------------------------------------------------------------------------
GRID = {"model.activation": ["gelu", "relu"], "model.tying": ["tied", "untied"]}


def planted(tmp_path, inter_sd: float, seeds: int = 3, n_blocks: int = 20, rng_seed: int = 0):
    """A 2x2 results folder whose runs have a test split and test_blocks.csv: relu 0.02 better on all text, each
    cell's loss on a block off by an arm x block deviation of SD `inter_sd`."""
    out = make_results(tmp_path, GRID, seeds, name="blocks", effects={(("model.activation", "relu"),): -0.02},
                       rng_seed=rng_seed)
    rng = np.random.default_rng(rng_seed + 1)
    summary = pd.read_csv(ResultsDir(out).summary_csv)
    cells = list(itertools.product(*GRID.values()))
    deviation = {c: rng.normal(0, inter_sd, n_blocks) for c in cells}
    difficulty = rng.normal(0, 0.1, n_blocks)
    tests = []
    for r in summary.to_dict("records"):
        tokens = np.full(n_blocks, 2800) + np.arange(n_blocks) % 2
        loss = (r["best_val_loss"] + 0.05 + difficulty + deviation[(r["model.activation"], r["model.tying"])]
                + rng.normal(0, 0.01, n_blocks))
        ResultsDir(out).run(r["run_id"]).write_test_blocks(
            [{"block": b, "chars": int(t), "tokens": int(t), "loss": float(v)}
             for b, (t, v) in enumerate(zip(tokens, loss))])
        tests.append(float((loss * tokens).sum() / tokens.sum()))
    summary["best_val_bpc"] = summary["best_val_loss"] / LN2
    summary["best_test_loss"] = tests
    summary["best_test_bpc"] = summary["best_test_loss"] / LN2
    summary.to_csv(ResultsDir(out).summary_csv, index=False)
    return out


def report_text(tmp_path, out):
    folder = write_report(out, tmp_path / "reports")
    main = list(csv.DictReader(open(folder / "tables" / "main_effects.csv")))
    return (folder / "report.md").read_text(), main


def test_a_report_with_test_blocks_counts_the_text(tmp_path, no_figures):
    out = planted(tmp_path, inter_sd=0.02)
    res = load_results(out)
    assert res.test_blocks.present and res.test_blocks.n_blocks == 20
    tables = compute_tables(res)
    assert tables.effects.text is not None
    for name in ("main", "interactions", "simple"):
        share = getattr(tables, name)["text_share"]
        assert share.notna().all() and (share > 0.3).all(), name
    report, main = report_text(tmp_path, out)
    assert "Error model: seeds x text blocks." in report and "`text_share` is the blocks' share" in report
    assert all(0.3 < float(r["text_share"]) <= 1 for r in main)
    assert "text_share" in report.split("## Main effects")[1].split("##")[0]  # the markdown table shows it
    seeds_only = compute_tables(dataclasses.replace(res, test_blocks=BlockLosses()))
    assert (tables.main["ci95"] > seeds_only.main["ci95"]).all()  # the text widens every main effect's CI


def test_without_an_interaction_the_report_barely_widens(tmp_path):
    res = load_results(planted(tmp_path, inter_sd=0.0))
    with_blocks = compute_tables(res).main
    seeds_only = compute_tables(dataclasses.replace(res, test_blocks=BlockLosses())).main
    assert (with_blocks["ci95"] <= seeds_only["ci95"] * 1.2).all()  # (8 rng seeds of this folder: at most 1.14)
    assert (with_blocks["text_share"] < 0.35).all()


def test_a_run_without_blocks_keeps_the_seed_only_model_and_says_so(tmp_path, no_figures):
    out = planted(tmp_path, inter_sd=0.02)
    (ResultsDir(out).run("run00s1").path / "test_blocks.csv").unlink()
    res = load_results(out)
    assert not res.test_blocks.present and res.test_blocks.missing == "no blocks"
    report, main = report_text(tmp_path, out)
    assert "Error model: seeds only." in report and "1 of 12 ok runs have no `test_blocks.csv`" in report
    assert "text_share" not in main[0] and "text_share" not in report


def test_blocks_that_do_not_add_up_to_the_test_loss_are_refused(tmp_path):
    out = planted(tmp_path, inter_sd=0.0)
    folder = ResultsDir(out).run("run01s2")
    rows = folder.test_blocks()
    rows[0]["loss"] = str(float(rows[0]["loss"]) + 1.0)
    folder.write_test_blocks(rows)
    tb = load_results(out).test_blocks
    assert tb.missing == "not their loss" and tb.culprit == "run01s2"


def test_a_sweep_without_a_test_split_says_seed_only(tmp_path, no_figures):
    out = make_results(tmp_path, GRID, 3)
    report, main = report_text(tmp_path, out)
    assert "Error model: seeds only." in report and "have no test split" in report
    assert "text_share" not in main[0]


def test_bits_per_char_blocks_are_weighted_by_their_characters(tmp_path):
    out = planted(tmp_path, inter_sd=0.0)
    res = load_results(out)
    runs = res.runs.copy()
    rows = ResultsDir(out).run(runs["run_id"][0]).test_blocks()
    for r in rows:
        r["chars"] = str(int(r["tokens"]) * 3)
    ResultsDir(out).run(runs["run_id"][0]).write_test_blocks(rows)
    loss = np.array([float(r["loss"]) for r in rows])
    tokens, chars = (np.array([float(r[k]) for r in rows]) for k in ("tokens", "chars"))
    runs.loc[0, "best_test_loss"] = (loss * tokens).sum() / chars.sum() / LN2
    tb = read_test_blocks(ResultsDir(out), runs.iloc[:1], "best_test_loss", "bits/char")
    assert tb.present
    assert tb.losses.iloc[0].to_numpy() == pytest.approx(loss / 3 / LN2)
    assert tb.weights.iloc[0].to_numpy() == pytest.approx(chars / chars.sum())
