"""The user cache: where downloaded datasets and trained tokenizers are kept (`cache_dir`).

`$GPTLAB_CACHE_DIR`, else `$XDG_CACHE_HOME/gptlab`, else `~/.cache/gptlab`. Its own module, below
`data` (datasets) and `tokenizers` (trained BPE files), so that neither imports the other for it.
"""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The user cache for downloaded datasets and trained tokenizers."""
    if os.environ.get("GPTLAB_CACHE_DIR"):
        return Path(os.environ["GPTLAB_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gptlab"
