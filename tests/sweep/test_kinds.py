"""gptlab/sweep/kinds.py (and its report side, gptlab/report/kinds.py): a kind of sweep is one file (a plugin's) or one
folder (the shipped ones, gptlab/kinds/), registered the same way; here one comes from outside the package, adds a
YAML key, a stage, summary rows and a report section, and resumes like the shipped `worth:` (whose own behaviour:
tests/kinds/test_worth.py); and the shipped kinds are built as it is, with no hook it lacks."""
from __future__ import annotations

import csv

import pytest
import yaml
from helpers import REPO, skip_figures, tiny_config

from gptlab.errors import GptlabError
from gptlab.report.kinds import REPORT_KINDS
from gptlab.sweep.kinds import SWEEP_KINDS, known_runs, planned_count
from gptlab.sweep.spec import load_spec
from gptlab.sweep_cli import main as sweep_main

PLUGIN = REPO / "ablations" / "plugins" / "recheck_kind.py"  # the shipped example kind


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The plugin file; what it registers goes into copies of the registries, gone after the test."""
    monkeypatch.setattr(SWEEP_KINDS, "_entries", dict(SWEEP_KINDS._entries))
    monkeypatch.setattr(REPORT_KINDS, "_entries", dict(REPORT_KINDS._entries))
    path = tmp_path / PLUGIN.name  # outside the package, beside the sweep's YAML
    path.write_text(PLUGIN.read_text())
    return path


def _spec(tmp_path, corpus, plugins, **extra) -> str:
    config = tiny_config(corpus, max_iters=20, eval_interval=10, log_interval=5)
    raw = {"name": "rechecked", "plugins": plugins, "base": {k: config[k] for k in ("model", "train", "data")},
           "grid": {"model.activation": ["gelu", "relu"]}, "seeds": 1, "executor": {"backend": "loky", "n_jobs": 2},
           **extra}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def test_a_kinds_key_is_refused_without_its_plugin_and_checked_by_it(plugin, tmp_path, corpus, capsys):
    assert sweep_main([_spec(tmp_path, corpus, [], recheck={"seeds": 2}), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'recheck'" in err and "worth" in err.split("valid top-level keys:")[1]  # the shipped kind listed
    assert sweep_main([_spec(tmp_path, corpus, [plugin.name], recheck={"seeds": 0}), "--dry-run"]) == 2
    assert "recheck: must be {seeds: N} with N from 1 to 100, got {'seeds': 0}" in capsys.readouterr().err
    spec = load_spec(_spec(tmp_path, corpus, [plugin.name], recheck={"seeds": 2}))
    assert spec.kinds["recheck"].seeds == 2 and spec.to_dict()["recheck"] == {"seeds": 2} and "worth" not in spec.kinds
    assert [r.seed for r in known_runs(spec) if r.role == "recheck"] == [100, 101] and planned_count(spec) == 2
    SWEEP_KINDS.register("exclude")(SWEEP_KINDS.get("recheck"))  # a kind may not take a key that every sweep has
    assert sweep_main([_spec(tmp_path, corpus, [plugin.name], recheck={"seeds": 2}), "--dry-run"]) == 2
    assert "sweep kind 'exclude' is registered under a top-level key of every sweep" in capsys.readouterr().err


@pytest.mark.slow  # a real sweep: its worker pool takes seconds to start
def test_a_plugin_kind_adds_a_stage_summary_rows_and_a_report_section_and_resumes(plugin, tmp_path, corpus, monkeypatch,
                                                                                 capsys):
    skip_figures(monkeypatch)
    args = [_spec(tmp_path, corpus, [plugin.name], recheck={"seeds": 2}), "--results-dir", str(tmp_path / "results"),
            "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main(args) == 0
    with open(tmp_path / "results" / "rechecked" / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    again = [r for r in rows if r["role"] == "recheck"]
    assert [r["seed"] for r in again] == ["100", "101"] and all(r["status"] == "ok" for r in again)
    assert len(rows) == 4  # the grid's two runs, then the kind's
    assert yaml.safe_load((tmp_path / "results" / "rechecked" / "sweep.yaml").read_text())["recheck"] == {"seeds": 2}
    report = (tmp_path / "reports" / "rechecked" / "report.md").read_text()
    assert report.index("## Summary") < report.index("## Recheck") and "at 2 fresh seed(s)" in report
    with open(tmp_path / "reports" / "rechecked" / "tables" / "recheck.csv") as f:
        assert [r["seed"] for r in csv.DictReader(f)] == ["100", "101"]
    capsys.readouterr()
    assert sweep_main(args) == 0  # rerun: every stage's runs are on disk, nothing trains
    assert "ok, best val" not in capsys.readouterr().err


def test_the_adaptive_rule_of_seeds_is_a_kind_and_a_count_joins_none(tmp_path, corpus):
    import io

    from gptlab.kinds.seeds.report import AdaptiveReport
    from gptlab.kinds.seeds.stages import AdaptiveSeeds, AdaptiveSeedsKind
    from gptlab.stats.adaptive_seeds import SeedRule
    from gptlab.sweep.execute import planner_for
    from gptlab.sweep.planners import FixedSeeds

    # first in the registry: its rounds replace the one stage before a tuner's or worth's stages wrap them
    assert list(SWEEP_KINDS)[0] == "seeds" and SWEEP_KINDS.get("seeds") is AdaptiveSeedsKind
    assert REPORT_KINDS.get("seeds") is AdaptiveReport
    rule = {"min": 2, "max": 3, "precision": 0.01}
    adaptive = load_spec(_spec(tmp_path, corpus, [], seeds=rule))
    assert adaptive.kinds["seeds"] == SeedRule(2, 3, 0.01)
    assert adaptive.seeds == [0, 1, 2] and adaptive.to_dict()["seeds"] == {**rule, "precision_for": "effects"}
    assert list(adaptive.to_dict())[:7] == ["name", "description", "plugins", "base", "grid", "seeds", "exclude"]
    assert isinstance(planner_for(adaptive, io.StringIO()), AdaptiveSeeds)
    fixed = load_spec(_spec(tmp_path, corpus, [], seeds=2))
    assert fixed.kinds == {} and fixed.to_dict()["seeds"] == [0, 1]
    assert isinstance(planner_for(fixed, io.StringIO()), FixedSeeds)


def test_scale_is_a_kind_whose_keys_are_the_specs_scale(tmp_path, corpus):
    from gptlab.kinds.scale.report import ScaleReport
    from gptlab.kinds.scale.spec import ScaleKind, ScaleSpec
    from gptlab.sweep.kinds import scale_keys

    assert SWEEP_KINDS.get("scale") is ScaleKind and REPORT_KINDS.get("scale") is ScaleReport
    grid = {"model.activation": ["gelu", "relu"], "model.norm": ["pre", "post"]}
    scaled = load_spec(_spec(tmp_path, corpus, [], grid=grid, scale=["model.norm"]))
    assert scaled.kinds == {"scale": ScaleSpec(("model.norm",))} and scale_keys(scaled) == ["model.norm"]
    assert list(scaled.to_dict())[-2:] == ["report", "scale"] and scaled.to_dict()["scale"] == ["model.norm"]
    plain = load_spec(_spec(tmp_path, corpus, [], grid=grid, scale=[]))
    assert plain.kinds == {} and scale_keys(plain) == [] and "scale" not in plain.to_dict()
    with pytest.raises(GptlabError, match="scale: names every grid factor"):
        load_spec(_spec(tmp_path, corpus, [], grid=grid, scale=["model.activation", "model.norm"]))


SHIPPED = ["seeds", "scale", "tune", "worth"]  # in the order they join a spec and wrap its planner


def _own_methods(cls: type) -> set[str]:
    """The public methods a kind's class defines itself (its overridden hooks)."""
    return {name for name, value in vars(cls).items() if callable(value) and not name.startswith("_")}


