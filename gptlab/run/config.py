"""Run configuration: `TrainConfig`, `DataConfig` and the resolution of a plain dict into them.

A run config is a plain nested dict `{model: {...}, train: {...}, data: {...}, seed: int}` (that
is what the sweep sends to workers and writes as `config.yaml`). `resolve_run_config` fills in
defaults and rejects unknown keys (suggesting the closest), wrong types and impossible values,
always naming the dotted key.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import dataclass
from typing import Any

from gptlab.errors import GptlabError, closest
from gptlab.fields import setting
from gptlab.model import ModelConfig


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation and evaluation settings of one training run (nanoGPT's CPU defaults)."""

    max_iters: int = setting(2000, "number of optimizer steps")
    batch_size: int = setting(12, "sequences per optimizer step")
    lr: float = setting(1e-3, "peak learning rate")
    min_lr: float = setting(1e-4, "learning rate at the end of the cosine decay")
    warmup_iters: int = setting(100, "steps of linear warmup (0 = none)")
    lr_decay_iters: int | None = setting(None, "step where the cosine reaches min_lr (default: max_iters)")
    weight_decay: float = setting(0.1, "AdamW decoupled weight decay, applied to matrices only")
    beta1: float = setting(0.9, "AdamW beta1")
    beta2: float = setting(0.99, "AdamW beta2")
    grad_clip: float = setting(1.0, "clip the global gradient norm to this value (0 = no clipping)")
    eval_interval: int = setting(500, "evaluate on the full val split (and checkpoint) every N steps")
    eval_batch_size: int = setting(64, "validation windows per forward pass (64: fastest on CPU, benchmarks/README.md)")
    log_interval: int = setting(50, "write a metrics.csv row every N steps")
    device: str = setting("auto", "auto | cpu | cuda | cuda:N | mps")
    dtype: str = setting("auto", "auto (bf16 autocast on CUDA, else float32) | float32 | bfloat16")
    compile: bool | None = setting(None, "torch.compile the model (default: on for CUDA, off elsewhere)")

    def __post_init__(self) -> None:
        for name in ("max_iters", "batch_size", "eval_interval", "eval_batch_size", "log_interval"):
            if getattr(self, name) < 1:
                raise GptlabError(f"train.{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup_iters < 0:
            raise GptlabError(f"train.warmup_iters must be >= 0, got {self.warmup_iters}")
        if self.lr_decay_iters is not None and self.lr_decay_iters < 1:
            raise GptlabError(f"train.lr_decay_iters must be >= 1, got {self.lr_decay_iters}")
        if not self.lr > 0 or self.min_lr < 0 or self.min_lr > self.lr:
            raise GptlabError(f"need 0 <= train.min_lr <= train.lr and lr > 0, got lr={self.lr}, min_lr={self.min_lr}")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise GptlabError(f"train.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.weight_decay < 0 or self.grad_clip < 0:
            raise GptlabError("train.weight_decay and train.grad_clip must be >= 0")
        if self.dtype not in ("auto", "float32", "bfloat16"):
            raise GptlabError(f"train.dtype must be one of auto, float32, bfloat16, got {self.dtype!r}")
        if self.device != "auto" and self.device.split(":")[0] not in ("cpu", "cuda", "mps"):
            raise GptlabError(f"train.device must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}")


@dataclass(frozen=True)
class DataConfig:
    """Which corpus to train on and how it is split."""

    dataset: str = setting("tinyshakespeare", "dataset name (tinyshakespeare) or a label for data.path")
    path: str | None = setting(None, "explicit path to a UTF-8 text file (overrides the dataset lookup)")
    val_fraction: float = setting(0.1, "last fraction of the text held out for validation")

    def __post_init__(self) -> None:
        if not 0 < self.val_fraction < 1:
            raise GptlabError(f"data.val_fraction must be in (0, 1), got {self.val_fraction}")


@dataclass(frozen=True)
class RunConfig:
    """One fully resolved training run."""

    model: ModelConfig  # architecture; its vocab_size is the derived field below
    train: TrainConfig  # optimisation settings
    data: DataConfig  # corpus
    seed: int = 0  # seeds the initialisation, the batch order and dropout
    vocab_size: int | None = None  # derived, never set by hand: the tokenizer's size (bind_vocab); not hashed

    def bind_vocab(self, vocab_size: int) -> "RunConfig":
        """This config with its derived vocabulary size set (in `model` too), as a run needs it."""
        model = dataclasses.replace(self.model, vocab_size=vocab_size)
        return dataclasses.replace(self, model=model, vocab_size=vocab_size)

    def to_dict(self) -> dict[str, Any]:
        """The settings only: the derived vocab_size is left out (and so out of the run's hash)."""
        model = dataclasses.asdict(self.model)
        model.pop("vocab_size")
        return {
            "model": model,
            "train": dataclasses.asdict(self.train),
            "data": dataclasses.asdict(self.data),
            "seed": self.seed,
        }

    def run_hash(self) -> str:
        """Deterministic short hash of the resolved config (seed included)."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:10]


SECTIONS: dict[str, type] = {"model": ModelConfig, "train": TrainConfig, "data": DataConfig}
# model.vocab_size is not a user setting: it always comes from the dataset's tokenizer.
HIDDEN_KEYS = {"model.vocab_size"}


def valid_keys() -> list[str]:
    """Every dotted key a run config accepts, e.g. 'model.norm', 'train.lr', and 'seed'."""
    keys = [f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)]
    return [k for k in keys if k not in HIDDEN_KEYS] + ["seed"]


def field_help(dotted: str) -> str:
    section, name = dotted.split(".", 1)
    f = next(f for f in dataclasses.fields(SECTIONS[section]) if f.name == name)
    return f.metadata.get("help", "")


def coerce(key: str, value: Any, annotation: Any) -> Any:
    """Check `value` against a field's type hint; accept ints for floats and '1e-3' strings."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if value is None:
        if type(None) in options:
            return None
        raise GptlabError(f"{key} must not be empty (null)")
    for kind in options:
        if kind is bool and isinstance(value, bool):
            return value
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if kind is float and isinstance(value, str):
            try:  # YAML 1.1 reads 1e-3 (no dot) as a string; accept it as the number it means
                return float(value)
            except ValueError:
                pass
        if kind is str and isinstance(value, str):
            return value
    names = " or ".join("null" if k is type(None) else k.__name__ for k in options)
    raise GptlabError(f"{key} must be {names}, got {value!r} ({type(value).__name__})")


def build_section(section: str, values: dict[str, Any]) -> Any:
    """Build one section's dataclass from a dict, naming the dotted key of every problem."""
    cls = SECTIONS[section]
    if not isinstance(values, dict):
        raise GptlabError(f"{section} must be a mapping of settings, got {type(values).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f"{section}.{f.name}" not in HIDDEN_KEYS]
    kwargs = {}
    for key, value in values.items():
        dotted = f"{section}.{key}"
        if key not in names:
            if dotted in HIDDEN_KEYS:
                raise GptlabError(f"{dotted} is set from the dataset; remove it from the config")
            raise GptlabError(f"unknown key '{dotted}'{closest(key, names)}; valid {section} keys: {', '.join(names)}")
        kwargs[key] = coerce(dotted, value, hints[key])
    return cls(**kwargs)


def resolve_run_config(raw: dict[str, Any] | RunConfig) -> RunConfig:
    """Validate a plain `{model, train, data, seed}` dict (missing keys take their defaults)."""
    if isinstance(raw, RunConfig):
        return raw
    if not isinstance(raw, dict):
        raise GptlabError(f"a run config must be a mapping, got {type(raw).__name__}")
    allowed = list(SECTIONS) + ["seed"]
    for key in raw:
        if key not in allowed:
            raise GptlabError(f"unknown key '{key}'{closest(key, allowed)}; valid: {', '.join(allowed)}")
    sections = {s: build_section(s, raw.get(s) or {}) for s in SECTIONS}
    seed = coerce("seed", raw.get("seed", 0), int)
    return RunConfig(seed=seed, **sections)


def set_dotted(config: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `config['train']['lr']` from 'train.lr', creating sections as needed."""
    *parents, leaf = dotted.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise GptlabError(f"cannot set '{dotted}': '{part}' is not a section")
    node[leaf] = value


def get_dotted(config: dict[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = node[part]
    return node
