"""The sweep's command line tells a reader what they need: the dry run's one bottom line (from scratch, and with what
is on disk), a warning when the design leaves the effects' noise too few degrees of freedom, and results on stdout
with progress and logging on stderr."""
from __future__ import annotations

import dataclasses
import io

import pytest
from fakes import write_spec

from gptlab import sweep_cli
from gptlab.stats.models import MIN_RESIDUAL_DF, planned_df
from gptlab.sweep import execute as execute_module
from gptlab.sweep.design_notes import noise_df_warning
from gptlab.sweep.dry_run import bottom_line
from gptlab.sweep.execute import SweepOptions, finish
from gptlab.sweep.spec import load_spec
from gptlab.sweep_cli import main as sweep_main
from gptlab.sweep_cli import report_with_calls


def test_the_residual_df_of_a_plan_is_the_one_the_model_fits():
    assert planned_df(2, 2) == 1 and planned_df(4, 2) == 3 and planned_df(2, 4) == 3  # (cells - 1)(seeds - 1)
    assert planned_df(1, 3) == 2  # one cell: no seed block
    assert planned_df(4, 1) == 0
    assert 2 < planned_df(11, 2, 4) < 3 and planned_df(11, 3, 6) > MIN_RESIDUAL_DF  # an arm against the baseline


def test_a_design_with_too_few_residual_df_is_warned_about_with_the_seeds_that_fix_it(tmp_path, corpus):
    one = load_spec(write_spec(tmp_path, corpus, {"model.activation": ["gelu", "relu"]}, seeds=2))
    warning = noise_df_warning(one)
    assert warning is not None and "1 residual degree(s) of freedom" in warning and "+/-12.7 standard errors" in warning
    assert "4 seeds per cell give 3 (`--set seeds=4`)" in warning
    assert noise_df_warning(load_spec(write_spec(tmp_path, corpus, {"model.activation": ["gelu", "relu"]}, seeds=4))) is None
    two_by_two = {"model.activation": ["gelu", "relu"], "model.norm": ["pre", "post"]}
    assert noise_df_warning(load_spec(write_spec(tmp_path, corpus, two_by_two, seeds=2))) is None  # 3 df
    assert noise_df_warning(load_spec(write_spec(tmp_path, corpus, two_by_two, seeds=1))) is None  # no replication


def test_the_bottom_line_says_the_cost_from_scratch_and_what_is_left():
    assert (
        bottom_line([(4, 20.0, 4, 20.0)])
        == "\nfrom scratch: 4 runs, about 0:00:20; with what is on disk: 4 to train, about 0:00:20"
    )
    line = bottom_line([(127, 31159.0, 0, None), (154, 42843.0, 0, None)], picked=True)
    assert line.startswith("\nfrom scratch: 127 to 154 runs, about 8:39:19 to 11:54:03; with what is on disk: "
                           "nothing to train (counting the finished runs on disk")
    assert "with what is on disk: at most 1 to train, about 0:00:30 (counting" in bottom_line(
        [(127, 100.0, 1, 20.0), (154, 200.0, 1, 30.0)], picked=True)
    assert "with what is on disk: 5 to 9 to train, about 0:01:00 to 0:02:00" in bottom_line(
        [(10, 100.0, 5, 60.0), (20, 200.0, 9, 120.0)])


