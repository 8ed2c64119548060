"""Plain helpers shared by the tests (no fixtures: those live in conftest.py).

Test modules import these with `from helpers import ...`; pytest puts this folder on sys.path
(rootdir-based conftest insertion), so no package is needed.
"""
from __future__ import annotations

import os
import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("GPTLAB_DATA_DIR") or REPO.parent / "shared" / "data")
SHAKESPEARE = SHARED_DATA / "tinyshakespeare" / "input.txt"


def make_corpus(path: Path, n_chars: int = 20_000, seed: int = 0) -> Path:
    """A small text with learnable structure: words from a fixed list, in short lines."""
    rng = random.Random(seed)
    words = ["the", "king", "queen", "shall", "speak", "to", "my", "lord", "and", "thou", "art", "good"]
    lines = []
    size = 0
    while size < n_chars:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(3, 8))).capitalize() + "."
        lines.append(line)
        size += len(line) + 1
    path.write_text("\n".join(lines)[:n_chars], encoding="utf-8")
    return path


def tiny_config(corpus_path: Path, **train) -> dict:
    """A run config that trains in about a second on one CPU core."""
    return {
        "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32},
        "train": {"max_iters": 40, "batch_size": 8, "lr": 3e-3, "min_lr": 3e-4, "warmup_iters": 5,
                  "eval_interval": 20, "log_interval": 10, "eval_batch_size": 64, "device": "cpu", **train},
        "data": {"dataset": "tiny", "path": str(corpus_path)},
        "seed": 0,
    }
