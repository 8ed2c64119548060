"""Every registry entry, in every combination: builds, trains, stays causal, has its stated size.

The full product of the built-in entries (4 norms x 2 norm types x 7 activations x 5 positions
x 2 tyings = 560), one test each: a 2-block, 16-wide model is counted and checked for causality,
and a 1-block one is counted and trained for 20 steps with falling loss. About 30 ms per
combination on one thread, so the full product fits the budget and needs no covering subset.
"""
from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gptlab import REGISTRIES, GptlabError, ModelConfig, build_model
from gptlab.activations import ACTIVATIONS
from gptlab.model import Block
from gptlab.norms import make_norm
from gptlab.positions import ALiBiPosition, RotaryPosition, alibi_slopes
from gptlab.spec import load_spec
from gptlab.sweep import main as sweep_main

from conftest import REPO

ENTRIES = {
    "norm": ["pre", "post", "sandwich", "none"],
    "norm_type": ["layernorm", "rmsnorm"],
    "activation": ["gelu", "relu", "gelu_tanh", "silu", "relu2", "swiglu", "geglu"],
    "position": ["learned", "sinusoidal", "none", "rotary", "alibi"],
    "tying": ["tied", "untied"],
}
GATED = {"swiglu", "geglu"}
COMBOS = [dict(zip(ENTRIES, values)) for values in itertools.product(*ENTRIES.values())]
# n_embd 16: 8C/3 = 42.67 is not an integer, so the gated rounding rule is really exercised.
T, STEPS, BATCH = 16, 20, 16
SMALL = dict(block_size=T, n_layer=2, n_head=2, n_embd=16)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models gain nothing from threads, and on a busy machine threads make them crawl."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def batches(corpus: Path) -> dict:
    """Fixed character-level batches from the generated corpus: STEPS to train on, one to evaluate."""
    text = corpus.read_text(encoding="utf-8")
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text])
    starts = torch.randint(0, len(data) - T - 1, (STEPS + 1, BATCH), generator=torch.Generator().manual_seed(0))
    xy = [(torch.stack([data[s : s + T] for s in row]), torch.stack([data[s + 1 : s + T + 1] for s in row])) for row in starts]
    return {"vocab": len(chars), "data": data, "train": xy[:STEPS], "eval": xy[STEPS]}


def expected_params(cfg: ModelConfig) -> int:
    """Parameter count from first principles, per the rules the entries' docstrings state."""
    C, V, L, bias = cfg.n_embd, cfg.vocab_size, cfg.n_layer, cfg.bias
    one_norm = 2 * C if (cfg.norm_type == "layernorm" and bias) else C  # rmsnorm: weight only
    n_norms = {"pre": 2 * L + 1, "post": 2 * L, "sandwich": 4 * L + 1, "none": 0}[cfg.norm]
    attention = 4 * C * C + (4 * C if bias else 0)  # c_attn 3C^2 + c_proj C^2
    if cfg.activation in GATED:
        H = round(8 * C / 3)  # the 2/3 rule: c_fc C x 2H, c_proj H x C
        mlp = 3 * C * H + (2 * H + C if bias else 0)
    else:
        H = 4 * C
        mlp = 2 * C * H + (H + C if bias else 0)
    position = cfg.block_size * C if cfg.position == "learned" else 0  # all others: buffers only
    head = V * C if cfg.tying == "untied" else 0
    return V * C + position + L * (attention + mlp) + n_norms * one_norm + head


def test_built_in_entries_are_the_ones_tested_here_in_order():
    assert list(REGISTRIES) == list(ENTRIES)  # also the order of ModelConfig's axis fields and of --list
    for axis, names in ENTRIES.items():
        assert REGISTRIES[axis].names()[: len(names)] == names  # plugins may follow


