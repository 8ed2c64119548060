"""Every registry entry, whatever registered it: builds, trains, stays causal, has its stated size.

The generic checks are parametrized over `REGISTRIES` as they stand when the tests are
collected, so a newly registered entry (built-in, or a plugin imported by then) is tested
without touching this file:

- `check_entry`, once per (axis, entry) with the other axes at their defaults: forward shape
  and finite loss, finite gradients for every parameter, causality, determinism given the seed,
  no state shared between two builds, the parameter count its entries declare, and a loss that
  falls over 20 training steps;
- `check_combination`, over a pairwise covering set of the registries' product (every two
  entries of different axes meet in some combination): causality and parameter count.

The tests after those check one named entry's own math (rotary, ALiBi, gated MLPs, RMSNorm,
the built-ins' documented parameter counts) and may name entries.
"""
from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import fields
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from helpers import REPO

from gptlab import REGISTRIES, GptlabError, ModelConfig, build_model
from gptlab.kinds.tune.kind import TUNERS
from gptlab.model import Block
from gptlab.model.activations import ACTIVATIONS, Activation
from gptlab.model.norms import make_norm
from gptlab.model.positions import ALiBiPosition, RotaryPosition, alibi_slopes
from gptlab.run.corpora import DATASETS
from gptlab.run.schedules import SCHEDULES
from gptlab.run.tokenizers import TOKENIZERS
from gptlab.sweep.kinds import SWEEP_KINDS
from gptlab.sweep.spec import load_spec
from gptlab.sweep_cli import main as sweep_main

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

# The built-in entries, in registration order; only the entry-specific tests below use this.
BUILT_IN = {
    "norm": ["pre", "post", "sandwich", "none"],
    "norm_type": ["layernorm", "rmsnorm"],
    "activation": ["gelu", "relu", "gelu_tanh", "silu", "relu2", "swiglu", "geglu"],
    "position": ["learned", "sinusoidal", "none", "rotary", "alibi"],
    "tying": ["tied", "untied"],
}
GATED = {"swiglu", "geglu"}
# n_embd 16: 8C/3 = 42.67 is not an integer, so the gated rounding rule is really exercised.
T, STEPS, BATCH = 16, 20, 16
SMALL = dict(block_size=T, n_layer=2, n_head=2, n_embd=16)


def pairwise_combinations(axes: dict[str, list[str]]) -> list[dict[str, str]]:
    """A small set of combinations in which every two values of different axes meet (greedy, deterministic)."""
    names = list(axes)
    todo = [frozenset({(a, x), (b, y)}) for a, b in itertools.combinations(names, 2) for x in axes[a] for y in axes[b]]
    uncovered = set(todo)
    combos = []
    while uncovered:
        combo = dict(next(p for p in todo if p in uncovered))  # start from the first pair not met yet
        for c in names:
            if c not in combo:  # then the value of each other axis that meets the most new pairs
                combo[c] = max(axes[c], key=lambda v: sum(frozenset({(c, v), e}) in uncovered for e in combo.items()))
        combos.append({c: combo[c] for c in names})
        uncovered -= {frozenset({(a, combo[a]), (b, combo[b])}) for a, b in itertools.combinations(names, 2)}
    return combos


# Evaluated at collection time: whatever is registered by then is tested.
ENTRY_CASES = [(axis, name) for axis, registry in REGISTRIES.items() for name in registry.names()]
COMBOS = pairwise_combinations({axis: registry.names() for axis, registry in REGISTRIES.items()})


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


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def declared_params(cfg: ModelConfig) -> int:
    """Parameter count composed from what each entry declares, for any registered entry.

    The placement's norm positions, each norm's own size, the activation's `hidden_dim`, `gated`
    and own parameters, the position module's own parameters and whether the tying entry leaves
    the head a matrix of its own: the builder must add up to exactly this.
    """
    C, V, L, bias = cfg.n_embd, cfg.vocab_size, cfg.n_layer, cfg.bias
    placement = REGISTRIES["norm"].get(cfg.norm)
    n_norms = 2 * L * (placement.in_norm + placement.out_norm + placement.sum_norm) + placement.final_norm
    one_norm = n_params(REGISTRIES["norm_type"].get(cfg.norm_type)(cfg))
    act = REGISTRIES["activation"].get(cfg.activation)
    H = act.hidden_dim(C)
    fc_out = H * (2 if act.gated else 1)  # c_fc C x H, or C x 2H for a gated entry; c_proj H x C
    mlp = C * fc_out + H * C + (fc_out + C if bias else 0) + n_params(act())
    attention = 4 * C * C + (4 * C if bias else 0)  # c_attn 3C^2 + c_proj C^2
    position = n_params(REGISTRIES["position"].get(cfg.position)(cfg))
    wte, head = nn.Embedding(V, C), nn.Linear(C, V, bias=False)
    REGISTRIES["tying"].get(cfg.tying)(wte, head)
    head_params = n_params(nn.ModuleList([wte, head])) - V * C
    return V * C + position + L * (attention + mlp) + n_norms * one_norm + head_params


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


