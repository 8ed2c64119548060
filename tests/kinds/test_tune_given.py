"""Given picks (`tune: {picks: [...], picked_by: ...}`): validation, the runs (ids as a tuned sweep's estimation
runs at those settings), and a small sweep with wsd lengths end to end, its report naming who picked."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml
from helpers import skip_figures, tiny_config

from gptlab.errors import GptlabError
from gptlab.kinds.tune.tuning import runs_at
from gptlab.run.resultsdir import SUMMARY_CSV
from gptlab.sweep.kinds import planned_range
from gptlab.sweep.runs import ESTIMATION
from gptlab.sweep.spec import validate_spec
from gptlab.sweep_cli import main as sweep_main

GRID = {"model.activation": ["gelu", "relu"], "model.tying": ["tied", "untied"]}
PICKS = [{"model.activation": "gelu", "train.lr": 4e-3},
         {"model.activation": "relu", "model.tying": "tied", "train.lr": 4e-3},
         {"model.activation": "relu", "model.tying": "untied", "train.lr": 2e-3}]


def _raw(corpus: Path, picks=None, **tune) -> dict:
    config = tiny_config(corpus)
    config["train"].pop("lr")
    return {"name": "given", "base": {k: config[k] for k in ("model", "train", "data")}, "grid": dict(GRID),
            "seeds": 2, "tune": {"picks": PICKS if picks is None else picks, **tune}}


def _spec(raw: dict, corpus: Path):
    return validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})


def test_each_cell_trains_at_its_given_setting_with_the_ids_of_estimation_runs(corpus):
    spec = _spec(_raw(corpus, picked_by="study X"), corpus)
    lr = {(r.cell[0][1], r.cell[1][1]): r.config.train.lr for r in spec.runs}
    assert lr == {("gelu", "tied"): 4e-3, ("gelu", "untied"): 4e-3, ("relu", "tied"): 4e-3, ("relu", "untied"): 2e-3}
    assert len(spec.runs) == 8 and {r.role for r in spec.runs} == {ESTIMATION} and {r.seed for r in spec.runs} == {0, 1}
    # the same ids as a tuned sweep's estimation runs at those settings: a rerun as either finds the other's runs
    tuned = _spec({**_raw(corpus), "tune": {"space": {"train.lr": [2e-3, 4e-3]}}}, corpus)
    alike = {r.run_id for s in tuned.kinds["tune"].settings() for r in runs_at(tuned, [s], tuned.seeds, ESTIMATION)}
    assert {r.run_id for r in spec.runs} <= alike
    assert planned_range(spec) == (8, 8) and spec.kinds["tune"].seeds == 0 and spec.kinds["tune"].selection_seeds == []
    recorded = spec.to_dict()["tune"]
    assert recorded["picked_by"] == "study X" and len(recorded["picks"]) == 4  # one entry per cell, as resolved
    assert _spec({**_raw(corpus), "tune": recorded}, corpus).runs == spec.runs  # sweep.yaml's record re-validates


def test_a_tuned_sweep_holds_out_a_test_split_with_given_picks_too(corpus):
    assert _spec(_raw(corpus), corpus).base["data"]["test_fraction"] == 0.05


BAD = [
    ({"picks": PICKS[:2]}, "tune.picks: no entry covers the cell (model.activation=relu, model.tying=untied)"),
    ({"picks": PICKS + [{"model.tying": "untied", "train.lr": 1e-3}]},
     "tune.picks: entries 0 and 3 both cover the cell (model.activation=gelu, model.tying=untied)"),
    ({"picks": PICKS + [{"model.activation": "swish", "train.lr": 1e-3}]},
     "tune.picks[3].model.activation: 'swish' is not a level of the grid; levels: gelu, relu"),
    ({"picks": [{"train.lr": 1e-3}, {"model.activation": "gelu", "train.lr": 1e-3}]}, "entries 0 and 1 both cover"),
    ({"picks": [{"model.activation": "gelu"}, *PICKS[1:]]}, "tune.picks[0]: sets nothing: name the setting"),
    ({"picks": [{"model.activation": "gelu", "train.beta2": 0.95}, *PICKS[1:]]},
     "tune.picks[1]: sets train.lr; every entry must set the same keys as the first (train.beta2)"),
    ({"picks": [{"model.activation": "gelu", "train.lrr": 1e-3}]}, "tune.picks: unknown key 'train.lrr' (did you mean"),
    ({"picks": [{"data.val_fraction": 0.2}]}, "tune.picks.data.val_fraction: data settings cannot be tuned"),
    ({"picks": [{"train.lr": "fast"}]}, "tune.picks.train.lr: train.lr must be float, got 'fast'"),
    ({"picks": []}, "tune.picks: must be a non-empty list of mappings"),
    ({"picks": ["gelu"]}, "tune.picks[0]: must be a mapping"),
    ({"picks": PICKS, "seeds": 2}, "tune: 'seeds' cannot go with tune.picks"),
    ({"picks": PICKS, "space": {"train.lr": [1e-3, 2e-3]}}, "tune: 'space' cannot go with tune.picks"),
    ({"picks": PICKS, "picked_by": ["a"]}, "tune.picked_by: must be a string"),
]


@pytest.mark.parametrize("tune, message", BAD, ids=[m[:40] for _, m in BAD])
def test_bad_given_picks_are_one_line_naming_the_entry(tune, message, corpus):
    raw = _raw(corpus)
    raw["tune"] = tune
    with pytest.raises(GptlabError) as err:
        _spec(raw, corpus)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_an_entry_that_covers_only_excluded_cells_is_refused(corpus):
    raw = _raw(corpus)
    raw["exclude"] = [{"model.activation": "relu", "model.tying": "untied"}]  # the cell PICKS[2] names
    with pytest.raises(GptlabError, match=r"tune.picks\[2\]: covers no cell of the grid \(after exclude\)"):
        _spec(raw, corpus)


def test_the_lr_in_base_and_given_picks_is_refused(corpus):
    raw = _raw(corpus)
    raw["base"]["train"]["lr"] = 1e-3
    with pytest.raises(GptlabError, match="train.lr is set in both base and tune.picks"):
        _spec(raw, corpus)


@pytest.mark.slow
def test_a_small_wsd_length_sweep_with_given_picks_end_to_end(tmp_path, corpus, monkeypatch, capsys):
    skip_figures(monkeypatch)
    config = tiny_config(corpus, eval_interval=10, schedule="wsd")
    config["train"].pop("lr")
    config["train"].pop("max_iters")
    raw = {"name": "given", "base": {k: config[k] for k in ("model", "train", "data")},
           "grid": {"model.activation": ["gelu", "relu"], "train.max_iters": [20, 40]}, "scale": ["train.max_iters"],
           "seeds": 1, "tune": {"picks": [{"model.activation": "gelu", "train.lr": 4e-3},
                                          {"model.activation": "relu", "train.lr": 2e-3}],
                                "picked_by": "a planted choice"},
           "executor": {"backend": "loky", "n_jobs": 2}}  # the pool most in-process sweeps use
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    args = [str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results"),
            "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main(args) == 0
    out = capsys.readouterr()
    assert "selection" not in out.out + out.err and "shared trunks" in out.out + out.err
    with open(tmp_path / "results" / "given" / SUMMARY_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and {r["role"] for r in rows} == {"estimation"}
    assert {(r["model.activation"], float(r["train.lr"])) for r in rows} == {("gelu", 4e-3), ("relu", 2e-3)}
    md = (tmp_path / "reports" / "given" / "report.md").read_text()
    assert "a planted choice" in md and "given" in md.lower()


def test_the_dry_run_estimate_counts_each_runs_steps_and_a_branch_only_from_its_cooldown(tmp_path, corpus, monkeypatch,
                                                                                         capsys):
    import gptlab.sweep.estimate as estimate

    monkeypatch.setattr(estimate, "time_run", lambda config, steps=6, **kwargs: estimate.StepTiming(1.0, 0.0))
    config = tiny_config(corpus, eval_interval=10, schedule="wsd")
    config["train"].pop("max_iters")
    raw = {"name": "lengths", "base": {k: config[k] for k in ("model", "train", "data")},
           "grid": {"model.activation": ["gelu", "relu"], "train.max_iters": [20, 40]}, "scale": ["train.max_iters"],
           "seeds": 2, "executor": {"backend": "loky", "n_jobs": 1}}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    args = [str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results"), "--dry-run"]
    assert sweep_main(args) == 0
    # 2 cells x 2 seeds: each trunk 40 steps, each 20-step branch only its cooldown (20 - 16 = 4): 176 s, not 240 s
    assert "~0:02:56 in all" in capsys.readouterr().out
    assert sweep_main(args + ["--backend", "dask", "--scheduler", "local"]) == 0  # no sharing on dask: from step 0
    assert "~0:04:00 in all" in capsys.readouterr().out
