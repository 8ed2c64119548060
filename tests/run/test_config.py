"""`RunConfig`: resolved once, derived by dotted keys (`with_settings`) under the checks of `resolve_run_config`,
and fit to cross every boundary as is (frozen, hashable, pickled to a worker)."""
from __future__ import annotations

import copy
import pickle

import pytest

from gptlab.errors import GptlabError
from gptlab.executors.base import Task
from gptlab.run.config import resolve_run_config, set_dotted

BASE = {"model": {"n_layer": 2, "n_head": 2, "n_embd": 32}, "train": {"max_iters": 100, "lr": 2e-3}}


def _with(raw: dict, settings: dict) -> dict:
    """`raw` with dotted settings set, the old way (a dict round trip)."""
    out = copy.deepcopy(raw)
    for dotted, value in settings.items():
        set_dotted(out, dotted, value)
    return out


@pytest.mark.parametrize("settings", [
    {"train.max_iters": "1e3", "seed": 3},  # YAML 1.1 reads 1e3 as a string: the number meant
    {"model.activation": "relu", "train.lr": 1, "data.test_fraction": 0.05},
    {"train.schedule": "wsd", "train.lr_decay_iters": None, "train.warmup_iters": 10},
])
def test_with_settings_equals_resolving_the_dict_with_the_settings_set(settings):
    derived = resolve_run_config(BASE).with_settings(settings)
    assert derived == resolve_run_config(_with(BASE, settings))
    assert derived.run_hash() == resolve_run_config(_with(BASE, settings)).run_hash()


@pytest.mark.parametrize("settings", [
    {"train.lrr": 1e-3},  # unknown key: the closest named
    {"foo.bar": 1},  # unknown section
    {"train.min_lr": "x", "train.batch_size": "y"},  # two bad values (neither in base): the first given is named,
    {"train.batch_size": "y", "train.min_lr": "x"},  # as a grid cell's levels are
    {"train.max_iters": 10**9},  # beyond its limit
    {"train.schedule": "wsd", "train.max_iters": 2},  # valid alone, impossible together
    {"model.vocab_size": 100},  # set from the dataset
    {"seed": -1},
])
def test_with_settings_refuses_what_resolution_refuses_with_the_same_words(settings):
    with pytest.raises(GptlabError) as resolved:
        resolve_run_config(_with(BASE, settings))
    with pytest.raises(GptlabError) as derived:
        resolve_run_config(BASE).with_settings(settings)
    assert str(derived.value) == str(resolved.value)


def test_with_settings_leaves_the_original_as_it_was():
    base = resolve_run_config(BASE)
    before = base.to_dict()
    assert base.with_settings({"train.lr": 1e-2}).train.lr == 1e-2
    assert base.to_dict() == before and base.train.lr == 2e-3


def test_a_run_config_is_hashable_and_crosses_to_a_worker_as_is():
    config = resolve_run_config(BASE).with_settings({"seed": 7})
    task = Task("r_s7_x", config, "/tmp/r", 1)
    back = pickle.loads(pickle.dumps(task, protocol=5))  # as dask ships a task; loky and SLURM pickle it too
    assert back == task and back.config == config and hash(back.config) == hash(config)
    assert back.config.run_hash() == config.run_hash()
    with pytest.raises(AttributeError):  # frozen: no worker edits the config it was given
        config.seed = 8  # type: ignore[misc]


@pytest.mark.parametrize("section, key, value, message", [
    ("train", "cuda_graphs", float("nan"), "train.cuda_graphs must be bool, got nan (float)"),
    ("train", "compile", float("inf"), "train.compile must be bool or null, got inf (float)"),
    ("model", "norm", "inf", "model.norm: unknown"),  # a name, read as one (the registry's refusal), not a number
    ("train", "lr", "nan", "train.lr must be a finite number"),  # a numeric field still refuses it as a number
])
def test_a_non_finite_value_is_judged_by_the_fields_type(section, key, value, message):
    with pytest.raises(GptlabError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_run_config({section: {key: value}})


def test_a_name_that_spells_a_number_is_a_name():
    assert resolve_run_config({"data": {"dataset": "inf"}}).data.dataset == "inf"
