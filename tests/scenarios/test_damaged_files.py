"""Files and folders that are not what the lab expects: a damaged checkpoint (named in one line; a run resumes from
its best one, or from step 0, to the uninterrupted result), a run folder holding another run's files, a metrics file
cut short, a results or reports folder the sweep cannot use, a disk without room, a report asked for too early."""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers import tiny_config

from gptlab.run.config import resolve_run_config
from gptlab.run.rundir import RunDir
from gptlab.run.runner import train_run
from gptlab.sample import main as sample_main


@pytest.fixture(scope="module")
def finished(tmp_path_factory, corpus):
    folder = tmp_path_factory.mktemp("run") / "r"
    summary = train_run(resolve_run_config(tiny_config(corpus, max_iters=30, eval_interval=10)), folder)
    return folder, summary


NOT_A_CHECKPOINT = b"PK\x03\x04 not a checkpoint"


def _unfinish(src, dest, damage: tuple[str, ...], content: bytes = NOT_A_CHECKPOINT):
    """A copy of the finished run as an interrupted one (no summary), with the named checkpoints overwritten by
    `content` (b"": the empty file a kill -9 or a power cut can leave, whose torch error has no message)."""
    import shutil

    shutil.copytree(src, dest)
    (dest / RunDir.SUMMARY).unlink()
    for name in damage:
        (dest / name).write_bytes(content)
    return dest


@pytest.mark.parametrize("content", [NOT_A_CHECKPOINT, b""], ids=["overwritten", "empty"])
@pytest.mark.parametrize("damage", [(RunDir.LAST,), (RunDir.LAST, RunDir.BEST)], ids=["last", "both"])
def test_a_damaged_checkpoint_resumes_to_the_uninterrupted_result(finished, tmp_path, corpus, damage, content, caplog):
    src, summary = finished
    run = _unfinish(src, tmp_path / "r", damage, content)
    again = train_run(resolve_run_config(tiny_config(corpus, max_iters=30, eval_interval=10)), run)
    assert again["status"] == "ok"
    for key in ("best_val_loss", "best_step", "final_val_loss", "final_train_loss"):
        assert again[key] == summary[key], key
    said = caplog.text
    assert "cannot be read" in said
    assert ("training from step 0 instead" in said) == (RunDir.BEST in damage)
    assert ("resuming from ckpt_best.pt instead" in said)


def test_population_members_with_an_empty_last_checkpoint_resume_from_their_best(tmp_path, corpus, caplog):
    from gptlab.run.population_run import train_population

    configs = [resolve_run_config({**tiny_config(corpus, max_iters=30, eval_interval=10), "seed": s}) for s in (0, 1)]
    folders = [tmp_path / "first" / f"r{s}" for s in (0, 1)]
    summaries = train_population(configs, folders)
    runs = [_unfinish(f, tmp_path / "again" / f.name, (RunDir.LAST,), b"") for f in folders]
    again = train_population(configs, runs)
    assert [s["status"] for s in again] == ["ok", "ok"]
    for mine, theirs in zip(again, summaries):
        assert mine["best_step"] == theirs["best_step"]
        assert mine["best_val_loss"] == pytest.approx(theirs["best_val_loss"], abs=1e-5)  # test_population's tolerance
    assert caplog.text.count("resuming from ckpt_best.pt instead") == 2 and "(an empty file)" in caplog.text


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


def test_a_run_folder_holding_another_runs_files_is_not_that_runs_result(two_runs, tmp_path, monkeypatch):
    import shutil

    import pandas as pd
    from helpers import skip_figures

    from gptlab.sweep_cli import main as sweep_main

    skip_figures(monkeypatch)
    results, _ = two_runs
    shutil.copytree(results.parent, tmp_path / "results")
    args = [str(results.parent.parent / "s.yaml"), "--results-dir", str(tmp_path / "results"),
            "--reports-dir", str(tmp_path / "reports")]
    runs = tmp_path / "results" / "s" / "runs"
    gelu, relu = sorted(runs.iterdir())  # gelu-... before relu-...
    shutil.rmtree(gelu)
    shutil.copytree(relu, gelu)  # gelu's folder now holds relu's files
    assert sweep_main(args) == 1
    summary = pd.read_csv(tmp_path / "results" / "s" / "summary.csv").set_index("model.activation")
    assert summary.loc["gelu", "status"] == "failed" and "holds the results of run" in summary.loc["gelu", "error"]
    assert summary.loc["relu", "status"] == "ok"


