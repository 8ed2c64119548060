"""Datasets: locate or download the corpus, split it, tokenize it (`tokenizers`), batch it.

Resolution order (docs/MODEL_AND_DATA.md): explicit `data.path` -> `$GPTLAB_DATA_DIR/NAME/input.txt` ->
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
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import torch

from gptlab.errors import GptlabError, closest
from gptlab.run.cache import cache_dir
from gptlab.run.corpora import DATASETS, DatasetSource, download, sha256_of
from gptlab.run.tokenizers import TOKENIZERS, Tokenizer

log = logging.getLogger("gptlab.run.data")


def _verify(path: Path, source: DatasetSource, name: str) -> Path:
    actual = sha256_of(path)
    if actual != source.sha256:
        fix = (f"delete it and run `{source.obtain.format(name=name)}`" if source.prepare is not None
               else "delete it to download it again")
        raise GptlabError(
            f"dataset '{name}' at {path} is not the published file (sha256 {actual[:12]}..., expected "
            f"{source.sha256[:12]}...); {fix}, or name it with data.path to train on it as it is"
        )
    return path


MAX_CORPUS_ENV = "GPTLAB_MAX_CORPUS_BYTES"
DEFAULT_MAX_CORPUS_BYTES = 2 * 2**30  # 2 GiB: far beyond any corpus a run here can use, far below a disk


def max_corpus_bytes() -> int:
    """The largest user corpus a run reads: 2 GiB, or `$GPTLAB_MAX_CORPUS_BYTES`."""
    raw = os.environ.get(MAX_CORPUS_ENV)
    if raw is None:
        return DEFAULT_MAX_CORPUS_BYTES
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if limit < 1:
        raise GptlabError(f"{MAX_CORPUS_ENV} must be a positive number of bytes, got {raw!r}")
    return limit


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def check_corpus_file(path: str | os.PathLike, key: str = "data.path") -> Path:
    """Refuse a user corpus that cannot be a text to train on, from its metadata alone (no byte is read).

    Run first, before any hash, decode or split: an endless device (/dev/zero), a FIFO that never
    closes, a directory or a multi-GiB file would otherwise hang the sweep or fill its memory.
    Returns the resolved path.
    """
    p = Path(path).expanduser()
    try:
        info = os.stat(p)  # follows symlinks: a link to a text file is fine, a link to /dev/zero is not
    except FileNotFoundError:
        raise GptlabError(f"{key}: {p} does not exist") from None
    except OSError as err:
        raise GptlabError(f"{key}: cannot read {p} ({err.strerror or err})") from None
    if not stat.S_ISREG(info.st_mode):
        raise GptlabError(f"{key}: {p} is {_kind(info.st_mode)}; a corpus is a regular UTF-8 text file")
    if info.st_size == 0:
        raise GptlabError(f"{key}: {p} is empty; a corpus is a UTF-8 text file with the text to train on")
    limit = max_corpus_bytes()
    if info.st_size > limit:
        raise GptlabError(f"{key}: {p} is {info.st_size / 2**30:.1f} GiB, larger than the {limit / 2**30:.1f} GiB "
                          f"a corpus may be; set {MAX_CORPUS_ENV} (bytes) to allow a larger one")
    if not os.access(p, os.R_OK):
        raise GptlabError(f"{key}: {p} is not readable (permission denied)")
    return p.resolve()


def resolve_dataset(name: str, path: str | os.PathLike | None = None, download_missing: bool = True) -> Path:
    """Return a local file for dataset `name`, downloading it into the cache when needed (and allowed)."""
    if path is not None:
        return check_corpus_file(path)
    if name not in DATASETS:
        raise GptlabError(f"unknown data.dataset '{name}'{closest(str(name), DATASETS)}; valid: "
                          f"{', '.join(DATASETS.names())} (or set data.path to a text file)")
    source = DATASETS.get(name)
    # Where to put the file, said in every "not found": the directory variable the README relies on, or data.path.
    where = (f"put {name}/{source.filename} under $GPTLAB_DATA_DIR" + (f" ({os.environ['GPTLAB_DATA_DIR']})"
             if os.environ.get("GPTLAB_DATA_DIR") else " (unset)") + " or set data.path")
    candidates = []
    if os.environ.get("GPTLAB_DATA_DIR"):
        candidates.append(Path(os.environ["GPTLAB_DATA_DIR"]) / name / source.filename)
    cached = cache_dir() / name / source.filename
    candidates.append(cached)
    for candidate in candidates:
        if candidate.is_file():
            return _verify(candidate, source, name)
    if source.url is None:  # prepared by a command, not downloaded
        raise GptlabError(f"dataset '{name}' not found at {' or '.join(map(str, candidates))}; prepare it with "
                          f"`{source.obtain.format(name=name)}`, or {where}")
    if not download_missing:
        raise GptlabError(f"dataset '{name}' not found at {' or '.join(map(str, candidates))}; {where}")
    log.info("downloading %s from %s to %s", name, source.url, cached)
    try:
        return download(source.url, cached, source.sha256)
    except OSError as err:  # URLError and socket timeouts are OSErrors
        raise GptlabError(
            f"dataset '{name}' not found and the download from {source.url} failed ({err}); "
            f"{where}"
        ) from None


def split_points(n_chars: int, val_fraction: float, test_fraction: float = 0.0) -> tuple[int, int]:
    """Where validation and test begin, in characters: text[:a] trains, text[a:b] validates, text[b:] tests.

    The held-out tail is the last `val_fraction` of the text; a test split is the last
    `test_fraction` of the whole text, carved from that tail (0: none, and b is the text's end, so
    the splits are exactly those of a config without the key).
    """
    start_val = int(n_chars * (1 - val_fraction))
    start_test = int(n_chars * (1 - test_fraction)) if test_fraction > 0 else n_chars
    return start_val, max(start_test, start_val)


def chars_scored(text: str, tokenizer: Tokenizer) -> int:
    """Characters of a split's targets (those of every token but the first, which is never a target)."""
    return max(len(text) - tokenizer.first_token_chars(text), 1)


