"""A results folder's sweep.yaml read back (`spec_from_results`): the spec the sweep ran, typed, whatever the schema
of the shipped studies; records kept apart; nothing planned or written; a bad file is one line naming it and the key."""
from __future__ import annotations

import sys

import pytest
import yaml
from fakes import tuned_arms_spec
from helpers import REPO, shipped_studies, tiny_config

from gptlab.errors import GptlabError
from gptlab.model.activations import ACTIVATIONS
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.summary_csv import SOURCES
from gptlab.stats.calls import DEFAULT_MARGIN
from gptlab.sweep.kinds import scale_keys
from gptlab.sweep.spec import validate_spec
from gptlab.sweep.stored import COMMAND, RECORDS, spec_from_results, unrecorded_spec


def _files(folder) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.parametrize("name", shipped_studies())
def test_every_shipped_study_reads_back_as_the_spec_its_sweep_wrote(name):
    """Older schemas included: what a file records comes back as it is; what it predates (`report:`,
    `executor.on_worker_lost`) comes back as the default the sweep had then."""
    folder = REPO / "results" / name
    stored = yaml.safe_load((folder / "sweep.yaml").read_text(encoding="utf-8"))
    before = _files(folder)
    spec = spec_from_results(folder)
    assert _files(folder) == before and spec.runs == ()  # nothing planned, nothing written
    again = spec.to_dict()
    assert {k: again[k] for k in stored if k not in RECORDS and k != "executor"} == \
        {k: v for k, v in stored.items() if k not in RECORDS and k != "executor"}
    assert stored["executor"].items() <= again["executor"].items()
    assert spec.command == stored[COMMAND] and spec.name == name
    if "report" not in stored:
        assert spec.report.equivalence_margin == DEFAULT_MARGIN


def test_the_shipped_studies_rules_come_back_typed():
    scorecard, lengths = spec_from_results(REPO / "results" / "scorecard"), spec_from_results(REPO / "results" / "lengths")
    assert scorecard.arms.baseline == "nanogpt" and scorecard.arms.claims["relu"][0].direction == "worse"
    assert (scorecard.kinds["seeds"].min, scorecard.kinds["seeds"].max) == (3, 5)
    assert scorecard.kinds["tune"].method == "refine" and scorecard.kinds["tune"].space["train.lr"][0] == 5e-4
    assert lengths.kinds["tune"].given and lengths.kinds["tune"].picked_by.startswith("the tuned study")
    assert scale_keys(lengths) == ["train.max_iters"]


def test_an_arms_sweep_reads_back_whole(tmp_path, corpus):
    """Scale keys, claims (one without a setting), the tuner and the command line: the spec the sweep validated."""
    config = tiny_config(corpus)
    config["train"].pop("lr"), config["train"].pop("max_iters")  # tuned and scaled: in neither base
    raw = tuned_arms_spec("back", config, {"train.max_iters": [8, 16]})
    spec = validate_spec(raw, tmp_path / "back.yaml", {}, {})
    folder = ResultsDir(tmp_path / "results" / "back")
    folder.path.mkdir(parents=True)
    stored = {**spec.to_dict(), SOURCES: {}, COMMAND: "python -m gptlab.sweep b.yaml"}
    folder.sweep_yaml.write_text(yaml.safe_dump(stored))  # keys sorted: the arms too, not the grid it ran
    back = spec_from_results(folder)
    assert back.to_dict() == spec.to_dict() and back.command == "python -m gptlab.sweep b.yaml"
    assert (back.arms, back.kinds.get("tune"), back.baseline) == (spec.arms, spec.kinds.get("tune"), spec.baseline)
    assert list(back.grid["arm"]) == list(spec.grid["arm"]) == ["nanogpt", "relu", "post_ln"]
    assert back.arms.claims["relu"][0].setting == "" and back.runs == () and spec.runs


