"""The one-at-a-time design (`arms:`): validation, runs and seeds, the model, the report's arms and scorecard."""
from __future__ import annotations

import copy
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from fakes import FakeBackend, tuned_arms_spec
from helpers import skip_figures, tiny_config

from calibration.synthetic import make_results
from gptlab import load
from gptlab.errors import GptlabError
from gptlab.executors import Resources
from gptlab.report import write_report
from gptlab.stats.arms import baseline_seed_count
from gptlab.stats.design import Design
from gptlab.stats.effects import analyse
from gptlab.stats.scorecard import VERDICTS, verdict
from gptlab.sweep.design_notes import arms_allocation
from gptlab.sweep.execute import SweepOptions, planner_for, train_stages
from gptlab.sweep.kinds import planned_range
from gptlab.sweep.spec import validate_spec

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

ARMS = {"nanogpt": {}, "post_ln": {"model.norm": "post"}, "relu": {"model.activation": "relu"},
        "modern": {"model.norm_type": "rmsnorm", "model.activation": "swiglu", "model.position": "rotary"}}


def _raw(corpus: Path, **extra) -> dict:
    config = tiny_config(corpus)
    return {"name": "arms", "base": {k: config[k] for k in ("model", "train", "data")}, "arms": copy.deepcopy(ARMS),
            "seeds": 3, **extra}


def _spec(corpus: Path, **extra):
    return validate_spec(_raw(corpus, **extra), corpus.parent / "sweep.yaml", {}, {})


# -- validation ---------------------------------------------------------------------------------

@pytest.mark.parametrize("change, message", [
    ({"grid": {"model.norm": ["pre", "post"]}}, "grid and arms are alternatives"),
    ({"arms": {}}, "arms: must be a mapping of arm names to settings"),
    ({"arms": {"nanogpt": {}}}, "needs a baseline and at least one arm"),
    ({"arms": {"a": {"model.norm": "post"}, "b": {"model.norm": "post"}}}, "'a' and 'b' have the same settings"),
    ({"arms": {"a": {}, "b": {"model.nrom": "post"}}}, "did you mean 'model.norm'"),
    ({"arms": {"a": {}, "b": {"train.max_iters": 10}}}, "train.max_iters is set in both base and arms.b"),
    ({"arms": {"a": {}, "b": {"model.activation": "gelu"}}}, "'a' and 'b' resolve to the same run config"),
    ({"arms": {"a": {}, "b": {"model.norm": "sideways"}}}, "arms.b:"),
    ({"baseline": "relu2"}, "baseline: must name one of the arms"),
    ({"claims": {"swish": {"source": "x", "claim": "y", "direction": "better"}}}, "'swish' is not an arm"),
    ({"claims": {"relu": {"source": "x", "claim": "y"}}}, "needs direction"),
    ({"claims": {"relu": {"source": "x", "claim": "y", "direction": "up"}}}, "must be one of better, worse, same"),
    ({"claims": {"relu": {"source": "x", "claim": "y", "direction": "worse", "about": "taste"}}}, "claims.relu.about"),
    ({"claims": {"relu": {"source": "x", "claim": "y", "direction": "worse", "sise": 1}}}, "did you mean 'size'"),
    ({"claims": {"relu": []}}, "is an empty list"),
    ({"scale": ["train.max_iters"]}, "scale: in an arms sweep must map keys to levels"),
    ({"scale": {"model.norm": ["pre", "post"]}}, "model.norm is set in both arms.post_ln and scale"),
])
def test_a_bad_arms_spec_is_one_line_naming_the_key(corpus, change, message):
    raw = _raw(corpus, **change)
    if "grid" in change:
        raw["grid"] = change["grid"]
    with pytest.raises(GptlabError) as err:
        validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_claims_outside_an_arms_sweep_are_refused(corpus):
    raw = {**_raw(corpus), "grid": {"model.norm": ["pre", "post"]}}
    del raw["arms"]
    raw["claims"] = {}
    with pytest.raises(GptlabError, match="claims: records the claims of an arms sweep"):
        validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})


