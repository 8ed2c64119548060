"""Populations: each member reproduces its lone run (init, batches, lr, clipping, AdamW, evaluations); a diverging
member stops alone; the stacked optimizer and per-member clipping equal torch's; one step per architecture.

Tolerance: a member's training losses equal its lone run's to 1e-5 nats (absolute) over the first 10 steps; measured
differences are up to ~1e-6 (float32 rounding: the batched matmuls and attention reduce in another order). Its
validation and test losses, computed in a plain model holding its weights, agree to the same tolerance.
"""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from helpers import make_corpus, tiny_config

from gptlab.errors import GptlabError
from gptlab.run.config import resolve_run_config
from gptlab.run.data import load_run_dataset
from gptlab.run.population import Population, check_population
from gptlab.run.population_cache import StepCache
from gptlab.run.population_optim import StackedAdamW, clip_per_member, max_norms
from gptlab.run.trainer import Trainer, make_optimizer

TOL = 1e-5  # nats; see the module docstring
pytestmark = pytest.mark.filterwarnings("ignore:There is a performance drop")  # vmap's attention fallback on CPU


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("population") / "corpus.txt")


def run_configs(corpus, members, **train):
    """Bound run configs, one per (seed, lr) or (seed, lr, its own train settings) in `members`, and their dataset."""
    base = tiny_config(corpus, **{"max_iters": 10, "log_interval": 1, "eval_interval": 5, **train})
    base["data"]["test_fraction"] = 0.05
    cfgs = [resolve_run_config({**base, "seed": m[0],
                                "train": {**base["train"], "lr": m[1], "min_lr": m[1] / 10, **(m[2] if len(m) > 2 else {})}})
            for m in members]
    dataset = load_run_dataset(cfgs[0].data)
    return [c.bind_vocab(dataset.tokenizer.vocab_size) for c in cfgs], dataset


def lone(cfg, dataset):
    trainer = Trainer(cfg, dataset, torch.device("cpu"))
    return trainer, trainer.run()


def assert_rows_match(rows, lone_rows):
    assert [r["step"] for r in rows] == [r["step"] for r in lone_rows]
    for mine, theirs in zip(rows, lone_rows):
        for key in ("train_loss", "val_loss", "grad_norm"):
            if theirs[key] is None:
                assert mine[key] is None
            else:
                assert mine[key] == pytest.approx(theirs[key], abs=TOL), (mine["step"], key)
        assert mine["lr"] == theirs["lr"] and mine["tokens"] == theirs["tokens"]


def test_members_reproduce_their_lone_runs_and_a_diverging_member_stops_alone(corpus):
    # Seeds 0 and 1 train; seed 2's lr of 1e3 sends its loss to inf/NaN within a few steps.
    cfgs, dataset = run_configs(corpus, [(0, 3e-3), (1, 1e-3), (2, 1e3)])
    population = Population(cfgs, dataset, torch.device("cpu"), run_ids=["a", "b", "c"])
    outcomes = population.run()
    for k in (0, 1):
        trainer, outcome = lone(cfgs[k], dataset)
        assert outcomes[k] == outcome and outcome.status == "ok"
        member = population.members[k]
        assert len(member.rows) == 10
        assert_rows_match(member.rows, trainer.rows)
        assert member.best_step == trainer.best_step == 10
        assert member.best_test_loss == pytest.approx(trainer.best_test_loss, abs=TOL)
        assert [b["tokens"] for b in member.best_test_blocks] == [b["tokens"] for b in trainer.best_test_blocks]
    diverged = population.members[2]
    assert outcomes[2].status == "diverged" and outcomes[2].diverged_step is not None
    assert diverged.rows[-1]["step"] == outcomes[2].diverged_step  # recorded at the row of its first non-finite loss
    assert not math.isfinite(diverged.rows[-1]["train_loss"])
    assert diverged.rows[0]["train_loss"] == pytest.approx(lone(cfgs[2], dataset)[0].rows[0]["train_loss"], abs=TOL)
    # Frozen at that step: its parameters stopped moving while the others went on.
    assert not bool(population.active[2]) and bool(population.active[:2].all())