def test_a_folder_without_sweep_yaml_has_no_spec_and_its_runs_give_one(tmp_path):
    assert spec_from_results(tmp_path) is None
    spec = unrecorded_spec("old", {"model.norm": ["pre", "post"]}, [0, 1])
    assert spec.baseline == {"model.norm": "pre"} and not spec.kinds and spec.report.equivalence_margin == DEFAULT_MARGIN


VALID = {"name": "t", "grid": {"model.norm": ["pre", "post"]}, "seeds": [0, 1]}


@pytest.mark.parametrize("text, key", [
    (yaml.safe_dump({**VALID, "colour": "red"}), "unknown key 'colour'"),  # a key of no schema this lab knows
    (yaml.safe_dump({**VALID, "seeds": [-1]}), "seeds:"),
    (yaml.safe_dump({**VALID, "tune": {"space": {"train.lr": [1e-3, 2e-3]}, "method": "bayes"}}), "bayes"),
    (yaml.safe_dump({"name": "t", "seeds": [0]}), "grid: is required"),
    (yaml.safe_dump({**VALID, COMMAND: ["python"]}), "command: must be the command line"),
    (yaml.safe_dump({**VALID, "base": {"train": {"lr": "fast"}}}), "train.lr"),
    ("- name\n- grid\n", "a list"),
    ("name: [t\n", "invalid YAML"),
    ("name: t\nname: u\ngrid: {model.norm: [pre, post]}\n", "name"),  # the strict loader: a key twice
], ids=["unknown-key", "bad-seed", "unknown-tuner", "no-grid", "command", "bad-base", "list", "yaml", "twice"])
def test_a_bad_sweep_yaml_is_one_line_naming_the_file_and_the_key(tmp_path, text, key):
    folder = ResultsDir(tmp_path / "results" / "t")
    folder.path.mkdir(parents=True)
    folder.sweep_yaml.write_text(text)
    with pytest.raises(GptlabError) as err:
        spec_from_results(folder)
    message = str(err.value)
    assert "\n" not in message and str(folder.sweep_yaml) in message and key in message, message


PLUGIN = '''
"""Test plugin: an activation registered from outside the package."""
import torch
from gptlab.model.activations import ACTIVATIONS, Activation

@ACTIVATIONS.register("stored_gelu")
class StoredGelu(Activation):
    def forward(self, h):
        return torch.nn.functional.gelu(h)
'''


def test_the_plugins_it_names_are_imported_as_the_sweep_imported_them(tmp_path, corpus, monkeypatch):
    plugin = tmp_path / "stored_act.py"
    plugin.write_text(PLUGIN)
    monkeypatch.setattr(ACTIVATIONS, "_entries", dict(ACTIVATIONS._entries))
    config = tiny_config(corpus)
    raw = {"name": "p", "plugins": ["stored_act.py"], "base": {k: config[k] for k in ("model", "train", "data")},
           "arms": {"nanogpt": {}, "mine": {"model.activation": "stored_gelu"}}, "seeds": 2}
    spec = validate_spec(raw, tmp_path / "p.yaml", {}, {})
    folder = ResultsDir(tmp_path / "results" / "p")
    folder.path.mkdir(parents=True)
    folder.sweep_yaml.write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False))
    for name in [n for n in sys.modules if n.startswith("gptlab_plugin_stored_act_")]:  # as a new process
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(ACTIVATIONS, "_entries", {k: v for k, v in ACTIVATIONS._entries.items() if k != "stored_gelu"})
    assert spec_from_results(folder).plugins == [str(plugin.resolve())] and "stored_gelu" in ACTIVATIONS.names()
    plugin.unlink()  # moved since the sweep ran: the file and the key that names it
    with pytest.raises(GptlabError, match=r"sweep\.yaml: plugins: the file /\S*stored_act\.py, which the sweep imported, is "
                                          r"gone; .* put it back there$"):
        spec_from_results(folder)
