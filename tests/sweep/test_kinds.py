"""gptlab/sweep/kinds.py (and its report side, gptlab/report/kinds.py): a kind of sweep is one file and one
registration line; here one comes from outside the package, adds a YAML key, a stage, summary rows and a report
section, and resumes like the shipped `worth:` (whose own behaviour: tests/sweep/test_worth.py)."""
from __future__ import annotations

import csv

import pytest
import yaml
from helpers import skip_figures, tiny_config

from gptlab.report.kinds import REPORT_KINDS
from gptlab.sweep.kinds import SWEEP_KINDS, known_runs, planned_count
from gptlab.sweep.spec import load_spec
from gptlab.sweep_cli import main as sweep_main

PLUGIN = '''
"""Test plugin: `probe: {seeds: N}` trains the baseline cell again at N more seeds once the sweep is done."""
from dataclasses import dataclass

from gptlab.errors import GptlabError
from gptlab.report.document.blocks import Heading, KindSection, Para, Table
from gptlab.report.kinds import REPORT_KINDS
from gptlab.run.identity import run_sources
from gptlab.sweep.kinds import SWEEP_KINDS
from gptlab.sweep.planners import Stage, SweepKind
from gptlab.sweep.tuning import TunedRun


@dataclass(frozen=True)
class Probe:
    seeds: int

    def to_dict(self):
        return {"seeds": self.seeds}


def probe_runs(spec):
    base = next(r for r in spec.runs if r.factors == spec.baseline)
    runs = []
    for seed in range(100, 100 + spec.kinds["probe"].seeds):
        config = base.config.with_settings({"seed": seed})
        digest = config.run_hash(run_sources(spec.plugins, config.data.path))
        runs.append(TunedRun(f"probe_s{seed}_{digest}", base.cell, seed, config, (), "probe"))
    return runs


class ProbeStages:
    def __init__(self, base, spec):
        self.base, self.spec, self.planned, self.state = base, spec, tuple(spec.runs), "base"

    def next_stage(self, finished):
        if self.state == "base":
            stage = self.base.next_stage(finished)
            if stage is not None:
                self.planned = stage.planned
                return stage
            self.state = "done"
            runs = tuple(probe_runs(self.spec))
            return Stage("probe: the baseline again", runs, self.planned + runs, tag="probe")
        return None

    def preview(self):
        return self.base.preview()


@SWEEP_KINDS.register("probe")
class ProbeKind(SweepKind):
    def check(self, raw, spec):
        if not isinstance(raw, dict) or set(raw) != {"seeds"} or not isinstance(raw["seeds"], int) or raw["seeds"] < 1:
            raise GptlabError(f"probe: must be {{seeds: N}} with N >= 1, got {raw!r}")
        return Probe(raw["seeds"])

    def stages(self, planner, spec, out):
        return ProbeStages(planner, spec)

    def known_runs(self, spec, runs):
        return probe_runs(spec)

    def planned_count(self, spec):
        return spec.kinds["probe"].seeds


@REPORT_KINDS.register("probe")
class ProbeReport:
    def section(self, res, tables, words, figures):
        rows = res.other_roles[res.other_roles["role"] == "probe"]
        table = rows[["run_id", "seed", "best_val_loss"]].reset_index(drop=True)
        return KindSection((Heading("Probe runs"), Para(f"{len(table)} probe run(s) of the baseline."), Table(table)),
                           {"probe": table})
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The plugin file; what it registers goes into copies of the registries, gone after the test."""
    monkeypatch.setattr(SWEEP_KINDS, "_entries", dict(SWEEP_KINDS._entries))
    monkeypatch.setattr(REPORT_KINDS, "_entries", dict(REPORT_KINDS._entries))
    path = tmp_path / "probe_kind.py"
    path.write_text(PLUGIN)
    return path


def _spec(tmp_path, corpus, plugins, **extra) -> str:
    config = tiny_config(corpus, max_iters=20, eval_interval=10, log_interval=5)
    raw = {"name": "probed", "plugins": plugins, "base": {k: config[k] for k in ("model", "train", "data")},
           "grid": {"model.activation": ["gelu", "relu"]}, "seeds": 1, "executor": {"backend": "loky", "n_jobs": 2},
           **extra}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def test_a_kinds_key_is_refused_without_its_plugin_and_checked_by_it(plugin, tmp_path, corpus, capsys):
    assert sweep_main([_spec(tmp_path, corpus, [], probe={"seeds": 2}), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'probe'" in err and "worth" in err.split("valid top-level keys:")[1]  # the shipped kind listed
    assert sweep_main([_spec(tmp_path, corpus, [plugin.name], probe={"seeds": 0}), "--dry-run"]) == 2
    assert "probe: must be {seeds: N} with N >= 1, got {'seeds': 0}" in capsys.readouterr().err
    spec = load_spec(_spec(tmp_path, corpus, [plugin.name], probe={"seeds": 2}))
    assert spec.kinds["probe"].seeds == 2 and spec.to_dict()["probe"] == {"seeds": 2} and spec.worth is None
    assert [r.seed for r in known_runs(spec) if r.role == "probe"] == [100, 101] and planned_count(spec) == 2


@pytest.mark.slow  # a real sweep: its worker pool takes seconds to start
def test_a_plugin_kind_adds_a_stage_summary_rows_and_a_report_section_and_resumes(plugin, tmp_path, corpus, monkeypatch,
                                                                                 capsys):
    skip_figures(monkeypatch)
    args = [_spec(tmp_path, corpus, [plugin.name], probe={"seeds": 2}), "--results-dir", str(tmp_path / "results"),
            "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main(args) == 0
    with open(tmp_path / "results" / "probed" / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    probes = [r for r in rows if r["role"] == "probe"]
    assert [r["seed"] for r in probes] == ["100", "101"] and all(r["status"] == "ok" for r in probes)
    assert len(rows) == 4  # the grid's two runs, then the kind's
    assert yaml.safe_load((tmp_path / "results" / "probed" / "sweep.yaml").read_text())["probe"] == {"seeds": 2}
    report = (tmp_path / "reports" / "probed" / "report.md").read_text()
    assert report.index("## Summary") < report.index("## Probe runs") and "2 probe run(s) of the baseline." in report
    with open(tmp_path / "reports" / "probed" / "tables" / "probe.csv") as f:
        assert [r["seed"] for r in csv.DictReader(f)] == ["100", "101"]
    capsys.readouterr()
    assert sweep_main(args) == 0  # rerun: every stage's runs are on disk, nothing trains
    assert "ok, best val" not in capsys.readouterr().err
