"""A corpus read once in bounded memory: its size in characters, its widest character and its vocabulary.

The sweep's driver checks every corpus before anything is built (UTF-8, no NUL bytes, long enough
for each block size) and plans each worker's memory from it. Loading the corpus for that, as a run
does, would hold the whole text and its token ids in the driver (about 11 bytes per character of
ASCII text): a 300 MB corpus took 3.3 GB for a dry run. `scan_text` reads 1 MiB at a time instead,
and `corpus_bytes` says how much memory a run's copy of the corpus takes.
"""
from __future__ import annotations

import codecs
import functools
from dataclasses import dataclass
from pathlib import Path

from gptlab.errors import GptlabError

CHUNK_BYTES = 2**20
ID_BYTES = 8  # a token id in a run's tensors (int64)


@dataclass(frozen=True)
class TextScan:
    """What one pass over a corpus file learns."""

    chars: int  # characters of the whole text
    width: int  # bytes per character of the text as a Python str: 1 (ASCII, Latin-1), 2 or 4
    vocab: str  # its distinct characters, sorted (the char tokenizer's vocabulary)

    @property
    def is_ascii(self) -> bool:
        return self.vocab.isascii()

    def corpus_bytes(self) -> int:
        """Peak bytes of a run's copy of this corpus, char-tokenized (checked by benchmarks/corpus_memory.py):
        the text and a split's slice (2 x width per character), the int64 ids, and the encoder's
        temporaries: the ASCII bytes and the check's booleans (2), or the UTF-32 code points (4)."""
        return self.chars * (2 * self.width + ID_BYTES + (2 if self.is_ascii else 4))


def scan_text(path: Path) -> TextScan:
    """Read `path` 1 MiB at a time; refuse text that is not UTF-8, holds NUL bytes or is empty, as loading does."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    chars, width, seen, offset = 0, 1, set(), 0
    with open(path, "rb") as f:
        while True:
            raw = f.read(CHUNK_BYTES)
            pending = len(decoder.getstate()[0])  # bytes of a character cut by the last chunk's end
            try:
                text = decoder.decode(raw, final=not raw)
            except UnicodeDecodeError as err:
                at = offset - pending + err.start
                raise GptlabError(f"data: {path} is not UTF-8 text (byte {max(at, 0)} cannot be decoded); "
                                  "a corpus is a plain text file") from None
            if "\x00" in text:
                raise GptlabError(f"data: {path} holds NUL bytes (a binary file?); a corpus is a plain text file")
            chars += len(text)
            seen.update(text)
            if text:
                top = ord(max(text))
                width = max(width, 1 if top < 256 else 2 if top < 65536 else 4)
            offset += len(raw)
            if not raw:
                break
    if chars < 2:
        raise GptlabError(f"dataset {path} is empty")
    return TextScan(chars, width, "".join(sorted(seen)))


def scan_corpus(path: Path) -> TextScan:
    """`scan_text` of `path`, read once per process (the sweep asks several times) unless the file changed."""
    info = path.stat()
    return _scan_cached(path, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=16)
def _scan_cached(path: Path, mtime_ns: int, size: int) -> TextScan:
    return scan_text(path)