def eval_loss_before_after(model, train_batches, x, y) -> tuple[float, float]:
    """Loss on (x, y) before and after AdamW steps over `train_batches`."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    with torch.no_grad():
        start = model(x, y)[1].item()
    for bx, by in train_batches:
        loss = model(bx, by)[1]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        end = model(x, y)[1].item()
    return start, end


@pytest.mark.parametrize("axes", COMBOS, ids=lambda a: "-".join(a.values()))
def test_every_combination_counts_trains_and_is_causal(axes, batches):
    V = batches["vocab"]
    torch.manual_seed(0)
    # Two blocks for the structural checks: counted and checked for causality in float64, where
    # rounding is ~1e-16 and so only a real dependence on a later token shows.
    cfg = ModelConfig(vocab_size=V, **SMALL, **axes)
    model = build_model(cfg).double().eval()
    assert model.num_params() == expected_params(cfg)
    idx = batches["eval"][0][:1].repeat(T, 1)  # (T, T): row t + 1 changes token t + 1 of row 0
    for t in range(T - 1):
        idx[t + 1, t + 1] = (idx[t + 1, t + 1] + 1) % V
    with torch.no_grad():
        logits = model(idx)[0]  # (T, T, vocab)
        prefix = model(idx[:1, :5])[0]  # a shorter sequence: position hooks slice their tables right
    for t in range(T - 1):
        assert torch.allclose(logits[t + 1, : t + 1], logits[0, : t + 1], rtol=0, atol=1e-12), f"position {t} saw {t + 1}"
        assert (logits[t + 1, t + 1] - logits[0, t + 1]).abs().max() > 1e-9
    assert torch.allclose(prefix[0], logits[0, :5], rtol=0, atol=1e-12)

    # One block for the 20 training steps, which are 95% of this test's time (half with two).
    cfg = ModelConfig(vocab_size=V, **{**SMALL, "n_layer": 1}, **axes)
    model = build_model(cfg)
    assert model.num_params() == expected_params(cfg)
    start, end = eval_loss_before_after(model, batches["train"], *batches["eval"])
    assert math.isfinite(end) and end < start - 0.15, f"loss {start:.3f} -> {end:.3f}"


@pytest.mark.parametrize("norm, norm_type, activation", list(itertools.product(ENTRIES["norm"], ENTRIES["norm_type"], ENTRIES["activation"])))
def test_parameter_counts_with_biases(norm, norm_type, activation):
    cfg = ModelConfig(vocab_size=11, **SMALL, bias=True, norm=norm, norm_type=norm_type, activation=activation)
    assert build_model(cfg).num_params() == expected_params(cfg)


def test_gated_mlp_matches_the_ungated_parameter_count_within_one_norm():
    for C in range(1, 400):
        H = ACTIVATIONS.get("swiglu").hidden_dim(C)
        assert H == round(8 * C / 3) == ACTIVATIONS.get("geglu").hidden_dim(C)
        assert 3 * C * H - 8 * C * C in ((0,) if C % 3 == 0 else (-C, C))


@pytest.mark.parametrize("name, gate", [("swiglu", F.silu), ("geglu", F.gelu)])
def test_gated_activations_gate_the_second_half_with_the_first(name, gate):
    cls = ACTIVATIONS.get(name)
    assert cls.gated
    h = torch.randn(2, 3, 10)
    assert torch.allclose(cls()(h), gate(h[..., :5]) * h[..., 5:])
    mlp = build_model(ModelConfig(**SMALL, activation=name)).transformer.h[0].mlp
    H = cls.hidden_dim(16)
    assert (mlp.c_fc.out_features, mlp.c_proj.in_features) == (2 * H, H)


def test_ungated_activations_compute_their_formulas():
    h = torch.randn(50)
    for name, expected in {"gelu_tanh": F.gelu(h, approximate="tanh"), "silu": h * torch.sigmoid(h),
                           "relu2": torch.clamp(h, min=0) ** 2}.items():
        assert not ACTIVATIONS.get(name).gated
        assert torch.allclose(ACTIVATIONS.get(name)()(h), expected, atol=1e-6)


def test_rmsnorm_scales_by_root_mean_square_and_has_no_bias():
    norm = make_norm(ModelConfig(**SMALL, norm_type="rmsnorm", bias=True))
    assert [n for n, _ in norm.named_parameters()] == ["weight"]
    x = 3.0 * torch.randn(4, 16) + 2.0
    y = norm(x)
    assert torch.allclose(y.pow(2).mean(-1), torch.ones(4), atol=1e-4)  # RMS 1 ...
    assert not torch.allclose(y.mean(-1), torch.zeros(4), atol=1e-2)  # ... but not re-centred
    assert isinstance(make_norm(ModelConfig(**SMALL)), torch.nn.LayerNorm)


@pytest.mark.parametrize("norm_type", ENTRIES["norm_type"])
def test_sandwich_normalises_each_branch_output_and_none_adds_it_raw(norm_type):
    cfg = ModelConfig(**SMALL, norm="sandwich", norm_type=norm_type)
    x = torch.randn(2, T, 16)

    class Branch(torch.nn.Module):  # stands in for attention (7h + 3) and for the MLP (adds nothing)
        def __init__(self, scale: float, shift: float) -> None:
            super().__init__()
            self.scale, self.shift = scale, shift

        def forward(self, h: torch.Tensor, pos=None) -> torch.Tensor:
            return self.scale * h + self.shift

    def block(norm: str) -> Block:
        b = Block(ModelConfig(**SMALL, norm=norm, norm_type=norm_type))
        b.attn, b.mlp = Branch(7.0, 3.0), Branch(0.0, 0.0)
        return b

    update = block("sandwich")(x, None) - x
    assert torch.allclose(update.pow(2).mean(-1), torch.ones(2, T), atol=1e-3)  # unit RMS (weight 1 at init)
    assert torch.allclose(block("none")(x, None), x + (7.0 * x + 3.0))  # the raw branch, no norm anywhere
    assert isinstance(build_model(cfg).transformer.ln_f, type(make_norm(cfg)))  # a final norm, like pre-LN
    model = build_model(ModelConfig(**SMALL, norm="none"))
    assert isinstance(model.transformer.ln_f, torch.nn.Identity)
    assert not any(isinstance(m, (torch.nn.LayerNorm, torch.nn.RMSNorm)) for m in model.modules())


def test_rotary_scores_depend_only_on_relative_position():
    torch.manual_seed(0)
    rope = RotaryPosition(ModelConfig(n_embd=32, n_head=2, block_size=24))
    L, shift = 8, 11
    q, k = torch.randn(2, 1, 2, L, 16).unbind(0)  # (B, nh, L, hs) content
    q_far, k_far = torch.randn(2, 1, 2, L + shift, 16).unbind(0)  # other tokens before it
    q_far[..., shift:, :], k_far[..., shift:, :] = q, k  # the same content, `shift` positions later

    def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        q, k = rope.rotate(q, k)
        return q @ k.transpose(-2, -1)  # (B, nh, T, T)

    near = scores(q, k)
    far = scores(q_far, k_far)[..., shift:, shift:]
    assert torch.allclose(near, far, atol=1e-4)
    assert not torch.allclose(near, q @ k.transpose(-2, -1), atol=1e-2)  # it did rotate
    assert torch.allclose(rope.rotate(q, k)[0].norm(dim=-1), q.norm(dim=-1), atol=1e-5)  # a rotation
    # Position 0 is not rotated at all; an odd head size leaves its last channel alone.
    assert torch.allclose(rope.rotate(q, k)[0][..., 0, :], q[..., 0, :])
    odd = RotaryPosition(ModelConfig(n_embd=18, n_head=2, block_size=8))
    q9 = torch.randn(1, 2, 8, 9)
    assert torch.equal(odd.rotate(q9, q9)[0][..., -1], q9[..., -1])
    assert list(rope.parameters()) == [] and rope.state_dict() == {}


@pytest.mark.parametrize("n_head, slopes", [
    (4, [1 / 4, 1 / 16, 1 / 64, 1 / 256]),
    (8, [1 / 2 ** i for i in range(1, 9)]),
    (6, [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]),  # not a power of 2: the paper's interpolation
])
def test_alibi_bias_matches_the_paper(n_head, slopes):
    assert alibi_slopes(n_head) == pytest.approx(slopes, rel=1e-12)
    alibi = ALiBiPosition(ModelConfig(n_embd=8 * n_head, n_head=n_head, block_size=12))
    bias = alibi.attn_bias(10, torch.device("cpu"), torch.float32)
    assert bias.shape == (n_head, 10, 10)
    i, j = torch.meshgrid(torch.arange(10), torch.arange(10), indexing="ij")
    for h, slope in enumerate(slopes):
        expected = -slope * (i - j).float()
        below = j <= i
        assert torch.allclose(bias[h][below], expected[below])
    assert list(alibi.parameters()) == [] and alibi.state_dict() == {}


def test_nope_still_learns_with_causal_attention(batches):
    """NoPE: no position information at all, yet the loss falls far below its start."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(vocab_size=batches["vocab"], block_size=T, n_layer=2, n_head=2, n_embd=32, position="none"))
    data = batches["data"]
    gen = torch.Generator().manual_seed(1)
    starts = [torch.randint(0, len(data) - T - 1, (BATCH,), generator=gen) for _ in range(150)]
    train = [(torch.stack([data[i : i + T] for i in s]), torch.stack([data[i + 1 : i + T + 1] for i in s])) for s in starts]
    start, end = eval_loss_before_after(model, train, *batches["eval"])
    counts = torch.tensor(list(Counter(data.tolist()).values()), dtype=torch.float64)
    unigram = -(counts / counts.sum() * (counts / counts.sum()).log()).sum().item()
    assert end < start - 1.0 and end < unigram - 0.5, (start, end, unigram)


