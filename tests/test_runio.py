"""`gptlab.runio`'s YAML reading: `parse_yaml` is `yaml.safe_load`, through libyaml where PyYAML has it."""
from __future__ import annotations

import pytest
import yaml

from gptlab.runio import parse_yaml, read_yaml

DOCUMENTS = [
    "train: {lr: 1e-3, min_lr: 1.0e-4, max_iters: 2000, decay: .inf, warm: -.5}\n",  # 1e-3 is a string in YAML 1.1
    "flags: [yes, no, on, off, true, False, ~, null, '']\nwhen: 2026-11-28\nport: 0o17\nhex: 0x1F\n",
    "name: t\nplugins: [/abs/plug.py]\ngrid: {model.norm: [pre, post]}\nseeds: {min: 3, max: 12, precision: 0.005}\n",
    "base: &b {n: 1}\nother: *b\ntext: |\n  two\n  lines\nunicode: \"caf\\u00e9 \\U0001F600\"\n",
    "",
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_parse_yaml_reads_what_safe_load_reads(text):
    assert parse_yaml(text) == yaml.safe_load(text)
    assert type(parse_yaml(text)) is type(yaml.safe_load(text))


@pytest.mark.parametrize("text", ["a: !!python/object/apply:os.system ['true']\n", "a: !!python/name:os.system\n"])
def test_parse_yaml_refuses_python_tags_as_safe_load_does(text):
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(text)
    with pytest.raises(yaml.YAMLError):
        parse_yaml(text)


def test_read_yaml_raises_what_its_readers_catch(tmp_path):
    broken, binary = tmp_path / "broken.yaml", tmp_path / "binary.yaml"
    broken.write_text("a: [1, 2\nb: :\n")
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(yaml.YAMLError):
        read_yaml(broken)
    with pytest.raises(UnicodeDecodeError):
        read_yaml(binary)
