"""The equivalence margin: `report.equivalence_margin` in the sweep YAML and `--margin` on both CLIs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO, tiny_config

import gptlab.report
from calibration.synthetic import make_results
from gptlab.errors import GptlabError
from gptlab.report.__main__ import main as report_main
from gptlab.report.load import load_results
from gptlab.sweep.spec import load_spec
from gptlab.sweep_cli import main as sweep_main

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
GRID = {"model.norm": ["pre", "post"]}


def spec_with(tmp_path: Path, corpus: Path, report: str | None) -> Path:
    """A small 2-cell spec (as in test_sweep); `report` is the raw YAML text of the `report` key (None: no key)."""
    config = tiny_config(corpus)
    spec = {"name": "t", "description": "margin test", "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": GRID, "seeds": 1, "executor": {"backend": "loky", "n_jobs": 2}}
    text = yaml.safe_dump(spec, sort_keys=False) + ("" if report is None else f"report: {report}\n")
    path = tmp_path / f"sweep_{len(list(tmp_path.glob('sweep_*.yaml')))}.yaml"
    path.write_text(text)
    return path


def one_line_error(stderr: str) -> str:
    err = stderr.strip()
    assert "Traceback" not in err, err
    assert err.startswith("error: ") and "\n" not in err, err
    return err


class FakeWriteReport:
    """Stands in for `gptlab.report.write_report`, recording how it was called."""

    def __init__(self, tmp_path: Path) -> None:
        self.calls: list[tuple[tuple, dict]] = []
        self.out = tmp_path / "fake_report"

    def __call__(self, *args, **kwargs) -> Path:
        self.calls.append((args, kwargs))
        return self.out


# --- the sweep YAML ---------------------------------------------------------------------------

def test_yaml_margin_is_accepted_and_stored(tmp_path, corpus):
    spec = load_spec(spec_with(tmp_path, corpus, "{equivalence_margin: 0.02}"))
    assert spec.report.equivalence_margin == 0.02
    assert spec.to_dict()["report"] == {"equivalence_margin": 0.02}


@pytest.mark.parametrize("report", [None, "{}", ""], ids=["absent", "empty_mapping", "null"])
def test_margin_defaults_to_0_01(tmp_path, corpus, report):
    spec = load_spec(spec_with(tmp_path, corpus, report))
    assert spec.report.equivalence_margin == 0.01
    assert spec.to_dict()["report"] == {"equivalence_margin": 0.01}


def test_report_key_does_not_change_run_ids(tmp_path, corpus):
    without = load_spec(spec_with(tmp_path, corpus, None))
    with_margin = load_spec(spec_with(tmp_path, corpus, "{equivalence_margin: 0.05}"))
    assert len(without.runs) == 2
    assert [r.run_id for r in with_margin.runs] == [r.run_id for r in without.runs]
    assert [r.config for r in with_margin.runs] == [r.config for r in without.runs]


def test_unknown_key_in_report_names_it_and_the_valid_one(tmp_path, corpus):
    with pytest.raises(GptlabError) as err:
        load_spec(spec_with(tmp_path, corpus, "{margin: 0.02}"))
    message = str(err.value)
    assert "'report.margin'" in message and "equivalence_margin" in message and "\n" not in message
    assert "did you mean 'report.equivalence_margin'" in message


@pytest.mark.parametrize("report", ["5", "[0.02]", "abc"])
def test_report_that_is_not_a_mapping_is_rejected(tmp_path, corpus, report):
    with pytest.raises(GptlabError, match=r"^report: must be a mapping"):
        load_spec(spec_with(tmp_path, corpus, report))


BAD_MARGINS = ['"abc"', ".nan", "-0.01", "0", "true", ".inf", "-.inf", "[0.01]"]


@pytest.mark.parametrize("value", BAD_MARGINS)
def test_bad_yaml_margin_is_rejected_naming_the_key(tmp_path, corpus, value):
    with pytest.raises(GptlabError) as err:
        load_spec(spec_with(tmp_path, corpus, f"{{equivalence_margin: {value}}}"))
    assert str(err.value).startswith("report.equivalence_margin: must be a positive") and "\n" not in str(err.value)


def test_bad_yaml_margin_through_the_sweep_cli_is_one_line_and_writes_nothing(tmp_path, corpus, capsys):
    spec = spec_with(tmp_path, corpus, "{equivalence_margin: .nan}")
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "rep")])
    err = one_line_error(capsys.readouterr().err)
    assert code == 2 and "report.equivalence_margin" in err
    assert not (tmp_path / "results").exists() and not (tmp_path / "rep").exists()


# --- python -m gptlab.sweep --margin ----------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "-1", "abc", "0", "inf"])
def test_sweep_cli_rejects_a_bad_margin_before_anything_else(tmp_path, corpus, capsys, value):
    spec = spec_with(tmp_path, corpus, None)
    code = sweep_main([str(spec), "--margin", value, "--dry-run", "--results-dir", str(tmp_path / "results"),
                       "--reports-dir", str(tmp_path / "rep")])
    captured = capsys.readouterr()
    assert code == 2 and "--margin" in one_line_error(captured.err)
    assert captured.out == ""  # the dry run's table was never printed
    assert not (tmp_path / "results").exists() and not (tmp_path / "rep").exists()


@pytest.mark.slow
def test_sweep_cli_bad_margin_as_a_process(tmp_path, corpus):
    spec = spec_with(tmp_path, corpus, None)
    proc = subprocess.run([sys.executable, "-m", "gptlab.sweep", str(spec), "--margin", "nan", "--dry-run",
                           "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "rep")],
                          env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--margin" in one_line_error(proc.stderr) and proc.stdout == ""
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("yaml_report, cli, expected", [
    (None, [], 0.01),
    ("{equivalence_margin: 0.02}", [], 0.02),
    ("{equivalence_margin: 0.02}", ["--margin", "0.03"], 0.03),
    (None, ["--margin", "0.04"], 0.04),
], ids=["default", "yaml", "cli_overrides_yaml", "cli"])
def test_the_sweep_records_the_margin_where_its_report_reads_it(tmp_path, corpus, monkeypatch, capsys,
                                                                yaml_report, cli, expected):
    fake = FakeWriteReport(tmp_path)
    monkeypatch.setattr(gptlab.report, "write_report", fake)
    spec = spec_with(tmp_path, corpus, yaml_report)
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "rep"),
                       "--set", "train.max_iters=4", "--set", "train.eval_interval=2", *cli])
    assert code == 0, capsys.readouterr().err
    assert len(fake.calls) == 1
    args, kwargs = fake.calls[0]
    assert Path(args[0]) == tmp_path / "results" / "t" and Path(args[1]) == tmp_path / "rep" / "t"
    assert kwargs == {}  # the margin travels in sweep.yaml, not beside it
    recorded = yaml.safe_load((tmp_path / "results" / "t" / "sweep.yaml").read_text())
    assert recorded["report"] == {"equivalence_margin": expected}
    margin = load_results(args[0]).margin  # what the report's load step reads back: the margin the sweep used
    assert margin == expected and isinstance(margin, float)


# --- python -m gptlab.report --margin ---------------------------------------------------------

@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return make_results(tmp_path_factory.mktemp("margin"), GRID, 2)


@pytest.mark.parametrize("value", ["nan", "-1", "abc", "0", "inf"])
def test_report_cli_rejects_a_bad_margin_and_writes_nothing(results, tmp_path, capsys, value):
    out = tmp_path / "reports" / "x"
    code = report_main([str(results), "--out", str(out), "--margin", value])
    captured = capsys.readouterr()
    assert code == 2 and "--margin" in one_line_error(captured.err)
    assert captured.out == "" and not (tmp_path / "reports").exists()
    assert not (results.parent.parent / "reports").exists()


@pytest.mark.slow
def test_report_cli_bad_margin_as_a_process(results, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gptlab.report", str(results), "--out", str(tmp_path / "r"),
                           "--margin", "-1"], env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--margin" in one_line_error(proc.stderr) and proc.stdout == ""
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("cli, expected", [([], 0.01), (["--margin", "0.05"], 0.05), (["--margin", "1e-3"], 0.001)],
                         ids=["absent", "given", "exponent"])
def test_report_cli_passes_the_margin_and_the_load_step_resolves_it(results, tmp_path, monkeypatch, capsys, cli,
                                                                    expected):
    fake = FakeWriteReport(tmp_path)
    monkeypatch.setattr(gptlab.report, "write_report", fake)
    assert report_main([str(results), "--out", str(tmp_path / "r"), *cli]) == 0
    given = cli[1] if cli else None  # as typed: the load step checks it (`SweepSpec.with_margin`)
    assert fake.calls == [((results, tmp_path / "r"), {"margin": given})]
    assert capsys.readouterr().out.strip() == str(fake.out / "report.md")
    margin = load_results(results, margin=given).margin
    assert margin == expected and isinstance(margin, float)


def test_a_binary_sweep_file_is_one_line(tmp_path, capsys):
    spec = tmp_path / "bin.yaml"
    spec.write_bytes(b"\xc1\xff" + bytes(range(256)))
    assert sweep_main([str(spec), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 2
    err = one_line_error(capsys.readouterr().err)
    assert "not UTF-8 text" in err and str(spec) in err and not (tmp_path / "results").exists()
