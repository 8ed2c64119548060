"""One rule of sameness for a factor's levels (`stats.levels`), used by the sweep on typed YAML values and by the
report on summary.csv's text."""
from __future__ import annotations

import pandas as pd
import pytest
from helpers import tiny_config

from calibration.synthetic import make_results
from gptlab.errors import GptlabError
from gptlab.report.load import load_results
from gptlab.stats.design import design_cells
from gptlab.stats.levels import grid_level, level_key, same_level
from gptlab.sweep.spec import validate_spec


def base_spec(corpus) -> dict:
    config = tiny_config(corpus)
    return {"name": "levels", "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"model.norm": ["pre", "post"]}, "seeds": 1}


@pytest.mark.parametrize("a, b, same", [
    (40, 40.0, True), (40, "40", True), ("0.99", 0.99, True), (1e-4, "1e-4", True), (True, "true", True),
    (True, "True", True), (False, "false", True), ("GELU", "gelu", True), (" relu ", "relu", True),
    (1, True, False), (0, False, False), ("gelu", "relu", False), (0.1, 0.10000001, False), ("nan", "NaN", True),
])
def test_same_level_on_typed_values_and_csv_text(a, b, same):
    assert same_level(a, b) is same
    assert same_level(b, a) is same
    assert (level_key(a) == level_key(b)) is same


def test_grid_level_returns_the_grids_own_value():
    assert grid_level([0.95, 0.99], "0.99") == 0.99 and isinstance(grid_level([0.95, 0.99], "0.99"), float)
    assert grid_level([True, False], "False") is False
    assert grid_level([True, False], 0, None) is None  # 0 is not False
    with pytest.raises(KeyError):
        grid_level(["pre", "post"], "mid")


def test_design_cells_exclude_by_the_same_rule():
    cells = design_cells({"a": [1, 2], "b": [True, False]}, [{"a": "1", "b": "true"}])
    assert cells == [(1, False), (2, True), (2, False)]


def test_the_sweep_takes_a_baseline_and_an_exclude_as_the_grids_levels(corpus, tmp_path):
    raw = {**base_spec(corpus), "grid": {"train.beta2": [0.95, 0.99], "model.bias": [True, False]},
           "baseline": {"train.beta2": "0.99"}, "exclude": [{"train.beta2": "0.95", "model.bias": "false"}]}
    spec = validate_spec(raw, tmp_path / "odd.yaml", {}, {})
    assert spec.baseline == {"train.beta2": 0.99, "model.bias": True}
    assert isinstance(spec.baseline["train.beta2"], float)
    assert spec.exclude == [{"train.beta2": 0.95, "model.bias": False}]
    assert [r.cell for r in spec.runs] == [(("train.beta2", 0.95), ("model.bias", True)),
                                           (("train.beta2", 0.99), ("model.bias", True)),
                                           (("train.beta2", 0.99), ("model.bias", False))]


@pytest.mark.parametrize("levels", [[1, "1"], [0.5, "0.50"], ["gelu", "GELU"]])
def test_a_grid_listing_one_level_twice_under_the_rule_is_refused(levels, corpus, tmp_path):
    raw = {**base_spec(corpus), "grid": {"model.activation" if isinstance(levels[0], str) else "train.beta2": levels}}
    with pytest.raises(GptlabError, match="lists a level twice"):
        validate_spec(raw, tmp_path / "odd.yaml", {}, {})


def test_the_report_maps_summary_text_onto_the_grids_levels_by_the_same_rule(tmp_path):
    folder = make_results(tmp_path, {"train.beta2": [0.95, 0.99]}, seeds=2)
    summary = pd.read_csv(folder / "summary.csv", dtype=str, keep_default_na=False)
    summary["train.beta2"] = summary["train.beta2"].replace({"0.99": "0.990"})  # hand-edited: still the grid's 0.99
    summary.to_csv(folder / "summary.csv", index=False)
    res = load_results(folder)
    assert set(res.runs["train.beta2"]) == {"0.95", "0.99"}
