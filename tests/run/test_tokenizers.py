"""The tokenizer axis (`data.tokenizer`, `data.vocab_size`): bits per character, BPE trained on the training
split only and cached on disk, validation and run identity, a sweep mixing tokenizers, a plugin's tokenizer."""
from __future__ import annotations

import contextlib
import csv
import json
import math
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml
from fakes import write_spec
from helpers import REPO, make_corpus, skip_figures, tiny_config

from gptlab.errors import GptlabError
from gptlab.run import data as gdata
from gptlab.run import tokenizers as gtok
from gptlab.run.config import resolve_run_config
from gptlab.run.data import load_dataset
from gptlab.run.evaluation import evaluate
from gptlab.run.rundir import RunDir
from gptlab.run.runner import train_run
from gptlab.run.sampling import load_checkpoint_model, sample_from_run
from gptlab.run.tokenizers import TOKENIZERS, BPETokenizer, tokenizer_cache
from gptlab.statuses import FINISHED
from gptlab.sweep_cli import main as sweep_main

LN2 = math.log(2)
ALIEN = "zxjv"  # letters make_corpus never writes: a word built from them can only come from the validation text

PLUGIN = '''
"""Test plugin: a tokenizer that folds case, registered from outside the package."""
import numpy as np
import torch
from gptlab.run.tokenizers import TOKENIZERS

@TOKENIZERS.register("lowerchar")
class LowerChar:
    """One id per distinct character of the lower-cased corpus."""
    uses_vocab_size = False

    def __init__(self, chars):
        self.chars = "".join(sorted(set(chars)))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def train(cls, corpus, n_train_chars, vocab_size):
        return cls(corpus.lower())

    @classmethod
    def from_state(cls, state):
        return cls(state["chars"])

    def to_state(self):
        return {"name": "lowerchar", "chars": self.chars}

    @property
    def vocab_size(self):
        return len(self.chars)

    def encode(self, text):
        return [self.stoi[c] for c in text.lower()]

    def encode_array(self, text):
        return np.asarray(self.encode(text), dtype=np.int64)

    def decode(self, ids):
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else ids
        return "".join(self.chars[i] for i in ids)

    def first_token_chars(self, text):
        return 1 if text else 0
'''


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: these tiny models gain nothing from two, and the machine may be busy."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def split(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """The training and validation text as the lab splits them (by characters)."""
    n_train = int(len(text) * (1 - val_fraction))
    return text[:n_train], text[n_train:]


SHORT_TRAIN = {"max_iters": 20, "eval_interval": 10, "log_interval": 10}


def short_config(corpus: Path, **data) -> dict:
    """tiny_config, shortened: these tests check how losses are scored, not how well a model learns."""
    config = tiny_config(corpus, **SHORT_TRAIN)
    config["data"].update(data)
    return config


def bpe_config(corpus: Path, vocab_size: int = 300) -> dict:
    config = short_config(corpus)
    config["data"].update(tokenizer="bpe", vocab_size=vocab_size)
    return config


# -- bits per character ------------------------------------------------------------------------------
def test_a_char_run_scores_bits_per_char_as_its_loss_over_ln2(corpus, tmp_path):
    summary = train_run(resolve_run_config(short_config(corpus)), tmp_path / "run")
    assert summary["status"] == "ok"
    assert abs(summary["best_val_bpc"] - summary["best_val_loss"] / LN2) <= 1e-12
    assert abs(summary["val_bpc_factor"] - 1 / LN2) <= 1e-12
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["best_val_bpc"] == summary["best_val_bpc"]


@pytest.fixture(scope="module")
def bpe_run(tmp_path_factory, corpus) -> tuple[Path, dict]:
    """One finished BPE run (300 tokens), shared by the tests that only read it or copy it."""
    root = tmp_path_factory.mktemp("bpe_run")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPTLAB_CACHE_DIR", str(root / "cache"))  # module scope: before the autouse isolation
        summary = train_run(resolve_run_config(bpe_config(corpus)), root / "run")
    return root / "run", summary


def test_a_bpe_run_scores_summed_nll_over_the_characters_scored(bpe_run, corpus):
    run, summary = bpe_run
    assert summary["status"] in FINISHED  # 20 steps of 300 tokens learn little (collapsed): scoring is what is tested
    model, tokenizer = load_checkpoint_model(run, "best")
    _, val_text = split(corpus.read_text())
    ids = torch.tensor(tokenizer.encode(val_text), dtype=torch.long)
    assert tokenizer.decode(ids) == val_text
    mean_nll = evaluate(model, ids, 32, 64, torch.device("cpu"), contextlib.nullcontext())
    assert summary["best_val_loss"] == pytest.approx(mean_nll, rel=1e-6)
    summed_nll = mean_nll * (len(ids) - 1)  # every token is a target but the first
    chars_scored = len(val_text) - len(tokenizer.decode(ids[:1]))  # an ASCII corpus: tokens end on characters
    assert summary["best_val_bpc"] == pytest.approx(summed_nll / chars_scored / LN2, rel=1e-6)
    assert len(ids) < 0.7 * len(val_text)  # BPE tokens span several characters, so bits/char < loss/ln 2
    assert summary["best_val_bpc"] < 0.8 * summary["best_val_loss"] / LN2


def test_a_run_is_not_resumed_with_another_tokenizer_than_its_checkpoint(bpe_run, corpus, tmp_path, monkeypatch):
    run = shutil.copytree(bpe_run[0], tmp_path / "run")
    (run / RunDir.SUMMARY).unlink()  # unfinished: the next train_run resumes from ckpt_last.pt
    real = gtok._train_bpe
    monkeypatch.setattr(gtok, "_train_bpe", lambda text, vocab_size: real(text[::-1], vocab_size))  # other merges
    gdata._load.cache_clear()  # with this test's empty cache, the tokenizer is trained again
    with pytest.raises(GptlabError, match="trained with another bpe tokenizer than the data gives now"):
        train_run(resolve_run_config(bpe_config(corpus)), run)
    monkeypatch.setattr(gtok, "_train_bpe", real)  # the same merges again: it resumes (and ends at once)
    gdata._load.cache_clear()
    monkeypatch.setenv("GPTLAB_CACHE_DIR", str(tmp_path / "fresh_cache"))
    assert train_run(resolve_run_config(bpe_config(corpus)), run)["best_val_loss"] == bpe_run[1]["best_val_loss"]


# -- BPE sees the training split only, and is trained once per training text and vocab size -------------
def test_bpe_is_trained_on_the_training_split_only(tmp_path, monkeypatch):
    train_text = make_corpus(tmp_path / "train.txt", 18_000).read_text()
    alien_val = (f"{ALIEN} {ALIEN}{ALIEN}.\n" * 300)[:2_000]
    plain_val = make_corpus(tmp_path / "other.txt", 2_000, seed=1).read_text()
    states, files = [], []
    for name, val in (("alien", alien_val), ("plain", plain_val)):
        path = tmp_path / f"{name}.txt"
        path.write_text(train_text + val, encoding="utf-8")
        assert split(train_text + val)[0] == train_text
        monkeypatch.setenv("GPTLAB_CACHE_DIR", str(tmp_path / f"cache_{name}"))  # each trains its own
        states.append(load_dataset(name, str(path), 0.1, "bpe", 300).tokenizer.to_state())
        files.append(sorted(p.name for p in tokenizer_cache().glob("*.json")))
    assert states[0] == states[1] and files[0] == files[1] and len(files[0]) == 1
    tokenizer = gtok.tokenizer_from_state(states[0])
    pieces = [tokenizer.decode([i]) for i in range(tokenizer.vocab_size)]
    assert not [p for p in pieces if len(p.strip()) > 1 and set(p) & set(ALIEN)]
    assert len(tokenizer.encode(ALIEN)) == len(ALIEN)  # one token per letter: no merge of its own
    # The control: a tokenizer that did see that text would have merged the word.
    leaky = BPETokenizer.train(train_text + alien_val, len(train_text + alien_val), 300)
    assert len(leaky.encode(ALIEN)) < len(ALIEN)


def test_the_bpe_cache_trains_once_per_training_text_and_vocab_size(corpus, monkeypatch):
    calls = []
    real = gtok._train_bpe

    def counting(text: str, vocab_size: int):
        calls.append((len(text), vocab_size))
        return real(text, vocab_size)

    def refusing(text: str, vocab_size: int):
        raise AssertionError("trained again: the cache was not used")

    text = corpus.read_text()
    n_train = len(split(text)[0])
    gdata._load.cache_clear()  # a dataset another test loaded in this process would hide the disk cache
    monkeypatch.setattr(gtok, "_train_bpe", counting)
    first = load_dataset("tiny", str(corpus), 0.1, "bpe", 300).tokenizer
    assert calls == [(n_train, 300)]
    monkeypatch.setattr(gtok, "_train_bpe", refusing)
    gdata._load.cache_clear()  # not this process's cache: the one on disk
    again = load_dataset("tiny", str(corpus), 0.1, "bpe", 300).tokenizer
    assert again.to_state() == first.to_state()
    assert BPETokenizer.train(text, n_train, 300).to_state() == first.to_state()
    monkeypatch.setattr(gtok, "_train_bpe", counting)
    load_dataset("tiny", str(corpus), 0.1, "bpe", 400)  # another vocab size
    load_dataset("tiny", str(corpus), 0.2, "bpe", 300)  # another training split
    assert calls == [(n_train, 300), (n_train, 400), (len(split(text, 0.2)[0]), 300)]
    assert len(list(tokenizer_cache().glob("bpe-*.json"))) == 3


def test_parallel_workers_train_one_bpe(corpus, monkeypatch):
    calls = []
    real = gtok._train_bpe

    def slow(text: str, vocab_size: int):
        calls.append(vocab_size)
        time.sleep(0.3)  # long enough for the other threads to reach the lock
        return real(text, vocab_size)

    monkeypatch.setattr(gtok, "_train_bpe", slow)
    text = corpus.read_text()
    states = []
    threads = [threading.Thread(target=lambda: states.append(BPETokenizer.train(text, 5_000, 280).to_state()))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [280] and len(states) == 3 and states[0] == states[1] == states[2]


# -- validation and run identity ---------------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 255, 65_537, 1_000_000])
def test_an_out_of_range_bpe_vocab_size_is_one_clear_error(size):
    with pytest.raises(GptlabError) as err:
        resolve_run_config({"data": {"tokenizer": "bpe", "vocab_size": size}})
    message = str(err.value)
    assert "data.vocab_size" in message and "256" in message and "65,536" in message and "\n" not in message
    assert f"{size:,}" in message


def test_the_bpe_vocab_size_bounds_are_accepted_and_char_ignores_it():
    for size in (256, 65_536):
        assert resolve_run_config({"data": {"tokenizer": "bpe", "vocab_size": size}}).data.vocab_size == size
    assert resolve_run_config({"data": {"vocab_size": 3}}).data.tokenizer == "char"


def test_an_out_of_range_vocab_size_in_a_sweep_grid_is_refused_in_one_line(tmp_path, corpus, capsys):
    spec = write_spec(tmp_path, corpus, {"data.tokenizer": ["char", "bpe"], "data.vocab_size": [100]}, train=SHORT_TRAIN,
                      name="tok", file="tok.yaml")
    assert sweep_main([str(spec), "--results-dir", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "data.vocab_size" in err[0] and "between 256 and 65,536" in err[0], err
    assert not (tmp_path / "results").exists()


def test_a_plugin_tokenizer_sets_its_own_vocab_size_range(monkeypatch):
    monkeypatch.setattr(TOKENIZERS, "_entries", dict(TOKENIZERS._entries))

    @TOKENIZERS.register("sized")
    class Sized(gtok.CharTokenizer):
        """A tokenizer that uses data.vocab_size, with its own range."""
        uses_vocab_size = True
        VOCAB_RANGE = (2, 128)

    @TOKENIZERS.register("unbounded")
    class Unbounded(gtok.CharTokenizer):
        """A tokenizer that uses data.vocab_size and states no range."""
        uses_vocab_size = True

    assert resolve_run_config({"data": {"tokenizer": "sized", "vocab_size": 100}}).data.vocab_size == 100
    with pytest.raises(GptlabError, match=r"data.vocab_size must be between 2 and 128 for data.tokenizer sized, got 129"):
        resolve_run_config({"data": {"tokenizer": "sized", "vocab_size": 129}})
    assert resolve_run_config({"data": {"tokenizer": "unbounded", "vocab_size": 10**6}}).data.vocab_size == 10**6
    with pytest.raises(GptlabError, match=r"data.vocab_size must be at least 1 for data.tokenizer unbounded, got 0"):
        resolve_run_config({"data": {"tokenizer": "unbounded", "vocab_size": 0}})


def test_an_unknown_tokenizer_names_the_key_and_the_valid_names():
    with pytest.raises(GptlabError) as err:
        resolve_run_config({"data": {"tokenizer": "bep"}})
    message = str(err.value)
    assert message.startswith("data.tokenizer:") and "'bep'" in message and "did you mean 'bpe'" in message
    assert "valid: char, bpe" in message


def test_vocab_size_enters_the_identity_of_bpe_runs_only():
    def run_hash(data: dict) -> str:
        return resolve_run_config({"data": data}).run_hash()

    char = run_hash({})
    assert run_hash({"tokenizer": "char"}) == char
    assert run_hash({"vocab_size": 300}) == run_hash({"tokenizer": "char", "vocab_size": 4096}) == char
    bpe = {size: run_hash({"tokenizer": "bpe", "vocab_size": size}) for size in (300, 500)}
    assert len({char, *bpe.values()}) == 3
    assert run_hash({"tokenizer": "bpe"}) == run_hash({"tokenizer": "bpe", "vocab_size": BPETokenizer.DEFAULT_VOCAB})


def test_a_char_run_keeps_the_hash_it_had_before_tokenizers():
    """The shipped four_axes runs were named before tokenizers existed: their ids end with today's hash."""
    runs = sorted((REPO / "results" / "four_axes" / "runs").iterdir())
    assert len(runs) == 48
    for run in runs:
        config = yaml.safe_load((run / "config.yaml").read_text())
        assert "tokenizer" not in config["data"]
        expected = run.name.rsplit("_", 1)[1]
        assert resolve_run_config(config).run_hash() == expected, run.name
        config["data"].update(tokenizer="char", vocab_size=2048)
        assert resolve_run_config(config).run_hash() == expected, run.name


