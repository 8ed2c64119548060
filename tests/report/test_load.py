"""`gptlab.load(results_dir)`: runs, curves and the report's own tables as DataFrames; the example notebook runs; the
load step reads sweep.yaml back as the sweep's typed spec, and a bad one is one line."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import REPO

import gptlab
from calibration.synthetic import make_results
from gptlab.errors import GptlabError
from gptlab.report import ReportError, load_results
from gptlab.report.__main__ import main as report_main
from gptlab.stats.calls import DEFAULT_MARGIN
from gptlab.sweep.runs import SweepSpec

slow = pytest.mark.slow  # the shipped study, real sweeps, the notebook: out of the edit loop (-m 'not slow')

FOUR_AXES = REPO / "results" / "four_axes"


@pytest.fixture(scope="module")
def study():
    return gptlab.load(FOUR_AXES)


@slow
def test_load_is_the_public_api():
    assert "load" in gptlab.__all__ and callable(gptlab.load)


@slow
def test_runs_are_summary_csv_one_row_per_run(study):
    summary = pd.read_csv(FOUR_AXES / "summary.csv")
    assert list(study.runs["run_id"]) == list(summary["run_id"])
    assert set(summary.columns) <= set(study.runs.columns)
    assert {"cell", "ok"} <= set(study.runs.columns) and "loss_scale" not in study.runs
    np.testing.assert_array_equal(study.runs["best_val_loss"], summary["best_val_loss"])
    assert study.factors == ["model.norm", "model.activation", "model.position", "model.tying"]
    assert study.levels["model.norm"] == ["pre", "post"] and study.baseline["model.tying"] == "tied"


@slow
def test_curves_are_every_metrics_csv_labelled(study):
    curves = study.curves
    assert list(curves.columns[:8]) == ["run_id", "cell", *study.factors, "seed", "status"]
    assert {"step", "train_loss", "val_loss", "lr"} <= set(curves.columns)
    assert len(curves) == sum(len(pd.read_csv(FOUR_AXES / "runs" / r / "metrics.csv")) for r in study.runs["run_id"])
    run = study.runs.iloc[5]
    mine = curves[curves["run_id"] == run["run_id"]].reset_index(drop=True)
    metrics = pd.read_csv(FOUR_AXES / "runs" / run["run_id"] / "metrics.csv")
    for col in ("step", "train_loss", "val_loss", "lr"):
        np.testing.assert_array_equal(mine[col].astype(float), metrics[col].astype(float))
    assert (mine["seed"] == run["seed"]).all() and (mine["model.tying"] == run["model.tying"]).all()
    assert (mine["cell"] == run["cell"]).all()


@slow
def test_tables_are_the_reports_tables(study):
    """Computed by the report's code: the same files as the committed report (which regenerates from results)."""
    shipped = REPO / "reports" / "four_axes" / "tables"
    assert set(study.tables) == {p.stem for p in shipped.glob("*.csv")}
    for name, table in study.tables.items():
        assert table.to_csv(index=False) == (shipped / f"{name}.csv").read_text(encoding="utf-8"), name
    assert study.main_effects is study.tables["main_effects"]
    assert study.effects_by_step is study.tables["effects_by_step"] and len(study.effects_by_step)
    assert study.effects_by_scale.empty  # four_axes has no scale: factor


@slow
def test_calls_name_each_effect_in_the_row_syntax(study):
    calls = study.calls
    assert len(calls) == len(study.main_effects) + len(study.interactions)
    relu = calls[calls["effect"] == "model.activation=relu"].iloc[0]
    assert (relu["baseline"], relu["call"], relu["table"]) == ("model.activation=gelu", "better", "main_effects")
    row = study.interactions.iloc[0]
    pair = calls[calls["effect"] == f"{row['factor_a']}={row['level_a']} x {row['factor_b']}={row['level_b']}"]
    assert list(pair["call"]) == [row["call"]] and list(pair["estimate"]) == [row["estimate"]]


