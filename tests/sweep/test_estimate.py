"""`gptlab.sweep.estimate` through the dry run: a compiled sweep's estimate adds each worker's compiles."""
from __future__ import annotations

import pytest
from fakes import write_spec

import gptlab.sweep.estimate as estimate
from gptlab.sweep_cli import main as sweep_main


@pytest.fixture
def one_second_steps(monkeypatch):
    """Every step timed at 1 s, evaluations at nothing: the estimate's arithmetic alone."""
    monkeypatch.setattr(estimate, "time_run", lambda config, steps=6, **kwargs: estimate.StepTiming(1.0, 0.0))


@pytest.mark.parametrize("jobs, compile, total", [
    (1, False, "~0:02:40"),  # 2 architectures x 2 seeds x 40 steps of 1 s, nothing compiled
    (1, True, "~0:03:06"),  # + one worker compiling both: 22 s for its first, 4 s for the other
    (2, True, "~0:01:46"),  # (160 s + each of 2 workers compiling both, 2 x 26 s) over 2 workers
])
def test_a_compiled_sweeps_estimate_adds_each_workers_compile_of_each_architecture(tmp_path, corpus, capsys,
                                                                                  one_second_steps, jobs, compile, total):
    spec = write_spec(tmp_path, corpus, {"model.activation": ["gelu", "relu"]}, seeds=2, train={"compile": compile},
                      executor={"backend": "loky", "n_jobs": jobs, "threads": 1})
    assert sweep_main([str(spec), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert f"{total} in all" in out and f"about 0:{total[3:]}" in out
    if compile:
        assert (f"compile: train.compile on: about 0:00:26 a worker ({2 * jobs} compiles: {estimate.FIRST_COMPILE_S:g} s a "
                "worker's first architecture, ") in out
    else:
        assert "compile:" not in out


def test_each_model_size_is_timed_once_and_its_runs_scaled_from_its_own_timing(tmp_path, corpus, capsys, monkeypatch):
    """A sweep over widths (a ladder's rungs differ so) times the first run of each size, once, and no other."""
    timed = []

    def time_run(config, steps=6, **kwargs):
        timed.append(config.model.n_embd)
        return estimate.StepTiming({16: 1.0, 32: 3.0}[config.model.n_embd], 0.0)

    monkeypatch.setattr(estimate, "time_run", time_run)
    spec = write_spec(tmp_path, corpus, {"model.n_embd": [16, 32]}, seeds=2,
                      executor={"backend": "loky", "n_jobs": 1, "threads": 1})
    assert sweep_main([str(spec), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 0
    assert sorted(timed) == [16, 32]
    assert "~0:05:20 in all" in capsys.readouterr().out  # 2 seeds x 40 steps at 1 s, and at 3 s: 320 s
