"""Damaged files on disk: a checkpoint that cannot be read is named in one line, and a run whose last checkpoint
is damaged resumes from its best one (or from step 0) to the result an uninterrupted run gives."""
from __future__ import annotations

import pytest

from gptlab.run.rundir import RunDir
from gptlab.run.runner import train_run
from gptlab.sample import main as sample_main

from helpers import tiny_config


@pytest.fixture(scope="module")
def finished(tmp_path_factory, corpus):
    folder = tmp_path_factory.mktemp("run") / "r"
    summary = train_run(tiny_config(corpus, max_iters=30, eval_interval=10), folder)
    return folder, summary


def _unfinish(src, dest, damage: tuple[str, ...]):
    """A copy of the finished run as an interrupted one (no summary), with the named checkpoints overwritten."""
    import shutil

    shutil.copytree(src, dest)
    (dest / RunDir.SUMMARY).unlink()
    for name in damage:
        (dest / name).write_bytes(b"PK\x03\x04 not a checkpoint")
    return dest


@pytest.mark.parametrize("damage", [(RunDir.LAST,), (RunDir.LAST, RunDir.BEST)], ids=["last", "both"])
def test_a_damaged_checkpoint_resumes_to_the_uninterrupted_result(finished, tmp_path, corpus, damage, caplog):
    src, summary = finished
    run = _unfinish(src, tmp_path / "r", damage)
    again = train_run(tiny_config(corpus, max_iters=30, eval_interval=10), run)
    assert again["status"] == "ok"
    for key in ("best_val_loss", "best_step", "final_val_loss", "final_train_loss"):
        assert again[key] == summary[key], key
    said = caplog.text
    assert "cannot be read" in said
    assert ("training from step 0 instead" in said) == (RunDir.BEST in damage)
    assert ("resuming from ckpt_best.pt instead" in said)


def test_sampling_a_damaged_checkpoint_is_one_line(finished, tmp_path, capsys):
    run = _unfinish(finished[0], tmp_path / "r", (RunDir.BEST,))
    assert sample_main([str(run), "--tokens", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "ckpt_best.pt cannot be read" in err and "damaged" in err


@pytest.mark.parametrize("tokens, message", [("0", "--tokens: must be a whole number from 1 to 100,000"),
                                             ("-5", "--tokens: must be a whole number from 1 to 100,000"),
                                             ("100000000000", "--tokens: must be a whole number from 1 to 100,000"),
                                             ("1e11", "--tokens: must be a whole number from 1 to 100,000")])
def test_sample_tokens_are_bounded(finished, tokens, message, capsys):
    with pytest.raises(SystemExit) as stop:
        sample_main([str(finished[0]), "--tokens", tokens])
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_a_report_asked_for_before_the_first_run_finishes_says_a_sweep_is_training(tmp_path, capsys):
    import json

    from gptlab.report.__main__ import main as report_main
    from gptlab.run.resultsdir import ResultsDir

    folder = ResultsDir(tmp_path / "busy")
    (folder.path / "runs").mkdir(parents=True)
    folder.lock_holder.write_text(json.dumps({"pid": 4242, "host": "h", "since": "2026-11-26 00:00:00",
                                              "command": "python -m gptlab.sweep busy.yaml"}))
    assert report_main([str(folder.path), "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err.strip()
    assert "no summary.csv yet: a sweep is training it (process 4242 on h" in err and err.count("\n") == 0


def test_a_run_folder_holding_another_runs_files_is_not_that_runs_result(tmp_path, corpus, capsys, monkeypatch):
    import shutil

    import pandas as pd
    import yaml

    from gptlab.sweep.cli import main as sweep_main
    from helpers import skip_figures

    skip_figures(monkeypatch)
    config = tiny_config(corpus, max_iters=10, eval_interval=5)
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"name": "s", "base": {k: config[k] for k in ("model", "train", "data")},
                                    "grid": {"model.activation": ["gelu", "relu"]}, "seeds": [0],
                                    "executor": {"backend": "loky", "n_jobs": 1}}))
    args = [str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main(args) == 0
    runs = tmp_path / "results" / "s" / "runs"
    gelu, relu = sorted(runs.iterdir())  # gelu-... before relu-...
    shutil.rmtree(gelu)
    shutil.copytree(relu, gelu)  # gelu's folder now holds relu's files
    assert sweep_main(args) == 1
    summary = pd.read_csv(tmp_path / "results" / "s" / "summary.csv").set_index("model.activation")
    assert summary.loc["gelu", "status"] == "failed" and "holds the results of run" in summary.loc["gelu", "error"]
    assert summary.loc["relu", "status"] == "ok"


def test_a_metrics_file_cut_short_loses_its_partial_row_with_a_warning(tmp_path, caplog):
    from gptlab.report.load import read_metrics

    path = tmp_path / "metrics.csv"
    path.write_text("step,val_loss,lr\n10,2.5,0.00189\n20,2.4,0.00189\n30,2.3,0.001")  # "0.00189" cut to "0.001"
    frame = read_metrics(path)
    assert frame["step"].tolist() == [10, 20] and frame["lr"].tolist() == [0.00189, 0.00189]
    assert "ends in a partial row" in caplog.text
    path.write_text("step,val_loss,lr\n10,2.5,0.00189\n")
    caplog.clear()
    assert read_metrics(path)["step"].tolist() == [10] and "partial" not in caplog.text
    assert read_metrics(tmp_path / "absent.csv") is None
