"""`gptlab.run.compiled`: when a run compiles and in which mode, CUDA graphs' settings refused where they cannot apply,
one compile per architecture per process (past dynamo's default limit of 8), and compiled losses equal to eager ones.

The compiled-against-eager test runs on every device this machine has: on CPU through the `aot_eager` backend
(the forward and backward graphs torch.compile traces, run by eager kernels: inductor's C++ build takes 20 s and
more a shape), on CUDA through inductor with CUDA graphs (`train.cuda_graphs`), to bf16 tolerance.
"""
from __future__ import annotations

import dataclasses
import logging

import pytest
import torch
from helpers import make_corpus, tiny_config
from torch._dynamo.utils import counters

from gptlab.errors import GptlabError
from gptlab.model import build_model
from gptlab.run import compiled as compiled_module
from gptlab.run import trainer as trainer_module
from gptlab.run.compiled import GRAPHS, compile_mode, compiled
from gptlab.run.config import TrainConfig, resolve_run_config
from gptlab.run.data import load_run_dataset
from gptlab.run.population import check_population
from gptlab.run.trainer import Trainer

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
STEPS = 8  # the first steps compared, one metrics row each
TOL = {"cpu": 1e-5, "cuda": 2e-2}  # nats: float32 on CPU; bf16 autocast on CUDA (about 3 significant digits)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("compiled") / "corpus.txt")


@pytest.fixture
def dynamo(monkeypatch):
    """A fresh dynamo cache and counters, compiling with the `eager` backend (dynamo's graphs, no code generation)."""
    monkeypatch.setattr(compiled_module, "BACKEND", "eager")
    torch._dynamo.reset()
    counters.clear()
    yield counters["stats"]
    torch._dynamo.reset()


def bound(corpus, model=None, **train):
    raw = tiny_config(corpus, **{"max_iters": STEPS, "log_interval": 1, "eval_interval": STEPS, **train})
    raw["model"].update(model or {})
    cfg = resolve_run_config(raw)
    dataset = load_run_dataset(cfg.data)
    return cfg.bind_vocab(dataset.tokenizer.vocab_size), dataset


def test_compile_mode_by_device_and_settings(caplog):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert compile_mode(TrainConfig(), cpu) is None and compile_mode(TrainConfig(), cuda) == "default"
    assert compile_mode(TrainConfig(compile=True), cpu) == "default" and compile_mode(TrainConfig(compile=False), cuda) is None
    assert compile_mode(TrainConfig(cuda_graphs=True), cuda) == GRAPHS == "reduce-overhead"
    assert compile_mode(TrainConfig(cuda_graphs=True), cpu) is None  # auto chose the CPU: not compiled by default there
    with caplog.at_level(logging.INFO, logger="gptlab.train"):
        assert compile_mode(TrainConfig(compile=True, cuda_graphs=True), cpu) == "default"
    assert "not CUDA; compiling without CUDA graphs" in caplog.text


def test_cuda_graphs_dropped_where_auto_chose_a_cpu_say_so_with_compile_unset_too(caplog):
    """docs/GPU.md's promise: `train.cuda_graphs` dropped with a log line where `auto` chose no CUDA device, whether
    the step compiles (`compile: true`) or not (`compile` unset: eager off CUDA)."""
    with caplog.at_level(logging.INFO, logger="gptlab.train"):
        assert compile_mode(TrainConfig(cuda_graphs=True), torch.device("cpu")) is None
    assert caplog.messages == ["train.cuda_graphs: the device is cpu, not CUDA; training without CUDA graphs (and "
                               "eager: train.compile is unset, which compiles on CUDA only)"]


@pytest.mark.parametrize("train", [{"cuda_graphs": True, "compile": False}, {"cuda_graphs": True, "device": "cpu"},
                                   {"cuda_graphs": True, "device": "mps"}])
def test_cuda_graphs_refused_where_they_cannot_apply(train):
    with pytest.raises(GptlabError, match="train.cuda_graphs captures the compiled step on a CUDA device"):
        resolve_run_config({"train": train})
    for device in ("auto", "cuda", "cuda:1"):  # a sweep may be checked on a machine without the GPUs it runs on
        assert resolve_run_config({"train": {"cuda_graphs": True, "device": device}}).train.cuda_graphs