# -- sweeps ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer_sweep(tmp_path_factory, corpus):
    """One sweep over char, bpe (300 tokens) and a plugin's tokenizer, trained once for the tests below."""
    root = tmp_path_factory.mktemp("tokenizer_sweep")
    plugin = root / "lowerchar_plugin.py"
    plugin.write_text(PLUGIN)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPTLAB_CACHE_DIR", str(root / "cache"))  # module scope: before the autouse isolation
        mp.setattr(TOKENIZERS, "_entries", dict(TOKENIZERS._entries))  # the plugin's entry leaves with the module
        skip_figures(mp)  # no test here reads the report's figures
        spec = write_spec(root, corpus, {"data.tokenizer": ["char", "bpe", "lowerchar"]}, plugins=(plugin,),
                          train=SHORT_TRAIN, data={"vocab_size": 300}, name="tok", file="tok.yaml")
        code = sweep_main([str(spec), "--results-dir", str(root / "results"), "--reports-dir", str(root / "reports")])
        with open(root / "results" / "tok" / "summary.csv") as f:
            rows = {row["data.tokenizer"]: row for row in csv.DictReader(f)}
        yield code, root / "results" / "tok", rows


@pytest.mark.slow
def test_a_sweep_mixing_tokenizers_writes_bits_per_char_for_every_run(tokenizer_sweep):
    code, results, rows = tokenizer_sweep
    assert code == 0 and set(rows) == {"char", "bpe", "lowerchar"}
    for name, row in rows.items():
        assert row["status"] in FINISHED, (name, row["error"])  # finished (a BPE run of 20 steps may not learn)
        summary = json.loads((results / "runs" / row["run_id"] / "summary.json").read_text())
        assert float(row["best_val_bpc"]) == pytest.approx(summary["best_val_bpc"], rel=1e-9)
        assert summary["best_val_bpc"] == pytest.approx(summary["best_val_loss"] * summary["val_bpc_factor"], rel=1e-12)
    assert float(rows["char"]["best_val_bpc"]) == pytest.approx(float(rows["char"]["best_val_loss"]) / LN2, rel=1e-9)
    assert float(rows["bpe"]["best_val_bpc"]) < float(rows["bpe"]["best_val_loss"]) / LN2  # tokens of several chars
    config = yaml.safe_load((results / "runs" / rows["bpe"]["run_id"] / "config.yaml").read_text())
    assert config["data"]["tokenizer"] == "bpe" and config["data"]["vocab_size"] == 300


