"""Run configuration: `TrainConfig`, `DataConfig` and the resolution of a plain dict into them.

A plain nested dict `{model: {...}, train: {...}, data: {...}, seed: int}` (a sweep's YAML, a config.yaml) is
resolved once into a frozen `RunConfig` (`resolve_run_config`: defaults filled in; unknown keys, with the closest,
wrong types and impossible values rejected, naming the dotted key), which then travels typed to the trainer;
`RunConfig.with_settings` derives a variant by dotted keys under the same checks.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Mapping

from gptlab.errors import GptlabError, closest, shown, unknown_key
from gptlab.fields import setting
from gptlab.model import ModelConfig
from gptlab.run.schedules import SCHEDULES
from gptlab.run.tokenizers import TOKENIZERS, check_vocab_size

# A run's length and peak lr by dotted key, as summary.csv names their columns (a `worth:` study's lengths, a tuned lr).
LENGTH_KEY, LR_KEY = "train.max_iters", "train.lr"
DEVICE_PATTERN = re.compile(r"auto|cpu|mps|cuda(:[0-9]{1,3})?")
MAX_SEED = 2**63  # seeds are int64 for torch: [0, 2**63)
# Upper bounds of every count and size of a run config, checked by `coerce`. Far beyond anything
# this lab or a large GPT trains, they stop an absurd number (2**128 steps, a typo such as 2e30)
# before a sweep starts a run that would never end. Memory is checked apart (sweep/preflight.py).
MAX_STEPS = 10**8  # optimizer steps: 10^8 steps of 1 ms each is 28 hours
LIMITS: dict[str, int] = {
    **{f"train.{k}": MAX_STEPS for k in ("max_iters", "warmup_iters", "lr_decay_iters", "eval_interval", "log_interval")},
    "train.batch_size": 2**20,  # sequences per step (GPT-3: 1,536)
    "train.eval_batch_size": 2**20,
    "model.n_layer": 1024,  # the deepest published Transformers have about 1,000 layers
    "model.n_head": 1024,
    "model.n_embd": 2**16,  # GPT-3: 12,288
    "model.block_size": 2**20,  # a million-token context
    "data.vocab_size": 2**20,  # the largest vocabularies in use have about 256k tokens
}


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation and evaluation settings of one training run (nanoGPT's CPU defaults)."""

    max_iters: int = setting(2000, "number of optimizer steps")
    batch_size: int = setting(12, "sequences per optimizer step")
    lr: float = setting(1e-3, "peak learning rate")
    min_lr: float = setting(1e-4, "learning rate at the end of the cosine decay")
    warmup_iters: int = setting(100, "steps of linear warmup (0 = none)")
    lr_decay_iters: int | None = setting(None, "step where the cosine reaches min_lr (default: max_iters; cosine only)")
    schedule: str = setting("cosine", "learning-rate schedule after the warmup (cosine: decay over the whole run; wsd: "
                                      "constant, then a 1-sqrt cooldown to min_lr)")
    cooldown_fraction: float = setting(0.2, "wsd: the last fraction of max_iters cooling down to min_lr, in (0, 1]")
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
    cuda_graphs: bool = setting(False, "capture the compiled training step as CUDA graphs (torch.compile's reduce-overhead "
                                       "mode): CUDA only, with compile; off until measured on a GPU (docs/GPU.md)")

    def __post_init__(self) -> None:
        for name in ("lr", "min_lr", "weight_decay", "beta1", "beta2", "grad_clip", "cooldown_fraction"):
            if not math.isfinite(getattr(self, name)):  # NaN passes every range check below
                raise GptlabError(f"train.{name} must be a finite number, got {getattr(self, name)}")
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
        if not DEVICE_PATTERN.fullmatch(self.device):
            raise GptlabError(f"train.device must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}")
        if self.cuda_graphs and (self.compile is False or self.device in ("cpu", "mps")):
            raise GptlabError("train.cuda_graphs captures the compiled step on a CUDA device: it needs train.compile (true, or "
                              f"unset) and train.device cuda, cuda:N or auto, got compile={self.compile}, device={self.device}")
        self._check_schedule()

    @property
    def cooldown_start(self) -> int:
        """The first step of a cooldown (wsd's): max_iters - round(cooldown_fraction x max_iters)."""
        return self.max_iters - round(self.cooldown_fraction * self.max_iters)

    def _check_schedule(self) -> None:
        try:
            schedule = SCHEDULES.get(self.schedule)  # an unknown name: the valid ones and the closest
        except GptlabError as err:
            raise GptlabError(f"train.schedule: {err}") from None
        if not 0 < self.cooldown_fraction <= 1:
            raise GptlabError(f"train.cooldown_fraction must be in (0, 1], got {self.cooldown_fraction}")
        schedule.check(self)


