"""Nothing is lost: one sweep per results folder, runs a changed spec no longer names are kept."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml
from fakes import write_spec
from helpers import REPO, python_m

from gptlab.statuses import FINISHED
from gptlab.sweep_cli import main as sweep_main

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

SAFE = {"name": "safe", "file": "safe.yaml"}  # the sweep these tests train: results/safe/


@pytest.fixture
def no_report(monkeypatch):
    """The sweep without its report, for tests of the sweep's own files (the report is tested in tests/report/)."""
    monkeypatch.setattr("gptlab.report.write_report", lambda results_dir, reports_dir, **_: reports_dir)

# An activation that trains only once a file exists: the first sweep holds its lock as long as the test needs.
GATE_PLUGIN = '''
"""Test plugin: GELU that waits, at each training step, until the gate file exists."""
import os, time
import torch
from gptlab.model.activations import ACTIVATIONS, Activation

@ACTIVATIONS.register("gated_gelu")
class GatedGelu(Activation):
    def forward(self, h):
        while self.training and not os.path.exists({gate!r}):
            time.sleep(0.01)
        return torch.nn.functional.gelu(h)
'''


def test_a_second_sweep_on_a_busy_folder_is_refused_and_the_first_finishes(tmp_path, corpus, capsys, monkeypatch):
    from gptlab.model.activations import ACTIVATIONS

    monkeypatch.setattr(ACTIVATIONS, "_entries", dict(ACTIVATIONS._entries))  # the gate's entry leaves with the test
    gate = tmp_path / "gate"
    plugin = tmp_path / "gate_plugin.py"
    plugin.write_text(GATE_PLUGIN.format(gate=str(gate)))
    # one run (one worker to start): how long it trains, and how many runs, is not the point
    spec = write_spec(tmp_path, corpus, {"model.norm": ["pre"]}, **SAFE, train={"max_iters": 10, "eval_interval": 10})
    raw = yaml.safe_load(spec.read_text())
    raw["plugins"] = [str(plugin)]
    raw["base"]["model"]["activation"] = "gated_gelu"  # the first sweep trains only once the gate is open
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports")]
    first = subprocess.Popen(python_m("gptlab.sweep", figures=False) + args, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    holder = tmp_path / "results" / "safe" / ".lock.json"
    try:
        deadline = time.monotonic() + 300  # a bound, not a budget: the loop ends once the lock is there
        while not holder.exists() and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.02)
        assert holder.exists(), "the first sweep never took the lock"
        capsys.readouterr()
        second = sweep_main(args)  # the second sweep: this process
        second_err = capsys.readouterr().err
    finally:
        gate.touch()  # whatever happened, the first sweep may now train and finish
    assert second == 2
    assert second_err.strip().splitlines() == [second_err.strip()]  # one line
    assert f"is in use by another sweep (process {first.pid} on " in second_err
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    summary = (tmp_path / "results" / "safe" / "summary.csv").read_text().splitlines()
    # finished (10 steps may not learn: collapsed is a result too)
    assert len(summary) == 2 and all(any(f",{s}," in line for s in FINISHED) for line in summary[1:])
    assert not holder.exists()


def test_a_lock_left_by_a_killed_sweep_is_taken_over(tmp_path, corpus, capsys, no_report):
    # two runs, as most in-process sweeps here: a one-run sweep shrinks the warm loky pool, and the next sweep of two
    # starts (and imports torch in) a new worker
    spec = write_spec(tmp_path, corpus, train={"max_iters": 4, "eval_interval": 2}, **SAFE)
    results = tmp_path / "results" / "safe"
    results.mkdir(parents=True)
    grab = ("import os, signal, sys; from filelock import FileLock; "
            "FileLock(sys.argv[1]).acquire(); open(sys.argv[2], 'w').write('{\"pid\": 1}'); "
            "os.kill(os.getpid(), signal.SIGKILL)")
    proc = subprocess.run([sys.executable, "-c", grab, str(results / ".lock"), str(results / ".lock.json")])
    assert proc.returncode == -9 and (results / ".lock").exists() and (results / ".lock.json").exists()
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports")])
    assert code == 0, capsys.readouterr().err
    assert "ok" in (results / "summary.csv").read_text() and not (results / ".lock.json").exists()


