"""Axis `data.tokenizer`: how a corpus becomes token ids, and the registry of tokenizers.

An entry is a class with `train(corpus, n_train_chars, vocab_size)` returning a tokenizer that
encodes and decodes, `to_state()` (what a checkpoint stores to rebuild it) and `from_state`.
`uses_vocab_size` says whether `data.vocab_size` means anything to it: `char` ignores it (its
vocabulary is the corpus's characters), so one base can serve both tokenizers and a char run's
identity does not change with it. A tokenizer that uses it may say which sizes it can have
(`VOCAB_RANGE`, checked by `check_vocab_size`) and which it takes when none is set (`DEFAULT_VOCAB`).

- `char`: one id per distinct character of the whole corpus (the first release's behaviour).
- `bpe`: byte-level BPE (Sennrich et al. 2016; GPT-2's byte-level variant) trained with the
  `tokenizers` package on the training split only, never the validation text, and cached on
  disk by a hash of that text and the settings, so every run of a sweep shares one tokenizer.
  `data.vocab_size: 256` is the 256 byte tokens with no merges: a byte-level model (ByT5's choice).
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
import torch

from gptlab.errors import GptlabError
from gptlab.registry import Registry
from gptlab.run.cache import cache_dir

log = logging.getLogger("gptlab.run.tokenizers")

# Byte-level BPE starts from the 256 byte tokens: 256 is a byte-level model with no merges (ByT5's
# choice), every size above it adds one merge per token.
MIN_BPE_VOCAB, MAX_BPE_VOCAB = 256, 65_536


class Tokenizer(Protocol):
    """What a run needs of a tokenizer."""

    uses_vocab_size: ClassVar[bool]

    @property
    def vocab_size(self) -> int: ...
    def encode(self, text: str) -> list[int]: ...
    def encode_array(self, text: str) -> np.ndarray: ...
    def decode(self, ids: list[int] | torch.Tensor) -> str: ...
    def first_token_chars(self, text: str) -> int: ...
    def to_state(self) -> dict[str, Any]: ...


TOKENIZERS: Registry[type] = Registry("tokenizer", "how text becomes token ids")


@TOKENIZERS.register("char")
class CharTokenizer:
    """One id per distinct character of the corpus, sorted (nanoGPT's shakespeare_char)."""

    uses_vocab_size: ClassVar[bool] = False

    def __init__(self, chars: str) -> None:
        self.chars = "".join(sorted(set(chars)))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def train(cls, corpus: str, n_train_chars: int, vocab_size: int | None) -> "CharTokenizer":
        # The whole corpus, as in the first release: a validation character unseen in training
        # still gets an id (its embedding simply never trains).
        return cls(corpus)

    @classmethod
    def from_state(cls, state: dict[str, Any] | str) -> "CharTokenizer":
        return cls(state if isinstance(state, str) else state["chars"])  # a str: checkpoints before tokenizers

    def to_state(self) -> dict[str, Any]:
        return {"name": "char", "chars": self.chars}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        try:
            return [self.stoi[c] for c in text]
        except KeyError as err:
            raise GptlabError(f"character {err.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: list[int] | torch.Tensor) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return "".join(self.chars[i] for i in ids)

    def encode_array(self, text: str) -> np.ndarray:
        """Vectorised encode of a whole corpus (int64)."""
        if text.isascii():  # the vocabulary may still hold non-ASCII characters from other splits
            lut = np.full(128, -1, dtype=np.int64)  # -1: not in the vocabulary
            for c, i in self.stoi.items():
                if ord(c) < 128:
                    lut[ord(c)] = i
            ids = lut[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
            if (ids < 0).any():
                return np.array(self.encode(text), dtype=np.int64)  # raises, naming the character
            return ids
        if set(text) - self.stoi.keys():
            return np.array(self.encode(text), dtype=np.int64)  # raises, naming the character
        # Code points looked up in the sorted vocabulary: 4 + 8 bytes a character, where a list of
        # Python ints then an array took about 16.
        vocab = np.array([ord(c) for c in self.chars], dtype=np.uint32)  # sorted: chars sort by code point
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        return np.searchsorted(vocab, codes).astype(np.int64, copy=False)

    def first_token_chars(self, text: str) -> int:
        return 1 if text else 0


@TOKENIZERS.register("bpe")
class BPETokenizer:
    """Byte-level BPE trained on the training split only, data.vocab_size tokens (default 1024)."""

    uses_vocab_size: ClassVar[bool] = True
    DEFAULT_VOCAB: ClassVar[int] = 1024
    VOCAB_RANGE: ClassVar[tuple[int, int]] = (MIN_BPE_VOCAB, MAX_BPE_VOCAB)

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    @classmethod
    def train(cls, corpus: str, n_train_chars: int, vocab_size: int | None) -> "BPETokenizer":
        from tokenizers import Tokenizer as HFTokenizer

        vocab_size = cls.DEFAULT_VOCAB if vocab_size is None else vocab_size
        check_vocab_size(vocab_size, "bpe")
        train_text = corpus[:n_train_chars]
        key = hashlib.sha256(f"bpe-bytelevel-v1:{vocab_size}:".encode() + train_text.encode("utf-8")).hexdigest()[:16]
        path = tokenizer_cache() / f"bpe-{vocab_size}-{key}.json"
        if not path.is_file():
            from filelock import FileLock

            from gptlab.runio import atomic_write_text

            path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(path) + ".lock"):  # the workers of a sweep train it once, not once each
                if not path.is_file():
                    atomic_write_text(path, _train_bpe(train_text, vocab_size).to_str())
                    log.info("trained a %d-token byte-level BPE on %d characters: %s", vocab_size,
                             len(train_text), path)
        return cls(HFTokenizer.from_file(str(path)))

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "BPETokenizer":
        from tokenizers import Tokenizer as HFTokenizer

        return cls(HFTokenizer.from_str(state["json"]))

    def to_state(self) -> dict[str, Any]:
        return {"name": "bpe", "json": self.tokenizer.to_str()}

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids

    def encode_array(self, text: str) -> np.ndarray:
        return np.asarray(self.encode(text), dtype=np.int64)

    def decode(self, ids: list[int] | torch.Tensor) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return self.tokenizer.decode(ids)

    def first_token_chars(self, text: str) -> int:
        # The whole text, not a prefix: cutting it could cut the first word and so change its
        # merges, or leave one long token (a run of a repeated character) that seems to span it all.
        # A byte token inside a multi-byte character shares its character's offset: the first
        # character then counts as scored, since part of it is a target.
        encoding = self.tokenizer.encode(text)
        return encoding.offsets[1][0] if len(encoding.ids) > 1 else len(text)


def _train_bpe(text: str, vocab_size: int) -> Any:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tokenizer = HFTokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[], show_progress=False)
    lines = text.splitlines(keepends=True)
    tokenizer.train_from_iterator((("".join(lines[i:i + 1000])) for i in range(0, len(lines), 1000)), trainer)
    return tokenizer


def check_vocab_size(vocab_size: int, tokenizer: str) -> None:
    """Refuse, in one line naming the range, a data.vocab_size the tokenizer cannot have (its VOCAB_RANGE)."""
    low, high = getattr(TOKENIZERS.get(tokenizer), "VOCAB_RANGE", (1, None))
    if high is None and vocab_size < low:
        raise GptlabError(f"data.vocab_size must be at least {low:,} for data.tokenizer {tokenizer}, got {vocab_size:,}")
    if high is not None and not low <= vocab_size <= high:
        why = " (the 256 byte tokens plus merges; 256: bytes only)" if tokenizer == "bpe" else ""
        raise GptlabError(f"data.vocab_size must be between {low:,} and {high:,} for data.tokenizer {tokenizer}{why}, "
                          f"got {vocab_size:,}")


def tokenizer_cache() -> Path:
    """Where trained tokenizers are kept, beside the downloaded datasets (`GPTLAB_CACHE_DIR`)."""
    return cache_dir() / "tokenizers"


def tokenizer_from_state(state: dict[str, Any] | str) -> Tokenizer:
    """Rebuild the tokenizer a checkpoint stored (a bare string: a char vocabulary of the first release)."""
    if isinstance(state, str):
        return CharTokenizer.from_state(state)
    return TOKENIZERS.get(state["name"]).from_state(state)
