"""Statistics of the report on synthetic results with planted effects (no training, no figures)."""
from __future__ import annotations

import dataclasses
import json
import math
import sys
from types import SimpleNamespace

import pytest
import statsmodels.formula.api as smf

from calibration.synthetic import make_results
from gptlab.report import load_results, sentences
from gptlab.report.load.results import TEST_OUTCOME
from gptlab.report.load.samples import NO_CHECKPOINT, SAMPLES_JSON, gather
from gptlab.report.sentences.overview import best_and_baseline
from gptlab.report.tables import compute_tables
from gptlab.report.tables.analyses import cell_table

GRID = {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"]}
POST = (("model.norm", "post"),)


def effects(res):
    """The report's effect tables as it writes them (with their verdicts), its fit and its warnings."""
    tables = compute_tables(res)
    words = sentences.write(res, tables)
    files = tables.files(words.verdicts)
    return SimpleNamespace(main=files["main_effects"], interactions=files["interactions"], analysis=tables.effects,
                           warnings=words.warnings)


def _row(table, **where):
    sel = table
    for k, v in where.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, where
    return sel.iloc[0]


def test_planted_effect_is_recovered(tmp_path):
    results = make_results(tmp_path, GRID, 4, effects={POST: 0.05}, seed_sd=0.005, noise_sd=0.002)
    eff = effects(load_results(results))
    norm = _row(eff.main, factor="model.norm", level="post")
    assert norm["baseline"] == "pre"
    assert norm["estimate"] == pytest.approx(0.05, abs=0.004)
    assert norm["ci_low"] <= 0.05 <= norm["ci_high"]
    assert norm["p_value"] < 0.001
    assert norm["verdict"].startswith("norm=post is worse than norm=pre (estimate 0.0")
    assert norm["call"] == "worse" and norm["p_adjusted"] >= norm["p_value"]
    act = _row(eff.main, factor="model.activation", level="relu")
    assert act["ci_low"] <= 0.0 <= act["ci_high"]
    assert act["call"] == "equivalent" and "equivalent within +/-0.01" in act["verdict"]
    # cell-means model: 16 runs - 4 cell means - 3 seed dummies
    assert eff.analysis.fit.seed_block and eff.analysis.fit.df == 16 - 4 - 3


def test_better_level_has_negative_effect(tmp_path):
    results = make_results(tmp_path, GRID, 3, effects={(("model.activation", "relu"),): -0.03})
    row = _row(effects(load_results(results)).main, factor="model.activation", level="relu")
    assert row["estimate"] == pytest.approx(-0.03, abs=0.004)
    assert "activation=relu is better than activation=gelu (estimate -0.0" in row["verdict"]


def test_no_effect_says_no_detectable_difference(tmp_path):
    results = make_results(tmp_path, GRID, 4, rng_seed=3)
    eff = effects(load_results(results))
    assert set(eff.main["call"]) <= {"equivalent", "inconclusive"}, list(eff.main["verdict"])
    assert not any("better" in v or "worse" in v for v in eff.main["verdict"])
    assert set(eff.interactions["call"]) <= {"equivalent", "inconclusive"}


def test_interaction_and_seed_pairing_match_statsmodels_formula(tmp_path):
    results = make_results(tmp_path, GRID, 3, effects={POST: 0.05, POST + (("model.activation", "relu"),): 0.03},
                           seed_sd=0.02, noise_sd=0.001)
    res = load_results(results)
    eff = effects(res)
    inter = _row(eff.interactions, level_a="post", level_b="relu")
    assert inter["ci_low"] <= 0.03 <= inter["ci_high"] and inter["p_value"] < 0.001
    assert "not additive; together they are worse than the sum of their separate effects (estimate 0.0" in inter["verdict"]
    # independent check: the cell-means model with seed blocking through statsmodels' formula interface
    df = res.runs.rename(columns={"model.norm": "norm", "model.activation": "act"})
    df["cell"] = df["norm"] + "-" + df["act"]
    fit = smf.ols("best_val_loss ~ 0 + C(cell) + C(seed)", df).fit()
    names = list(fit.params.index)

    def contrast(weights):
        return fit.t_test([weights.get(n.split("[")[1].rstrip("]"), 0.0) if n.startswith("C(cell)") else 0.0
                           for n in names])

    main = contrast({"post-gelu": 0.5, "post-relu": 0.5, "pre-gelu": -0.5, "pre-relu": -0.5})
    assert _row(eff.main, factor="model.norm")["estimate"] == round(float(main.effect[0]), 4)
    assert _row(eff.main, factor="model.norm")["p_value"] == float(f"{float(main.pvalue):.2g}")
    inter_t = contrast({"post-relu": 1, "post-gelu": -1, "pre-relu": -1, "pre-gelu": 1})
    assert inter["estimate"] == round(float(inter_t.effect[0]), 4)
    assert inter["ci_low"] == round(float(inter_t.conf_int()[0][0]), 4)


def test_seeds_are_paired(tmp_path):
    results = make_results(tmp_path, GRID, 4, effects={POST: 0.05}, seed_sd=0.02, noise_sd=0.001)
    norm = _row(effects(load_results(results)).main, factor="model.norm")
    assert norm["ci_low"] <= 0.05 <= norm["ci_high"]
    assert norm["ci95"] < 0.003  # the seed block removes the seed-to-seed noise (sd 0.02)


def test_unbalanced_design_from_exclude(tmp_path):
    results = make_results(tmp_path, GRID, 3, effects={POST: 0.05},
                           exclude=[{"model.norm": "post", "model.activation": "relu"}])
    res = load_results(results)
    assert len(res.cells) == 3 and len(cell_table(res)) == 3
    eff = effects(res)
    assert _row(eff.main, factor="model.norm")["estimate"] == pytest.approx(0.05, abs=0.005)
    inter = _row(eff.interactions, level_a="post", level_b="relu")
    assert math.isnan(inter["estimate"]) and "not estimable" in inter["verdict"]


def test_three_levels_typed_levels_single_seed_and_named_baseline(tmp_path):
    grid = {"train.warmup_iters": [0, 100, 500], "model.bias": [False, True]}
    results = make_results(tmp_path, grid, [7], baseline={"train.warmup_iters": 100},
                           effects={(("train.warmup_iters", 0),): 0.04, (("train.warmup_iters", 500),): 0.02},
                           noise_sd=0.001)
    res = load_results(results)
    assert res.levels == {"train.warmup_iters": ["0", "100", "500"], "model.bias": ["False", "True"]}
    assert res.baseline == {"train.warmup_iters": "100", "model.bias": "False"}
    cells = cell_table(res)
    assert _row(cells, baseline=True)["cell"] == "warmup_iters=100, bias=False"
    eff = effects(res)
    assert list(eff.main["level"]) == ["0", "500", "True"] and set(eff.main["baseline"]) == {"100", "False"}
    assert _row(eff.main, level="0")["estimate"] == pytest.approx(0.04, abs=0.005)
    assert _row(eff.main, level="500")["estimate"] == pytest.approx(0.02, abs=0.005)
    assert eff.analysis.fit.kind == "none"  # one run per cell, two factors: no error estimate at all
    assert eff.main["p_value"].isna().all() and (eff.main["call"] == "").all()
    assert "no error estimate (no call)" in _row(eff.main, level="0")["verdict"]
    assert any("Only one seed" in w for w in eff.warnings)
    assert any("No error estimate" in w for w in eff.warnings)


def _no_error_warning(tmp_path, name, **losses):
    """The report's no-error warning for 2 cells x 2 seeds whose losses are exactly cell plus seed (no noise)."""
    res = load_results(make_results(tmp_path, {"model.norm": ["pre", "post"]}, [0, 1], name=name, noise_sd=0.0,
                                    **losses))
    eff = effects(res)
    assert eff.analysis.fit.kind == "none"  # nothing is left to estimate an error from
    (warning,) = [w for w in eff.warnings if w.startswith("No error estimate")]
    return warning


def test_no_error_estimate_says_each_cells_runs_are_identical_only_when_they_are(tmp_path):
    same = _no_error_warning(tmp_path, "same", seed_sd=0.0)  # every run at one loss: each cell's runs are identical
    assert "the runs of each cell have identical losses" in same
    twins = _no_error_warning(tmp_path, "twins", seed_sd=0.05)  # the seeds differ, the cells match seed for seed
    assert "identical losses" not in twins
    assert "cells norm=pre and norm=post have the same loss at every seed" in twins
    shifted = _no_error_warning(tmp_path, "shifted", seed_sd=0.05, effects={(("model.norm", "post"),): 0.03})
    assert "identical losses" not in shifted and "same loss at every seed" not in shifted
    assert "exactly its cell's plus its seed's" in shifted and "exactly its cell's plus its seed's" in twins


def test_float_levels_keep_grid_order(tmp_path):
    results = make_results(tmp_path, {"train.lr": [1e-3, 3e-4, 1e-4]}, 2, effects={(("train.lr", 1e-4),): 0.1})
    res = load_results(results)
    assert res.levels == {"train.lr": ["0.001", "0.0003", "0.0001"]} and res.baseline == {"train.lr": "0.001"}
    row = _row(effects(res).main, level="0.0001")
    assert row["estimate"] == pytest.approx(0.1, abs=0.01) and row["verdict"].startswith("lr=0.0001 is worse")


def test_samples_use_best_seed_and_tolerate_missing_checkpoints(tmp_path, monkeypatch):
    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, 3)
    res = load_results(results)
    calls = []

    def fake_sample(run_dir, prompt, max_new_tokens, seed):
        calls.append((run_dir.name, prompt, max_new_tokens, seed))
        if "run01" in run_dir.name:
            raise FileNotFoundError(run_dir)
        return "To be, or not to be"

    def texts(report_dir=None) -> list[str]:
        return [t for _, _, t in gather(res, report_dir).shown]

    monkeypatch.setattr("gptlab.run.sampling.sample_from_run", fake_sample)
    got = gather(res)
    ok = res.runs
    best = [ok.loc[ok[ok["cell"] == c]["best_val_loss"].idxmin(), "run_id"] for c in res.cells["cell"]]
    assert [run for _, run, _ in got.shown] == best == [c[0] for c in calls]
    assert {c[1:] for c in calls} == {(None, 200, 0)}  # the sample's own prompt, as the run's (default_prompt)
    assert [t for _, _, t in got.shown] == ["To be, or not to be", NO_CHECKPOINT]
    # a sample drawn from a checkpoint is kept for reports without checkpoints: in the report's folder (the
    # render step writes it), never in results/NAME/, which no report step writes
    assert got.drawn == {best[0]: "To be, or not to be"} and not (results / "samples.json").exists()
    assert json.loads(got.cache_text()) == got.drawn
    report = tmp_path / "reports" / "x"
    report.mkdir(parents=True)
    (report / SAMPLES_JSON).write_text(got.cache_text())
    sampling = sys.modules["gptlab.run.sampling"]
    monkeypatch.setitem(sys.modules, "gptlab.run.sampling", None)  # module missing -> ImportError
    assert texts(report) == ["To be, or not to be", NO_CHECKPOINT]
    assert gather(res, report).drawn == got.drawn  # kept again by the next generation, or its manifest drops it
    assert texts() == [NO_CHECKPOINT, NO_CHECKPOINT] and gather(res).cache_text() is None
    # results/NAME/samples.json, where reports before kept them (the shipped studies have one), is still read
    (results / "samples.json").write_text(json.dumps({best[1]: "Kept by an older report"}))
    assert texts() == [NO_CHECKPOINT, "Kept by an older report"] and gather(res).drawn == {}
    assert texts(report) == ["To be, or not to be", "Kept by an older report"]
    # the run's own sample.txt (same checkpoint, same settings) is used as is: no model is loaded
    (results / "runs" / best[0]).mkdir(parents=True, exist_ok=True)
    (results / "runs" / best[0] / "sample.txt").write_text("From the run itself")
    calls.clear()
    monkeypatch.setitem(sys.modules, "gptlab.run.sampling", sampling)
    assert texts()[0] == "From the run itself" and best[0] not in [c[0] for c in calls]


