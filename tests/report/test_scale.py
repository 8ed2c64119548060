"""Scale factors (`scale:`) and losses in bits per character when a sweep mixes tokenizers."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import yaml
from helpers import tiny_config

from calibration.synthetic import make_results
from gptlab.errors import GptlabError
from gptlab.kinds.scale.sentences import scale_verdicts
from gptlab.report import figures, write_report
from gptlab.report.load import load_results
from gptlab.report.tables.scale import effects_by_scale
from gptlab.sweep.spec import load_spec

GRID = {"model.activation": ["gelu", "relu"], "model.tying": ["tied", "untied"], "train.max_iters": [2000, 6000]}
# relu: -0.03 at 2000 iterations, +0.03 at 6000 (it reverses); untied: -0.02 at both (it holds)
EFFECTS = {(("model.activation", "relu"), ("train.max_iters", 2000)): -0.03,
           (("model.activation", "relu"), ("train.max_iters", 6000)): 0.03,
           (("model.tying", "untied"),): -0.02,
           (("train.max_iters", 6000),): -0.2}


def _with_scale(results, scale):
    spec = yaml.safe_load((results / "sweep.yaml").read_text())
    spec["scale"] = scale
    (results / "sweep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return results


def test_effects_are_reported_at_each_scale_level_and_the_scale_is_not_an_effect(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "make_figures", lambda *args, **kw: figures.Figures())  # only the scale figure is checked here
    results = _with_scale(make_results(tmp_path, GRID, 3, effects=EFFECTS), ["train.max_iters"])
    res = load_results(results)
    assert res.scale == ["train.max_iters"] and res.scientific == ["model.activation", "model.tying"]
    table = effects_by_scale(res)
    assert list(table.columns[:5]) == ["factor", "level", "baseline", "scale_factor", "scale_level"]
    got = {(r["level"], str(r["scale_level"])): r for r in table.to_dict("records")}
    assert set(got) == {("relu", "2000"), ("relu", "6000"), ("untied", "2000"), ("untied", "6000")}
    assert got["relu", "2000"]["estimate"] == pytest.approx(-0.03, abs=0.004)
    assert got["relu", "6000"]["estimate"] == pytest.approx(0.03, abs=0.004)
    assert got["relu", "2000"]["ci_low"] < -0.03 < got["relu", "2000"]["ci_high"]
    assert (got["relu", "2000"]["call"], got["relu", "6000"]["call"]) == ("better", "worse")
    sentences = scale_verdicts(table, res)
    assert any(s.startswith("activation=relu vs activation=gelu: the call reverses with max_iters") for s in sentences)
    assert any(s.startswith("tying=untied vs tying=tied: the call holds with max_iters") for s in sentences)

    out = write_report(results, tmp_path / "rep")
    main = pd.read_csv(out / "tables" / "main_effects.csv")
    assert "train.max_iters" not in set(main["factor"])  # longer training being better is not a finding
    by_scale = pd.read_csv(out / "tables" / "effects_by_scale.csv")
    assert len(by_scale) == 4 and (out / "figures" / "effects_by_scale.png").stat().st_size > 5_000
    md = (out / "report.md").read_text()
    assert "## Effects by scale" in md and "the call reverses with max_iters" in md


def test_a_sweep_without_scale_has_no_scale_section(tmp_path, no_figures):
    out = write_report(make_results(tmp_path, GRID, 2, effects=EFFECTS), tmp_path / "rep")
    assert "Effects by scale" not in (out / "report.md").read_text()
    assert not (out / "tables" / "effects_by_scale.csv").exists()
    assert "train.max_iters" in set(pd.read_csv(out / "tables" / "main_effects.csv")["factor"])


def _set_tokenizer_factors(results, factor_of):
    """Give every run the bits-per-char factor its tokenizer would have (as summary.json does)."""
    for path in (results / "runs").glob("*/summary.json"):
        data = json.loads(path.read_text())
        data["val_bpc_factor"] = factor_of[data["config"]["data"]["tokenizer"]]
        path.write_text(json.dumps(data))


def test_mixed_tokenizers_put_every_loss_in_bits_per_character(tmp_path, no_figures):
    grid = {"model.activation": ["gelu", "relu"], "data.tokenizer": ["char", "bpe"]}
    results = make_results(tmp_path, grid, 2, effects={(("data.tokenizer", "bpe"),): 2.0})  # nats/token differ
    char, bpe = 1 / math.log(2), 0.45  # bpe: ~2.2 characters per token
    _set_tokenizer_factors(results, {"char": char, "bpe": bpe})
    raw = pd.read_csv(results / "summary.csv")
    res = load_results(_with_scale(results, ["data.tokenizer"]))
    assert res.unit == "bits/char"
    for run in res.runs.to_dict("records"):
        factor = bpe if run["data.tokenizer"] == "bpe" else char
        original = raw.loc[raw["run_id"] == run["run_id"], "best_val_loss"].iloc[0]
        assert run["best_val_loss"] == pytest.approx(original * factor, rel=1e-12)
    curve = res.curves[res.curves["run_id"] == res.runs["run_id"].iloc[-1]]
    assert curve["val_loss"].min() == pytest.approx(res.runs["best_val_loss"].iloc[-1], rel=1e-9)
    md = (write_report(results, tmp_path / "rep") / "report.md").read_text()
    assert "**Loss unit**: bits/char (the sweep mixes tokenizers" in md and "nats/char" not in md


def test_one_tokenizer_keeps_its_own_unit(tmp_path):
    results = make_results(tmp_path, {"model.activation": ["gelu", "relu"]}, 2)
    assert load_results(results).unit == "nats/char"  # char runs (no factor recorded: the first release's)
    for path in (results / "runs").glob("*/summary.json"):
        data = json.loads(path.read_text())
        data["val_bpc_factor"] = 0.45
        path.write_text(json.dumps(data))
    res = load_results(results)
    assert res.unit == "nats/token" and res.runs["best_val_loss"].equals(pd.read_csv(results / "summary.csv")["best_val_loss"])


@pytest.mark.parametrize("scale, message", [
    ("train.max_iters", "scale: must be a list"),
    (["train.lr"], "scale: 'train.lr' is not a grid factor"),
    (["train.max_iters", "train.max_iters"], "scale: lists a key twice"),
    (["model.activation", "train.max_iters"], "scale: names every grid factor"),
])
def test_bad_scale_keys_are_refused(tmp_path, corpus, scale, message):
    config = tiny_config(corpus)
    spec = {"name": "s", "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"model.activation": ["gelu", "relu"], "train.max_iters": [20, 40]}, "scale": scale}
    spec["base"]["train"].pop("max_iters")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(GptlabError, match=message):
        load_spec(path)