def test_claims_may_live_in_a_file_the_spec_names(corpus, tmp_path):
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump({"relu": [
        {"source": "Hendrycks & Gimpel 2016", "claim": "GELU wins", "direction": "worse"},
        {"source": "somebody", "claim": "faster", "direction": "better", "about": "speed", "size": "7%"}]}))
    spec = validate_spec(_raw(corpus, claims="claims.yaml"), tmp_path / "sweep.yaml", {}, {})
    claims = spec.arms.claims["relu"]
    assert [c.direction for c in claims] == ["worse", "better"] and claims[1].size == "7%"
    assert spec.to_dict()["claims"]["relu"][1]["about"] == "speed"
    with pytest.raises(GptlabError, match=r"^claims: file .*missing.yaml not found$"):
        validate_spec(_raw(corpus, claims="missing.yaml"), tmp_path / "sweep.yaml", {}, {})
    (tmp_path / "bad.yaml").write_text("relu: [1, 2]\n")
    with pytest.raises(GptlabError, match=r"claims \(.*bad.yaml\)\.relu\[0\]: must be a mapping"):
        validate_spec(_raw(corpus, claims="bad.yaml"), tmp_path / "sweep.yaml", {}, {})


# -- runs and seeds ------------------------------------------------------------------------------

def test_each_arm_is_base_plus_its_settings_and_the_baseline_gets_dunnetts_seeds(corpus):
    spec = _spec(corpus, baseline="relu")
    assert list(spec.grid) == ["arm"] and spec.grid["arm"][0] == "relu"  # the baseline first
    by_arm = {}
    for run in spec.runs:
        by_arm.setdefault(run.factors["arm"], []).append(run)
    assert {a: len(r) for a, r in by_arm.items()} == {"relu": 5, "nanogpt": 3, "post_ln": 3, "modern": 3}
    assert [r.seed for r in by_arm["relu"]] == [0, 1, 2, 3, 4]  # round(3 sqrt(3)) = 5
    modern = by_arm["modern"][0].config.model
    assert (modern.norm_type, modern.activation, modern.position) == ("rmsnorm", "swiglu", "rotary")
    assert by_arm["post_ln"][0].config.model.norm == "post" and by_arm["nanogpt"][0].config.model.norm == "pre"
    assert by_arm["post_ln"][0].run_id.startswith("post_ln_s0_")
    assert "sqrt(3) = 1.73" in arms_allocation(spec) and "5 where an arm trains 3" in arms_allocation(spec)
    assert [baseline_seed_count(n, 10) for n in (1, 3, 5)] == [3, 9, 16]
    adaptive = _spec(corpus, seeds={"min": 2, "max": 4, "precision": 0.01})
    assert planned_range(adaptive) == (3 * 2 + 3, 3 * 4 + 7)  # the baseline: round(2 sqrt(3)), round(4 sqrt(3))


def test_a_grid_sweep_keeps_its_run_ids(corpus):
    raw = _raw(corpus)
    del raw["arms"]
    raw["grid"] = {"model.norm": ["pre", "post"]}
    spec = validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})
    assert arms_allocation(spec) is None and len(spec.runs) == 6 and "arms" not in spec.to_dict()
    arms = _spec(corpus)  # the same config has the same hash whichever design names it
    assert {r.run_id.rsplit("_", 1)[1] for r in spec.runs if r.factors["model.norm"] == "post"} == \
        {r.run_id.rsplit("_", 1)[1] for r in arms.runs if r.factors["arm"] == "post_ln"}


def _loop(spec, results: Path, backend):
    out = io.StringIO()
    options = SweepOptions(results, results.parent / "reports", stream=out, progress_every_s=60)
    plan = Resources(workers=1, threads=1, device="cpu", gpus=0, reason="test")
    return train_stages(spec, planner_for(spec, out), plan, options, backend), out.getvalue()