@dataclass(frozen=True)
class DataConfig:
    """Which corpus to train on and how it is split."""

    dataset: str = setting(
        "tinyshakespeare", "a corpus in the data.dataset registry (tinyshakespeare, austen) or a label for data.path"
    )
    path: str | None = setting(None, "explicit path to a UTF-8 text file (overrides the dataset lookup)")
    val_fraction: float = setting(0.1, "last fraction of the text held out for validation (and test)")
    tokenizer: str = setting("char", "how text becomes tokens: char | bpe | a plugin's (--list)")
    vocab_size: int | None = setting(None, "tokens of a trained tokenizer (bpe: 256..65536, default 1024; char ignores it)")
    test_fraction: float = setting(0.0, "last fraction of the text held out for testing, carved from the val_fraction "
                                        "tail (0 = none); never used to choose a checkpoint")

    def __post_init__(self) -> None:
        if not 0 < self.val_fraction < 1:
            raise GptlabError(f"data.val_fraction must be in (0, 1), got {self.val_fraction}")
        if not 0 <= self.test_fraction < self.val_fraction:  # NaN fails this too
            raise GptlabError(f"data.test_fraction must be >= 0 and below data.val_fraction ({self.val_fraction}): "
                              f"the test split is the tail of the held-out text, got {self.test_fraction}")
        try:
            tokenizer = TOKENIZERS.get(self.tokenizer)
        except GptlabError as err:
            raise GptlabError(f"data.tokenizer: {err}") from None
        if tokenizer.uses_vocab_size and self.vocab_size is not None:
            check_vocab_size(self.vocab_size, self.tokenizer)

    @property
    def uses_vocab_size(self) -> bool:
        """Whether data.vocab_size means anything to this tokenizer (char: no, so it stays out of the hash)."""
        return TOKENIZERS.get(self.tokenizer).uses_vocab_size


