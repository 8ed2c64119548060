"""Shared fixtures: an isolated data cache and a small generated corpus.

Plain helpers (paths, `make_corpus`, `tiny_config`) live in helpers.py; only fixtures are here.
No test uses the network: downloads go to a local HTTP server, the real text comes from
`../shared/data` (or $GPTLAB_DATA_DIR), and most tests train on a corpus generated here.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers import make_corpus


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets an empty user cache, so nothing depends on this machine's ~/.cache."""
    monkeypatch.setenv("GPTLAB_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("corpus") / "tiny.txt")
