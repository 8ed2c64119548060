"""The reliability campaign's cases (issue 40): each a small sweep trained by a fake backend, or a hand-made folder."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from fakes import FakeBackend, write_spec

from gptlab.executors import Resources
from gptlab.report.load import ReportError, load_results
from gptlab.run.config import resolve_run_config
from gptlab.run.rundir import RunDir
from gptlab.sweep import execute as execute_module
from gptlab.sweep.execute import SweepOptions, execute
from gptlab.sweep.spec import load_spec

PLAN = Resources(workers=1, threads=1, device="cpu", gpus=0, reason="test")


def sweep(spec_path: Path, results: Path, monkeypatch, backend=None, **options) -> tuple[int, str, FakeBackend]:
    """Train the sweep at `spec_path` into `results` (results/NAME) with a fake backend: (exit status, output, backend)."""
    spec = load_spec(spec_path)
    backend = backend or FakeBackend(lambda config: 1.5 + 0.01 * (config.model.norm == "post")
                                     + 1e-3 * (config.seed % 7))
    monkeypatch.setattr(execute_module, "BACKENDS", {spec.executor.backend: lambda cfg: backend})
    out = io.StringIO()
    code = execute(spec, PLAN, SweepOptions(results, results.parent.parent / "reports" / spec.name, stream=out,
                                            progress_every_s=60, **options))
    return code, out.getvalue(), backend


# -- 1. a run's place records what its identity depends on: a fixed plugin's runs replace the old ones -----------

def test_runs_of_an_edited_plugin_stay_out_of_the_report_and_the_report_writes_nothing(tmp_path, corpus, monkeypatch):
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text('"""A test plugin."""\nVERSION = 1\n')
    spec = write_spec(tmp_path, corpus, seeds=2, plugins=[plugin])
    results = tmp_path / "results" / "t"
    assert sweep(spec, results, monkeypatch)[0] == 0
    plugin.write_text('"""A test plugin, fixed."""\nVERSION = 2\n')  # the documented flow: fix it, rerun the same command
    code, out, backend = sweep(spec, results, monkeypatch)
    assert code == 0 and len(backend.trained) == 4 and "4 finished run(s)" in out and "stay on disk" in out
    assert len(list((results / "runs").iterdir())) == 8
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    res = load_results(results)
    assert sorted(res.runs["run_id"]) == sorted(backend.trained)  # plugin v2's runs only, each seed once
    assert len(res.summary_check.others) == 4 and res.summary_check.text is None
    assert {p: p.read_bytes() for p in results.rglob("*") if p.is_file()} == before  # nothing written
    place = json.loads((results / "runs" / backend.trained[0] / RunDir.PLACE).read_text())
    assert set(place["sources"]) == {"plugin:my_plugin.py", str(corpus)}  # the files the run read


def test_a_report_reads_a_stale_summary_from_the_folders_and_leaves_the_file_alone(tmp_path, corpus, monkeypatch):
    from gptlab.report.sentences.notes import summary_notes

    results = tmp_path / "results" / "t"
    assert sweep(write_spec(tmp_path, corpus, seeds=2), results, monkeypatch)[0] == 0
    lines = (results / "summary.csv").read_text().splitlines()
    (results / "summary.csv").write_text("\n".join(lines[:3]) + "\n")  # cut short: 2 of 4 runs
    res = load_results(results)
    assert len(res.runs) == 4 and "2 finished run(s) missing from it" in res.summary_check.reason
    assert (results / "summary.csv").read_text().splitlines() == lines[:3]
    assert any("reads the runs from their folders" in line for line in summary_notes(res))


# -- 2. damaged place.json files: counted, never lost silently; a comment in sweep.yaml changes nothing ------------

def test_runs_without_a_place_are_counted_and_named_in_the_report(tmp_path, corpus, monkeypatch):
    from gptlab.report.sentences.notes import summary_notes

    results = tmp_path / "results" / "t"
    assert sweep(write_spec(tmp_path, corpus, seeds=2), results, monkeypatch)[0] == 0
    (results / "summary.csv").unlink()
    lost = sorted((results / "runs").iterdir())[0]
    (lost / RunDir.PLACE).unlink()
    res = load_results(results)
    assert len(res.runs) == 3 and res.summary_check.unplaced == (lost.name,)
    assert any(line.startswith("1 finished run folder(s)") and lost.name in line for line in summary_notes(res))
    assert not (results / "summary.csv").exists()


def test_a_comment_added_to_sweep_yaml_keeps_every_run_placed(tmp_path, corpus, monkeypatch):
    results = tmp_path / "results" / "t"
    assert sweep(write_spec(tmp_path, corpus, seeds=2), results, monkeypatch)[0] == 0
    (results / "summary.csv").unlink()
    text = (results / "sweep.yaml").read_text()
    (results / "sweep.yaml").write_text("# looked at on Friday\n" + text.replace("\n", "\n\n", 1))
    assert len(load_results(results).runs) == 4


def test_no_summary_and_no_place_says_how_many_finished_runs_are_there(tmp_path, corpus, monkeypatch):
    results = tmp_path / "results" / "t"
    assert sweep(write_spec(tmp_path, corpus, seeds=2), results, monkeypatch)[0] == 0
    (results / "summary.csv").unlink()
    for folder in (results / "runs").iterdir():
        (folder / RunDir.PLACE).write_text("{not json")
    with pytest.raises(ReportError, match="none of the 4 finished run folder"):
        load_results(results)


def test_sweep_yaml_records_the_files_its_runs_read(tmp_path, corpus, monkeypatch):
    results = tmp_path / "results" / "t"
    assert sweep(write_spec(tmp_path, corpus), results, monkeypatch)[0] == 0
    stored = yaml.safe_load((results / "sweep.yaml").read_text())
    assert list(stored["sources"]) == [str(corpus)] and len(stored["sources"][str(corpus)]) == 64


# -- 3. a cell with no finished run: not estimable, by every tuning method and in the report -------------------------

def _tuned_spec(folder: Path, corpus: Path, method: str) -> Path:
    return write_spec(folder, corpus, grid={"model.activation": ["gelu", "relu"]}, seeds=2,
                      train={"min_lr": 1e-5}, tune={"method": method, "space": {"train.lr": [1e-3, 2e-3, 4e-3]}})


@pytest.mark.parametrize("method", ["grid", "refine"])
def test_a_cell_whose_selection_runs_all_diverge_is_not_estimable(tmp_path, corpus, monkeypatch, method):
    from helpers import skip_figures

    from gptlab.report import write_report

    skip_figures(monkeypatch)
    spec = _tuned_spec(tmp_path, corpus, method)
    raw = yaml.safe_load(spec.read_text())
    raw["base"]["train"].pop("lr", None)
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    loss = lambda config: 1.5 + abs(config.train.lr - 2e-3) + 1e-3 * (config.seed % 7)  # noqa: E731
    relu = [r.run_id for r in load_spec(spec).runs if "relu" in r.run_id]
    results = tmp_path / "results" / "t"
    for attempt in range(2):  # the same again: a rerun neither crashes nor trains the cell
        code, out, backend = sweep(spec, results, monkeypatch, FakeBackend(loss, diverge=relu))
        assert code == 0, out
        assert "relu" in out and "no pick, so no estimation runs" in out
    assert not [r for r in backend.trained if "relu" in r]
    report = write_report(results, tmp_path / "reports" / "t")
    text = (report / "report.md").read_text()
    assert "not estimable" in text


# -- 4. an arms study without estimation runs: the report says what there is -------------------------------------

def test_an_arms_study_whose_selection_failed_is_reported_and_the_sweep_says_rerun_failed(tmp_path, corpus,
                                                                                         monkeypatch):
    from fakes import tuned_arms_spec
    from helpers import skip_figures, tiny_config

    from gptlab.report import write_report

    skip_figures(monkeypatch)
    config = tiny_config(corpus)
    config["train"].pop("lr")
    config["train"].pop("max_iters")
    raw = tuned_arms_spec("t", config, {"train.max_iters": [8, 16]})
    spec = tmp_path / "arms.yaml"
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    broken = load_spec(spec).runs[0].run_id
    results = tmp_path / "results" / "t"
    code, out, _ = sweep(spec, results, monkeypatch, FakeBackend(lambda c: 1.5, fail=[broken]),
                         write_report=write_report)
    assert code == 1 and "fix the cause and rerun with --rerun-failed" in out, out
    text = (tmp_path / "reports" / "t" / "report.md").read_text()
    assert "No estimation runs yet" in text and "rerun the sweep with --rerun-failed" in text
    from gptlab import load

    study = load(results)  # a notebook's view of the same folder, mid-sweep
    assert study.calls.empty and study.scorecard.empty
    assert len(study.runs) == 12 and set(study.runs["role"]) == {"selection"}  # every run, by role: no estimation yet


# -- 5. an lr space spanning a float's range: planned, not a traceback ------------------------------------------

def test_a_refine_space_spanning_a_floats_range_dry_runs(tmp_path, corpus, capsys):
    from gptlab.sweep_cli import main as sweep_main

    spec = write_spec(tmp_path, corpus, grid={"model.activation": ["gelu", "relu"]},
                      train={"min_lr": 1e-305, "max_iters": 4, "eval_interval": 2},
                      tune={"method": "refine", "space": {"train.lr": [1e-300, 1, 1e300]}})
    raw = yaml.safe_load(spec.read_text())
    raw["base"]["train"].pop("lr")
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    code = sweep_main([str(spec), "--dry-run", "--results-dir", str(tmp_path / "results")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.out + captured.err and "worst case" in captured.out


# -- 6. sample: a hand-made bad checkpoint is one line; another run's checkpoint is refused ------------------------

@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, corpus):
    from helpers import tiny_config

    from gptlab.run.runner import train_run

    folder = tmp_path_factory.mktemp("sampled") / "run"
    train_run(resolve_run_config(tiny_config(corpus, max_iters=4, eval_interval=2)), folder)
    return folder


@pytest.mark.parametrize("content", [[1, 2], {}, {"config": {}, "model": {}, "tokenizer": {}},
                                     "BEST"], ids=["a-list", "empty", "empty-parts", "wrong-shapes"])
def test_sample_of_a_hand_made_bad_checkpoint_is_one_line(trained_run, tmp_path, capsys, content):
    import shutil

    import torch

    from gptlab.sample import main as sample_main

    folder = tmp_path / "run"
    shutil.copytree(trained_run, folder)
    if content == "BEST":  # the run's own config and tokenizer around a model of the wrong shape
        state = torch.load(folder / RunDir.BEST, weights_only=True)
        state["model"] = {k: v[..., :1] for k, v in state["model"].items()}
        content = state
    torch.save(content, folder / RunDir.BEST)
    assert sample_main([str(folder), "--tokens", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_foreign_architectures_checkpoint_in_a_run_folder_is_refused(trained_run, tmp_path, corpus, capsys):
    import shutil

    from helpers import tiny_config

    from gptlab.run.runner import train_run
    from gptlab.sample import main as sample_main

    other = tmp_path / "other"
    config = tiny_config(corpus, max_iters=2, eval_interval=2)
    config["model"]["activation"] = "relu"
    train_run(resolve_run_config(config), other)
    folder = tmp_path / "run"
    shutil.copytree(trained_run, folder)
    shutil.copy(other / RunDir.BEST, folder / RunDir.BEST)
    assert sample_main([str(folder), "--tokens", "5"]) == 2
    assert "does not match this run's config" in capsys.readouterr().err
    assert sample_main([str(trained_run), "--tokens", "5"]) == 0  # its own checkpoint samples


# -- 7. the lr sensitivity with its text missing: capped at the unigram loss the runs recorded ----------------------

def test_the_lr_sensitivity_is_reported_when_the_text_is_gone(tmp_path, corpus, monkeypatch):
    import shutil

    from gptlab.report.tables import compute_tables

    text = shutil.copy(corpus, tmp_path / "text.txt")
    spec = write_spec(tmp_path, Path(text), grid={"model.activation": ["gelu", "relu"]}, seeds=2,
                      train={"min_lr": 1e-5}, tune={"space": {"train.lr": [1e-3, 2e-3, 4e-3]}})
    raw = yaml.safe_load(spec.read_text())
    raw["base"]["train"].pop("lr")
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    loss = lambda config: 1.5 + abs(config.train.lr - 2e-3) * 10 + 1e-3 * (config.seed % 7)  # noqa: E731
    results = tmp_path / "results" / "t"
    assert sweep(spec, results, monkeypatch, FakeBackend(loss, extra={"unigram_val_loss": 3.25}))[0] == 0
    for folder in (results / "runs").iterdir():  # what a real run records (the fake backend writes no config)
        (folder / RunDir.CONFIG).write_text(yaml.safe_dump({"data": {"dataset": "tiny", "path": str(text)}}))
    assert load_results(results).kinds["tune"].selection_ceiling != 3.25  # from the text while it is there
    Path(text).unlink()
    res = load_results(results)
    assert res.kinds["tune"].selection_ceiling == 3.25 and "summary.json" in res.ceiling_note
    tuned = compute_tables(res).kinds["tune"].view
    assert len(tuned.sensitivity) and tuned.ceiling == 3.25


# -- 8, 9. claims files and arms: a bad one is refused in one line that names it --------------------------------

def _arms_raw(corpus: Path, **extra) -> dict:
    from helpers import tiny_config

    config = tiny_config(corpus)
    return {"name": "a", "base": {k: config[k] for k in ("model", "train", "data")},
            "arms": {"nanogpt": {}, "relu": {"model.activation": "relu"}}, "seeds": 2, **extra}


@pytest.mark.parametrize("text, words", [("", "got an empty file"), ("- relu\n- gelu\n", "got a list")])
def test_an_empty_or_list_claims_file_is_refused_as_a_claims_file(tmp_path, corpus, text, words):
    from gptlab.errors import GptlabError
    from gptlab.sweep.spec import validate_spec

    (tmp_path / "claims.yaml").write_text(text)
    with pytest.raises(GptlabError) as err:
        validate_spec(_arms_raw(corpus, claims="claims.yaml"), tmp_path / "sweep.yaml", {}, {})
    message = str(err.value)
    assert "a claims file must be a YAML mapping of arm names" in message and words in message
    assert "a sweep must be" not in message and "\n" not in message


@pytest.mark.parametrize("settings, key", [({"train.device": "cpu"}, "train.device"),
                                           ({"train.log_interval": 7}, "train.log_interval")])
def test_an_arm_that_changes_only_how_a_run_is_carried_out_is_refused(tmp_path, corpus, settings, key):
    from gptlab.errors import GptlabError
    from gptlab.sweep.spec import validate_spec

    raw = _arms_raw(corpus)
    raw["base"]["train"].pop(key.partition(".")[2])
    raw["arms"]["elsewhere"] = settings
    with pytest.raises(GptlabError) as err:
        validate_spec(raw, tmp_path / "sweep.yaml", {}, {})
    assert f"arms.elsewhere: trains what 'nanogpt' trains: it differs only in {key}" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_claim_on_the_baseline_arm_is_refused(tmp_path, corpus):
    from gptlab.errors import GptlabError
    from gptlab.sweep.spec import validate_spec

    claims = {"nanogpt": {"source": "x", "claim": "y", "direction": "better"}}
    with pytest.raises(GptlabError, match="claims.nanogpt: 'nanogpt' is the baseline"):
        validate_spec(_arms_raw(corpus, claims=claims), tmp_path / "sweep.yaml", {}, {})


# -- 10. the interrupt message says what leaves the run count open ----------------------------------------------

@pytest.mark.parametrize("seeds, words", [(2, "(tune.method refine adds selection runs as it goes)"),
                                          ({"min": 2, "max": 4, "precision": 0.01},
                                           "(adaptive seeds and tune.method refine adds selection runs as it goes)")])
def test_the_interrupt_message_of_a_refine_sweep_names_why_the_count_is_a_range(tmp_path, corpus, monkeypatch, capsys,
                                                                               seeds, words):
    import gptlab.sweep_cli as sweep_cli

    spec = write_spec(tmp_path, corpus, grid={"model.activation": ["gelu", "relu"]}, seeds=seeds,
                      train={"min_lr": 1e-5}, tune={"method": "refine", "space": {"train.lr": [1e-3, 2e-3, 4e-3]}})
    raw = yaml.safe_load(spec.read_text())
    raw["base"]["train"].pop("lr")
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_cli, "execute", interrupted)
    results = tmp_path / "results"
    (results / "t").mkdir(parents=True)
    assert sweep_cli.main([str(spec), "--results-dir", str(results), "--reports-dir", str(tmp_path / "reports")]) == 130
    err = capsys.readouterr().err
    assert "interrupted: 0 runs finished, of the " in err and words in err
    if seeds == 2:
        assert "adaptive seeds" not in err


def test_the_interrupt_message_of_a_sweep_past_its_fewest_runs_does_not_read_as_more_than_planned(tmp_path, corpus,
                                                                                                  monkeypatch, capsys):
    import gptlab.sweep_cli as sweep_cli

    spec = write_spec(tmp_path, corpus, grid={"model.activation": ["gelu", "relu"]},
                      seeds={"min": 2, "max": 4, "precision": 0.01})

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_cli, "execute", interrupted)
    monkeypatch.setattr(sweep_cli, "write_summary", lambda *args: [{}] * 6)  # 6 finished: past the fewest (4)
    results = tmp_path / "results"
    (results / "t").mkdir(parents=True)
    assert sweep_cli.main([str(spec), "--results-dir", str(results), "--reports-dir", str(tmp_path / "reports")]) == 130
    err = capsys.readouterr().err
    assert "interrupted: 6 runs finished, of the 4 to 8 the sweep trains in all (adaptive seeds)" in err
    assert "6 of 4" not in err