def test_a_tuned_arms_sweep_selects_alike_and_estimates_with_the_baselines_extra_seeds(corpus, tmp_path):
    raw = _raw(corpus, tune={"space": {"train.lr": [1e-3, 2e-3, 4e-3]}}, seeds={"min": 2, "max": 4, "precision": 1e-6},
               scale={"train.max_iters": [20, 40]})
    raw["base"]["train"].pop("lr")
    raw["base"]["train"].pop("max_iters")
    spec = validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})
    selection = {}
    for run in spec.runs:
        selection.setdefault(run.factors["arm"], []).append(run.seed)
    assert all(seeds == [1_000_000] * 6 for seeds in selection.values())  # every arm alike: 3 lrs x 2 lengths
    loss = {"nanogpt": 1.5, "post_ln": 1.52, "relu": 1.49, "modern": 1.47}
    backend = FakeBackend(lambda c: loss[{"post": "post_ln"}.get(c.model.norm, "relu" if c.model.activation
                                         == "relu" else "modern" if c.model.activation == "swiglu" else "nanogpt")]
                          + 1e-3 * (c.seed % 5) + 1e-2 * abs(np.log2(c.train.lr / 2e-3)))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "sweep.yaml").write_text(yaml.safe_dump(spec.to_dict()))  # the rule reads it back
    planned, out = _loop(spec, tmp_path / "results", backend)
    estimation = [r for r in planned if r.role == "estimation"]
    count = pd.Series([dict(r.cell)["arm"] for r in estimation]).value_counts().to_dict()
    # precision 1e-6 asks for max: arms 4 seeds per length, the baseline round(4 sqrt(3)) = 7
    assert count == {"nanogpt": 14, "post_ln": 8, "relu": 8, "modern": 8}
    assert {dict(r.setting)["train.lr"] for r in estimation} == {2e-3}


# -- the model and the verdicts ------------------------------------------------------------------

def test_the_baselines_extra_seeds_narrow_every_comparison_without_a_seed_block():
    rng = np.random.default_rng(0)
    arms = ["base", "a", "b", "c"]
    design = Design(("arm",), {"arm": tuple(arms)}, {"arm": "base"}, tuple((a,) for a in arms))
    rows = [(a, s) for a in arms for s in range(9 if a == "base" else 3)]
    y = np.array([1.5 + rng.normal(0, 0.01) for _ in rows])
    cells, seeds = [(a,) for a, _ in rows], np.array([s for _, s in rows])
    label = lambda f, lv: f"{f}={lv}"  # noqa: E731
    extra = analyse(y, cells, seeds, design, label, 0.01, block_seeds=False)
    keep = seeds < 3
    equal = analyse(y[keep], [c for c, k in zip(cells, keep) if k], seeds[keep], design, label, 0.01,
                    block_seeds=False)
    blocked = analyse(y, cells, seeds, design, label, 0.01)
    assert not extra.fit.seed_block and blocked.fit.seed_block
    assert (extra.main["ci95"] < equal.main["ci95"]).all()
    assert extra.fit.df == len(y) - 4 and blocked.fit.df < extra.fit.df  # a seed block spends df on unpartnered seeds


@pytest.mark.parametrize("direction, about, call, expected", [
    ("worse", "quality", "worse", "holds"), ("worse", "quality", "better", "opposite"),
    ("worse", "quality", "equivalent", "no difference"), ("better", "quality", "inconclusive", "not shown"),
    ("better", "quality", "depends on the picks", "not shown"), ("same", "quality", "equivalent", "holds"),
    ("same", "quality", "worse", "opposite"), ("same", "quality", "inconclusive", "not shown"),
    ("better", "length", "better", "not tested here"), (None, "quality", "better", "no claim recorded"),
])
def test_the_verdict_reads_the_call_against_the_claim(direction, about, call, expected):
    assert verdict(direction, about, call) == expected


