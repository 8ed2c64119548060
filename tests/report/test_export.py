"""`python -m gptlab.export results/NAME --tensorboard DIR`: the event files read back equal to metrics.csv."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import REPO
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from calibration.synthetic import make_results
from gptlab.report.export import cell_folder, main

FOUR_AXES = REPO / "results" / "four_axes"
CELL = "norm=post,activation=relu,position=learned,tying=untied"
CELL_RUNS = {"model.norm": "post", "model.activation": "relu", "model.position": "learned", "model.tying": "untied"}


def read_back(folder: Path) -> dict[str, pd.Series]:
    """Every scalar of one TensorBoard run: tag -> values indexed by step (a float32 each, as stored)."""
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: pd.Series([e.value for e in events.Scalars(tag)], index=[e.step for e in events.Scalars(tag)])
            for tag in events.Tags()["scalars"]}


def from_csv(metrics: pd.DataFrame, tag: str) -> pd.Series:
    """A metrics.csv column as TensorBoard stores it: its logged steps, rounded to float32."""
    col = metrics.dropna(subset=[tag])
    return pd.Series(col[tag].astype(np.float32).astype(float).to_numpy(), index=col["step"].to_numpy())


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("tb") / "four_axes"
    assert main([str(FOUR_AXES), "--tensorboard", str(out)]) == 0
    return out


def cell_metrics() -> list[pd.DataFrame]:
    summary = pd.read_csv(FOUR_AXES / "summary.csv")
    mine = summary[np.logical_and.reduce([summary[k] == v for k, v in CELL_RUNS.items()])]
    return [pd.read_csv(FOUR_AXES / "runs" / r / "metrics.csv") for r in mine.sort_values("seed")["run_id"]]


def test_runs_are_grouped_by_cell_then_seed(exported):
    cells = sorted(p.name for p in exported.iterdir())
    assert len(cells) == 16 and CELL in cells
    assert sorted(p.name for p in (exported / CELL).iterdir()) == ["mean", "mean+sd", "mean-sd",
                                                                    "seed_0", "seed_1", "seed_2"]


def test_every_seed_reads_back_as_its_metrics_csv(exported):
    for seed, metrics in enumerate(cell_metrics()):
        back = read_back(exported / CELL / f"seed_{seed}")
        assert set(back) == {"train_loss", "val_loss", "lr"}
        for tag, values in back.items():
            pd.testing.assert_series_equal(values, from_csv(metrics, tag), check_names=False)


def test_the_mean_and_its_band_are_the_seeds(exported):
    runs = cell_metrics()
    stacked = pd.concat(runs).groupby("step")
    mean, sd = stacked[["train_loss", "val_loss", "lr"]].mean(), stacked[["train_loss", "val_loss"]].std(ddof=1)
    back = {name: read_back(exported / CELL / name) for name in ("mean", "mean-sd", "mean+sd")}
    assert set(back["mean"]) == {"train_loss", "val_loss", "lr"} and set(back["mean+sd"]) == {"train_loss", "val_loss"}
    val_steps = runs[0].dropna(subset=["val_loss"])["step"].tolist()
    assert list(back["mean"]["val_loss"].index) == val_steps  # only evaluated steps
    for tag in ("train_loss", "val_loss"):
        want = mean[tag].dropna()
        np.testing.assert_allclose(back["mean"][tag].to_numpy(), want.to_numpy(), rtol=1e-6)
        np.testing.assert_allclose(back["mean-sd"][tag], (mean[tag] - sd[tag]).dropna(), rtol=1e-6)
        np.testing.assert_allclose(back["mean+sd"][tag], (mean[tag] + sd[tag]).dropna(), rtol=1e-6)
    assert (back["mean+sd"]["val_loss"] > back["mean"]["val_loss"]).all()


def test_a_diverged_seed_is_exported_but_not_averaged_a_failed_one_not_at_all(tmp_path):
    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, seeds=3,
                           status={(("post",), 0): "diverged", (("post",), 1): "failed"})
    out = tmp_path / "tb"
    assert main([str(results), "--tensorboard", str(out)]) == 0
    post = out / cell_folder("norm=post")
    assert sorted(p.name for p in post.iterdir()) == ["mean", "seed_0", "seed_2"]  # one ok seed: no band
    only_ok = pd.read_csv(results / "runs" / "run01s2" / "metrics.csv")
    pd.testing.assert_series_equal(read_back(post / "mean")["val_loss"], from_csv(only_ok, "val_loss"),
                                   check_names=False)
    assert len(read_back(post / "seed_0")["val_loss"])  # the diverged run's own curve is there


def test_every_run_is_exported_by_role(tmp_path):
    """The estimation runs as DIR/CELL/seed_N with the cell's mean and band over them alone; every other run of the
    study (a tuned study's selection runs, a `worth:` study's lengths) under DIR/ROLE/CELL/RUN_ID."""
    from tests.report.test_load import with_roles

    results, summary = with_roles(tmp_path)
    out = tmp_path / "tb"
    assert main([str(results), "--tensorboard", str(out)]) == 0
    pre = out / cell_folder("norm=pre")
    assert sorted(p.name for p in pre.iterdir()) == ["mean", "mean+sd", "mean-sd", "seed_0", "seed_1"]
    for role in ("selection", "worth"):
        for run in summary[summary["role"] == role].to_dict("records"):
            folder = out / role / cell_folder(f"norm={run['model.norm']}") / run["run_id"]
            metrics = pd.read_csv(results / "runs" / run["run_id"] / "metrics.csv")
            pd.testing.assert_series_equal(read_back(folder)["val_loss"], from_csv(metrics, "val_loss"), check_names=False)
    estimation = [pd.read_csv(results / "runs" / r / "metrics.csv") for r in ("run00s0", "run00s1")]
    mean = (from_csv(estimation[0], "val_loss") + from_csv(estimation[1], "val_loss")) / 2
    np.testing.assert_allclose(read_back(pre / "mean")["val_loss"], mean, rtol=1e-6)  # the estimation runs' mean


def test_a_second_export_replaces_the_first(tmp_path):
    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, seeds=2)
    out = tmp_path / "tb"
    assert main([str(results), "--tensorboard", str(out)]) == 0
    assert main([str(results), "--tensorboard", str(out)]) == 0
    folder = out / cell_folder("norm=pre") / "seed_1"
    assert len(list(folder.glob("events.out.tfevents.*"))) == 1
    metrics = pd.read_csv(results / "runs" / "run00s1" / "metrics.csv")
    pd.testing.assert_series_equal(read_back(folder)["train_loss"], from_csv(metrics, "train_loss"), check_names=False)


def test_cell_folders_are_path_safe():
    assert cell_folder("norm=post, activation=relu") == "norm=post,activation=relu"
    assert cell_folder("data.path=/a b/c.txt") == "data.path=_a_b_c.txt"


def one_line_error(capsys, code: int) -> str:
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_a_missing_results_folder_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "tb"
    err = one_line_error(capsys, main([str(tmp_path / "nowhere"), "--tensorboard", str(out)]))
    assert "not found" in err and not out.exists()


def test_a_tensorboard_dir_that_is_a_file_is_one_line(tmp_path, capsys):
    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, seeds=1)
    out = tmp_path / "taken"
    out.write_text("not a folder")
    err = one_line_error(capsys, main([str(results), "--tensorboard", str(out)]))
    assert "--tensorboard" in err and "not a folder" in err


def test_a_missing_tensorboard_package_names_the_extra(tmp_path, capsys, monkeypatch):
    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, seeds=1)
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if `tensorboard` were not installed
    out = tmp_path / "tb"
    err = one_line_error(capsys, main([str(results), "--tensorboard", str(out)]))
    assert '.[tensorboard]' in err and not out.exists()


@pytest.mark.slow
def test_the_public_command_runs_the_report_export(tmp_path):
    """`python -m gptlab.export` (docs/RESULTS.md's command) still runs the export that lives in `gptlab.report.export`."""
    import subprocess

    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, seeds=2)
    out = tmp_path / "tb"
    proc = subprocess.run([sys.executable, "-m", "gptlab.export", str(results), "--tensorboard", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (out / "norm=pre").iterdir()) == ["mean", "mean+sd", "mean-sd", "seed_0", "seed_1"]