def test_the_dry_run_ends_with_its_bottom_line_and_warns_of_too_few_df_on_stdout(tmp_path, corpus, capsys):
    spec = write_spec(tmp_path, corpus, {"model.activation": ["gelu", "relu"]}, seeds=2, train={"max_iters": 4})
    assert sweep_main([str(spec), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("from scratch: 4 runs, about ") and "; with what is on disk: 4 to train, about " in out[-1]
    assert any(line.startswith("warning: 2 cell(s) x 2 seeds leave 1 residual") for line in out)


def test_results_go_to_stdout_and_progress_to_stderr(tmp_path, corpus, capsys, monkeypatch):
    path = write_spec(tmp_path, corpus, {"model.activation": ["gelu", "relu"]}, seeds=2)
    spec = load_spec(path)
    out, err = io.StringIO(), io.StringIO()
    options = SweepOptions(tmp_path / "results" / "t", tmp_path / "reports" / "t", stream=err, results_stream=out)
    assert finish(spec, spec.runs, options) == 1  # nothing trained
    assert "summary: " in out.getvalue() and "4 run(s) were not trained" in out.getvalue()
    assert err.getvalue() == ""

    seen = {}

    def fake_execute(spec, plan, options):  # the command line's streams, without training
        seen["options"] = options
        return finish(spec, spec.runs, dataclasses.replace(options, write_report=None))

    monkeypatch.setattr(sweep_cli, "execute", fake_execute)
    code = sweep_main([str(path), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "rep")])
    captured = capsys.readouterr()
    assert code == 1 and "4 run(s) were not trained" in captured.out and "were not trained" not in captured.err
    assert seen["options"].stream is not seen["options"].results_stream
    assert execute_module.SweepOptions is SweepOptions


def test_a_finished_sweep_prints_its_calls_on_stdout(tmp_path, capsys):
    def write_report(results_dir, reports_dir):
        (reports_dir / "tables").mkdir(parents=True)
        (reports_dir / "tables" / "main_effects.csv").write_text(
            "factor,level,verdict\nmodel.norm,post,norm=post is worse than norm=pre by 0.04 nats/char\n")
        return reports_dir

    assert report_with_calls(write_report, tmp_path / "results", tmp_path / "rep") == tmp_path / "rep"
    out = capsys.readouterr().out
    assert "calls (" in out and "  norm=post is worse than norm=pre by 0.04 nats/char" in out


@pytest.mark.parametrize("flag", ["--help"])
def test_the_help_names_what_set_takes(flag, capsys):
    with pytest.raises(SystemExit):
        sweep_main([flag])
    text = " ".join(capsys.readouterr().out.split())
    assert "seeds=4" in text and "train.max_iters=500" in text


def test_a_dry_run_stopped_says_so_in_one_line_and_writes_nothing(tmp_path, corpus, monkeypatch, capsys):
    """Ctrl-C while the dry run times its run: exit 130 and one line, and nothing written into a results folder that
    exists (the sweep's own stop rebuilds summary.csv there: a dry run writes nothing)."""
    import gptlab.sweep.estimate as estimate

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(estimate, "time_run", stopped)
    spec = write_spec(tmp_path, corpus, {"model.activation": ["gelu", "relu"]})
    results = tmp_path / "results"
    (results / "t").mkdir(parents=True)
    assert sweep_main([str(spec), "--dry-run", "--results-dir", str(results)]) == 130
    captured = capsys.readouterr()
    stops = [line for line in (captured.out + captured.err).splitlines() if "interrupted" in line]
    assert stops == ["interrupted: the dry run stopped; nothing was trained or written"]
    assert list((results / "t").iterdir()) == []


# Stops the process as `python -m gptlab.sweep` begins to import torch (then the report, the executors...): the
# seconds a Ctrl-C pressed at once lands in.
STOP_WHILE_IMPORTING = '''
import os, runpy, signal, sys

# As a terminal's Ctrl-C finds it, whatever started the tests (a background shell starts its jobs with SIGINT ignored,
# which the sweep then rightly leaves ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)

class StopAtImport:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            os.kill(os.getpid(), signal.{signal})
        return None

sys.meta_path.insert(0, StopAtImport())
runpy.run_module("gptlab.sweep", run_name="__main__", alter_sys=True)
'''


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_a_stop_while_the_command_starts_exits_130_in_one_line_without_a_traceback(tmp_path, corpus, stop):
    import subprocess
    import sys

    from helpers import REPO

    spec = write_spec(tmp_path, corpus)
    done = subprocess.run([sys.executable, "-c", STOP_WHILE_IMPORTING.replace("{signal}", stop), str(spec), "--dry-run",
                           "--results-dir", str(tmp_path / "results")], capture_output=True, text=True, cwd=REPO,
                          timeout=300)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "interrupted while starting: nothing was trained or written" and done.stdout == ""


def test_a_stop_in_the_step_timing_says_every_run_finished_and_the_timing_was_stopped(tmp_path, corpus, monkeypatch,
                                                                                      capsys):
    """A worth sweep whose runs all finished, stopped while it times the arms' steps: the count is true (a wsd study's
    1x lengths are its estimation runs, counted once) and the line says what was stopped."""
    import yaml
    from fakes import FakeBackend

    import gptlab.sweep.estimate as estimate

    class Backends:
        @staticmethod
        def get(name):
            return lambda executor: FakeBackend(lambda config: 1.0)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(execute_module, "BACKENDS", Backends)
    monkeypatch.setattr(estimate, "build_trainer", lambda config, stand_in=False: object())
    monkeypatch.setattr(estimate, "time_train_steps", stopped)
    monkeypatch.setattr("gptlab.run.device.configure_process", lambda threads=None: None)
    spec = write_spec(tmp_path, corpus, {}, seeds=2, train={"schedule": "wsd"},
                      worth={"lengths": [0.5, 1, 2], "retune": [2]})
    raw = yaml.safe_load(spec.read_text())
    del raw["grid"]
    raw["arms"] = {"nanogpt": {}, "relu": {"model.activation": "relu"}}
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    args = [str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main(args) == 130
    err = capsys.readouterr().err
    assert ("interrupted: 12 of 12 runs finished; the step timing after them was stopped: run the same command again "
            "to time the steps (no run trains again)") in err


def test_the_dry_run_of_an_interrupted_sweep_times_only_the_steps_left(tmp_path, corpus, capsys):
    """Issue 55: after an interrupt the dry run said the runs were partial but timed them from scratch."""
    from helpers import skip_figures

    from gptlab.run.rundir import RunDir
    from gptlab.sweep.dry_run import _seconds

    spec_path = write_spec(tmp_path, corpus, {"model.norm": ["pre", "post"]}, seeds=1)
    results = tmp_path / "results"
    with pytest.MonkeyPatch.context() as mp:
        skip_figures(mp)
        assert sweep_main([str(spec_path), "--results-dir", str(results), "--reports-dir", str(tmp_path / "r")]) == 0
    spec = load_spec(spec_path)
    folder = RunDir(results / "t" / "runs" / spec.runs[0].run_id)
    (folder / RunDir.SUMMARY).unlink()  # as an interrupt leaves it: metrics to its last checkpoint, no summary
    rows = (folder / RunDir.METRICS).read_text().splitlines()
    (folder / RunDir.METRICS).write_text("\n".join(r for r in rows if r.split(",")[0] in ("step", "10", "20")) + "\n")
    (folder / RunDir.LAST).write_bytes((folder / RunDir.BEST).read_bytes())  # a last checkpoint: the run is partial
    assert folder.state() == "partial" and folder.resume_step() == 20
    capsys.readouterr()
    assert sweep_main([str(spec_path), "--dry-run", "--results-dir", str(results)]) == 0
    assert "1 of them resume from their last checkpoint (steps 20): only their remaining steps" in capsys.readouterr().out

    class PerStep:  # one second a step: the estimate counts steps
        @staticmethod
        def seconds(config, start=0):
            return float(config.train.max_iters - start)

    run = spec.runs[0]
    timing = lambda run: PerStep  # noqa: E731 (the timing of each run's model size)
    assert _seconds(spec, [run], timing, 1) == 40 and _seconds(spec, [run], timing, 1, {run.run_id: 20}) == 20


def test_a_sweep_stopped_before_its_results_folder_exists_says_so_and_exits_130(tmp_path, corpus, monkeypatch, capsys):
    import gptlab.sweep_cli as cli

    spec = write_spec(tmp_path, corpus)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while the spec is read

    monkeypatch.setattr(cli, "load_spec", stopped)
    assert cli.main([str(spec), "--results-dir", str(tmp_path / "r")]) == 130
    assert "interrupted before anything was trained or written" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