@dataclass(frozen=True)
class RunConfig:
    """One fully resolved training run."""

    model: ModelConfig  # architecture; its vocab_size is the derived field below
    train: TrainConfig  # optimisation settings
    data: DataConfig  # corpus
    seed: int = 0  # seeds the initialisation, the batch order and dropout
    vocab_size: int | None = None  # derived, never set by hand: the tokenizer's size (bind_vocab); not hashed
    population: bool = False  # planned to train in a population (executor.population): hashed, written, when true

    def bind_vocab(self, vocab_size: int) -> "RunConfig":
        """This config with its derived vocabulary size set (in `model` too), as a run needs it."""
        model = dataclasses.replace(self.model, vocab_size=vocab_size)
        return dataclasses.replace(self, model=model, vocab_size=vocab_size)

    def with_settings(self, settings: Mapping[str, Any]) -> "RunConfig":
        """This config with `settings` ({dotted key or 'seed': value}) set, checked as `resolve_run_config` checks a
        dict: the same error for an unknown key or a bad value (the settings first, in their order)."""
        raw, changed = self.to_dict(), {}
        for dotted, value in settings.items():
            set_dotted(changed, dotted, value)
        for section, values in changed.items():  # first in their section: an error names the first bad setting
            kept = raw.get(section)
            raw[section] = {**values, **kept, **values} if isinstance(kept, dict) and isinstance(values, dict) else values
        return resolve_run_config(raw)

    def to_dict(self) -> dict[str, Any]:
        """The settings only: the derived vocab_size is left out (and so out of the run's hash); `population` only
        when true (a population member is another run than its lone twin: docs/GPU.md), so a lone run's is unchanged."""
        model = _settings(self.model)
        model.pop("vocab_size")
        member = {"population": True} if self.population else {}
        return {"model": model, "train": _settings(self.train), "data": _settings(self.data), "seed": self.seed, **member}

    def identity(self, sources: Mapping[str, str] | None = None) -> dict[str, Any]:
        """What makes two runs the same run: the settings, and the content of what they read.

        Every setting of the first release is always in it; a setting added since enters only when
        it differs from its default, so adding a field never orphans finished results (a rerun
        of an old sweep finds them). `sources` maps a file the run reads (a user corpus, a plugin)
        to its sha256, so editing one makes a new run rather than reusing an old result.
        """
        settings = self.to_dict()
        tokenizer = TOKENIZERS.get(self.data.tokenizer)
        if not tokenizer.uses_vocab_size:
            settings["data"]["vocab_size"] = None  # char ignores it: one base serves every tokenizer
        elif self.data.vocab_size is None:  # the size it trains when none is set: bpe's 1024 is one run, not two
            settings["data"]["vocab_size"] = getattr(tokenizer, "DEFAULT_VOCAB", None)
        if not SCHEDULES.get(self.train.schedule).uses_cooldown:  # cosine with any cooldown_fraction is one run
            settings["train"]["cooldown_fraction"] = TrainConfig.cooldown_fraction
        defaults = _default_settings()
        for section in ("model", "train", "data"):
            for name in list(settings[section]):
                dotted = f"{section}.{name}"
                if dotted not in FIRST_RELEASE_KEYS and settings[section][name] == defaults[section][name]:
                    del settings[section][name]
        return {**settings, **({"sources": dict(sorted(sources.items()))} if sources else {})}

    def run_hash(self, sources: Mapping[str, str] | None = None) -> str:
        """Deterministic short hash of the run's identity (seed included)."""
        text = json.dumps(self.identity(sources), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:10]


_fields, _type_hints = functools.cache(dataclasses.fields), functools.cache(typing.get_type_hints)  # once a class


def _settings(section: Any) -> dict[str, Any]:
    """A section's fields as a new dict: `dataclasses.asdict` without its recursive deep copies, which every
    field being a scalar makes needless (they took 0.8 ms a run, 8 s of validating a 10,000-run sweep)."""
    return {f.name: getattr(section, f.name) for f in _fields(type(section))}


_default_settings = functools.cache(lambda: RunConfig(ModelConfig(), TrainConfig(), DataConfig()).to_dict())


# The settings of the first release (those of the shipped studies' config.yaml). Always hashed;
# any setting added later is hashed only when it differs from its default (RunConfig.identity).
FIRST_RELEASE_KEYS = frozenset(
    [f"model.{k}" for k in ("block_size", "n_layer", "n_head", "n_embd", "dropout", "bias", "norm", "norm_type",
                            "activation", "position", "tying")]
    + [f"train.{k}" for k in ("max_iters", "batch_size", "lr", "min_lr", "warmup_iters", "lr_decay_iters",
                              "weight_decay", "beta1", "beta2", "grad_clip", "eval_interval", "eval_batch_size",
                              "log_interval", "device", "dtype", "compile")]
    + [f"data.{k}" for k in ("dataset", "path", "val_fraction")]
)

SECTIONS: dict[str, type] = {"model": ModelConfig, "train": TrainConfig, "data": DataConfig}
HIDDEN_KEYS = {"model.vocab_size"}  # not a user setting: it always comes from the dataset's tokenizer


def valid_keys() -> list[str]:
    """Every dotted key a run config accepts, e.g. 'model.norm', 'train.lr', and 'seed'."""
    keys = [f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)]
    return [k for k in keys if k not in HIDDEN_KEYS] + ["seed"]


