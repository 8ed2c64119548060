"""The one parametric GPT: `ModelConfig` and `build_model`.

Every ablation axis is a string in `ModelConfig`, resolved through its registry; the builder
never branches on an axis's value. Module names follow GPT-2 / nanoGPT (`transformer.wte`,
`transformer.wpe`, `transformer.h`, `transformer.ln_f`, `lm_head`, `c_attn`, `c_proj`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from gptlab.errors import GptlabError
from gptlab.fields import setting
from gptlab.model.activations import ACTIVATIONS
from gptlab.model.norms import NORM_TYPES, make_norm, norm_at
from gptlab.model.placements import NORM_PLACEMENTS
from gptlab.model.positions import EMBEDDING_INIT_STD, POSITIONS, PositionEncoding
from gptlab.model.tying import TYING

# Key order is the order of `--list`; every key is also a string field of ModelConfig.
REGISTRIES = {"norm": NORM_PLACEMENTS, "norm_type": NORM_TYPES, "activation": ACTIVATIONS, "position": POSITIONS, "tying": TYING}


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of one GPT; the string fields are the ablation axes, one per REGISTRIES key."""

    vocab_size: int = setting(65, "number of token ids (set from the dataset's tokenizer in runs)")
    block_size: int = setting(64, "maximum context length in tokens")
    n_layer: int = setting(4, "number of transformer blocks")
    n_head: int = setting(4, "attention heads per block; must divide n_embd")
    n_embd: int = setting(128, "width of the residual stream")
    dropout: float = setting(0.0, "dropout on attention weights, residual branches and embeddings")
    bias: bool = setting(False, "biases in Linear and LayerNorm layers (GPT-2: true)")
    norm: str = setting("pre", "norm placement")
    norm_type: str = setting("layernorm", "what each norm computes")
    activation: str = setting("gelu", "MLP non-linearity")
    position: str = setting("learned", "position encoding")
    tying: str = setting("tied", "head/embedding weight sharing")

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise GptlabError(f"model.{name} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head != 0:
            raise GptlabError(
                f"model.n_embd ({self.n_embd}) must be divisible by model.n_head ({self.n_head})"
            )
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise GptlabError(f"model.dropout must be a number in [0, 1), got {self.dropout!r}")
        if not isinstance(self.bias, bool):
            raise GptlabError(f"model.bias must be true or false, got {self.bias!r}")
        for axis, registry in REGISTRIES.items():
            name = getattr(self, axis)
            if name not in registry:
                try:
                    registry.get(name)  # raises, naming the valid entries and the closest one
                except GptlabError as err:
                    raise GptlabError(f"model.{axis}: {err}") from None

    def to_dict(self) -> dict:
        return asdict(self)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through F.scaled_dot_product_attention."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)  # q, k, v in one matmul
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = cfg.dropout
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, pos: PositionEncoding) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q, k = pos.rotate(q, k)
        bias = pos.attn_bias(T, x.device, q.dtype)  # (nh, T, T) or None
        dropout_p = self.dropout if self.training else 0.0
        if bias is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        else:
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            mask = bias.masked_fill(~causal, float("-inf"))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C): heads side by side
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """Position-wise feed-forward: c_fc -> activation -> c_proj."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        act_cls = ACTIVATIONS.get(cfg.activation)
        hidden = act_cls.hidden_dim(cfg.n_embd)
        self.c_fc = nn.Linear(cfg.n_embd, hidden * (2 if act_cls.gated else 1), bias=cfg.bias)
        self.act = act_cls()
        self.c_proj = nn.Linear(hidden, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    """One transformer block: x = sum_norm(x + out_norm(f(in_norm(x)))) for f = attention, then MLP.

    The placement (`model.norm`) decides which norm positions hold a norm; the others are
    parameter-free identities. Pre-LN's input norms are `ln_1`/`ln_2`, as in nanoGPT.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        p = NORM_PLACEMENTS.get(cfg.norm)
        self.ln_1 = norm_at(cfg, p.in_norm)
        self.attn = CausalSelfAttention(cfg)
        self.ln_1_out, self.ln_1_sum = norm_at(cfg, p.out_norm), norm_at(cfg, p.sum_norm)
        self.ln_2 = norm_at(cfg, p.in_norm)
        self.mlp = MLP(cfg)
        self.ln_2_out, self.ln_2_sum = norm_at(cfg, p.out_norm), norm_at(cfg, p.sum_norm)

    def forward(self, x: torch.Tensor, pos: PositionEncoding) -> torch.Tensor:
        x = self.ln_1_sum(x + self.ln_1_out(self.attn(self.ln_1(x), pos)))  # (B, T, C)
        return self.ln_2_sum(x + self.ln_2_out(self.mlp(self.ln_2(x))))  # (B, T, C)


class GPT(nn.Module):
    """Decoder-only transformer language model."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
                wpe=POSITIONS.get(cfg.position)(cfg),
                drop=nn.Dropout(cfg.dropout),
                h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
                ln_f=make_norm(cfg) if NORM_PLACEMENTS.get(cfg.norm).final_norm else nn.Identity(),
            )
        )
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.apply(self._init_weights)
        # GPT-2: residual projections scaled by 1/sqrt(2 * n_layer), since each block adds two
        # branches to the residual stream and its variance would otherwise grow with depth.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))
        TYING.get(cfg.tying)(self.transformer.wte, self.lm_head)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=EMBEDDING_INIT_STD)

    def num_params(self, non_embedding: bool = False) -> int:
        """Unique parameters (a tied matrix counts once); optionally without wte and wpe."""
        n = sum(p.numel() for p in self.parameters())  # parameters() already de-duplicates
        if non_embedding:
            n -= sum(p.numel() for p in self.transformer.wte.parameters())
            n -= sum(p.numel() for p in self.transformer.wpe.parameters())
        return n

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T = idx.size()
        if T > self.config.block_size:
            raise GptlabError(f"sequence of length {T} exceeds block_size {self.config.block_size}")
        pos = self.transformer.wpe
        x = pos.embed(self.transformer.wte(idx))  # (B, T, C)
        x = self.transformer.drop(x)
        for block in self.transformer.h:
            x = block(x, pos)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)  # (B, T, vocab)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))
        return logits, loss

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Append `max_new_tokens` sampled tokens to idx (B, T), cropping context to block_size."""
        for _ in range(max_new_tokens):
            context = idx[:, -self.config.block_size :]
            logits, _ = self(context)
            logits = logits[:, -1, :] / max(temperature, 1e-8)  # (B, vocab)
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = float("-inf")
            probs = F.softmax(logits.float(), dim=-1)
            nxt = torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)
            idx = torch.cat((idx, nxt), dim=1)
        return idx


def build_model(cfg: ModelConfig) -> GPT:
    """Build the GPT that `cfg` describes; every axis resolved through its registry."""
    if not isinstance(cfg, ModelConfig):
        raise GptlabError(f"build_model expects a ModelConfig, got {type(cfg).__name__}")
    return GPT(cfg)
