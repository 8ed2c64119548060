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
