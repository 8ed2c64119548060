"""The corpus registry (`data.dataset`): Austen from the shared file, refused when missing or altered,
prepared from the package's published data, listed; the char tokenizer on a text whose non-ASCII
characters fall in one split only."""
from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest
import rdata
from helpers import REPO, SHARED_DATA, with_dataset

from gptlab.errors import GptlabError
from gptlab.prepare import main as prepare_main
from gptlab.run.corpora import AUSTEN_BOOKS, DATASETS, DatasetSource, prepare_austen, prepare_dataset
from gptlab.run.data import load_dataset, resolve_dataset
from gptlab.run.tokenizers import CharTokenizer

AUSTEN = SHARED_DATA / "austen" / "input.txt"
AUSTEN_SHA = "32432b75ad045648fc586b923f9d38cddee6ecfa14cfe8968b9a028c36a19c23"


def test_austen_is_the_shared_file_split_like_shakespeare(monkeypatch):
    monkeypatch.setenv("GPTLAB_DATA_DIR", str(SHARED_DATA))
    assert DATASETS.get("austen").sha256 == AUSTEN_SHA
    assert resolve_dataset("austen") == AUSTEN
    ds = load_dataset("austen", test_fraction=0.05)
    text = AUSTEN.read_text(encoding="utf-8")
    assert len(text) == 4_025_038 and ds.tokenizer.vocab_size == 81 and "£" in ds.tokenizer.chars
    assert len(ds.train) == int(len(text) * 0.9)  # the tail is held out: val, then test the last 5%
    assert len(ds.train) + len(ds.val) == int(len(text) * 0.95)
    assert ds.tokenizer.decode(ds.test[:200]) == text[int(len(text) * 0.95):][:200]


def test_a_missing_austen_names_the_file_and_the_command_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("GPTLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GPTLAB_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(GptlabError) as err:
        resolve_dataset("austen")
    message = str(err.value)
    assert "\n" not in message and str(tmp_path / "data" / "austen" / "input.txt") in message
    assert "python -m gptlab.prepare austen" in message and "pip install rdata" in message


def test_an_altered_austen_is_refused_unless_named_with_data_path(monkeypatch, tmp_path):
    altered = tmp_path / "data" / "austen" / "input.txt"
    altered.parent.mkdir(parents=True)
    altered.write_bytes(AUSTEN.read_bytes().replace(b"Elinor", b"Eleanor", 1))
    monkeypatch.setenv("GPTLAB_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(GptlabError, match=r"^dataset 'austen' at .* is not the published file .*python -m "
                                          r"gptlab.prepare austen.*data.path"):
        resolve_dataset("austen")
    assert resolve_dataset("austen", altered) == altered  # named by data.path: the user's text, trained as it is


@pytest.mark.slow
def test_a_sweep_refuses_an_altered_corpus_before_anything_is_written(tmp_path):
    altered = tmp_path / "data" / "austen" / "input.txt"
    altered.parent.mkdir(parents=True)
    altered.write_text("It is a truth universally acknowledged.\n" * 200, encoding="utf-8")
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nbase: {data: {dataset: austen}, train: {max_iters: 2}}\n"
                    "grid: {model.activation: [gelu, relu]}\nseeds: [0]\n")
    env = {"GPTLAB_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "gptlab.sweep", str(spec), "--results", str(tmp_path / "r")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "is not the published file" in proc.stderr and not (tmp_path / "r").exists()


def _published(folder, books: dict[str, list[str]]) -> None:
    """A stand-in for janeaustenr's data/: one .rda per book, a character vector named after it."""
    folder.mkdir()
    for name, lines in books.items():
        rdata.write_rda(folder / f"{name}.rda", {name: np.array(lines, dtype=object)})


def test_prepare_builds_the_recipe_verifies_it_and_writes_atomically(monkeypatch, tmp_path, capsys):
    books = {name: [f"  {name.upper()}", "", f"Chapter 1 of {name}, £10", "  "] for name in AUSTEN_BOOKS}
    _published(tmp_path / "pkg", books)
    expected = "\n\n".join("\n".join(lines).strip() + "\n" for lines in books.values()).encode()
    assert prepare_austen(str(tmp_path / "pkg"), tmp_path) == expected  # publication order, one blank line between
    source = DatasetSource(None, hashlib.sha256(expected).hexdigest(), prepare=prepare_austen,
                           published=str(tmp_path / "pkg"), needs="rdata")
    with_dataset(monkeypatch, "austen_like", source)
    monkeypatch.setenv("GPTLAB_DATA_DIR", str(tmp_path / "data"))
    assert prepare_main(["austen_like"]) == 0
    written = tmp_path / "data" / "austen_like" / "input.txt"
    assert written.read_bytes() == expected and "verified" in capsys.readouterr().out
    assert resolve_dataset("austen_like") == written  # where a run looks for it


def test_prepare_writes_nothing_when_the_text_differs(monkeypatch, tmp_path, capsys):
    _published(tmp_path / "pkg", {name: ["not the novel"] for name in AUSTEN_BOOKS})
    dest = tmp_path / "out" / "input.txt"
    with pytest.raises(GptlabError, match="expected 32432b75ad04.*nothing was written"):
        prepare_dataset("austen", dest, str(tmp_path / "pkg"))
    assert not dest.exists()
    assert prepare_main(["austen", "--from", str(tmp_path / "nowhere"), "--out", str(dest)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: --from:") and "sensesensibility.rda" in err[-1] and not dest.exists()


@pytest.mark.slow
def test_datasets_are_listed_with_what_they_are():
    proc = subprocess.run([sys.executable, "-m", "gptlab.sweep", "--list"], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    lines = proc.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("data.dataset:")))
    assert lines[at + 1].split()[0] == "tinyshakespeare" and lines[at + 2].split()[0] == "austen"
    assert "Jane Austen" in lines[at + 2]


def test_a_non_ascii_character_in_one_split_only_encodes_every_split(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("caf\u00e9 \U0001F600 \ufeff" + "plain ascii text here. " * 400, encoding="utf-8")
    ds = load_dataset("c", str(corpus))  # the validation tail is pure ASCII, the vocabulary is not
    tok = ds.tokenizer
    assert isinstance(tok, CharTokenizer) and tok.decode(ds.val[:20]) == corpus.read_text(encoding="utf-8")[
        len(ds.train):len(ds.train) + 20]
    assert tok.encode_array("plain").tolist() == tok.encode("plain")
    with pytest.raises(GptlabError, match="'z' is not in the vocabulary"):
        tok.encode_array("plaz")


@pytest.mark.parametrize("study", ["four_axes", "postln_warmup", "beyond", "transfer", "tuned", "lengths",
                                   "tuned_refine", "scorecard"])
def test_the_shipped_studies_keep_their_run_ids(study):
    """The registry moved and a corpus can be a scale factor: every run a shipped spec names first is still the
    run its results hold (a tuned spec's first stage, the selection round 1, for tuned ones)."""
    import pandas as pd

    from gptlab.sweep.spec import load_spec

    spec = load_spec(REPO / "ablations" / f"{study}.yaml")
    trained = set(pd.read_csv(REPO / "results" / study / "summary.csv")["run_id"])
    assert spec.runs and {r.run_id for r in spec.runs} <= trained


def test_prepare_never_writes_over_a_device_or_a_fifo(tmp_path, capsys):
    import os
    import stat

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert prepare_main(["austen", "--out", str(fifo), "--from", str(tmp_path)]) == 2
    assert "--out: " in capsys.readouterr().err and stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the FIFO