def test_a_report_keeps_drawn_samples_in_its_own_folder_and_writes_nothing_into_the_results(tmp_path, monkeypatch):
    from helpers import skip_figures

    from gptlab.report import write_report

    skip_figures(monkeypatch)
    results = make_results(tmp_path / "results", {"model.norm": ["pre", "post"]}, 2, name="drawn")
    before = sorted((p.relative_to(results), p.stat().st_mtime_ns) for p in results.rglob("*"))
    monkeypatch.setattr("gptlab.run.sampling.sample_from_run", lambda run_dir, **kw: f"Drawn from {run_dir.name}")
    out = write_report(results, tmp_path / "reports" / "drawn")
    drawn = json.loads((out / SAMPLES_JSON).read_text())
    assert len(drawn) == 2 and all(f"Drawn from {run}" in (out / "report.md").read_text() for run in drawn)
    assert SAMPLES_JSON in json.loads((out / ".manifest.json").read_text())["files"]
    assert sorted((p.relative_to(results), p.stat().st_mtime_ns) for p in results.rglob("*")) == before
    # the checkpoints are gone: the next generation shows the kept texts and keeps them again
    monkeypatch.setattr("gptlab.run.sampling.sample_from_run",
                        lambda run_dir, **kw: (_ for _ in ()).throw(FileNotFoundError(run_dir)))
    out = write_report(results, out)
    assert json.loads((out / SAMPLES_JSON).read_text()) == drawn
    assert all(f"Drawn from {run}" in (out / "report.md").read_text() for run in drawn)