@pytest.mark.slow
def test_a_bpe_run_of_a_sweep_samples_decoded_text(tokenizer_sweep, corpus):
    _, results, rows = tokenizer_sweep
    run = results / "runs" / rows["bpe"]["run_id"]
    sample = (run / RunDir.SAMPLE).read_text()
    assert sample and sample == sample_from_run(run)  # the tokenizer rebuilt from the checkpoint
    assert not set(sample) & set("ĠĊ")  # byte-level symbols would mean undecoded tokens
    assert any(word in sample.lower() for word in ("the", "king", "queen", "lord", "thou"))
    state = RunDir(run).load_checkpoint("best")["tokenizer"]
    assert state["name"] == "bpe" and gtok.tokenizer_from_state(state).vocab_size <= 300


@pytest.mark.slow
def test_a_plugin_registers_a_tokenizer_a_sweep_can_use(tokenizer_sweep, corpus):
    _, results, rows = tokenizer_sweep
    run = results / "runs" / rows["lowerchar"]["run_id"]
    state = RunDir(run).load_checkpoint("best")["tokenizer"]
    assert state == {"name": "lowerchar", "chars": "".join(sorted(set(corpus.read_text().lower())))}
    sample = (run / RunDir.SAMPLE).read_text()
    assert sample and sample == sample.lower() and sample == sample_from_run(run)
    assert int(rows["lowerchar"]["params"]) < int(rows["char"]["params"])  # a smaller embedding


