"""`ResultsDir`: the file names of results/NAME/ (docs/RESULTS.md's layout), its runs, and that nothing else spells them."""
from __future__ import annotations

import ast
import dataclasses
import os
from pathlib import Path

import pytest
import yaml
from helpers import REPO

from gptlab.errors import GptlabError
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir

PACKAGE = REPO / "gptlab"
# The contract (docs/RESULTS.md "Results layout", docs/CONTRACTS.md), spelled out here on purpose: a renamed file fails.
LAYOUT = {"sweep_yaml": "sweep.yaml", "summary_csv": "summary.csv", "runs_dir": "runs", "rounds_csv": "rounds.csv",
          "tuning_csv": "tuning.csv", "samples_json": "samples.json", "discussion_md": "discussion.md",
          "lock": ".lock", "lock_holder": ".lock.json"}


def _run(results: ResultsDir, run_id: str, status: str | None) -> RunDir:
    """A run folder in `status` (None: pending, no summary.json)."""
    folder = results.run(run_id)
    folder.path.mkdir(parents=True)
    if status is not None:
        folder.write_summary({"run_id": run_id, "status": status})
    return folder


def test_every_file_name_of_the_layout(tmp_path):
    results = ResultsDir(tmp_path / "quick")
    assert {key: getattr(results, key) for key in LAYOUT} == {key: tmp_path / "quick" / name
                                                              for key, name in LAYOUT.items()}
    assert results.run("r1").path == tmp_path / "quick" / "runs" / "r1" and isinstance(results.run("r1"), RunDir)
    assert results.name == "quick" and results / "notes.txt" == tmp_path / "quick" / "notes.txt"


def test_built_from_a_str_a_path_or_itself_and_path_like(tmp_path):
    built = [ResultsDir(str(tmp_path)), ResultsDir(tmp_path), ResultsDir(ResultsDir(tmp_path))]
    assert all(r == built[0] and isinstance(r.path, Path) for r in built)
    assert os.fspath(built[0]) == str(built[0]) == str(tmp_path) and Path(built[0]) == tmp_path
    with pytest.raises(dataclasses.FrozenInstanceError):
        built[0].path = tmp_path / "other"  # type: ignore[misc]


def test_run_ids_and_finished_runs(tmp_path):
    results = ResultsDir(tmp_path)
    assert results.run_ids() == [] and results.finished_runs() == []  # before the first run: no runs/ at all
    for run_id, status in [("d", "diverged"), ("a", "ok"), ("c", "failed"), ("b", None)]:
        _run(results, run_id, status)
    (results.run("e").path / RunDir.LAST).parent.mkdir(parents=True)
    (results.run("e").path / RunDir.LAST).write_bytes(b"")  # partial: a checkpoint, no summary
    (results.runs_dir / "stray.txt").write_text("not a run")
    assert results.run_ids() == ["a", "b", "c", "d", "e"]
    assert [r.path.name for r in results.finished_runs()] == ["a", "d"]  # ok and diverged are results
    assert [r.path.name for r in results.finished_runs(skip={"a"})] == ["d"]


def test_holding_finds_the_results_folder_of_a_run_folder_only(tmp_path):
    assert ResultsDir.holding(tmp_path / "quick" / "runs" / "r1") == ResultsDir(tmp_path / "quick")
    assert ResultsDir.holding(tmp_path / "train" / "abc123") is None  # a `python -m gptlab.train` run


def test_sample_without_a_sweep_needs_no_sweep_yaml(tmp_path):
    """A run folder outside results/NAME/runs/ has no sweep: no plugins, and no error (it once raised TypeError)."""
    from gptlab.sample import import_sweep_plugins

    assert import_sweep_plugins(tmp_path / "train" / "abc123") == []


def test_sample_names_the_sweep_yaml_of_a_missing_plugin(tmp_path):
    from gptlab.sample import import_sweep_plugins

    results = ResultsDir(tmp_path / "quick")
    results.path.mkdir()
    results.sweep_yaml.write_text(yaml.safe_dump({"plugins": ["no_such_plugin_module_xyz"]}))
    with pytest.raises(GptlabError, match=f"named by {results.sweep_yaml}"):
        import_sweep_plugins(results.run("r1").path)


def test_the_report_reads_results_through_it(tmp_path):
    from gptlab.report.load import load_results

    results = ResultsDir(tmp_path / "tiny")
    results.path.mkdir()
    results.sweep_yaml.write_text(yaml.safe_dump({"name": "tiny", "grid": {"model.activation": ["gelu", "relu"]}}))
    results.summary_csv.write_text("run_id,seed,model.activation,status,best_val_loss\n"
                                   "r0,0,gelu,ok,2.0\nr1,0,relu,ok,2.1\n")
    results.discussion_md.write_text("Hand-written.")
    res = load_results(results.path)
    assert res.results_dir == results and res.discussion == "Hand-written." and len(res.runs) == 2


def _joins_of_layout_names(path: Path) -> list[str]:
    """`x / "summary.csv"` and the like: a results file name joined to a path outside `ResultsDir`."""
    names = set(LAYOUT.values())
    return [f"line {node.lineno}: / {node.right.value!r}" for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
            and node.right.value in names]