@dataclass
class TextDataset:
    """A corpus split by characters into the first (1 - val_fraction) for training and the rest held
    out: validation, then (with `data.test_fraction`) the test split at the very end; each split is
    tokenized on its own."""

    tokenizer: Tokenizer  # from the `data.tokenizer` registry
    train: torch.Tensor  # (N_train,) int64 token ids
    val: torch.Tensor  # (N_val,) int64 token ids
    val_chars_scored: int  # characters of the validation targets (every token but the first)
    test: torch.Tensor | None = None  # (N_test,) int64 token ids; None without a test split
    test_chars_scored: int = 1  # characters of the test targets (every token but the first)

    @property
    def bits_per_char_factor(self) -> float:
        """Multiply a validation loss (nats/token) by this for bits per character: summed NLL / characters / ln 2."""
        return (len(self.val) - 1) / self.val_chars_scored / math.log(2)

    @property
    def test_bits_per_char_factor(self) -> float | None:
        """The same factor for a test loss (the test split has its own characters per token); None without one."""
        return None if self.test is None else (len(self.test) - 1) / self.test_chars_scored / math.log(2)

    def check_fits(self, block_size: int, where: str) -> None:
        """Refuse a corpus too short for `block_size`: training needs one window, validation (and test) one too."""
        check_split_tokens(len(self.train), len(self.val), None if self.test is None else len(self.test),
                           block_size, where)


def check_split_tokens(train: int, val: int, test: int | None, block_size: int, where: str) -> None:
    """Refuse splits of these token counts (`test` None: no test split) that are too short for `block_size`."""
    need = block_size + 2  # a window of block_size inputs and its targets, plus one offset to sample
    splits = [("training", train, "data.val_fraction"), ("validation", val, "data.val_fraction")]
    if test is not None:
        splits[1] = ("validation", val, "data.val_fraction or data.test_fraction")
        splits.append(("test", test, "data.test_fraction"))
    for split, tokens, keys in splits:
        if tokens < need:
            raise GptlabError(f"{where}: the {split} split has {tokens:,} tokens, too few for "
                              f"model.block_size {block_size:,} (it needs at least {need:,}); use a longer "
                              f"text, a smaller block_size or another {keys}")