def test_a_member_differs_from_another_only_by_what_its_config_says(corpus):
    # Same seed, two lrs: the same init and first batch, so the same first loss; then they part. The second
    # also has its own schedule, warmup, weight decay and clipping, and follows its lone run through them.
    own = {"schedule": "wsd", "cooldown_fraction": 0.5, "warmup_iters": 1, "weight_decay": 0.0, "grad_clip": 0.0}
    cfgs, dataset = run_configs(corpus, [(0, 3e-3), (0, 1e-4, own)], max_iters=4)
    population = Population(cfgs, dataset, torch.device("cpu"))
    population.run()
    first, second = ([r["train_loss"] for r in m.rows] for m in population.members)
    assert first[0] == pytest.approx(second[0], abs=TOL)
    assert abs(first[2] - second[2]) > 1e-3
    trainer, _ = lone(cfgs[1], dataset)
    assert_rows_match(population.members[1].rows, trainer.rows)


def test_dropout_gives_each_member_its_own_masks(corpus):
    # Documented limit: the masks are the member's own, not its lone run's draws (docs/GPU.md).
    cfgs, dataset = run_configs(corpus, [(0, 3e-3), (0, 3e-3)], max_iters=2)
    cfgs = [dataclasses.replace(c, model=dataclasses.replace(c.model, dropout=0.3)) for c in cfgs]
    population = Population(cfgs, dataset, torch.device("cpu"))
    population.run()
    first, second = ([r["train_loss"] for r in m.rows] for m in population.members)
    assert all(math.isfinite(v) for v in first + second)
    assert first[0] != second[0]  # same weights and batch, other masks


def test_stacked_adamw_equals_torch_adamw_per_member_with_its_own_lr_and_decay():
    torch.manual_seed(0)
    lrs, decays = [1e-2, 3e-4], [0.1, 0.0]
    models = [torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3)) for _ in lrs]
    stacked = [torch.stack([p.detach().clone() for p in ps]) for ps in zip(*(m.parameters() for m in models))]
    alone = [torch.optim.AdamW([{"params": [p for p in m.parameters() if p.dim() >= 2], "weight_decay": wd},
                                {"params": [p for p in m.parameters() if p.dim() < 2], "weight_decay": 0.0}],
                               lr=lr, betas=(0.9, 0.99), fused=True) for m, lr, wd in zip(models, lrs, decays)]
    opt = StackedAdamW(stacked, [p.dim() >= 3 for p in stacked], torch.tensor(decays), (0.9, 0.99))
    for _ in range(5):
        for model in models:
            for p in model.parameters():
                p.grad = torch.randn_like(p)
        for s, ps in zip(stacked, zip(*(m.parameters() for m in models))):
            s.grad = torch.stack([p.grad for p in ps])
        for single in alone:
            single.step()
        opt.step(torch.tensor(lrs), torch.tensor([True, True]))
    for s, ps in zip(stacked, zip(*(m.parameters() for m in models))):
        torch.testing.assert_close(s, torch.stack([p.detach() for p in ps]), rtol=1e-6, atol=1e-7)


def test_stacked_adamw_leaves_a_masked_member_untouched():
    params = [torch.zeros(2, 3)]
    params[0].grad = torch.ones(2, 3)
    opt = StackedAdamW(params, [True], torch.tensor([0.1, 0.1]))
    opt.step(torch.tensor([1e-2, 1e-2]), torch.tensor([True, False]))
    assert params[0][0].abs().min() > 0 and params[0][1].abs().max() == 0
    assert opt.exp_avg_sq[0][1].abs().max() == 0 and opt.steps.tolist() == [1.0, 0.0]


def test_clipping_is_per_member_and_equals_clip_grad_norm():
    torch.manual_seed(1)
    grads = [torch.randn(3, 5, 4) * 3, torch.randn(3, 5)]
    expected = []
    for k, limit in enumerate([1.0, 0.0, 100.0]):
        alone = [g[k].clone().requires_grad_() for g in grads]
        for a in alone:
            a.grad = a.detach().clone()
        norm = torch.nn.utils.clip_grad_norm_(alone, limit if limit > 0 else math.inf)
        expected.append((norm, [a.grad for a in alone]))
    grads[1][2, 0] = math.nan  # a third member's non-finite gradient must not reach the first two
    norms = clip_per_member(grads, max_norms([1.0, 0.0, 100.0], torch.device("cpu")))
    for k in (0, 1):
        assert norms[k] == pytest.approx(float(expected[k][0]), rel=1e-6)
        for g, e in zip(grads, expected[k][1]):
            torch.testing.assert_close(g[k], e)
    assert math.isnan(norms[2])


