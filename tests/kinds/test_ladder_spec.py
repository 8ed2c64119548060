"""The `ladder:` section (`gptlab.kinds.ladder.spec`): rungs in order of compute, each a set of run settings."""
from __future__ import annotations

import pytest

from gptlab.errors import GptlabError
from gptlab.kinds.ladder.spec import check_ladder, compute_of
from gptlab.run.config import resolve_run_config

BASE = resolve_run_config({"model": {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64},
                           "train": {"max_iters": 2000, "batch_size": 12}})
RUNGS = {"small": {"model.n_embd": 64, "model.n_head": 2, "train.max_iters": 1000},
         "medium": {"model.n_embd": 128, "model.n_head": 4, "train.max_iters": 2000},
         "large": {"model.n_embd": 192, "model.n_head": 6, "train.max_iters": 4000}}


def test_each_rung_s_compute_is_six_n_d_of_its_baseline():
    ladder = check_ladder({"rungs": RUNGS}, BASE, {"model.activation"})
    small, medium, large = ladder.rungs
    assert medium.params == 12 * 4 * 128 ** 2 and medium.tokens == 2000 * 12 * 64
    assert medium.flops == 6 * medium.params * medium.tokens == compute_of(BASE)[2]
    assert large.flops / small.flops == pytest.approx((192 / 64) ** 2 * 4)  # 36x: more than the 16x a study needs
    assert ladder.margin == 0.01 and "36x the smallest" in ladder.describe()[2]
    assert check_ladder(ladder.to_dict(), BASE, set()) == ladder  # written back, read the same


def test_tokens_per_param_derives_each_rung_s_steps():
    rungs = {k: {key: v for key, v in r.items() if key != "train.max_iters"} for k, r in RUNGS.items()}
    ladder = check_ladder({"rungs": rungs, "tokens_per_param": 20}, BASE, set())
    for rung in ladder.rungs:
        assert rung.tokens >= 20 * rung.params > rung.tokens - 12 * 64  # ceil to whole steps
    assert check_ladder(ladder.to_dict(), BASE, set()) == ladder


@pytest.mark.parametrize("raw, message", [
    ({"rungs": {"a": {"model.n_embd": 64, "model.n_head": 2}}}, "2 to 12 rung names"),
    ({"rungs": RUNGS, "extra": 1}, "unknown key 'extra'"),
    ({"rungs": {"big": RUNGS["large"], "small": RUNGS["small"]}}, "ladder.rungs.small: trains"),
    ({"rungs": {**RUNGS, "huge": {"model.activation": "relu"}}}, "which an arm or the grid sets"),
    ({"rungs": {**RUNGS, "bad": {"model.n_embdd": 256}}}, "ladder.rungs.bad"),
    ({"rungs": RUNGS, "tokens_per_param": 20}, "give one of the two"),
    ({"rungs": RUNGS, "margin": float("nan")}, "ladder.margin"),
    ({"rungs": {"a b": RUNGS["small"], "c": RUNGS["large"]}}, "a rung's name"),
])
def test_a_bad_ladder_is_one_line_naming_the_key(raw, message):
    with pytest.raises(GptlabError, match=message.replace("(", r"\(")):
        check_ladder(raw, BASE, {"model.activation"})
