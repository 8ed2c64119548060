"""A user corpus (`data.path`) is checked from its metadata before any byte is read: an endless device,
a FIFO, a directory, an empty or a huge file is refused in one line, exit 2, nothing written.

Each case runs under an alarm: before these checks, /dev/zero and a FIFO made the sweep hang forever.
"""
from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
import yaml

from gptlab.run.data import MAX_CORPUS_ENV, check_corpus_file
from gptlab.sweep_cli import main as sweep_main
from tests.scenarios.test_hardening import base_spec, setting

HANG_GUARD_S = 20  # far above the few milliseconds a refusal takes: only a hang trips it


def fifo(folder: Path) -> str:
    path = folder / "corpus.fifo"
    os.mkfifo(path)  # nobody ever writes to it: opening it for reading blocks
    return str(path)


def sparse(folder: Path, size: int = 3 * 2**30) -> str:
    path = folder / "sparse.txt"
    with open(path, "wb") as f:
        f.truncate(size)  # 3 GiB on paper, no block on disk
    return str(path)


def empty(folder: Path) -> str:
    path = folder / "empty.txt"
    path.touch()
    return str(path)


def link_to_zero(folder: Path) -> str:
    path = folder / "looks_like_text.txt"
    path.symlink_to("/dev/zero")
    return str(path)


CASES = [
    ("dev-zero", lambda d: "/dev/zero", "is a character device"),
    ("dev-urandom", lambda d: "/dev/urandom", "is a character device"),
    ("link-to-dev-zero", link_to_zero, "is a character device"),
    ("fifo", fifo, "is a FIFO"),
    ("directory", lambda d: str(d), "is a directory"),
    ("empty", empty, "is empty"),
    ("sparse-3GiB", sparse, f"larger than the 2.0 GiB a corpus may be; set {MAX_CORPUS_ENV}"),
    ("missing", lambda d: str(d / "nope.txt"), "does not exist"),
]