def test_rerunning_a_changed_spec_warns_and_keeps_the_runs_it_no_longer_names(tmp_path, corpus, capsys, no_report):
    spec = write_spec(tmp_path, corpus, **SAFE)
    args = ["--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main([str(spec), *args]) == 0
    runs = tmp_path / "results" / "safe" / "runs"
    before = sorted(p.name for p in runs.iterdir())
    capsys.readouterr()
    assert sweep_main([str(spec), *args, "--set", "train.max_iters=30", "--dry-run"]) == 0
    assert "note: 2 finished run(s) in " in capsys.readouterr().out  # --dry-run prints to stdout
    assert sweep_main([str(spec), *args, "--set", "train.max_iters=30"]) == 0
    err = capsys.readouterr().err
    assert "note: 2 finished run(s) in " in err and "they stay on disk" in err
    after = sorted(p.name for p in runs.iterdir())
    assert set(before) < set(after) and len(after) == 4
    assert len((tmp_path / "results" / "safe" / "summary.csv").read_text().splitlines()) == 3


# -- result identity -------------------------------------------------------------------------------
def test_the_shipped_studies_still_name_all_their_finished_runs():
    """Their YAMLs, resolved by today's code, find every committed run finished (no orphans)."""
    from gptlab.sweep.spec import load_spec
    from gptlab.sweep.summary import run_dir

    for name in ("four_axes", "postln_warmup", "beyond", "transfer"):
        spec = load_spec(REPO / "ablations" / f"{name}.yaml")
        states = {run_dir(REPO / "results" / name, r).state() for r in spec.runs}
        assert "ok" in states and states <= set(FINISHED), (name, states)  # study 2's post-LN at 6e-3: collapsed


def test_an_edited_corpus_or_plugin_makes_new_runs(tmp_path, corpus):
    from gptlab.sweep.spec import load_spec

    text = tmp_path / "text.txt"
    text.write_text(corpus.read_text(), encoding="utf-8")
    plugin = tmp_path / "noop_plugin.py"
    plugin.write_text("X = 1\n")
    spec = yaml.safe_load(write_spec(tmp_path, text, **SAFE).read_text())
    spec["plugins"] = [str(plugin)]
    path = tmp_path / "ids.yaml"
    path.write_text(yaml.safe_dump(spec))
    ids = [r.run_id for r in load_spec(path).runs]
    assert [r.run_id for r in load_spec(path).runs] == ids  # deterministic
    text.write_text(corpus.read_text() + "\nOne more line.", encoding="utf-8")
    after_corpus = [r.run_id for r in load_spec(path).runs]
    plugin.write_text("X = 2\n")
    after_plugin = [r.run_id for r in load_spec(path).runs]
    assert len({tuple(ids), tuple(after_corpus), tuple(after_plugin)}) == 3


def test_a_corpus_replaced_on_disk_is_read_again_not_taken_from_the_cache(tmp_path, corpus):
    from gptlab.run.data import load_dataset

    text = tmp_path / "swap.txt"
    text.write_text(corpus.read_text(), encoding="utf-8")
    first = load_dataset("x", str(text))
    text.write_text("another text entirely, with new signs: @#~\n" * 500, encoding="utf-8")
    second = load_dataset("x", str(text))
    assert "@" in second.tokenizer.to_state()["chars"] and "@" not in first.tokenizer.to_state()["chars"]


def test_a_corpus_changed_between_stages_stops_the_sweep_in_one_line_naming_it(tmp_path, corpus, monkeypatch, capsys):
    import gptlab.sweep.execute as execute

    text = tmp_path / "stages.txt"
    text.write_text(corpus.read_text(), encoding="utf-8")
    path = write_spec(tmp_path, text, train={"max_iters": 4, "eval_interval": 2, "lr": None}, grid={"model.norm": ["pre"]},
                      seeds=1, tune={"space": {"train.lr": [1e-3, 2e-3]}, "seeds": 1}, **SAFE)
    raw = yaml.safe_load(path.read_text())
    raw["base"]["train"].pop("lr")
    path.write_text(yaml.safe_dump(raw))
    trained = execute.train

    def train_then_swap(*args, **kwargs):  # the selection stage trains, then the text is replaced on disk
        rows = trained(*args, **kwargs)
        text.write_text(corpus.read_text() + "\nA line the selection never saw.", encoding="utf-8")
        return rows

    monkeypatch.setattr(execute, "train", train_then_swap)
    args = ["--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main([str(path), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"error: {text} changed since this sweep's first stage read it") and "another sweep" in err
    runs = pd.read_csv(tmp_path / "results" / "safe" / "summary.csv")
    assert set(runs["role"]) == {"selection"}  # no estimation run was planned on the new text


def test_a_setting_added_later_is_hashed_only_when_it_leaves_its_default(monkeypatch):
    from gptlab.run import config as config_module
    from gptlab.run.config import resolve_run_config

    default, changed = resolve_run_config({}), resolve_run_config({"train": {"compile": True}})
    released = default.run_hash()
    # Pretend train.compile came after the first release: a default value no longer enters the hash...
    monkeypatch.setattr(config_module, "FIRST_RELEASE_KEYS", config_module.FIRST_RELEASE_KEYS - {"train.compile"})
    assert "compile" not in default.identity()["train"] and changed.identity()["train"]["compile"] is True
    assert default.run_hash() != released  # (the hash of a run that has the field is what it was)
    # ...so a config written before the field existed and one at its default are the same run.
    before = {k: v for k, v in default.to_dict()["train"].items() if f"train.{k}" in config_module.FIRST_RELEASE_KEYS}
    assert "compile" not in before
    assert default.identity()["train"] == before
    assert changed.run_hash() != default.run_hash()


def test_the_report_warns_when_runs_come_from_different_code():
    from types import SimpleNamespace

    from gptlab.report.sentences.notes import mixed_code

    assert mixed_code(SimpleNamespace(environment={"gptlab": ["0.1.0"], "git_commit": ["abc"]})) == []
    warning = mixed_code(SimpleNamespace(environment={"gptlab": ["0.1.0", "0.2.0"]}))
    assert len(warning) == 1 and "different code (versions 0.1.0, 0.2.0)" in warning[0]


def test_the_report_removes_only_what_its_previous_generation_wrote(tmp_path, monkeypatch):
    import json

    # What the figures show is not tested here (tests/report/test_render.py): one stand-in, drawn in no time
    from gptlab.report.figures import Figures

    monkeypatch.setattr("gptlab.report.figures.make_figures", lambda *a, **k: Figures.of(val_curves=b"\x89PNG stand-in"))

    from calibration.synthetic import make_results
    from gptlab.report import write_report

    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, 2)
    out = tmp_path / "report"
    write_report(results, out)
    manifest = json.loads((out / ".manifest.json").read_text())["files"]
    assert "report.md" in manifest and any(f.startswith("figures/") for f in manifest)
    (out / "tables" / "my_notes.csv").write_text("mine\n")
    (out / "figures" / "my_plot.png").write_bytes(b"png")
    (out / "README.txt").write_text("mine\n")
    # Pretend the previous generation also wrote a table this one no longer does.
    json.dump({"files": manifest + ["tables/old_table.csv"]}, open(out / ".manifest.json", "w"))
    (out / "tables" / "old_table.csv").write_text("old\n")
    write_report(results, out)
    assert not (out / "tables" / "old_table.csv").exists()
    for mine in ("tables/my_notes.csv", "figures/my_plot.png", "README.txt"):
        assert (out / mine).exists(), mine
    assert json.loads((out / ".manifest.json").read_text())["files"] == manifest


def test_a_dask_dry_run_prints_the_dask_plan(tmp_path, corpus, capsys):
    spec = yaml.safe_load(write_spec(tmp_path, corpus, **SAFE).read_text())
    spec["executor"] = {"backend": "dask", "scheduler": "local", "n_jobs": 2}
    path = tmp_path / "dask.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert sweep_main([str(path), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 0
    assert "plan: a local dask cluster of 2 worker(s), " in capsys.readouterr().out


def test_a_run_keeps_its_sample_so_a_report_without_checkpoints_shows_it(tmp_path, corpus, no_figures):
    from gptlab.report import write_report
    from gptlab.run.sampling import sample_from_run

    spec = write_spec(tmp_path, corpus, **SAFE)
    assert sweep_main([str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports")]) == 0
    run = next((tmp_path / "results" / "safe" / "runs").iterdir())
    text = (run / "sample.txt").read_text(encoding="utf-8")
    assert text == sample_from_run(run) and len(text) == 200
    for results_run in (tmp_path / "results" / "safe" / "runs").iterdir():
        for ckpt in results_run.glob("ckpt_*.pt"):
            ckpt.unlink()
    (tmp_path / "results" / "safe" / "samples.json").unlink(missing_ok=True)
    report = write_report(tmp_path / "results" / "safe", tmp_path / "again")
    assert text.strip().splitlines()[0] in (report / "report.md").read_text(encoding="utf-8")