def test_cuda_graphs_off_keeps_run_ids_and_on_keeps_a_run_out_of_populations():
    from gptlab.executors.populations import population_key

    plain, graphs = resolve_run_config({}), resolve_run_config({"train": {"cuda_graphs": True}})
    assert resolve_run_config({"train": {"cuda_graphs": False}}).run_hash() == plain.run_hash() != graphs.run_hash()
    assert population_key(plain, auto=False) is not None and population_key(graphs, auto=False) is None
    with pytest.raises(GptlabError, match="population member 1: train.cuda_graphs is set"):
        check_population([plain, graphs])


def test_a_worker_compiles_each_architecture_once(corpus, dynamo):
    """Runs of one architecture in one process share the graph the first compiled; another architecture adds one."""
    cfg, dataset = bound(corpus, compile=True, max_iters=2)
    for seed in (0, 1):  # the same shapes, other weights: a worker's next run
        Trainer(dataclasses.replace(cfg, seed=seed), dataset, torch.device("cpu")).run()
        assert dynamo["unique_graphs"] == 1
    other, _ = bound(corpus, {"activation": "relu"}, compile=True, max_iters=2)
    Trainer(other, dataset, torch.device("cpu")).run()
    assert dynamo["unique_graphs"] == 2


def test_more_architectures_than_dynamos_default_limit_all_compile(corpus, dynamo):
    """Dynamo compiles 8 variants of one function by default, then runs the rest eager; the scorecard has 11."""
    cfg, dataset = bound(corpus)
    x = torch.randint(0, cfg.vocab_size, (2, cfg.model.block_size))
    widths = [8 * (i + 1) for i in range(10)]
    for width in widths:  # ten architectures, one process
        model = build_model(dataclasses.replace(cfg.model, n_embd=width))
        compiled(model)(x, x)[1].backward()
    assert dynamo["unique_graphs"] == len(widths)


@pytest.mark.parametrize("device", DEVICES)
def test_compiled_steps_equal_eager_ones(corpus, device, monkeypatch):
    """The first steps' training losses of a compiled run (CUDA graphs on CUDA) equal the eager run's."""
    if device == "cpu":
        monkeypatch.setattr(compiled_module, "BACKEND", "aot_eager")
    torch._dynamo.reset()
    counters.clear()
    losses = {}
    for way, train in {"eager": {"compile": False}, "compiled": {"compile": True, "cuda_graphs": device == "cuda"}}.items():
        cfg, dataset = bound(corpus, device=device, **train)
        trainer = Trainer(cfg, dataset, torch.device(device))
        assert trainer.graphs == (device == "cuda" and way == "compiled")
        assert trainer.run().status == "ok"
        losses[way] = [row["train_loss"] for row in trainer.rows]
        assert counters["stats"]["unique_graphs"] == (way == "compiled")  # the compiled run went through dynamo
    torch._dynamo.reset()
    assert len(losses["eager"]) == STEPS
    assert losses["compiled"] == pytest.approx(losses["eager"], abs=TOL[device])


def test_the_cuda_graphs_path_marks_each_step_and_keeps_the_eager_losses(corpus, dynamo, monkeypatch):
    """The trainer's CUDA-graphs path, run on CPU (its mode handed to a backend that ignores it): each training step
    is marked as a new one before its forward (a replay may overwrite the last one's outputs), and the losses it
    records are the eager run's."""
    marks = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(len(marks)))
    monkeypatch.setattr(trainer_module, "compile_mode", lambda train, device: GRAPHS if train.compile else None)
    losses = {}
    for compile in (False, True):
        cfg, dataset = bound(corpus, compile=compile)
        trainer = Trainer(cfg, dataset, torch.device("cpu"))
        assert trainer.graphs == compile and trainer.run().status == "ok"
        losses[compile] = [row["train_loss"] for row in trainer.rows]
    assert len(marks) == STEPS and dynamo["unique_graphs"] == 1
    assert losses[True] == pytest.approx(losses[False], abs=TOL["cpu"])