def coerce(key: str, value: Any, annotation: Any) -> Any:
    """Check `value` against a field's type hint; accept ints for floats and '1e-3' strings."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if value is None:
        if type(None) in options:
            return None
        raise GptlabError(f"{key} must not be empty (null)")
    # YAML 1.1 reads 1e-3 and 1e4 (no dot) as strings: the number meant; a bool or str field reads no number
    # ("inf" may name a dataset, and `.nan` for a bool is a wrong type, not a wrong number)
    number = _as_number(value) if int in options or float in options else None
    if isinstance(number, float) and not math.isfinite(number):  # an int is finite, and may not fit a float
        raise GptlabError(f"{key} must be a finite number, got {shown(value)}")
    limit = LIMITS.get(key)
    if limit is not None and number is not None and number > limit:
        raise GptlabError(f"{key} must be at most {limit:,}, got {shown(value)}: no real run comes near it (a typo?)")
    for kind in options:
        if kind is bool and isinstance(value, bool):
            return value
        if kind is int and number is not None and (isinstance(number, int) or number.is_integer()):
            if isinstance(number, float) and abs(number) >= 2**53:
                raise GptlabError(f"{key} must be an integer below 2**53 when written as {shown(value)}")
            return int(number)  # 10000, 1e4 and 10000.0 all mean 10000
        if kind is float and number is not None:
            try:
                return float(number)
            except OverflowError:  # an int beyond the largest float
                raise GptlabError(f"{key} must be a finite number, got {shown(value)}") from None
        if kind is str and isinstance(value, str):
            if any(ord(c) < 32 or ord(c) == 127 for c in value):
                raise GptlabError(f"{key} must not contain control characters (newlines, tabs...), got {shown(value)}")
            return value
    names = " or ".join("null" if k is type(None) else k.__name__ for k in options)
    raise GptlabError(f"{key} must be {names}, got {shown(value)} ({type(value).__name__})")


def _as_number(value: Any) -> int | float | None:
    """`value` as an int or float if it is one (or a string spelling one), else None; bools are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def build_section(section: str, values: dict[str, Any]) -> Any:
    """Build one section's dataclass from a dict, naming the dotted key of every problem."""
    cls = SECTIONS[section]
    if not isinstance(values, dict):
        raise GptlabError(f"{section} must be a mapping of settings, got {type(values).__name__}")
    hints = _type_hints(cls)
    names = [f.name for f in _fields(cls) if f"{section}.{f.name}" not in HIDDEN_KEYS]
    kwargs = {}
    for key, value in values.items():
        dotted = f"{section}.{key}"
        if key not in names:
            if dotted in HIDDEN_KEYS:
                raise GptlabError(f"{dotted} is set from the dataset; remove it from the config")
            raise unknown_key(dotted, names, listed=f"valid {section} keys", hint=closest(str(key), names))
        kwargs[key] = coerce(dotted, value, hints[key])
    return cls(**kwargs)


def resolve_run_config(raw: dict[str, Any] | RunConfig) -> RunConfig:
    """Validate a plain `{model, train, data, seed}` dict (missing keys take their defaults)."""
    if isinstance(raw, RunConfig):
        return raw
    if not isinstance(raw, dict):
        raise GptlabError(f"a run config must be a mapping, got {type(raw).__name__}")
    sections = {s: build_section(s, raw.get(s) or {}) for s in SECTIONS}
    seed = coerce("seed", raw.get("seed", 0), int)
    if not 0 <= seed < MAX_SEED:
        raise GptlabError(f"seed must be in [0, 2**63), got {seed}")
    allowed = list(SECTIONS) + ["seed", "population"]
    for key in raw:  # a stray top-level key (`modle:`), once the sections and the seed are valid
        if key not in allowed:
            raise unknown_key(key, allowed)
    return RunConfig(seed=seed, population=coerce("population", raw.get("population", False), bool), **sections)


def set_dotted(config: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `config['train']['lr']` from 'train.lr', creating sections as needed."""
    *parents, leaf = dotted.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise GptlabError(f"cannot set {shown(dotted)}: {shown(part)} is not a section")
    node[leaf] = value


def get_dotted(config: dict[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = node[part]
    return node