def test_the_report_of_an_arms_sweep_has_arms_and_a_scorecard_and_no_main_effects(tmp_path, monkeypatch):
    skip_figures(monkeypatch, keep=("make_figures",))
    grid = {"arm": ["nanogpt", "relu", "swiglu", "sinusoidal", "untied", "nope"]}
    effects = {(("arm", "relu"),): -0.03, (("arm", "swiglu"),): -0.03}
    results = make_results(tmp_path, grid, seeds=4, effects=effects, seed_sd=0.002, noise_sd=0.001, name="card")
    spec = yaml.safe_load((results / "sweep.yaml").read_text())
    spec["arms"] = {"nanogpt": {}, "relu": {"model.activation": "relu"}, "swiglu": {"model.activation": "swiglu"},
                    "sinusoidal": {"model.position": "sinusoidal"}, "untied": {"model.tying": "untied"},
                    "nope": {"model.position": "none"}}
    claim = lambda d, **kw: [{"source": f"paper {d}", "claim": "words", "direction": d, **kw}]  # noqa: E731
    spec["claims"] = {"relu": claim("worse"), "swiglu": claim("better", size="1.944 vs 1.983"),
                      "sinusoidal": claim("same"), "untied": claim("worse"), "nope": claim("better", about="length")}
    (results / "sweep.yaml").write_text(yaml.safe_dump(spec))
    (results / "discussion.md").write_text("ReLU: {{arms: arm=relu}}.")
    report = write_report(results, tmp_path / "reports" / "card")
    tables = report / "tables"
    assert not (tables / "main_effects.csv").exists() and not (tables / "interactions.csv").exists()
    arms = pd.read_csv(tables / "arms.csv")
    assert list(arms["arm"]) == ["relu", "swiglu", "sinusoidal", "untied", "nope"]
    assert dict(zip(arms["arm"], arms["call"]))["relu"] == "better"
    card = pd.read_csv(tables / "scorecard.csv").set_index("arm")
    assert card.loc["relu", "verdict"] == "opposite" and card.loc["swiglu", "verdict"] == "holds"
    assert card.loc["sinusoidal", "verdict"] == "holds" and card.loc["untied", "verdict"] == "no difference"
    assert card.loc["nope", "verdict"] == "not tested here" and "longer than the training context" in card.loc["nope", "reason"]
    text = (report / "report.md").read_text()
    row = arms.set_index("arm").loc["relu"]
    assert f"ReLU: {row['estimate']:.4f} (95% CI {row['ci_low']:.4f} to {row['ci_high']:.4f}, better)." in text
    assert "## Scorecard" in text and "## Arms against the baseline" in text and "## Main effects" not in text
    assert "Untuned: every cell trained at one setting of each nuisance key (`train.lr` = 0.001" in text
    assert (report / "figures" / "forest.png").is_file() and not (report / "figures" / "interactions.png").exists()
    study = load(results)  # the notebook API: the same tables
    assert study.main_effects.empty and list(study.arms["arm"]) == list(arms["arm"])
    assert list(study.scorecard["verdict"]) == list(pd.read_csv(tables / "scorecard.csv")["verdict"])
    assert list(study.calls["effect"]) == [f"arm={a}" for a in arms["arm"]]


def test_a_tuned_arms_sweep_with_a_scale_factor_trains_and_reports_a_scorecard(tmp_path, corpus, monkeypatch, capsys):
    from gptlab.sweep_cli import main as sweep_main

    skip_figures(monkeypatch)
    config = tiny_config(corpus, eval_interval=32)
    for key in ("lr", "max_iters"):
        config["train"].pop(key)
    # The untuned lr (1e-3) among the lrs, and steps enough for it to learn (fewer leave runs collapsed: no effect)
    raw = tuned_arms_spec("card", config, {"train.max_iters": [96, 128]}, lrs=(1e-3, 1e-2))
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    args = [str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results"),
            "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main(args + ["--dry-run"]) == 0
    assert "3 where an arm trains 2" in capsys.readouterr().out  # Dunnett: round(2 sqrt(2))
    assert sweep_main(args) == 0
    summary = pd.read_csv(tmp_path / "results" / "card" / "summary.csv")
    estimation = summary[summary["role"] == "estimation"]
    assert estimation.groupby("arm").size().to_dict() == {"nanogpt": 6, "post_ln": 4, "relu": 4}
    tables = tmp_path / "reports" / "card" / "tables"
    arms = pd.read_csv(tables / "arms.csv")
    assert sorted(zip(arms["arm"], arms["scale_level"])) == [("post_ln", 96), ("post_ln", 128), ("relu", 96),
                                                             ("relu", 128)]
    assert arms["estimate"].notna().all() and arms["pick"].str.startswith("lr=").all()
    card = pd.read_csv(tables / "scorecard.csv")
    assert len(card) == 4 and set(card["verdict"]) <= set(VERDICTS) - {"not tested here"}
    assert card["untuned_setting"].eq("lr=0.001").all() and card["untuned_estimate"].notna().all()
    assert (card.loc[card["arm"] == "post_ln", "verdict"] == "no claim recorded").all()
