"""Fast paths give the results of the plain way of doing the same thing.

The trainer batches by gather instead of a Python loop, keeps losses on the device instead of
calling .item() each step, evaluates many windows per forward under inference mode, and uses the
fused AdamW kernel. Each is checked against a plain implementation here (equivalence, not speed).
"""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from helpers import tiny_config

from gptlab.model import build_model
from gptlab.run.config import resolve_run_config
from gptlab.run.data import BatchSampler, load_dataset
from gptlab.run.evaluation import evaluate
from gptlab.run.runner import train_run
from gptlab.run.trainer import lr_at
from gptlab.runio import read_json
from gptlab.sweep.estimate import build_trainer, time_train_steps


def test_gather_batches_equal_a_python_loop_over_offsets():
    data = torch.arange(5000) % 97
    sampler = BatchSampler(data, block_size=16, batch_size=6, seed=3)
    for step in (0, 1, 17):
        offsets = sampler.offsets(step).tolist()
        x, y = sampler.batch(step)
        assert torch.equal(x, torch.stack([data[i: i + 16] for i in offsets]))
        assert torch.equal(y, torch.stack([data[i + 1: i + 17] for i in offsets]))


def test_batched_evaluation_equals_scoring_one_window_at_a_time(corpus):
    ds = load_dataset("tiny", str(corpus))
    cfg = dataclasses.replace(resolve_run_config(tiny_config(corpus)).model, vocab_size=ds.tokenizer.vocab_size)
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    fast = evaluate(model, ds.val, cfg.block_size, 256, torch.device("cpu"), torch.autocast("cpu", enabled=False))
    total, count, T, n = 0.0, 0, cfg.block_size, len(ds.val) - 1
    with torch.no_grad():
        for start in range(0, n, T):  # plain: each window alone; the tail window ends at the split's end
            end = min(start + T, n)
            lo = max(0, end - T)
            logits, _ = model(ds.val[lo:end][None])
            scored = end - start
            total += F.cross_entropy(logits[0, -scored:], ds.val[lo + 1: end + 1][-scored:], reduction="sum").item()
            count += scored
    assert count == n
    assert fast == pytest.approx(total / count, rel=1e-6)


def test_fused_adamw_follows_the_foreach_implementation():
    torch.manual_seed(0)
    cfg = resolve_run_config({"model": {"n_layer": 1, "n_embd": 32, "n_head": 2, "block_size": 16}}).model
    models = [build_model(dataclasses.replace(cfg, vocab_size=20)) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1, fused=fused)
            for m, fused in zip(models, (False, True))]
    idx = torch.randint(0, 20, (4, 16))
    for _ in range(10):
        for model, opt in zip(models, opts):
            _, loss = model(idx, idx.roll(-1, 1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.allclose(a, b, atol=1e-5)


def test_trainer_losses_equal_a_plain_training_loop(corpus, tmp_path):
    """The trainer (deferred host syncs, fused AdamW, buffers) against a textbook loop with .item()."""
    config = tiny_config(corpus, max_iters=30, eval_interval=30, log_interval=10)
    train_run(resolve_run_config(config), tmp_path / "run")
    rows = pd.read_csv(tmp_path / "run" / "metrics.csv").dropna(subset=["train_loss"]).to_dict("records")

    cfg = resolve_run_config(config)
    ds = load_dataset("tiny", str(corpus))
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.bind_vocab(ds.tokenizer.vocab_size).model)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.train.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg.train.lr, betas=(cfg.train.beta1, cfg.train.beta2), foreach=False)
    sampler = BatchSampler(ds.train, cfg.model.block_size, cfg.train.batch_size, cfg.seed)
    losses = []
    for step in range(30):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg.train)
        x, y = sampler.batch(step)
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    plain = [sum(losses[i: i + 10]) / 10 for i in range(0, 30, 10)]
    assert [r["train_loss"] for r in rows] == pytest.approx(plain, rel=1e-4)
    assert read_json(tmp_path / "run" / "summary.json")["final_train_loss"] == pytest.approx(plain[-1], rel=1e-4)


def test_timing_steps_never_overflows_the_loss_buffer(corpus, tmp_path):
    config = tiny_config(corpus, log_interval=2, eval_interval=4)
    trainer = build_trainer(resolve_run_config(config))
    assert time_train_steps(trainer, 10, warmup=3) > 0
    assert trainer.recent_train_loss() is None  # timed steps leave nothing for the next metrics row
