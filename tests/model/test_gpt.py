"""The parametric GPT: every combination of the four classic axes, causality, exact parameter counts."""
from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch

from gptlab import GptlabError, ModelConfig, build_model
from gptlab.model import Block

CLASSIC = {"norm": ["pre", "post"], "activation": ["gelu", "relu"],
           "position": ["learned", "sinusoidal"], "tying": ["tied", "untied"]}
COMBOS = [dict(zip(CLASSIC, values)) for values in itertools.product(*CLASSIC.values())]
SMALL = dict(vocab_size=17, block_size=16, n_layer=2, n_head=2, n_embd=24)


def small(**axes) -> ModelConfig:
    return ModelConfig(**SMALL, **axes)


@pytest.mark.parametrize("axes", COMBOS, ids=lambda a: "-".join(a.values()))
def test_every_combination_trains_generates_and_is_causal(axes):
    torch.manual_seed(0)
    model = build_model(small(**axes))
    idx = torch.randint(0, 17, (3, 16))
    logits, loss = model(idx, idx.roll(-1, dims=1))
    assert logits.shape == (3, 16, 17) and torch.isfinite(loss)
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)

    model.eval()
    out = model.generate(idx[:1, :4], max_new_tokens=20, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 24) and int(out.max()) < 17  # longer than block_size: context is cropped

    with torch.no_grad():
        base, _ = model(idx)
        for t in range(15):
            changed = idx.clone()
            changed[:, t + 1] = (changed[:, t + 1] + 1) % 17
            new, _ = model(changed)
            assert torch.equal(new[:, : t + 1], base[:, : t + 1]), f"position {t} saw token {t + 1}"
            assert not torch.allclose(new[:, t + 1], base[:, t + 1])


@pytest.mark.parametrize("axes", COMBOS, ids=lambda a: "-".join(a.values()))
def test_parameter_counts_are_exact(axes):
    model = build_model(small(**axes))
    C = SMALL["n_embd"]
    untied = build_model(small(**{**axes, "tying": "untied"})).num_params()
    tied = build_model(small(**{**axes, "tying": "tied"})).num_params()
    assert untied - tied == SMALL["vocab_size"] * C
    learned = build_model(small(**{**axes, "position": "learned"})).num_params()
    sinusoidal = build_model(small(**{**axes, "position": "sinusoidal"})).num_params()
    assert learned - sinusoidal == SMALL["block_size"] * C
    # The count from first principles (bias off): per block 2 norms + attention 4C^2 + MLP 8C^2.
    n_norms = 2 * SMALL["n_layer"] + (1 if axes["norm"] == "pre" else 0)
    expected = SMALL["n_layer"] * 12 * C * C + n_norms * C + SMALL["vocab_size"] * C
    expected += SMALL["block_size"] * C if axes["position"] == "learned" else 0
    expected += SMALL["vocab_size"] * C if axes["tying"] == "untied" else 0
    assert model.num_params() == expected


def test_tied_head_and_embedding_share_one_tensor():
    tied = build_model(small(tying="tied"))
    assert tied.lm_head.weight is tied.transformer.wte.weight
    assert tied.lm_head.weight.data_ptr() == tied.transformer.wte.weight.data_ptr()
    untied = build_model(small(tying="untied"))
    assert untied.lm_head.weight.data_ptr() != untied.transformer.wte.weight.data_ptr()


def test_sinusoidal_positions_are_a_buffer_scaled_like_the_learned_table():
    model = build_model(small(position="sinusoidal"))
    assert list(model.transformer.wpe.parameters()) == []
    table = model.transformer.wpe.table
    assert table.shape == (16, 24)
    assert table.pow(2).mean().sqrt().item() == pytest.approx(0.02, rel=1e-4)
    assert "transformer.wpe.table" not in model.state_dict()