def test_a_metrics_file_cut_short_loses_its_partial_row_with_a_warning(tmp_path, caplog):
    from gptlab.report.load.runfiles import read_metrics

    path = tmp_path / "metrics.csv"
    path.write_text("step,val_loss,lr\n10,2.5,0.00189\n20,2.4,0.00189\n30,2.3,0.001")  # "0.00189" cut to "0.001"
    frame = read_metrics(path)
    assert frame["step"].tolist() == [10, 20] and frame["lr"].tolist() == [0.00189, 0.00189]
    assert "ends in a partial row" in caplog.text
    path.write_text("step,val_loss,lr\n10,2.5,0.00189\n")
    caplog.clear()
    assert read_metrics(path)["step"].tolist() == [10] and "partial" not in caplog.text
    assert read_metrics(tmp_path / "absent.csv") is None


@pytest.mark.parametrize("obstacle, words", [
    ("results-is-a-file", "where the sweep keeps a folder"),
    ("lock-is-a-folder", ".lock is a folder where the sweep keeps a file"),
    ("runs-is-a-file", "runs is a file where the sweep keeps a folder"),
    ("summary-is-a-folder", "summary.csv is a folder where the sweep keeps a file"),
])
def test_a_folder_the_sweep_cannot_use_is_one_line_before_training(obstacle, words, tmp_path, corpus, capsys):
    import yaml

    from gptlab.sweep_cli import main as sweep_main

    config = tiny_config(corpus)
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"name": "s", "base": {k: config[k] for k in ("model", "train", "data")},
                                    "grid": {"model.activation": ["gelu", "relu"]}, "seeds": [0]}))
    results, reports = tmp_path / "results", tmp_path / "reports"
    results.mkdir()
    reports.mkdir()
    target = results / "s"
    if obstacle == "results-is-a-file":
        target.write_text("")
    else:
        target.mkdir()
        name, kind = {"lock-is-a-folder": (".lock", "dir"), "runs-is-a-file": ("runs", "file"),
                      "summary-is-a-folder": ("summary.csv", "dir")}[obstacle]
        (target / name).mkdir() if kind == "dir" else (target / name).write_text("")
    code = sweep_main([str(spec), "--results-dir", str(results), "--reports-dir", str(reports)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and words in err, err
    assert not any(results.rglob("*.pt"))


@pytest.mark.parametrize("which", ["results", "reports"])
def test_a_folder_the_sweep_may_not_write_is_one_line(which, tmp_path, monkeypatch, corpus):
    """Permissions through os.access (this suite may run as root, which no chmod stops)."""
    import os

    import yaml

    from gptlab.errors import GptlabError
    from gptlab.run.resultsdir import ResultsDir
    from gptlab.sweep import preflight
    from gptlab.sweep.spec import load_spec

    config = tiny_config(corpus)
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(yaml.safe_dump({"name": "s", "base": {k: config[k] for k in ("model", "train", "data")},
                                         "grid": {"model.activation": ["gelu", "relu"]}, "seeds": [0]}))
    (tmp_path / which).mkdir()
    denied = (tmp_path / which).resolve()
    real = os.access
    monkeypatch.setattr(preflight.os, "access", lambda p, mode: False if Path(p) == denied else real(p, mode))
    with pytest.raises(GptlabError, match=f"cannot write to {denied} \\(permission denied\\)"):
        preflight.check_folders(load_spec(spec_path), ResultsDir(tmp_path / "results" / "s"), tmp_path / "reports" / "s")


def test_a_disk_without_room_for_the_checkpoints_is_refused(tmp_path, monkeypatch, corpus):
    from collections import namedtuple

    import yaml

    from gptlab.errors import GptlabError
    from gptlab.run.resultsdir import ResultsDir
    from gptlab.sweep import preflight
    from gptlab.sweep.spec import load_spec

    config = tiny_config(corpus)
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(yaml.safe_dump({"name": "s", "base": {k: config[k] for k in ("model", "train", "data")},
                                         "grid": {"model.activation": ["gelu", "relu"]}, "seeds": [0]}))
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda p: usage(10**9, 10**9, 1000))
    with pytest.raises(GptlabError, match=r"^disk full: the 2 runs to train first keep about .* and 0 MiB is free"):
        preflight.check_folders(load_spec(spec_path), ResultsDir(tmp_path / "results" / "s"), tmp_path / "reports")


def test_a_corpus_edited_after_planning_fails_its_runs_instead_of_training_under_their_ids(tmp_path, corpus):
    import shutil

    import yaml

    from gptlab.executors.base import Task
    from gptlab.executors.worker import execute_run
    from gptlab.sweep.spec import load_spec

    text = tmp_path / "text.txt"
    shutil.copy(corpus, text)
    config = tiny_config(text, max_iters=10, eval_interval=5, lr=2e-2, min_lr=1e-3)  # learns: ok, not collapsed
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(yaml.safe_dump({"name": "s", "base": {k: config[k] for k in ("model", "train", "data")},
                                         "grid": {"model.activation": ["gelu", "relu"]}, "seeds": [0]}))
    first, second = load_spec(spec_path).runs  # planned: the ids carry the text's sha256
    done = execute_run(Task(first.run_id, first.config, str(tmp_path / "runs" / first.run_id), 1))
    assert done.summary.status == "ok"
    text.write_text(text.read_text() + "An edit after the sweep started.\n")
    result = execute_run(Task(second.run_id, second.config, str(tmp_path / "runs" / second.run_id), 1))
    assert result.summary.status == "failed" and "changed since the sweep planned run" in result.summary.error
    assert not (tmp_path / "runs" / second.run_id / RunDir.BEST).exists()
    again = execute_run(Task(first.run_id, first.config, str(tmp_path / "runs" / first.run_id), 1))
    assert again.summary.status == "ok"  # a finished run is a result already: nothing is read again


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, corpus):
    """A finished two-run sweep: its results folder and the bytes of its summary.csv."""
    import yaml

    from gptlab.sweep_cli import main as sweep_main

    tmp = tmp_path_factory.mktemp("two")
    config = tiny_config(corpus, max_iters=10, eval_interval=5, lr=2e-2, min_lr=1e-3)  # learns: ok, not collapsed
    spec = tmp / "s.yaml"
    spec.write_text(yaml.safe_dump({"name": "s", "base": {k: config[k] for k in ("model", "train", "data")},
                                    "grid": {"model.activation": ["gelu", "relu"]}, "seeds": [0],
                                    "executor": {"backend": "loky", "n_jobs": 2, "threads": 1}}))  # the pool the other sweeps use
    mp = pytest.MonkeyPatch()
    from helpers import skip_figures

    skip_figures(mp)
    try:
        assert sweep_main([str(spec), "--results-dir", str(tmp / "results"), "--reports-dir", str(tmp / "reports")]) == 0
    finally:
        mp.undo()
    results = tmp / "results" / "s"
    return results, (results / "summary.csv").read_bytes()


