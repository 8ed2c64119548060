"""What a run's id is made of besides its settings: the files it reads, by sha256 (`RunConfig.run_hash`).

A run id ends in `_s{seed}_{hash}`, the hash over the resolved config and these sources: the sha256 of a
user corpus (`data.path`; a named corpus is fixed by the registry's own checksum) and of each plugin's
file. The sweep hashes them when it plans a run; the worker that trains the run hashes them again
(`check_run_identity`), so a corpus or plugin edited after the sweep started fails the run in one line
instead of training the new text under the old text's id.
"""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Mapping, Sequence

from gptlab.errors import GptlabError
from gptlab.run.config import RunConfig


def plugin_sources(plugins: Sequence[str]) -> dict[str, str]:
    """sha256 of each (already imported) plugin's file: a fixed plugin makes new runs, not reused ones."""
    sources = {}
    for entry in plugins:
        path = entry if entry.endswith(".py") else getattr(sys.modules.get(entry), "__file__", None)
        if path:
            sources[f"plugin:{Path(entry).name}"] = _sha256(path)  # by name: moving the project keeps ids
    return sources


def corpus_source(path: str | None) -> dict[str, str]:
    """sha256 of a user corpus (`data.path`); named datasets are fixed by their own checksum."""
    from gptlab.run.data import check_corpus_file

    if path is None:
        return {}
    resolved = check_corpus_file(path)  # metadata first: /dev/zero or a FIFO would never finish hashing
    try:
        return {"corpus": _sha256(str(resolved))}
    except OSError as err:
        raise GptlabError(f"data.path: cannot read {path} ({err.strerror or err})") from None


def run_sources(plugins: Sequence[str], data_path: str | None) -> dict[str, str]:
    """Every file a run's identity counts: its plugins and its user corpus."""
    return {**plugin_sources(plugins), **corpus_source(data_path)}


def sweep_sources(plugins: Sequence[str], data_paths: Sequence[str | None]) -> dict[str, str]:
    """sha256 of every file a sweep's runs read besides named corpora: its plugins and each user corpus, by path."""
    sources = plugin_sources(plugins)
    for path in sorted({p for p in data_paths if p is not None}):
        sources[str(path)] = corpus_source(path)["corpus"]
    return sources


def check_unchanged(before: Mapping[str, str], plugins: Sequence[str], data_paths: Sequence[str | None]) -> None:
    """Refuse to go on with a sweep whose corpus or plugin files changed since its first stage read them.

    A later stage (a tuned sweep's estimation, an adaptive round) decides from runs on the old files: picks
    made on one text must not be estimated on another, even under ids that hash the new one."""
    try:
        now = sweep_sources(plugins, data_paths)
    except GptlabError:  # a corpus now missing or unreadable: the same stop, with the same words
        now = {}
    changed = [name for name, digest in before.items() if now.get(name) != digest]
    if changed:
        which = changed[0].removeprefix("plugin:")
        raise GptlabError(f"{which} changed since this sweep's first stage read it (its earlier stages trained and "
                          "chose on the old file); put the old file back to finish this sweep, or run the new one "
                          "as another sweep (another name:)")


def check_run_identity(run_id: str, config: RunConfig, plugins: Sequence[str]) -> None:
    """Refuse to train `run_id` when the files it reads are no longer those its id was made from."""
    expected = run_id.rpartition("_")[2]
    actual = config.run_hash(run_sources(plugins, config.data.path))
    if actual != expected:
        what = "the corpus (data.path) or a plugin file" if plugins else "the corpus (data.path)"
        raise GptlabError(f"{what} changed since the sweep planned run {run_id}: it would train other text or code "
                          "under this run's id; rerun the sweep, which plans the changed files' runs under new ids")


@functools.lru_cache(maxsize=64)
def _sha256_cached(path: str, mtime_ns: int, size: int) -> str:
    from gptlab.run.data import sha256_of

    return sha256_of(Path(path))


def _sha256(path: str) -> str:
    stat = os.stat(path)
    return _sha256_cached(path, stat.st_mtime_ns, stat.st_size)