def check_causal(model, row: torch.Tensor) -> None:
    """Changing token t + 1 changes no logit at positions <= t (and does change position t + 1).

    Run in float64, where rounding is ~1e-16, so only a real dependence on a later token shows.
    A shorter sequence must give the same logits as the long one's prefix.
    """
    V = model.config.vocab_size
    idx = row[None].repeat(T, 1)  # (T, T): row t + 1 changes token t + 1 of row 0
    for t in range(T - 1):
        idx[t + 1, t + 1] = (idx[t + 1, t + 1] + 1) % V
    with torch.no_grad():
        logits = model(idx)[0]  # (T, T, vocab)
        prefix = model(idx[:1, :5])[0]  # a shorter sequence: position hooks slice their tables right
    for t in range(T - 1):
        assert torch.allclose(logits[t + 1, : t + 1], logits[0, : t + 1], rtol=0, atol=1e-12), f"position {t} saw {t + 1}"
        assert (logits[t + 1, t + 1] - logits[0, t + 1]).abs().max() > 1e-9, f"position {t + 1} ignored its own token"
    assert torch.allclose(prefix[0], logits[0, :5], rtol=0, atol=1e-12)


def check_entry(axis: str, name: str, batches: dict) -> None:
    """Everything any entry of any axis must satisfy, with the other axes at their defaults."""
    V = batches["vocab"]
    x, y = batches["eval"]
    assert not isinstance(REGISTRIES[axis].get(name), nn.Module), f"{axis} '{name}' is an instance, not a factory"
    cfg = ModelConfig(vocab_size=V, **SMALL, **{axis: name})

    # Deterministic given the seed, and the seed matters; two builds share no module or parameter.
    torch.manual_seed(0)
    model = build_model(cfg)
    torch.manual_seed(0)
    again = build_model(cfg)
    torch.manual_seed(1)
    other = build_model(cfg)
    sd, sd_again, sd_other = model.state_dict(), again.state_dict(), other.state_dict()
    assert list(sd) == list(sd_again) and all(torch.equal(sd[k], sd_again[k]) for k in sd)
    assert not all(torch.equal(sd[k], sd_other[k]) for k in sd)
    assert not {id(m) for m in model.modules()} & {id(m) for m in again.modules()}
    assert not {p.data_ptr() for p in model.parameters()} & {p.data_ptr() for p in again.parameters()}
    assert model.num_params() == declared_params(cfg)

    # Forward: (B, T, vocab) logits and a finite loss, the same for the same seed.
    logits, loss = model(x, y)
    assert logits.shape == (BATCH, T, V)
    assert torch.isfinite(logits).all() and math.isfinite(loss.item())
    assert torch.equal(logits, again(x, y)[0])

    # Backward: a finite gradient for every trainable parameter (none left unused).
    loss.backward()
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    assert trainable
    for pname, p in trainable:
        assert p.grad is not None, f"{pname} got no gradient"
        assert torch.isfinite(p.grad).all(), f"{pname} has a non-finite gradient"

    check_causal(model.double().eval(), x[0])

    # One block for 20 training steps (most of this check's time): the loss must fall.
    cfg = ModelConfig(vocab_size=V, **{**SMALL, "n_layer": 1}, **{axis: name})
    torch.manual_seed(0)
    model = build_model(cfg)
    assert model.num_params() == declared_params(cfg)
    start, end = eval_loss_before_after(model, batches["train"], x, y)
    assert math.isfinite(end) and end < start - 0.15, f"loss {start:.3f} -> {end:.3f}"


def check_combination(axes: dict[str, str], batches: dict) -> None:
    """Entries of different axes compose: the declared size, finite loss, still causal."""
    cfg = ModelConfig(vocab_size=batches["vocab"], **SMALL, **axes)
    torch.manual_seed(0)
    model = build_model(cfg)
    assert model.num_params() == declared_params(cfg)
    x, y = batches["eval"]
    with torch.no_grad():
        assert math.isfinite(model(x, y)[1].item())
    check_causal(model.double().eval(), x[0])


@pytest.mark.parametrize("axis, name", ENTRY_CASES, ids=[f"{a}={n}" for a, n in ENTRY_CASES])
def test_every_registered_entry_builds_trains_and_is_causal(axis, name, batches):
    check_entry(axis, name, batches)


@pytest.mark.parametrize("axes", COMBOS, ids=["-".join(c.values()) for c in COMBOS])
def test_registered_entries_combine(axes, batches):
    check_combination(axes, batches)