def _damaged_copy(two_runs, tmp_path, damage):
    import shutil

    results, original = two_runs
    copy = tmp_path / "s"
    shutil.copytree(results, copy)
    damage(copy / "summary.csv", original)
    return copy, original


@pytest.mark.parametrize("damage, reason", [
    (lambda path, text: path.write_bytes(text[: text.index(b"\n", text.index(b"\n") + 1) + 10]), "missing from it"),
    (lambda path, text: path.write_bytes(text.replace(b",ok,", b",failed,", 1)), "differ from their run's summary"),
    (lambda path, text: path.write_bytes(b"\x00\xff binary"), "missing or unreadable"),
    (lambda path, text: path.unlink(), "missing or unreadable"),
], ids=["cut-short", "edited", "binary", "deleted"])
def test_a_summary_csv_that_disagrees_with_the_run_folders_is_read_from_them_and_left_as_it_is(
        two_runs, tmp_path, damage, reason, caplog):
    from gptlab.report.load import load_results

    copy, original = _damaged_copy(two_runs, tmp_path, damage)
    damaged = (copy / "summary.csv").read_bytes() if (copy / "summary.csv").exists() else None
    with caplog.at_level("WARNING"):
        results = load_results(copy)
    assert sorted(results.runs["model.activation"]) == ["gelu", "relu"] and results.runs["ok"].all()
    after = (copy / "summary.csv").read_bytes() if (copy / "summary.csv").exists() else None
    assert after == damaged  # the report writes nothing into results/NAME/
    assert reason in caplog.text and "read from them instead" in caplog.text
    assert reason in results.summary_check.reason


