"""A sweep spec is built once (parse -> validate -> resolve) and frozen: nothing edits it afterwards."""
from __future__ import annotations

import dataclasses

import pytest
import yaml
from helpers import tiny_config

from gptlab.sweep.spec import load_spec


def _write(tmp_path, corpus, **extra) -> str:
    config = tiny_config(corpus)
    if "tune" in extra:
        config["train"].pop("lr", None)
    raw = {"name": "frozen", "base": {k: config[k] for k in ("model", "train", "data")},
           "grid": {"model.norm": ["pre", "post"]}, "seeds": 1, **extra}
    path = tmp_path / "frozen.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


@pytest.mark.parametrize("field", ["runs", "tune", "base", "report", "seeds", "grid"])
def test_the_loaded_spec_is_frozen(field, tmp_path, corpus):
    spec = load_spec(_write(tmp_path, corpus))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(spec, field, None)
    assert isinstance(spec.runs, tuple)


def test_the_margin_override_goes_in_as_a_new_frozen_spec(tmp_path, corpus):
    path = _write(tmp_path, corpus, report={"equivalence_margin": 0.02})
    written = load_spec(path)
    assert written.report.equivalence_margin == 0.02 and written.with_margin(None) is written
    spec = written.with_margin("0.03")
    assert spec.report.equivalence_margin == 0.03 and spec.to_dict()["report"] == {"equivalence_margin": 0.03}
    assert written.report.equivalence_margin == 0.02 and spec.runs == written.runs  # the runs are the same runs


def test_set_seeds_replaces_the_seeds_and_a_wrong_key_says_what_set_takes(tmp_path, corpus):
    from gptlab.errors import GptlabError

    path = _write(tmp_path, corpus)
    assert len(load_spec(path).runs) == 2
    assert sorted({r.seed for r in load_spec(path, overrides={"seeds": 3}).runs}) == [0, 1, 2]
    assert {r.seed for r in load_spec(path, overrides={"seeds": [5]}).runs} == {5}
    with pytest.raises(GptlabError, match="--set: unknown key 'sedes'.*did you mean 'seeds'.*run setting of base"):
        load_spec(path, overrides={"sedes": 3})
    with pytest.raises(GptlabError, match="seeds"):
        load_spec(path, overrides={"seeds": 0})


def test_a_tuned_spec_gets_its_tune_and_test_split_without_editing_what_it_was_built_from(tmp_path, corpus):
    path = _write(tmp_path, corpus, tune={"space": {"train.lr": [1e-3, 2e-3]}, "seeds": 1})
    spec = load_spec(path)
    assert "tune" in spec.kinds and spec.base["data"]["test_fraction"] == pytest.approx(
        spec.runs[0].config.data.val_fraction / 2)
    assert all(r.config.data.test_fraction == spec.base["data"]["test_fraction"] for r in spec.runs)
    assert {dict(r.setting)["train.lr"] for r in spec.runs} == {1e-3, 2e-3}
    untuned = load_spec(_write(tmp_path, corpus))
    assert "tune" not in untuned.kinds and "test_fraction" not in untuned.base["data"]
