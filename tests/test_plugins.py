"""Plugins that misbehave while being imported (exit, interrupt) or are not files: one line naming the plugin,
exit 2, nothing written."""
from __future__ import annotations

import pytest
import yaml

from gptlab.sweep.cli import main as sweep_main

from helpers import tiny_config


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