def test_list_shows_the_tokenizer_registry(capsys):
    assert sweep_main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines.index(f"data.tokenizer: {TOKENIZERS.description}")
    entries = [line.split()[0] for line in lines[header + 1:header + 1 + len(TOKENIZERS)]]
    assert entries[:2] == ["char", "bpe"] and all(line.startswith("  ") for line in lines[header + 1:header + 3])


# -- a byte-level BPE: data.vocab_size 256 -------------------------------------------------------------
TRAIN_TEXT = "Café au lait — naïve façade, smörgåsbord.\nThe king shall speak to my lord.\n" * 12  # 900 chars
VAL_TEXT = ("éclair 日本語 and 😀 emoji; the queen.\n" * 3)[:100]  # its first character is two bytes
assert len(TRAIN_TEXT) == 900 and len(VAL_TEXT) == 100


def test_bpe_accepts_a_byte_vocabulary_of_256_and_refuses_255_naming_the_range():
    assert resolve_run_config({"data": {"tokenizer": "bpe", "vocab_size": 256}}).data.vocab_size == 256
    with pytest.raises(GptlabError) as err:
        resolve_run_config({"data": {"tokenizer": "bpe", "vocab_size": 255}})
    message = str(err.value)
    assert "data.vocab_size must be between 256 and 65,536 for data.tokenizer bpe" in message and "got 255" in message