def test_list_shows_every_entry_of_every_registry(capsys):
    assert sweep_main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for axis, registry in REGISTRIES.items():
        header = lines.index(f"model.{axis}: {registry.description}")
        listed = {}
        for line in lines[header + 1 :]:
            if not line.startswith("  "):
                break
            name, _, summary = line.strip().partition(" ")
            listed[name] = summary.strip()
        assert list(listed) == registry.names()
        assert all(listed.values()), f"{axis}: an entry without a docstring line"
    assert [line for line in lines if not line.startswith("  ")] == [f"model.{a}: {r.description}" for a, r in REGISTRIES.items()]


def test_block_accepts_every_new_placement():
    x = torch.randn(2, T, 16)
    pos = build_model(ModelConfig(**SMALL, position="rotary")).transformer.wpe
    for norm in ("sandwich", "none"):
        assert Block(ModelConfig(**SMALL, norm=norm))(x, pos).shape == x.shape


def test_plugin_example_yaml_validates_with_its_plugin_entry():
    path = REPO / "ablations" / "plugin_example.yaml"
    spec = load_spec(path)
    load_spec(path)  # the plugin is cached by path: loading twice never registers twice
    assert "scaled_sinusoidal" in REGISTRIES["position"]
    assert "scaled_sinusoidal" in spec.grid["model.position"]
    assert {r.config["model"]["position"] for r in spec.runs} == set(spec.grid["model.position"])
    assert REGISTRIES["position"].summary("scaled_sinusoidal")
    model_keys = {k: v for k, v in spec.runs[0].config["model"].items() if k != "position"}
    torch.manual_seed(0)
    plain = build_model(ModelConfig(**model_keys, position="sinusoidal"))
    torch.manual_seed(0)
    scaled = build_model(ModelConfig(**model_keys, position="scaled_sinusoidal"))
    assert scaled.num_params() == plain.num_params() + 1
    idx = torch.randint(0, 65, (2, 8))
    with torch.no_grad():
        assert torch.equal(scaled(idx)[0], plain(idx)[0])  # scale starts at 1: plain sinusoidal
        scaled.transformer.wpe.scale.fill_(2.0)
        assert not torch.allclose(scaled(idx)[0], plain(idx)[0])


def test_unknown_norm_type_names_the_key_and_the_closest_entry():
    with pytest.raises(GptlabError, match=r"model\.norm_type: unknown norm_type 'rms'.*did you mean 'rmsnorm'"):
        ModelConfig(norm_type="rms")
