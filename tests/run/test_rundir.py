"""`RunDir`'s summary: a run's summary.json read back as its `RunSummary`, and the modules that take the record."""
from __future__ import annotations

from gptlab.executors import RunResult
from gptlab.run.rundir import TYPED, RunDir, RunSummary
from gptlab.run.summary_csv import METRIC_FIELDS, TEST_FIELDS
from gptlab.statuses import STATUS_RULE
from gptlab.sweep.planners import FinishedRuns


def test_a_summary_reads_as_a_typed_record_that_gives_its_file_back(tmp_path):
    folder = RunDir(tmp_path / "r0")
    folder.path.mkdir()
    written = {"run_id": "r0", "seed": 3, "status": "ok", "status_rule": STATUS_RULE, "best_val_loss": 2.5,
               "best_step": 40, "error": None, "population": {"size": 2}, "wall_s": 1.5, "config": {"seed": 3}}
    folder.write_summary(written)
    summary = folder.summary()
    assert (summary.run_id, summary.status, summary.best_val_loss, summary.best_step, summary.wall_s) == ("r0", "ok", 2.5,
                                                                                                            40, 1.5)
    assert summary.best_test_loss is None and summary.error is None  # not in the file, and null in it: both None
    assert summary.extra == {"status_rule": STATUS_RULE, "population": {"size": 2}, "config": {"seed": 3}}
    assert summary.to_dict() == written and list(summary.to_dict()) == list(written)  # nothing lost, in the file's order
    assert RunSummary.from_mapping(written) == summary and folder.finished_summary() == summary


def test_summary_csv_the_planners_and_the_executors_read_the_record(tmp_path):
    assert set(METRIC_FIELDS + TEST_FIELDS) <= TYPED  # summary.csv's metric columns are fields (`summary_row`)
    finished = FinishedRuns(tmp_path, ({"run_id": "x", "status": "ok"}, RunSummary(run_id="y")))  # a mapping: its record
    assert [(r.run_id, r.status) for r in finished.rows] == [("x", "ok"), ("y", None)]
    assert RunResult("x", {"status": "diverged"}, 1.0).summary == RunSummary.from_mapping({"status": "diverged"})
    assert RunResult("x", RunSummary(), 1.0).status == "failed"  # no status recorded: failed, as before
