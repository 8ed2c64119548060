"""Datasets: locate or download the corpus, split it, tokenize it (`tokenizers`), batch it.

Resolution order (DESIGN.md): explicit `data.path` -> `$GPTLAB_DATA_DIR/NAME/input.txt` ->
user cache (`$GPTLAB_CACHE_DIR`, else `$XDG_CACHE_HOME/gptlab`, else `~/.cache/gptlab`) ->
download from the canonical URL, verified by sha256 and written atomically into the cache.
Training batches depend only on (seed, step), so every architecture sees the same batches and a
resumed run sees the batches it would have seen; validation covers the whole val split.
"""
from __future__ import annotations

import hashlib
import logging
import math
import os
import urllib.request
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import torch

from gptlab.errors import GptlabError
from gptlab.run.tokenizers import TOKENIZERS, Tokenizer
from gptlab.runio import atomic_write

log = logging.getLogger("gptlab.run.data")


@dataclass(frozen=True)
class DatasetSource:
    """Where a named dataset comes from and how to recognise an intact copy."""

    url: str  # canonical download address
    sha256: str  # checksum of the exact file
    filename: str = "input.txt"  # file name under <data dir>/<dataset>/


DATASETS: dict[str, DatasetSource] = {
    "tinyshakespeare": DatasetSource(
        url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
        sha256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    )
}