def file_version(path: Path) -> tuple[int, int]:
    """(mtime_ns, size) of a corpus file: part of every cache key, so a file replaced on disk is read again."""
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


@lru_cache(maxsize=4)
def _read(path: Path, version: tuple[int, int]) -> str:
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
def _load(path: Path, version: tuple[int, int], val_fraction: float, tokenizer: str = "char",
          vocab_size: int | None = None, test_fraction: float = 0.0) -> TextDataset:
    # `version` keys the cache by the file's contents as well as its path: a worker that trained on a file
    # replaced since (a corpus swapped between a sweep's stages) must not train the old text under new ids.
    text = _read(path, version)
    # Split by characters: the same text for every tokenizer. The tokenizer sees the training text only.
    start_val, start_test = split_points(len(text), val_fraction, test_fraction)
    tok = TOKENIZERS.get(tokenizer).train(text, start_val, vocab_size)
    train_text, val_text, test_text = text[:start_val], text[start_val:start_test], text[start_test:]
    train, val = (torch.from_numpy(tok.encode_array(t)) for t in (train_text, val_text))
    if not test_fraction > 0:
        return TextDataset(tok, train, val, chars_scored(val_text, tok))
    test = torch.from_numpy(tok.encode_array(test_text))
    return TextDataset(tok, train, val, chars_scored(val_text, tok), test, chars_scored(test_text, tok))


def load_dataset(name: str = "tinyshakespeare", path: str | None = None, val_fraction: float = 0.1,
                 tokenizer: str = "char", vocab_size: int | None = None, test_fraction: float = 0.0) -> TextDataset:
    """Resolve, read, split and tokenize a dataset (cached per process: sweeps reuse it across runs)."""
    file = resolve_dataset(name, path).resolve()
    return _load(file, file_version(file), val_fraction, tokenizer, vocab_size, test_fraction)


def load_run_dataset(data: Any) -> TextDataset:
    """The dataset a run's `data` section (a `DataConfig`) names."""
    return load_dataset(data.dataset, data.path, data.val_fraction, data.tokenizer, data.vocab_size,
                        data.test_fraction)


def unigram_val_loss(name: str = "tinyshakespeare", path: str | None = None, val_fraction: float = 0.1,
                     download_missing: bool = False, tokenizer: str = "char", vocab_size: int | None = None,
                     test_fraction: float = 0.0, split: str = "val") -> float:
    """Cross-entropy (nats/token) of the validation split (or, `split="test"` or `"train"`, the test or the
    training split) under the training split's token frequencies.

    The loss of a model that learned only how often each token occurs: the ceiling at which the
    report counts a diverged run (`unigram_loss` of the named corpus's dataset).
    """
    file = resolve_dataset(name, path, download_missing).resolve()
    data = _load(file, file_version(file), val_fraction, tokenizer, vocab_size, test_fraction)
    if split == "test" and data.test is None:
        raise GptlabError(f"no test split: data.test_fraction is {test_fraction}")
    return unigram_loss(data, split)


def unigram_loss(data: TextDataset, split: str = "val") -> float:
    """The unigram loss (nats/token) of `data`'s validation, test or training split (`split`) in its own tokens, under
    the training split's token frequencies: the one formula behind `unigram_val_loss`, the report's ceiling (val,
    test) and the runner's `collapsed` rule (train: the plateau of a model that learned only the frequencies,
    `gptlab.statuses.judge`). Tokens unseen in training get add-one smoothed counts."""
    held_out = {"test": data.test, "train": data.train}.get(split, data.val)
    counts = torch.bincount(data.train, minlength=data.tokenizer.vocab_size).double() + 1.0
    log_p = torch.log(counts / counts.sum())
    return float(-log_p[held_out].mean())


class BatchSampler:
    """Random training windows whose positions depend only on (seed, step)."""

    def __init__(
        self, data: torch.Tensor, block_size: int, batch_size: int, seed: int, device: str | torch.device = "cpu"
    ) -> None:
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