@slow
def test_a_study_is_frozen_and_its_tables_lazy(tmp_path):
    s = gptlab.load(make_results(tmp_path, {"model.norm": ["pre", "post"]}, seeds=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.margin = 0.5
    assert len(s.runs) == 4 and len(s.curves)
    assert "_bundle" not in vars(s)  # runs and curves fit no model
    assert list(s.main_effects["factor"]) == ["model.norm"]
    assert "_bundle" in vars(s)


def with_roles(tmp_path, name="roles"):
    """A synthetic study of 2 cells x 4 seeds whose seeds 2 and 3 are a selection and a `worth` run in each cell, as a
    tuned `worth:` study has runs of several roles: 4 estimation runs of 8."""
    path = make_results(tmp_path, {"model.norm": ["pre", "post"]}, seeds=4, name=name)
    summary = pd.read_csv(path / "summary.csv")
    summary["role"] = summary["seed"].map({0: "estimation", 1: "estimation", 2: "selection", 3: "worth"})
    summary.to_csv(path / "summary.csv", index=False)
    return path, summary


def test_runs_and_curves_hold_every_run_of_the_study_with_its_role(tmp_path):
    path, summary = with_roles(tmp_path)
    s = gptlab.load(path)
    assert list(s.runs["run_id"]) == list(summary["run_id"])  # summary.csv's rows, in its order
    assert list(s.runs["role"]) == list(summary["role"])
    assert s.curves.groupby("role")["run_id"].nunique().to_dict() == {"estimation": 4, "selection": 2, "worth": 2}
    worth = s.curves[s.curves["role"] == "worth"]
    assert set(worth["run_id"]) == set(summary.loc[summary["role"] == "worth", "run_id"])
    assert len(s.results.runs) == 4  # the effects are still the estimation runs' alone
    old = gptlab.load(make_results(tmp_path, {"model.norm": ["pre", "post"]}, seeds=2, name="plain"))
    assert list(old.runs["role"]) == ["estimation"] * 4  # a summary.csv from before roles: every run estimates
    assert set(old.curves["role"]) == {"estimation"}


@slow
def test_margin_overrides_the_sweeps(tmp_path):
    path = make_results(tmp_path, {"model.norm": ["pre", "post"]}, seeds=3)
    assert gptlab.load(path).margin == 0.01 and gptlab.load(path, margin=0.2).margin == 0.2
    assert gptlab.load(path, margin=0.2).main_effects.iloc[0]["call"] == "equivalent"  # the effect is ~0
    with pytest.raises(GptlabError, match="margin"):
        gptlab.load(path, margin=-1)


@slow
def test_failed_runs_have_no_curve_diverged_runs_keep_theirs(tmp_path):
    path = make_results(tmp_path, {"model.norm": ["pre", "post"]}, seeds=2,
                        status={(("post",), 0): "diverged", (("post",), 1): "failed"})
    s = gptlab.load(path)
    by_status = s.curves.groupby("status")["run_id"].nunique().to_dict()
    assert by_status == {"ok": 2, "diverged": 1}
    assert list(s.runs["status"]) == ["ok", "ok", "diverged", "failed"]


@slow
def test_scale_sweeps_mixing_tokenizers(tmp_path):
    """transfer: losses in bits/char in the runs and curves alike; effects_by_scale as the report's."""
    s = gptlab.load(REPO / "results" / "transfer")
    assert s.unit == "bits/char"
    best = s.curves.merge(s.runs[["run_id", "best_step", "best_val_loss"]], on="run_id")
    best = best[best["step"] == best["best_step"]]
    assert len(best) == len(s.runs) and np.allclose(best["val_loss"], best["best_val_loss"], rtol=1e-12)
    shipped = REPO / "reports" / "transfer" / "tables" / "effects_by_scale.csv"
    assert len(s.effects_by_scale) and s.effects_by_scale.to_csv(index=False) == shipped.read_text(encoding="utf-8")


@slow
@pytest.mark.parametrize("make, words", [
    (lambda tmp: tmp / "nowhere", "not found"),
    (lambda tmp: tmp, "summary.csv"),
])
def test_a_folder_that_is_not_results_is_one_line(tmp_path, make, words):
    with pytest.raises(GptlabError, match=words) as err:
        gptlab.load(make(tmp_path))
    assert "\n" not in str(err.value)


def _snapshot(*folders: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folders` (not caches) with its size and modification time."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for f in folders for p in f.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts}


@slow
def test_the_example_notebook_runs_and_writes_nothing(monkeypatch):
    """docs/example.ipynb executes from docs/ (as Jupyter runs it) on the shipped four_axes study."""
    # The kernel inherits this process's environment: a headless server's MPLBACKEND=Agg would keep
    # matplotlib from drawing inline, which a notebook in Jupyter (the case tested) never has.
    monkeypatch.delenv("MPLBACKEND", raising=False)
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(REPO / "docs" / "example.ipynb", as_version=4)
    watched = (REPO / "docs", FOUR_AXES, REPO / "reports" / "four_axes")
    before = _snapshot(*watched)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(REPO / "docs")}}).execute()
    assert _snapshot(*watched) == before
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the curves plot
    text = "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "") for o in outputs)
    assert "model.activation" in text and "better" in text  # the main effects and calls tables


# -- sweep.yaml read back as the sweep's own spec (`gptlab.sweep.stored`) ------------------------------------------
def test_the_spec_is_the_sweeps_typed_spec_old_schema_included(tmp_path):
    """The synthetic folder's sweep.yaml predates `report:` and `executor.on_worker_lost`: their defaults."""
    res = load_results(make_results(tmp_path, {"model.norm": ["pre", "post"]}, 2, name="typed", max_iters=500))
    assert isinstance(res.spec, SweepSpec) and "tune" not in res.spec.kinds and "seeds" not in res.spec.kinds
    assert res.spec.command == "python -m gptlab.sweep ablations/typed.yaml" and res.spec.runs == ()
    assert res.margin == DEFAULT_MARGIN and res.fixed("train.max_iters") == 500
    assert res.fixed("train.schedule") == "cosine"  # not in base: the run config's default


def test_a_bad_sweep_yaml_stops_the_report_in_one_line_and_writes_nothing(tmp_path, capsys):
    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, 2, name="bad")
    stored = yaml.safe_load((results / "sweep.yaml").read_text())
    (results / "sweep.yaml").write_text(yaml.safe_dump({**stored, "grid": {"model.norm": ["pre", "post"]},
                                                        "schema": 9}, sort_keys=False))
    with pytest.raises(ReportError, match="sweep.yaml: unknown key 'schema'"):
        gptlab.load(results)
    assert report_main([str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and str(results / "sweep.yaml") in err and "'schema'" in err
    assert not (tmp_path / "reports").exists()


def test_a_folder_without_sweep_yaml_takes_its_factors_from_summary_csv(tmp_path):
    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, 2, name="bare")
    (results / "sweep.yaml").unlink()
    res = load_results(results)
    assert res.name == "bare" and res.factors == ["model.norm"] and res.baseline == {"model.norm": "pre"}
    assert res.spec.grid == {"model.norm": ["pre", "post"]} and res.seeds == res.spec.seeds == [0, 1]