def cache_dir() -> Path:
    """The user cache for downloaded datasets."""
    if os.environ.get("GPTLAB_CACHE_DIR"):
        return Path(os.environ["GPTLAB_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gptlab"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verify(path: Path, source: DatasetSource, name: str) -> Path:
    actual = sha256_of(path)
    if actual != source.sha256:
        raise GptlabError(
            f"dataset '{name}' at {path} is corrupted (sha256 {actual[:12]}..., expected "
            f"{source.sha256[:12]}...); delete it to download it again, or replace it with the original"
        )
    return path


def download(url: str, dest: Path, sha256: str | None = None, timeout: float = 30.0) -> Path:
    """Download `url` to `dest` atomically, checking the sha256 if given (a mismatch saves nothing)."""

    def fetch(out: BinaryIO) -> None:
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=timeout) as response:
            for chunk in iter(lambda: response.read(1 << 16), b""):
                digest.update(chunk)
                out.write(chunk)
        if sha256 is not None and digest.hexdigest() != sha256:
            raise GptlabError(
                f"download from {url} has sha256 {digest.hexdigest()[:12]}..., expected {sha256[:12]}...; "
                "nothing was saved"
            )

    atomic_write(dest, fetch)
    return dest


def resolve_dataset(name: str, path: str | os.PathLike | None = None, download_missing: bool = True) -> Path:
    """Return a local file for dataset `name`, downloading it into the cache when needed (and allowed)."""
    if path is not None:
        p = Path(path).expanduser()
        if not p.is_file():
            raise GptlabError(f"data.path {p} does not exist or is not a file")
        return p
    source = DATASETS.get(name)
    if source is None:
        raise GptlabError(
            f"unknown data.dataset '{name}'; valid: {', '.join(DATASETS)} (or set data.path to a text file)"
        )
    candidates = []
    if os.environ.get("GPTLAB_DATA_DIR"):
        candidates.append(Path(os.environ["GPTLAB_DATA_DIR"]) / name / source.filename)
    cached = cache_dir() / name / source.filename
    candidates.append(cached)
    for candidate in candidates:
        if candidate.is_file():
            return _verify(candidate, source, name)
    if not download_missing:
        raise GptlabError(f"dataset '{name}' not found at {' or '.join(map(str, candidates))}")
    log.info("downloading %s from %s to %s", name, source.url, cached)
    try:
        return download(source.url, cached, source.sha256)
    except OSError as err:  # URLError and socket timeouts are OSErrors
        raise GptlabError(
            f"dataset '{name}' not found and the download from {source.url} failed ({err}); "
            f"put {source.filename} at {candidates[0]} or set data.path"
        ) from None


@dataclass
class TextDataset:
    """A corpus split by characters into the first (1 - val_fraction) for training and the rest for
    validation, each tokenized on its own."""

    tokenizer: Tokenizer  # from the `data.tokenizer` registry
    train: torch.Tensor  # (N_train,) int64 token ids
    val: torch.Tensor  # (N_val,) int64 token ids
    val_chars_scored: int  # characters of the validation targets (every token but the first)

    @property
    def bits_per_char_factor(self) -> float:
        """Multiply a validation loss (nats/token) by this for bits per character: summed NLL / characters / ln 2."""
        return (len(self.val) - 1) / self.val_chars_scored / math.log(2)

    def check_fits(self, block_size: int, where: str) -> None:
        """Refuse a corpus too short for `block_size`: training needs one window, validation one too."""
        need = block_size + 2  # a window of block_size inputs and its targets, plus one offset to sample
        for split, ids in (("training", self.train), ("validation", self.val)):
            if len(ids) < need:
                raise GptlabError(f"{where}: the {split} split has {len(ids):,} tokens, too few for "
                                  f"model.block_size {block_size:,} (it needs at least {need:,}); use a longer "
                                  "text, a smaller block_size or another data.val_fraction")


@lru_cache(maxsize=4)
def _read(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise GptlabError(f"data: {path} is not UTF-8 text (byte {err.start} cannot be decoded); "
                          "a corpus is a plain text file") from None
    if "\x00" in text:
        raise GptlabError(f"data: {path} holds NUL bytes (a binary file?); a corpus is a plain text file")
    if len(text) < 2:
        raise GptlabError(f"dataset {path} is empty")
    return text


@lru_cache(maxsize=4)
def _load(path: Path, val_fraction: float, tokenizer: str = "char", vocab_size: int | None = None) -> TextDataset:
    text = _read(path)
    n_train = int(len(text) * (1 - val_fraction))  # split by characters: the same text for every tokenizer
    tok = TOKENIZERS.get(tokenizer).train(text, n_train, vocab_size)
    train_text, val_text = text[:n_train], text[n_train:]
    train, val = (torch.from_numpy(tok.encode_array(t)) for t in (train_text, val_text))
    return TextDataset(tok, train, val, max(len(val_text) - tok.first_token_chars(val_text), 1))


def load_dataset(name: str = "tinyshakespeare", path: str | None = None, val_fraction: float = 0.1,
                 tokenizer: str = "char", vocab_size: int | None = None) -> TextDataset:
    """Resolve, read, split and tokenize a dataset (cached per process: sweeps reuse it across runs)."""
    return _load(resolve_dataset(name, path).resolve(), val_fraction, tokenizer, vocab_size)


def load_run_dataset(data: Any) -> TextDataset:
    """The dataset a run's `data` section (a `DataConfig`) names."""
    return load_dataset(data.dataset, data.path, data.val_fraction, data.tokenizer, data.vocab_size)


def unigram_val_loss(name: str = "tinyshakespeare", path: str | None = None, val_fraction: float = 0.1,
                     download_missing: bool = False, tokenizer: str = "char", vocab_size: int | None = None) -> float:
    """Cross-entropy (nats/token) of the validation split under the training split's token frequencies.

    The loss of a model that learned only how often each token occurs: the ceiling at which the
    report counts a diverged run. Tokens unseen in training get add-one smoothed counts.
    """
    data = _load(resolve_dataset(name, path, download_missing).resolve(), val_fraction, tokenizer, vocab_size)
    vocab = data.tokenizer.vocab_size
    counts = torch.bincount(data.train, minlength=vocab).double() + 1.0
    log_p = torch.log(counts / counts.sum())
    return float(-log_p[data.val].mean())


class BatchSampler:
    """Random training windows whose positions depend only on (seed, step)."""

    def __init__(self, data: torch.Tensor, block_size: int, batch_size: int, seed: int, device: str | torch.device = "cpu") -> None:
        if len(data) <= block_size + 1:
            raise GptlabError(
                f"the training split has {len(data)} tokens, too few for block_size {block_size}"
            )
        self.data = data.to(device)
        self.block_size = block_size
        self.batch_size = batch_size
        self.seed = seed
        self.window = torch.arange(block_size + 1, device=device)
        self.generator = torch.Generator()

    def offsets(self, step: int) -> torch.Tensor:
        """(batch_size,) start positions for `step`; a fresh stream per step makes resume exact."""
        # torch's CPU generator keeps only the low 32 bits of a seed, so (seed, step) is hashed
        # into 32 bits rather than packed as seed << 32 | step (which would ignore the seed).
        key = hashlib.blake2b(f"{self.seed}:{step}".encode(), digest_size=4).digest()
        self.generator.manual_seed(int.from_bytes(key, "little"))
        high = len(self.data) - self.block_size - 1
        return torch.randint(high, (self.batch_size,), generator=self.generator)

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y), both (B, T): y is x shifted by one token."""
        ix = self.offsets(step).to(self.data.device)[:, None] + self.window  # (B, T+1)
        chunk = self.data[ix]
        return chunk[:, :-1], chunk[:, 1:]


def eval_windows(data: torch.Tensor, block_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
    """Cover every next-token target of `data` exactly once.

    Yields (x, y, n_scored) with x, y: (n, T). Full non-overlapping windows first; a tail shorter
    than T is scored through one last window ending at the split's end, of which only the last
    `n_scored` targets count (the others were already scored).
    """
    n_targets = len(data) - 1
    n_full = n_targets // block_size
    if n_full:
        x = data[: n_full * block_size].view(n_full, block_size)
        y = data[1 : n_full * block_size + 1].view(n_full, block_size)
        yield x, y, block_size
    tail = n_targets - n_full * block_size
    if tail:
        T = min(block_size, n_targets)
        yield data[n_targets - T : n_targets].view(1, T), data[n_targets - T + 1 :].view(1, T), tail