def test_a_study_decided_on_test_loss_ranks_its_cells_and_names_its_best_cell_on_test_loss(tmp_path):
    res = load_results(make_results(tmp_path, {"model.norm": ["pre", "post"]}, 3, effects={POST: -0.05}))
    # post is best on validation; on the test split (what the effects are estimated on) pre is best
    test = 3.0 - res.runs["best_val_loss"]
    res = dataclasses.replace(res, runs=res.runs.assign(best_test_loss=test, best_test_bpc=test / math.log(2)))
    assert cell_table(res).iloc[0]["model.norm"] == "post"
    res = dataclasses.replace(res, outcome=TEST_OUTCOME)
    cells = cell_table(res)
    assert list(cells["model.norm"]) == ["pre", "post"] and list(cells["rank"]) == [1, 2]
    (best,) = best_and_baseline(res, cells)
    assert best.startswith("Best cell: **norm=pre** (the baseline is also the best cell), test loss at the best val step ")
    assert f"{cells.iloc[0]['best_test_loss']:.4f}" in best


def test_an_arms_failures_at_its_pick_are_part_of_its_row(tmp_path):
    """Issue 54: each arm's row gives its failures at the pick with a 95% interval, and its effect counting every
    run (an unstable run at its own loss, a diverged one at the unigram loss) beside the effect of the runs that
    trained; an arm without failures has the same estimate, its CI widened by what its few runs cannot rule out."""
    import pandas as pd
    import yaml
    from statsmodels.stats.proportion import proportion_confint

    from gptlab.report import write_report

    grid = {"arm": ["nanogpt", "a", "b", "c"]}
    results = make_results(tmp_path, grid, seeds=4, effects={(("arm", "a"),): 0.02}, name="fail",
                           status={(("a",), 1): "unstable", (("b",), 2): "diverged"})
    spec = yaml.safe_load((results / "sweep.yaml").read_text())
    spec["arms"] = {"nanogpt": {}, "a": {"model.activation": "relu"}, "b": {"model.tying": "untied"},
                    "c": {"model.norm": "post"}}
    (results / "sweep.yaml").write_text(yaml.safe_dump(spec))
    report = write_report(results, tmp_path / "reports")
    arms = pd.read_csv(report / "tables" / "arms.csv").set_index("arm")
    low, high = proportion_confint(1, 4, alpha=0.05, method="beta")
    for arm in ("a", "b"):
        assert (arms.loc[arm, "n_ok"], arms.loc[arm, "n_diverged"]) == (3, 1)
        assert (arms.loc[arm, "failure_rate_low"], arms.loc[arm, "failure_rate_high"]) == pytest.approx((low, high),
                                                                                                       abs=1e-6)
    assert arms.loc["c", "n_diverged"] == 0 and arms.loc["c", "failure_rate_low"] == 0
    c = arms.loc["c"]
    assert c["estimate_all_runs"] == c["estimate"]  # no run of c failed: the same estimate
    # but 4 runs that all trained do not show that c never fails: its CI widens by what the failure rates allow
    res = load_results(results)
    runs = res.runs
    q_c = proportion_confint(0, 4, alpha=0.05, method="beta")[1]
    ok_c = runs.loc[(runs["arm"] == "c") & runs["ok"], res.outcome].mean()
    assert c["ci_high_all_runs"] == pytest.approx(c["ci_high"] + q_c * (res.ceiling - ok_c), abs=2e-4)
    assert c["ci_low_all_runs"] < c["ci_low"]  # the baseline may fail too
    unstable = runs[(runs["arm"] == "a") & (runs["seed"] == 1)]
    assert unstable["status"].item() == "unstable" and not unstable["ok"].item()
    a = arms.loc["a"]
    assert a["estimate_all_runs"] != a["estimate"] and abs(a["estimate_all_runs"] - a["estimate"]) < 0.01  # own loss
    b = arms.loc["b"]
    assert b["estimate_all_runs"] > b["estimate"] + 0.3  # the diverged run at the unigram loss, ~3.3 against ~1.5
    text = (report / "report.md").read_text()
    assert "1 of 4 runs at its pick failed to train" in text and "counting every run" in text
