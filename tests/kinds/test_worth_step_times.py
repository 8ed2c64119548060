"""`gptlab.kinds.worth.step_times`: a step_times.csv of the same cells is kept; a damaged or foreign one is timed again."""
from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from gptlab.kinds.worth.step_times import ROUNDS, time_steps
from gptlab.run.resultsdir import ResultsDir

CPU = SimpleNamespace(train=SimpleNamespace(device="cpu"))
PLANNED = [SimpleNamespace(role="estimation", cell=(("arm", arm),), config=CPU) for arm in ("nanogpt", "relu")]


@pytest.fixture
def timed(monkeypatch, tmp_path):
    """A results folder whose steps `time_steps` times without training (every step 0.05 s)."""
    monkeypatch.setattr("gptlab.sweep.estimate.build_trainer", lambda config, stand_in=False: object())
    monkeypatch.setattr("gptlab.sweep.estimate.time_train_steps", lambda trainer, steps, warmup=1: 0.05)
    monkeypatch.setattr("gptlab.run.device.configure_process", lambda threads=None: None)  # this process's threads
    results = ResultsDir(tmp_path / "w")
    results.path.mkdir()
    return results


def _time(results: ResultsDir) -> str:
    out = io.StringIO()
    time_steps(results, PLANNED, 1, out)
    return out.getvalue()


def test_the_same_cells_timed_before_are_kept(timed):
    assert "each of 2 cells' training step" in _time(timed)
    assert len(timed.step_times(["arm"])) == 2 * ROUNDS
    assert "step times: kept" in _time(timed)


@pytest.mark.parametrize("damage", [
    lambda text: "",
    lambda text: text.replace("seconds_per_step", "seconds"),
    lambda text: text + text.split("\n", 1)[1],  # every row twice
    lambda text: text.replace("0.05,", "1e308,", 1),
    lambda text: text.replace("0.05,", "-0.05,", 1),
    lambda text: text.replace("0.05,", "nan,", 1),
], ids=["empty", "no-seconds-column", "every-row-twice", "1e308", "negative", "nan"])
def test_a_damaged_step_times_csv_is_timed_again_not_kept(timed, damage, caplog):
    _time(timed)
    path = timed.step_times_csv
    path.write_text(damage(path.read_text()))
    said = _time(timed)
    assert "kept" not in said and "each of 2 cells' training step" in said
    assert "read as not measured" in caplog.text
    assert len(timed.step_times(["arm"])) == 2 * ROUNDS  # whole again