def test_post_ln_block_output_is_normalised_per_position_and_pre_ln_is_not():
    torch.manual_seed(0)
    x = 5.0 * torch.randn(2, 16, 24) + 3.0
    for norm, normalised in (("post", True), ("pre", False)):
        block = Block(small(norm=norm)).eval()
        with torch.no_grad():
            y = block(x, build_model(small()).transformer.wpe)
        mean, std = y.mean(-1), y.std(-1, unbiased=False)
        is_normalised = torch.allclose(mean, torch.zeros_like(mean), atol=1e-4) and torch.allclose(
            std, torch.ones_like(std), atol=1e-3)
        assert is_normalised == normalised, norm


def test_post_ln_has_no_final_norm_and_pre_ln_has_one():
    assert isinstance(build_model(small(norm="post")).transformer.ln_f, torch.nn.Identity)
    assert isinstance(build_model(small(norm="pre")).transformer.ln_f, torch.nn.LayerNorm)


def test_gpt2_init_scales_residual_projections():
    model = build_model(ModelConfig(n_layer=8, n_embd=256, n_head=4))
    c_proj = model.transformer.h[0].mlp.c_proj.weight.std().item()
    c_fc = model.transformer.h[0].mlp.c_fc.weight.std().item()
    assert c_fc == pytest.approx(0.02, rel=0.05)
    assert c_proj == pytest.approx(0.02 / 4, rel=0.05)  # 1/sqrt(2 * 8)


@pytest.mark.parametrize("bad, key", [
    (dict(norm="prenorm"), "model.norm"),
    (dict(activation="gleu"), "model.activation"),
    (dict(position="rope"), "model.position"),
    (dict(tying="tie"), "model.tying"),
    (dict(n_embd=130, n_head=4), "model.n_embd"),
    (dict(n_layer=0), "model.n_layer"),
    (dict(dropout=1.5), "model.dropout"),
])
def test_invalid_config_names_the_key(bad, key):
    with pytest.raises(GptlabError, match=key.replace(".", r"\.")):
        ModelConfig(**bad)


def test_unknown_activation_suggests_the_closest_name():
    with pytest.raises(GptlabError, match="did you mean 'gelu'"):
        ModelConfig(activation="gleu")


def test_sequence_longer_than_block_size_is_rejected():
    model = build_model(small())
    with pytest.raises(GptlabError, match="block_size"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_config_is_a_frozen_dataclass_with_help_on_every_field():
    fields = dataclasses.fields(ModelConfig)
    assert all(f.metadata.get("help") for f in fields)
    with pytest.raises(dataclasses.FrozenInstanceError):
        small().n_layer = 3


def _nanogpt_state_dict(V: int, T: int, C: int, L: int, bias: bool, seed: int = 0) -> dict:
    """A state_dict with nanoGPT's `GPT` key names and shapes (public facts of its model.py), random values."""
    g = torch.Generator().manual_seed(seed)

    def t(*shape):
        return torch.randn(*shape, generator=g) * 0.1

    sd = {"transformer.wte.weight": t(V, C), "transformer.wpe.weight": t(T, C)}
    for i in range(L):
        h = f"transformer.h.{i}."
        shapes = {"ln_1": (C,), "attn.c_attn": (3 * C, C), "attn.c_proj": (C, C), "ln_2": (C,),
                  "mlp.c_fc": (4 * C, C), "mlp.c_proj": (C, 4 * C)}
        for name, shape in shapes.items():
            sd[h + name + ".weight"] = 1.0 + t(*shape) if name.startswith("ln") else t(*shape)
            if bias:
                sd[h + name + ".bias"] = t(shape[0])
    sd["transformer.ln_f.weight"] = 1.0 + t(C)
    if bias:
        sd["transformer.ln_f.bias"] = t(C)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]  # nanoGPT ties them
    return sd


