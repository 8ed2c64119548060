"""Data contract: resolution order, checksummed atomic download, tokenizer, split, batches, eval windows."""
from __future__ import annotations

import hashlib
import http.server
import socket
import threading

import pytest
import torch
from helpers import SHAKESPEARE, SHARED_DATA, with_dataset

from gptlab.errors import GptlabError
from gptlab.run import data as gdata
from gptlab.run.corpora import DATASETS, DatasetSource
from gptlab.run.data import BatchSampler, eval_windows, load_dataset, resolve_dataset
from gptlab.run.tokenizers import CharTokenizer

PAYLOAD = b"To be, or not to be, that is the question.\n" * 50


@pytest.fixture
def http_server(tmp_path):
    """Serve tmp_path/www on 127.0.0.1 (a random free port); yields the base URL and a hit counter."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "input.txt").write_bytes(PAYLOAD)
    hits = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self):
            hits.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()
    server.server_close()


@pytest.fixture
def served_dataset(http_server, monkeypatch, tmp_path):
    url, hits = http_server
    source = DatasetSource(url=f"{url}/input.txt", sha256=hashlib.sha256(PAYLOAD).hexdigest())
    with_dataset(monkeypatch, "served", source)
    monkeypatch.delenv("GPTLAB_DATA_DIR", raising=False)
    return hits


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_download_is_verified_cached_and_not_repeated(served_dataset):
    path = resolve_dataset("served")
    assert path == gdata.cache_dir() / "served" / "input.txt"
    assert path.read_bytes() == PAYLOAD
    assert served_dataset == ["/input.txt"]
    assert resolve_dataset("served") == path
    assert served_dataset == ["/input.txt"], "a cached file must not be downloaded again"
    assert not [p for p in path.parent.iterdir() if p.name != "input.txt"], "no temp file left behind"


def test_download_with_wrong_checksum_saves_nothing(served_dataset, monkeypatch):
    with_dataset(monkeypatch, "served", DatasetSource(DATASETS.get("served").url, "0" * 64))
    with pytest.raises(GptlabError, match="nothing was saved"):
        resolve_dataset("served")
    folder = gdata.cache_dir() / "served"
    assert not folder.exists() or list(folder.iterdir()) == []


def test_offline_without_a_file_says_where_to_put_it(monkeypatch):
    url = f"http://127.0.0.1:{closed_port()}/input.txt"
    with_dataset(monkeypatch, "offline", DatasetSource(url, "0" * 64))
    monkeypatch.delenv("GPTLAB_DATA_DIR", raising=False)
    with pytest.raises(GptlabError) as err:
        resolve_dataset("offline")
    message = str(err.value)
    assert "not found" in message and url in message and "input.txt" in message and "data.path" in message


def test_corrupted_cached_file_is_reported_by_checksum(served_dataset):
    path = resolve_dataset("served")
    path.write_bytes(PAYLOAD[:-1] + b"!")
    with pytest.raises(GptlabError, match="is not the published file.*data.path"):
        resolve_dataset("served")


def test_resolution_order_path_then_data_dir_then_cache(served_dataset, monkeypatch, tmp_path):
    explicit = tmp_path / "mine.txt"
    explicit.write_text("abc")
    data_dir = tmp_path / "data"
    (data_dir / "served").mkdir(parents=True)
    (data_dir / "served" / "input.txt").write_bytes(PAYLOAD)
    monkeypatch.setenv("GPTLAB_DATA_DIR", str(data_dir))
    assert resolve_dataset("served", explicit) == explicit
    assert resolve_dataset("served") == data_dir / "served" / "input.txt"
    assert served_dataset == []
    monkeypatch.delenv("GPTLAB_DATA_DIR")
    assert resolve_dataset("served") == gdata.cache_dir() / "served" / "input.txt"
    assert served_dataset == ["/input.txt"]


def test_unknown_dataset_and_missing_path_are_clear_errors(tmp_path):
    with pytest.raises(GptlabError, match="unknown data.dataset 'shakespear'.*tinyshakespeare"):
        resolve_dataset("shakespear")
    with pytest.raises(GptlabError, match="data.path"):
        resolve_dataset("tinyshakespeare", tmp_path / "absent.txt")


def test_tiny_shakespeare_contract(monkeypatch):
    monkeypatch.setenv("GPTLAB_DATA_DIR", str(SHARED_DATA))
    assert resolve_dataset("tinyshakespeare") == SHAKESPEARE
    ds = load_dataset("tinyshakespeare")
    assert ds.tokenizer.vocab_size == 65
    assert len(ds.train) + len(ds.val) == 1_115_394
    assert len(ds.train) == int(1_115_394 * 0.9)
    text = SHAKESPEARE.read_text()
    assert ds.tokenizer.decode(ds.val[:100]) == text[len(ds.train): len(ds.train) + 100]


def test_tokenizer_round_trip_and_unknown_character():
    tok = CharTokenizer("hello world")
    assert tok.vocab_size == 8 and tok.chars == " dehlorw"
    assert tok.decode(tok.encode("low old")) == "low old"
    assert tok.encode_array("hello").tolist() == tok.encode("hello")
    with pytest.raises(GptlabError, match="'z'"):
        tok.encode("z")


def test_batches_depend_only_on_seed_and_step():
    data = torch.arange(10_000)
    a = BatchSampler(data, block_size=16, batch_size=4, seed=1)
    b = BatchSampler(data, block_size=16, batch_size=4, seed=1)
    x5, y5 = a.batch(5)
    b.batch(0), b.batch(9)  # other steps drawn first: no effect on step 5
    assert torch.equal(b.batch(5)[0], x5)
    assert torch.equal(y5, x5 + 1)  # targets are the inputs shifted by one token
    assert not torch.equal(BatchSampler(data, 16, 4, seed=2).batch(5)[0], x5)
    assert not torch.equal(a.batch(6)[0], x5)


def test_eval_windows_score_every_target_exactly_once():
    data = torch.arange(103)
    scored = []
    for x, y, n in eval_windows(data, block_size=10):
        assert torch.equal(y, x + 1)
        scored += y[:, -n:].reshape(-1).tolist()
    assert scored == list(range(1, 103))