def test_the_shipped_kinds_are_built_as_the_plugin_is_and_use_no_hook_it_lacks(plugin):
    """Each shipped kind is the folder gptlab/kinds/KEY/ and registers its two sides under KEY, in the shipped order,
    from there; like the plugin's, its sides extend `SweepKind` and `ReportKind` and override only their hooks: the
    sweep and the report ask a shipped kind nothing a plugin's kind could not answer."""
    from gptlab.plugins import import_plugin
    from gptlab.report.kinds import ReportKind
    from gptlab.sweep.planners import SweepKind

    assert SWEEP_KINDS.names()[:len(SHIPPED)] == SHIPPED and REPORT_KINDS.names()[:len(SHIPPED)] == SHIPPED
    example = import_plugin(str(plugin))  # registered in the fixture's copies of the registries
    sides = [(key, SWEEP_KINDS.get(key), REPORT_KINDS.get(key)) for key in SHIPPED]
    for key, sweep_side, report_side in sides + [("recheck", example.RecheckKind, example.RecheckReport)]:
        assert issubclass(sweep_side, SweepKind) and issubclass(report_side, ReportKind), key
        assert _own_methods(sweep_side) <= _own_methods(SweepKind), (key, _own_methods(sweep_side) - _own_methods(SweepKind))
        assert _own_methods(report_side) <= _own_methods(ReportKind), (key, _own_methods(report_side) - _own_methods(ReportKind))
    for key, sweep_side, report_side in sides:
        folder = REPO / "gptlab" / "kinds" / key
        assert (folder / "__init__.py").is_file(), key
        assert {sweep_side.__module__.rsplit(".", 1)[0], report_side.__module__.rsplit(".", 1)[0]} == {f"gptlab.kinds.{key}"}
