"""The live progress display: runs in flight show step, loss and ETA while they train."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import yaml
from helpers import tiny_config

from gptlab.executors import RunResult
from gptlab.run.rundir import RunDir
from gptlab.sweep import progress as progress_module
from gptlab.sweep.progress import Progress
from gptlab.sweep.reuse import identity, run_label
from gptlab.sweep.spec import load_spec
from gptlab.sweep.summary import run_dir
from gptlab.sweep_cli import main as sweep_main


def _spec(folder: Path, corpus: Path, **train) -> Path:
    config = tiny_config(corpus, **train)
    spec = {"name": "live", "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"model.norm": ["pre", "post"]}, "seeds": 1, "executor": {"backend": "loky", "n_jobs": 2}}
    path = folder / "live.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _in_flight(folder: RunDir, step: int, max_iters: int, seconds: float, loss: float) -> None:
    folder.path.mkdir(parents=True, exist_ok=True)
    (folder / RunDir.RUNNING).write_text(json.dumps({"pid": 1}))
    folder.write_progress({"step": step, "max_iters": max_iters, "train_loss": loss,
                           "train_s": seconds * 0.9, "eval_s": seconds * 0.1})


def test_a_run_in_flight_gets_its_step_loss_and_eta_and_the_sweep_its_eta(tmp_path, corpus):
    spec = load_spec(_spec(tmp_path, corpus))
    results = tmp_path / "results" / "live"
    first, second = spec.runs
    _in_flight(run_dir(results, first), step=50, max_iters=100, seconds=10.0, loss=1.2345)
    out = io.StringIO()
    progress = Progress(spec.runs, spec.runs, results, workers=1, stream=out, every_s=3600, live=False)
    flying = progress._in_flight()
    assert [(f.step, f.max_iters, f.train_loss) for f in flying] == [(50, 100, 1.2345)]
    assert flying[0].eta == 10.0  # 10 s for 50 steps, 50 to go
    assert progress._eta(flying) == 30.0  # run length 20 s; half of one run and all of the other left
    assert "step 50/100 (50%), train loss 1.2345, ETA 0:00:10" in flying[0].line()

    # A finished run sets the pace from then on, and leaves the runs in flight.
    progress.finished(RunResult(first.run_id, {"status": "ok", "best_val_loss": 1.5}, 8.0))
    assert "[1/2] pre seed 0: ok, best val 1.5000, 8.0 s" in out.getvalue()
    assert progress._eta(progress._in_flight()) == 8.0  # one run of 8 s left, nothing in flight


def test_a_run_without_a_running_marker_is_not_shown(tmp_path, corpus):
    spec = load_spec(_spec(tmp_path, corpus))
    results = tmp_path / "results" / "live"
    folder = run_dir(results, spec.runs[0])
    _in_flight(folder, step=5, max_iters=100, seconds=1.0, loss=2.0)
    folder.clear_running()  # the run ended: its marker and progress record go together
    progress = Progress(spec.runs, spec.runs, results, workers=1, stream=io.StringIO(), live=False)
    assert progress._in_flight() == []


def test_the_terminal_table_lists_the_runs_in_flight(tmp_path, corpus):
    spec = load_spec(_spec(tmp_path, corpus))
    results = tmp_path / "results" / "live"
    _in_flight(run_dir(results, spec.runs[1]), step=30, max_iters=120, seconds=6.0, loss=0.75)
    progress = Progress(spec.runs, spec.runs, results, workers=2, stream=io.StringIO(), live=True)
    from rich.console import Console

    console = Console(file=io.StringIO(), width=120)
    console.print(progress._table(progress._in_flight()))
    text = console.file.getvalue()
    assert re.search(r"post seed 0\s+30/120\s+0\.7500\s+0:00:18", text), text
    assert "0/2 runs finished, 1 in flight" in text


@pytest.mark.slow
def test_a_sweep_shows_its_runs_while_the_first_ones_are_still_training(tmp_path, corpus, monkeypatch, capsys,
                                                                      no_figures):
    monkeypatch.setattr(progress_module, "LIVE_EVERY_S", 0.1)
    spec = _spec(tmp_path, corpus, max_iters=200, eval_interval=100, log_interval=20)
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports")])
    assert code == 0
    err = capsys.readouterr().err
    first_finished = err.index("[1/2]")
    live = [m for m in re.finditer(r"running (pre|post) seed 0: step (\d+)/200 \(\d+%\), train loss (\S+), ETA", err)]
    assert live and live[0].start() < first_finished, err
    assert "sweep: 0/2 runs finished, " in err[:first_finished]


def test_a_run_is_labelled_by_its_id_so_a_length_or_setting_shows():
    """A worth run of 8,000 steps and its 2,000-step sibling read differently in the console."""
    run_id = "nanogpt-tinyshakespeare-0.00565685-wsd8000_s0_612ebf2837"
    assert run_label(run_id) == "nanogpt-tinyshakespeare-0.00565685-wsd8000"
    assert run_label(run_id) + identity(run_id) == run_id
    assert run_label("a_sb-c_s12_ff00") == "a_sb-c"  # a label holding '_s' keeps it: the seed's is the last
