"""Statistics of the report on synthetic results with planted effects (no training, no figures)."""
from __future__ import annotations

import math
import sys
import types

import pytest
import statsmodels.formula.api as smf

from gptlab.report import load_results
from gptlab.report.samples import NO_CHECKPOINT, samples
from gptlab.report.stats import cell_table, effects
from gptlab.report.synthetic import make_results

GRID = {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"]}
POST = (("model.norm", "post"),)


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
    assert norm["verdict"].startswith("norm=post is worse than norm=pre by 0.0")
    act = _row(eff.main, factor="model.activation", level="relu")
    assert act["ci_low"] <= 0.0 <= act["ci_high"]
    assert "no detectable difference" in act["verdict"]
    assert eff.seed_block and eff.df_resid == 16 - 6  # intercept, 2 factor dummies, 3 seed dummies


def test_better_level_has_negative_effect(tmp_path):
    results = make_results(tmp_path, GRID, 3, effects={(("model.activation", "relu"),): -0.03})
    row = _row(effects(load_results(results)).main, factor="model.activation", level="relu")
    assert row["estimate"] == pytest.approx(-0.03, abs=0.004)
    assert "activation=relu is better than activation=gelu by" in row["verdict"]


def test_no_effect_says_no_detectable_difference(tmp_path):
    results = make_results(tmp_path, GRID, 4, rng_seed=3)
    eff = effects(load_results(results))
    assert all("no detectable difference (p = " in v for v in eff.main["verdict"]), list(eff.main["verdict"])
    assert all("no detectable interaction" in v for v in eff.interactions["verdict"])
    assert any("Too few seeds to rule out small main effects" in w for w in eff.warnings)


def test_interaction_and_seed_pairing_match_statsmodels_formula(tmp_path):
    results = make_results(tmp_path, GRID, 3, effects={POST: 0.05, POST + (("model.activation", "relu"),): 0.03},
                           seed_sd=0.02, noise_sd=0.001)
    res = load_results(results)
    eff = effects(res)
    inter = _row(eff.interactions, level_a="post", level_b="relu")
    assert inter["ci_low"] <= 0.03 <= inter["ci_high"] and inter["p_value"] < 0.001
    assert "not additive; together they are worse by" in inter["verdict"]
    # independent check of the design matrix: the same models through the formula interface
    df = res.runs.rename(columns={"model.norm": "norm", "model.activation": "act"})
    add = smf.ols("best_val_loss ~ C(norm, Treatment('pre')) + C(act, Treatment('gelu')) + C(seed)", df).fit()
    full = smf.ols("best_val_loss ~ C(norm, Treatment('pre')) * C(act, Treatment('gelu')) + C(seed)", df).fit()
    name = "C(norm, Treatment('pre'))[T.post]"
    assert _row(eff.main, factor="model.norm")["estimate"] == round(add.params[name], 4)
    assert _row(eff.main, factor="model.norm")["p_value"] == float(f"{add.pvalues[name]:.2g}")
    assert inter["estimate"] == round(full.params[f"{name}:C(act, Treatment('gelu'))[T.relu]"], 4)


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
    assert not eff.seed_block and eff.df_resid == 6 - 4
    assert any("Only one seed" in w for w in eff.warnings)


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

    monkeypatch.setitem(sys.modules, "gptlab.sample", types.SimpleNamespace(sample_from_run=fake_sample))
    got = samples(res)
    ok = res.runs
    best = [ok.loc[ok[ok["cell"] == c]["best_val_loss"].idxmin(), "run_id"] for c in res.cells["cell"]]
    assert [run for _, run, _ in got] == best == [c[0] for c in calls]
    assert {c[1:] for c in calls} == {("\n", 200, 0)}
    assert [t for _, _, t in got] == ["To be, or not to be", NO_CHECKPOINT]
    monkeypatch.setitem(sys.modules, "gptlab.sample", None)  # module missing -> ImportError
    assert [t for _, _, t in samples(res)] == [NO_CHECKPOINT, NO_CHECKPOINT]
