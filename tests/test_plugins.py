"""Plugins that misbehave while being imported (exit, interrupt) or are not files: one line naming the plugin,
exit 2, nothing written."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from helpers import tiny_config

from gptlab.model.activations import ACTIVATIONS
from gptlab.report import load_results
from gptlab.report.load.samples import gather
from gptlab.sample import main as sample_main
from gptlab.sweep_cli import main as sweep_main


@pytest.mark.parametrize("body, message", [
    ("import sys\nsys.exit(0)\n", "called sys.exit(0) while being imported"),
    ("import sys\nsys.exit('bye')\n", "called sys.exit('bye') while being imported"),
    ("raise KeyboardInterrupt\n", "was interrupted (KeyboardInterrupt)"),
    (None, "is a directory"),
], ids=["exit-0", "exit-text", "interrupt", "directory"])
def test_a_plugin_that_exits_interrupts_or_is_a_directory(tmp_path, corpus, capsys, body, message):
    plugin = tmp_path / "bad_plugin.py"
    if body is None:
        plugin.mkdir()
    else:
        plugin.write_text(body)
    config = tiny_config(corpus)
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"name": "s", "plugins": ["bad_plugin.py"],
                                    "base": {k: config[k] for k in ("model", "train", "data")},
                                    "grid": {"model.activation": ["gelu", "relu"]}, "seeds": [0]}))
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "bad_plugin.py" in err and message in err, err
    assert not (tmp_path / "results").exists()


# -- python -m gptlab.sample imports the sweep's plugins -----------------------------------------------
PLUGIN = '''
"""Test plugin: an activation registered from outside the package."""
import torch
from gptlab.model.activations import ACTIVATIONS, Activation

@ACTIVATIONS.register("sampled_gelu")
class SampledGelu(Activation):
    """GELU, under a name only this file registers."""
    def forward(self, h):
        return torch.nn.functional.gelu(h)
'''


def forget_plugin(monkeypatch, entries: dict, path: Path) -> None:
    """This process as a new one: the activation registry without the plugin, the plugin not imported."""
    monkeypatch.setattr(ACTIVATIONS, "_entries", dict(entries))
    for name in [n for n in sys.modules if n.startswith(f"gptlab_plugin_{path.stem}_")]:
        monkeypatch.delitem(sys.modules, name)


def test_sample_and_the_report_import_the_plugins_of_the_sweep_that_trained_the_run(tmp_path, corpus, capsys,
                                                                                      monkeypatch):
    plugin = tmp_path / "sampled_act.py"
    plugin.write_text(PLUGIN)
    empty = tmp_path / "registers_nothing.py"
    empty.write_text('"""A plugin that registers nothing."""\n')
    entries = dict(ACTIVATIONS._entries)
    monkeypatch.setattr(ACTIVATIONS, "_entries", dict(entries))  # the sweep's import registers into a copy
    config = tiny_config(corpus, max_iters=10, eval_interval=10, log_interval=10, lr=2e-2, min_lr=1e-3)  # learns
    spec = {"name": "plug", "description": "a run with a plugin activation", "plugins": ["sampled_act.py"],
            "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"model.activation": ["sampled_gelu"]}, "seeds": 1,
            "executor": {"backend": "loky", "n_jobs": 2, "threads": 1}}  # the suite's other sweeps' pool: no restart
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    monkeypatch.setattr("gptlab.report.write_report", lambda *a, **k: tmp_path)  # its samples are checked below
    assert sweep_main([str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results"),
                       "--reports-dir", str(tmp_path / "reports")]) == 0
    results = tmp_path / "results" / "plug"
    assert yaml.safe_load((results / "sweep.yaml").read_text())["plugins"] == [str(plugin.resolve())]
    (run,) = (results / "runs").iterdir()
    monkeypatch.chdir(results)  # not the sweep's folder: the plugin is found from sweep.yaml

    forget_plugin(monkeypatch, entries, plugin)
    capsys.readouterr()
    assert sample_main([str(run), "--tokens", "12", "--prompt", "The"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("The") and len(text) > len("The")
    assert "sampled_gelu" in ACTIVATIONS.names()

    # --plugin names them instead: a plugin that does not register the activation leaves it unknown
    forget_plugin(monkeypatch, entries, plugin)
    assert sample_main([str(run), "--tokens", "12", "--plugin", str(empty)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "sampled_gelu" in err and "\n" not in err

    # the report samples a checkpoint whose run kept no sample.txt: with the plugin, not "(sampling failed ...)"
    forget_plugin(monkeypatch, entries, plugin)
    (run / "sample.txt").unlink()
    (cell, run_id, sample), = gather(load_results(results)).shown
    assert run_id == run.name and sample and not sample.startswith("(")


def test_sample_names_the_sweep_yaml_when_a_plugin_it_lists_is_gone(tmp_path, capsys):
    run = tmp_path / "results" / "gone" / "runs" / "r_s0_0123456789"
    run.mkdir(parents=True)
    (tmp_path / "results" / "gone" / "sweep.yaml").write_text(yaml.safe_dump({"plugins": [str(tmp_path / "moved.py")]}))
    assert sample_main([str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert "moved.py" in err and "sweep.yaml" in err and "--plugin" in err and "\n" not in err