def test_the_lone_run_optimizer_groups_are_the_populations(corpus):
    cfgs, dataset = run_configs(corpus, [(0, 3e-3)])
    population = Population(cfgs, dataset, torch.device("cpu"))
    lone_opt = make_optimizer(Trainer(cfgs[0], dataset, torch.device("cpu")).model, cfgs[0].train, torch.device("cpu"))
    decayed = sum(p.numel() for p in lone_opt.param_groups[0]["params"])
    assert sum(p[0].numel() for p, d in zip(population.optimizer.params, population.optimizer.decay) if d) == decayed


def test_members_that_cannot_share_a_step_are_refused(corpus):
    cfgs, _ = run_configs(corpus, [(0, 3e-3), (1, 3e-3)])
    wider = dataclasses.replace(cfgs[1], model=dataclasses.replace(cfgs[1].model, n_embd=64))
    with pytest.raises(GptlabError, match="only runs of one architecture"):
        check_population([cfgs[0], wider])
    longer = dataclasses.replace(cfgs[1], train=dataclasses.replace(cfgs[1].train, max_iters=20))
    with pytest.raises(GptlabError, match="train.max_iters 20 differs"):
        check_population([cfgs[0], longer])
    with pytest.raises(GptlabError, match="at least one"):
        check_population([])


def test_one_step_per_architecture_per_worker(corpus):
    built = []

    def fake_compiler(fn):
        built.append(fn)
        return fn

    cache = StepCache(compiler=fake_compiler)
    cfgs, dataset = run_configs(corpus, [(0, 3e-3), (1, 1e-3)])
    cpu = torch.device("cpu")
    first = Population(cfgs, dataset, cpu, cache=cache)
    second = Population(cfgs[::-1], dataset, cpu, cache=cache)  # other seeds and lrs, the same shapes
    assert first.step_fn is second.step_fn and cache.builds == 1 and built == []  # compile off on CPU
    wider = [dataclasses.replace(c, model=dataclasses.replace(c.model, n_embd=64)) for c in cfgs]
    assert Population(wider, dataset, cpu, cache=cache).step_fn is not first.step_fn and cache.builds == 2
    compiled = [dataclasses.replace(c, train=dataclasses.replace(c.train, compile=True)) for c in cfgs]
    one = Population(compiled, dataset, cpu, cache=cache)
    two = Population(compiled, dataset, cpu, cache=cache)
    assert one.step_fn is two.step_fn and len(built) == 1 and cache.builds == 3
    one.train_step(0)
    two.train_step(0)
    assert one.step_fn.calls == 2 and cache.compile_s() > 0


def test_a_member_finishes_alone_and_a_stopped_population_resumes(corpus):
    # Stopped at step 5 (its evaluation done, where a lone run's checkpoint is taken): member 1 handed to a lone
    # Trainer, and the whole population resumed from its members' lone-run states, both finish as never stopped.
    cfgs, dataset = run_configs(corpus, [(0, 3e-3), (1, 1e-3)])
    population = Population(cfgs, dataset, torch.device("cpu"))
    assert population.run(stop_at=5) == [None, None]
    states = [population.member_trainer_state(k) for k in range(2)]
    reference, _ = lone(cfgs[1], dataset)
    alone = Trainer(cfgs[1], dataset, torch.device("cpu"))
    alone.load_state_dict(states[1])
    assert alone.run().status == "ok"
    assert_rows_match(alone.rows, reference.rows)
    resumed = Population(cfgs, dataset, torch.device("cpu"))
    resumed.resume([population.member_trainer_state(k) for k in range(2)])  # fresh: the lone run appended to its rows
    assert [o.status for o in resumed.run()] == ["ok", "ok"]
    assert_rows_match(resumed.members[1].rows, reference.rows)
    assert resumed.members[1].best_step == 10
    with pytest.raises(GptlabError, match="one state per member"):
        resumed.resume(states[:1])