def test_a_256_token_bpe_is_the_bytes_alone_and_round_trips_any_text():
    tok = BPETokenizer.train(TRAIN_TEXT + VAL_TEXT, len(TRAIN_TEXT), 256)
    assert tok.vocab_size == 256
    assert json.loads(tok.to_state()["json"])["model"]["merges"] == []  # no merge: one token per byte
    text = VAL_TEXT + "𝄞 ∑ ü, never seen in training"
    ids = tok.encode(text)
    assert len(ids) == len(text.encode("utf-8")) and max(ids) < 256
    assert tok.decode(ids) == text and tok.decode(torch.tensor(ids)) == text


def test_a_byte_level_run_trains_256_logits_and_scores_bits_per_character(tmp_path):
    corpus = tmp_path / "unicode.txt"
    corpus.write_text(TRAIN_TEXT + VAL_TEXT, encoding="utf-8")
    data = load_dataset("unicode", str(corpus), 0.1, "bpe", 256)
    n_bytes = len(VAL_TEXT.encode("utf-8"))
    assert len(data.val) == n_bytes and len(data.train) == len(TRAIN_TEXT.encode("utf-8"))
    # the first target is the second byte of 'é': part of the first character is scored, so every one counts
    assert data.val_chars_scored == len(VAL_TEXT)
    assert data.bits_per_char_factor == pytest.approx((n_bytes - 1) / len(VAL_TEXT) / math.log(2), rel=1e-12)

    config = tiny_config(corpus, max_iters=10, eval_interval=10, log_interval=10)
    config["data"].update(tokenizer="bpe", vocab_size=256, val_fraction=0.1)
    summary = train_run(resolve_run_config(config), tmp_path / "run")
    assert summary["status"] in FINISHED  # 10 steps on bytes learn little (collapsed): scoring is what is tested
    assert summary["val_bpc_factor"] == pytest.approx(data.bits_per_char_factor, rel=1e-12)
    assert summary["best_val_bpc"] == pytest.approx(summary["best_val_loss"] * data.bits_per_char_factor, rel=1e-9)
    model, tokenizer = load_checkpoint_model(tmp_path / "run")
    assert tokenizer.vocab_size == 256 and model.lm_head.out_features == 256


# -- first_token_chars reads the whole text ------------------------------------------------------------
def test_first_token_chars_reads_the_whole_text_not_a_prefix():
    train = ("a" * 512 + "\n") * 8  # long runs of one letter: BPE learns tokens of 2, 4, ..., 256 a's
    val = "a" * 300 + "\nab\n"
    tok = BPETokenizer.train(train + val, len(train), 266)
    first = tok.encode(val)[0]
    assert tok.decode([first]) == "a" * 256  # the first token is 256 characters long
    # A 256-character prefix is that one token: read alone it seems to span the whole text.
    assert tok.first_token_chars(val) == 256
    assert tok.first_token_chars("a" * 256) == 256  # one token: it is all there is