@pytest.fixture
def hang_guard():
    def hung(signum, frame):
        raise TimeoutError(f"no refusal within {HANG_GUARD_S} s: the corpus is being read")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(HANG_GUARD_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize("case, make, words", CASES, ids=[c[0] for c in CASES])
def test_a_corpus_that_is_not_a_text_file_is_refused_before_it_is_read(case, make, words, dry_run, tmp_path, corpus,
                                                                       capsys, hang_guard):
    spec = setting(base_spec(corpus), "base.data.path", make(tmp_path))
    spec_path = tmp_path / "odd.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    results, reports = tmp_path / "results", tmp_path / "reports"
    code = sweep_main([str(spec_path), "--results-dir", str(results), "--reports-dir", str(reports)]
                      + (["--dry-run"] if dry_run else []))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error: data.path: ") and len(err.splitlines()) == 1, err
    assert words in err
    assert not results.exists() and not reports.exists()


def test_a_corpus_in_the_grid_is_checked_too(tmp_path, corpus, capsys, hang_guard):
    spec = base_spec(corpus)
    del spec["base"]["data"]["path"]
    spec["grid"] = {"data.path": [str(corpus), "/dev/zero"]}
    spec_path = tmp_path / "odd.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert sweep_main([str(spec_path), "--dry-run", "--results-dir", str(tmp_path / "r")]) == 2
    assert "data.path: /dev/zero is a character device" in capsys.readouterr().err


def test_the_size_limit_is_overridable_and_named(tmp_path, monkeypatch):
    text = tmp_path / "small.txt"
    text.write_text("hello world\n" * 100)
    assert check_corpus_file(text) == text.resolve()
    monkeypatch.setenv(MAX_CORPUS_ENV, "100")
    with pytest.raises(Exception, match=f"set {MAX_CORPUS_ENV}"):
        check_corpus_file(text)
    monkeypatch.setenv(MAX_CORPUS_ENV, str(4 * 2**30))
    assert check_corpus_file(sparse(tmp_path)).name == "sparse.txt"  # allowed once the user raises the limit
    monkeypatch.setenv(MAX_CORPUS_ENV, "lots")
    with pytest.raises(Exception, match=f"{MAX_CORPUS_ENV} must be a positive number of bytes"):
        check_corpus_file(text)


def test_a_corpus_is_hashed_once_per_sweep(tmp_path, corpus, monkeypatch):
    """Every cell and seed shares one corpus: it is read for its hash once, not once per run."""
    import gptlab.run.data as data
    from gptlab.run.identity import _sha256_cached
    from gptlab.sweep.spec import validate_spec

    calls = []
    real = data.sha256_of
    monkeypatch.setattr(data, "sha256_of", lambda p: calls.append(p) or real(p))
    _sha256_cached.cache_clear()
    spec = base_spec(corpus)
    spec["grid"] = {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"]}
    spec["seeds"] = 3
    loaded = validate_spec(spec, tmp_path / "s.yaml", {}, {})
    assert len(loaded.runs) == 12 and len(calls) == 1


# -- the corpus in bounded memory, and in the plan (issue: a 300 MB corpus took 3.5 GB per worker, 604 MB planned) --
@pytest.mark.parametrize("text, chars, width", [("ab\ncd\n" * 5, 30, 1), ("café £5\n" * 4, 32, 1),
                                                ("ĉu vi\n" * 3, 18, 2), ("🙂 ok\n" * 2, 10, 4)],
                         ids=["ascii", "latin-1", "bmp", "astral"])
def test_a_scan_counts_characters_width_and_vocabulary_in_chunks(text, chars, width, tmp_path, monkeypatch):
    import gptlab.run.textscan as textscan

    monkeypatch.setattr(textscan, "CHUNK_BYTES", 3)  # characters cut across chunk ends
    path = tmp_path / "c.txt"
    path.write_text(text, encoding="utf-8")
    scan = textscan.scan_text(path)
    assert (scan.chars, scan.width, scan.vocab) == (chars, width, "".join(sorted(set(text))))
    assert scan.corpus_bytes() == chars * (2 * width + 8 + (2 if text.isascii() else 4))


@pytest.mark.parametrize("data, words", [(b"abc\n" * 5 + b"\xe9t\xc3", "not UTF-8 text (byte 20 cannot"),
                                         (b"ab\xc3", "not UTF-8 text (byte 2 cannot"),
                                         (b"abc\x00def", "holds NUL bytes"), (b"a", "is empty")],
                         ids=["bad-byte", "cut-character", "nul", "one-char"])
def test_a_scan_refuses_what_loading_refuses_with_the_same_words(data, words, tmp_path, monkeypatch):
    import gptlab.run.textscan as textscan
    from gptlab.errors import GptlabError
    from gptlab.run.data import _read, file_version

    monkeypatch.setattr(textscan, "CHUNK_BYTES", 4)
    path = tmp_path / "c.txt"
    path.write_bytes(data)
    for read in (textscan.scan_text, lambda p: _read(p, file_version(p))):
        with pytest.raises(GptlabError, match=re.escape(words)):
            read(path)


def test_the_driver_checks_a_char_corpus_without_loading_it_and_the_plan_counts_it(tmp_path, corpus, monkeypatch,
                                                                                    capsys):
    import gptlab.run.data as data
    from gptlab.executors.plan import estimate_run_bytes
    from gptlab.sweep.preflight import check_datasets, preflight
    from gptlab.sweep.spec import validate_spec

    def no_load(*args, **kwargs):
        raise AssertionError("the driver loaded the corpus")

    spec = validate_spec(base_spec(corpus), tmp_path / "s.yaml", {}, {})
    monkeypatch.setattr(data, "_load", no_load)
    found = check_datasets(spec)
    (corpus_info,) = found.values()
    text = corpus.read_text(encoding="utf-8")
    assert corpus_info.vocab_size == len(set(text)) and corpus_info.memory_bytes == len(text) * (2 + 8 + 2)
    config = spec.runs[0].config
    assert preflight(spec)[1] == estimate_run_bytes(config, len(set(text)), corpus_info.memory_bytes) \
        == estimate_run_bytes(config, len(set(text))) + corpus_info.memory_bytes
    assert sweep_main([str(_written(tmp_path, base_spec(corpus))), "--dry-run",
                       "--results-dir", str(tmp_path / "r")]) == 0  # timed on a stand-in: nothing loaded either
    assert "estimate: ~" in capsys.readouterr().out


def test_a_corpus_too_big_for_memory_is_refused_in_the_plan(tmp_path, corpus, monkeypatch, capsys):
    from collections import namedtuple

    import psutil

    from gptlab.run.textscan import TextScan
    from gptlab.sweep.preflight import preflight
    from gptlab.sweep.spec import validate_spec

    planned = preflight(validate_spec(base_spec(corpus), tmp_path / "s.yaml", {}, {}))[1]
    memory = namedtuple("memory", "available")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: memory(int(planned / 0.8) + 2**20))
    assert sweep_main([str(_written(tmp_path, base_spec(corpus))), "--dry-run",
                       "--results-dir", str(tmp_path / "a")]) == 0  # fits while the corpus is small
    monkeypatch.setattr(TextScan, "corpus_bytes", lambda self: 2**30)  # a corpus of about 90 MB
    assert sweep_main([str(_written(tmp_path, base_spec(corpus))), "--dry-run",
                       "--results-dir", str(tmp_path / "b")]) == 2
    assert "needs about 1." in capsys.readouterr().err


def _written(folder: Path, spec: dict) -> Path:
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path