def _reference_forward(sd: dict, idx: torch.Tensor, n_layer: int, n_head: int, bias: bool) -> torch.Tensor:
    """GPT-2 / nanoGPT forward pass written out with plain tensor ops (no gptlab code)."""
    import torch.nn.functional as F

    def b(name):
        return sd.get(name + ".bias") if bias else None

    def ln(x, name):
        return F.layer_norm(x, x.shape[-1:], sd[name + ".weight"], b(name), eps=1e-5)

    def lin(x, name):
        y = x @ sd[name + ".weight"].T
        return y + sd[name + ".bias"] if bias else y

    B, T = idx.shape
    x = sd["transformer.wte.weight"][idx] + sd["transformer.wpe.weight"][:T]
    C = x.shape[-1]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(n_layer):
        h = f"transformer.h.{i}."
        q, k, v = lin(ln(x, h + "ln_1"), h + "attn.c_attn").split(C, dim=2)
        q, k, v = (z.view(B, T, n_head, C // n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // n_head)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + lin(y, h + "attn.c_proj")
        m = lin(ln(x, h + "ln_2"), h + "mlp.c_fc")
        x = x + lin(0.5 * m * (1 + torch.erf(m / math.sqrt(2))), h + "mlp.c_proj")  # exact GELU
    return ln(x, "transformer.ln_f") @ sd["lm_head.weight"].T


@pytest.mark.parametrize("bias", [False, True])
def test_a_nanogpt_state_dict_loads_strictly_and_gives_the_same_logits(bias):
    V, T, C, L, H = 65, 16, 32, 2, 4
    model = build_model(ModelConfig(vocab_size=V, block_size=T, n_layer=L, n_head=H, n_embd=C, bias=bias,
                                    norm="pre", activation="gelu", position="learned", tying="tied"))
    sd = _nanogpt_state_dict(V, T, C, L, bias)
    assert list(model.state_dict()) == list(sd)  # the same keys in the same order
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == {k: tuple(v.shape) for k, v in sd.items()}
    model.load_state_dict(sd, strict=True)
    model.eval()
    idx = torch.randint(0, V, (3, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits, _ = model(idx, idx)
        expected = _reference_forward(sd, idx, L, H, bias)
    assert logits.shape == expected.shape == (3, T, V)
    torch.testing.assert_close(logits, expected, atol=2e-5, rtol=1e-4)
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()  # still tied


@pytest.mark.parametrize("compiled", [False, True])
def test_a_nanogpt_checkpoint_is_sampled_and_evaluated(tmp_path, corpus, capsys, compiled):
    from gptlab.run.data import load_dataset
    from gptlab.sample import load_nanogpt_checkpoint, main
    V = load_dataset("tiny", str(corpus)).tokenizer.vocab_size
    sd = _nanogpt_state_dict(V, 16, 32, 2, bias=True)
    prefix = "_orig_mod." if compiled else ""
    ckpt = {"model": {prefix + k: v for k, v in sd.items()}, "iter_num": 5, "best_val_loss": torch.tensor(2.0),
            "model_args": {"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 16, "bias": True,
                           "vocab_size": V, "dropout": 0.0}}
    torch.save(ckpt, tmp_path / "ckpt.pt")
    model, tokenizer, val = load_nanogpt_checkpoint(tmp_path / "ckpt.pt", data_path=str(corpus))
    idx = val[:16].view(1, 16)
    with torch.no_grad():
        torch.testing.assert_close(model(idx)[0], _reference_forward(sd, idx, 2, 4, True), atol=2e-5, rtol=1e-4)
    assert main(["--nanogpt-ckpt", str(tmp_path / "ckpt.pt"), "--data", str(corpus), "--eval", "--tokens", "30",
                 "--prompt", "The"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("val loss ") and out[0].endswith(" nats/char (full validation split)")
    assert float(out[0].split()[2]) > 0 and out[1].startswith("The")


def test_a_file_that_is_not_a_nanogpt_checkpoint_is_one_line(tmp_path, corpus, capsys):
    from gptlab.sample import main
    torch.save({"weights": torch.zeros(3)}, tmp_path / "other.pt")
    assert main(["--nanogpt-ckpt", str(tmp_path / "other.pt"), "--data", str(corpus)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --nanogpt-ckpt:") and "not a nanoGPT checkpoint" in err and "\n" not in err