def test_no_module_but_resultsdir_joins_a_results_file_name(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(d):\n    return d / 'summary.csv'\n")
    assert _joins_of_layout_names(bad) == ["line 2: / 'summary.csv'"]  # the check itself can fail
    wrong = {str(p.relative_to(PACKAGE)): hits for p in sorted(PACKAGE.rglob("*.py"))
             if p.name != "resultsdir.py" and (hits := _joins_of_layout_names(p))}
    assert not wrong, f"results/NAME/ file names are ResultsDir's (gptlab/run/resultsdir.py): {wrong}"


def test_the_gpu_slots_of_a_sweep_are_named_by_its_results_folder(tmp_path):
    from gptlab.executors.worker import _slots_dir
    from gptlab.run.resultsdir import ResultsDir
    from gptlab.run.rundir import RunDir

    results = ResultsDir(tmp_path / "NAME")
    assert _slots_dir(results.run("r_s0_abc")) == results.gpu_slots == tmp_path / "NAME" / ".gpu_slots"
    assert _slots_dir(RunDir(tmp_path / "elsewhere" / "run")) == tmp_path / "elsewhere" / ".gpu_slots"


def test_a_sweep_removes_what_a_killed_sweep_left_of_its_own_files(tmp_path):
    """The driver writes summary.csv and each run's place.json; killed mid-write, it leaves their temp files."""
    from gptlab.run.resultsdir import ResultsDir

    results = ResultsDir(tmp_path / "NAME")
    run = results.run("r_s0_abc").path
    run.mkdir(parents=True)
    left = [results.path / ".summary.csv.k1ll3d01.tmp", run / ".place.json.k1ll3d02.tmp"]
    kept = [results.path / "summary.csv", run / ".ckpt_last.pt.w0rk3r01.tmp"]  # a worker's: its run cleans it
    for path in left + kept:
        path.write_text("x")
    assert results.remove_sweep_temp_files() == 2
    assert not any(p.exists() for p in left) and all(p.exists() for p in kept)


# -- step_times.csv: a `worth:` sweep's step timings, read back by the sweep, the report, `gptlab.load` and the export --

STEP_TIMES = ("arm,round,seconds_per_step,machine\nnanogpt,0,0.05,test CPU\nrelu,0,0.06,test CPU\n"
              "nanogpt,1,0.051,test CPU\nrelu,1,0.061,test CPU\n")


def _step_times(tmp_path: Path, content: str | bytes) -> ResultsDir:
    results = ResultsDir(tmp_path / "w")
    results.path.mkdir()
    path = results.step_times_csv
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return results


def test_step_times_are_read_back_typed_and_an_absent_file_is_none_unlogged(tmp_path, caplog):
    rows = _step_times(tmp_path, STEP_TIMES).step_times(["arm"])
    assert rows is not None and len(rows) == 4
    assert rows[0] == {"arm": "nanogpt", "round": 0, "seconds_per_step": 0.05, "machine": "test CPU"}
    assert ResultsDir(tmp_path / "none").step_times(["arm"]) is None and not caplog.text


@pytest.mark.parametrize("content, reason", [
    ("", "empty"),
    (b"\x00\xff\xfe binary", "not UTF-8 text"),
    ("arm,round,machine\nnanogpt,0,test CPU\n", "no seconds_per_step column"),
    ("dataset,round,seconds_per_step,machine\nx,0,0.05,test CPU\n", "no arm column"),  # another sweep's file
    ("arm,round,seconds_per_step,machine\n", "no rows"),
    (STEP_TIMES + STEP_TIMES.split("\n", 1)[1], "round 0 of arm=nanogpt twice"),  # every row twice: twice the rounds
    (STEP_TIMES.replace("0.06,", "1e308,"), "line 3: seconds_per_step '1e308'"),
    (STEP_TIMES.replace("0.06,", "inf,"), "seconds_per_step 'inf'"),
    (STEP_TIMES.replace("0.06,", "nan,"), "seconds_per_step 'nan'"),
    (STEP_TIMES.replace("0.06,", "-0.06,"), "seconds_per_step '-0.06'"),
    (STEP_TIMES.replace("0.06,", "0,"), "seconds_per_step '0'"),
    (STEP_TIMES.replace("0.06,", "fast,"), "seconds_per_step 'fast'"),
    (STEP_TIMES.replace("relu,0,", "relu,0.5,"), "line 3: round '0.5'"),
    (STEP_TIMES + "relu,2\n", "line 6: no seconds_per_step"),  # a row cut short
    (STEP_TIMES + "relu,2,0.06,test CPU,0.07\n", "line 6: more values than columns"),
])
def test_a_damaged_or_foreign_step_times_csv_reads_as_not_measured(tmp_path, caplog, content, reason):
    results = _step_times(tmp_path, content)
    assert results.step_times(["arm"]) is None
    said = caplog.text
    assert f"{results.step_times_csv}: " in said and reason in said and "read as not measured" in said, said
    assert said.strip().count("\n") == 0  # one line