def test_the_generic_checks_cover_every_registry_and_every_pair_of_entries():
    collected = {axis: [n for a, n in ENTRY_CASES if a == axis] for axis in REGISTRIES}
    for axis, names in BUILT_IN.items():
        assert collected[axis][: len(names)] == names  # plugins imported by then may follow
    for a, b in itertools.combinations(collected, 2):
        met = {(c[a], c[b]) for c in COMBOS}
        assert met == set(itertools.product(collected[a], collected[b])), (a, b)
    assert len(COMBOS) < math.prod(len(names) for names in collected.values()) / 5


def test_a_newly_registered_entry_gets_the_generic_checks(batches):
    """Register an activation here: the same checks run on it, and they catch a broken one."""

    class Softsign(Activation):
        """Softsign x / (1 + |x|): registered only for this test."""

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            return F.softsign(h)

    class LooksAhead(Activation):
        """Adds the next position's hidden state: not causal, so the generic checks must fail it."""

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            return h + h.roll(-1, dims=1)  # (B, T, hidden)

    good, broken = "test_only_softsign", "test_only_looks_ahead"
    assert good not in ACTIVATIONS and broken not in ACTIVATIONS
    try:
        ACTIVATIONS.register(good)(Softsign)
        ACTIVATIONS.register(broken)(LooksAhead)
        assert {good, broken} <= set(REGISTRIES["activation"].names())
        check_entry("activation", good, batches)
        check_combination(
            {"norm": "post", "norm_type": "rmsnorm", "activation": good, "position": "rotary", "tying": "untied"}, batches
        )
        with pytest.raises(AssertionError, match="position 0 saw 1"):
            check_entry("activation", broken, batches)
    finally:
        ACTIVATIONS._entries.pop(good, None)
        ACTIVATIONS._entries.pop(broken, None)
    assert good not in ACTIVATIONS and broken not in ACTIVATIONS


# ---- Entry-specific checks: these name the entries whose math they pin down. ----


def test_built_in_entries_are_registered_in_order():
    # Also the order of ModelConfig's axis fields and of --list.
    axis_fields = [f.name for f in fields(ModelConfig) if f.type in (str, "str")]
    assert list(REGISTRIES) == list(BUILT_IN) == axis_fields
    for axis, names in BUILT_IN.items():
        assert REGISTRIES[axis].names()[: len(names)] == names  # plugins may follow


def documented_params(cfg: ModelConfig) -> int:
    """A built-in combination's parameter count from first principles, per the entries' docstrings."""
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


@pytest.mark.parametrize("norm, norm_type", list(itertools.product(BUILT_IN["norm"], BUILT_IN["norm_type"])))
def test_built_in_parameter_counts_match_their_docstrings(norm, norm_type):
    # The count is a sum over axes except norm x norm_type x bias, so those three go in full product.
    for bias, activation in itertools.product((False, True), BUILT_IN["activation"]):
        cfg = ModelConfig(vocab_size=11, **SMALL, bias=bias, norm=norm, norm_type=norm_type, activation=activation)
        assert build_model(cfg).num_params() == documented_params(cfg), cfg
    for position, tying in itertools.product(BUILT_IN["position"], BUILT_IN["tying"]):
        cfg = ModelConfig(vocab_size=11, **SMALL, norm=norm, norm_type=norm_type, position=position, tying=tying)
        assert build_model(cfg).num_params() == documented_params(cfg), cfg


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


@pytest.mark.parametrize("norm_type", BUILT_IN["norm_type"])
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
    assert [line for line in lines if not line.startswith("  ")] == [
        *(f"model.{a}: {r.description}" for a, r in REGISTRIES.items()), f"data.dataset: {DATASETS.description}",
        f"data.tokenizer: {TOKENIZERS.description}", f"train.schedule: {SCHEDULES.description}",
        f"top-level keys: {SWEEP_KINDS.description}", f"tune.method: {TUNERS.description}"]


@pytest.mark.parametrize("norm", REGISTRIES["norm"].names())
def test_a_block_with_rotary_positions_keeps_its_shape_under_every_placement(norm):
    x = torch.randn(2, T, 16)
    pos = build_model(ModelConfig(**SMALL, position="rotary")).transformer.wpe
    y = Block(ModelConfig(**SMALL, norm=norm))(x, pos)
    assert y.shape == x.shape and torch.isfinite(y).all()


def test_plugin_example_yaml_validates_with_its_plugin_entry():
    path = REPO / "ablations" / "plugin_example.yaml"
    spec = load_spec(path)
    load_spec(path)  # the plugin is cached by path: loading twice never registers twice
    assert "scaled_sinusoidal" in REGISTRIES["position"]
    assert "scaled_sinusoidal" in spec.grid["model.position"]
    assert {r.config.model.position for r in spec.runs} == set(spec.grid["model.position"])
    assert REGISTRIES["position"].summary("scaled_sinusoidal")
    model_keys = {k: v for k, v in spec.runs[0].config.to_dict()["model"].items() if k != "position"}
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