def test_a_summary_csv_that_agrees_is_left_alone_and_old_or_foreign_runs_stay_out(two_runs, tmp_path, caplog):
    import json
    import shutil

    from gptlab.run.resultsdir import ResultsDir
    from gptlab.run.summary_csv import check_summary

    copy, original = _damaged_copy(two_runs, tmp_path, lambda path, text: None)
    assert check_summary(ResultsDir(copy)).text is None
    runs = copy / "runs"
    relu = next(p for p in runs.iterdir() if p.name.startswith("relu"))
    stale = runs / relu.name.replace("relu", "swiglu")  # a run planned under another spec: its stamp differs
    shutil.copytree(relu, stale)
    place = json.loads((stale / RunDir.PLACE).read_text())
    place["row"]["run_id"], place["sweep"] = stale.name, "0" * 16
    (stale / RunDir.PLACE).write_text(json.dumps(place))
    summary = json.loads((stale / RunDir.SUMMARY).read_text())
    (stale / RunDir.SUMMARY).write_text(json.dumps({**summary, "run_id": stale.name}))
    check = check_summary(ResultsDir(copy))
    assert check.text is None and check.others == (stale.name,) and not check.unplaced
    for folder in runs.iterdir():  # results from before places were recorded: the file is all there is
        (folder / RunDir.PLACE).unlink()
    (copy / "summary.csv").write_bytes(original.replace(b",ok,", b",failed,", 1))
    assert check_summary(ResultsDir(copy)).text is None  # the file stands


def test_a_write_that_fails_for_want_of_space_says_disk_full(tmp_path, monkeypatch):
    import errno
    import shutil
    from collections import namedtuple

    from gptlab.runio import DiskFull, atomic_write

    def enospc(f):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(DiskFull, match=r"^disk full: cannot write .*x\.json \(.* MiB free on its disk, OSError: "):
        atomic_write(tmp_path / "x.json", enospc)

    def torch_save(f):  # what torch.save raises on a full disk: no errno
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")

    with pytest.raises(RuntimeError, match="enforce fail") as raised:  # plenty of space: not a full disk
        atomic_write(tmp_path / "x.pt", torch_save)
    assert not isinstance(raised.value, DiskFull)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 4096, 4096))
    with pytest.raises(DiskFull, match=r"\(0\.0 MiB free on its disk, RuntimeError: \[enforce fail"):
        atomic_write(tmp_path / "x.pt", torch_save)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no temp file left behind


def test_a_run_that_fills_the_disk_fails_saying_so_and_rerun_failed_recovers_it(finished, tmp_path, corpus,
                                                                                 monkeypatch):
    import shutil
    from collections import namedtuple

    import torch

    from gptlab.executors.base import Task
    from gptlab.executors.worker import execute_run
    from gptlab.run.identity import run_sources

    config = resolve_run_config(tiny_config(corpus, max_iters=30, eval_interval=10))
    run_id = "r_" + config.run_hash(run_sources((), str(corpus)))
    task = Task(run_id, config, str(tmp_path / "runs" / run_id), 1, (), (), 0, 1)
    save, disk_usage, usage = torch.save, shutil.disk_usage, namedtuple("usage", "total used free")
    monkeypatch.setattr("gptlab.run.device.configure_process", lambda threads=None: None)  # this process's threads

    def full_disk(*args, **kwargs):
        monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9, 0))
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")

    monkeypatch.setattr(torch, "save", full_disk)
    result = execute_run(task)
    assert result.status == "failed" and result.summary.error.startswith("DiskFull: disk full: cannot write ")
    monkeypatch.setattr(torch, "save", save)
    monkeypatch.setattr(shutil, "disk_usage", disk_usage)
    folder = RunDir(task.run_dir)
    assert folder.clear_failure()  # what --rerun-failed does before training it again
    again = execute_run(task)
    assert again.status == "ok" and again.summary.best_val_loss == finished[1]["best_val_loss"]
