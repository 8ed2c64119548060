"""Loose ends of issue 20: a byte-level BPE (vocab 256), `python -m gptlab.sample` importing the plugins of
the sweep that trained a run, a "same config" error that says why, `first_token_chars` over the whole
text, and reports of numeric factors that log nothing from matplotlib's category axis."""
from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path

import pytest
import torch
import yaml

from gptlab.errors import GptlabError
from gptlab.model.activations import ACTIVATIONS
from gptlab.report import figures as F
from gptlab.report import analyses, load_results, write_report
from gptlab.report.samples import samples
from gptlab.report.synthetic import make_results
from gptlab.run.config import resolve_run_config
from gptlab.run.data import load_dataset
from gptlab.run.runner import train_run
from gptlab.run.sampling import load_checkpoint_model
from gptlab.run.tokenizers import BPETokenizer
from gptlab.sample import main as sample_main
from gptlab.sweep import main as sweep_main

from helpers import make_corpus, tiny_config

LN2 = math.log(2)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: these tiny models gain nothing from two, and the machine may be busy."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
    assert data.bits_per_char_factor == pytest.approx((n_bytes - 1) / len(VAL_TEXT) / LN2, rel=1e-12)

    config = tiny_config(corpus, max_iters=10, eval_interval=10, log_interval=10)
    config["data"].update(tokenizer="bpe", vocab_size=256, val_fraction=0.1)
    summary = train_run(config, tmp_path / "run")
    assert summary["status"] == "ok"
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


# -- python -m gptlab.sample imports the sweep's plugins -----------------------------------------------
PLUGIN = '''
"""Test plugin: an activation registered from outside the package."""
import torch
from gptlab.model.activations import ACTIVATIONS, Activation

@ACTIVATIONS.register("loose_ends_gelu")
class LooseEndsGelu(Activation):
    """GELU, under a name only this file registers."""
    def forward(self, h):
        return torch.nn.functional.gelu(h)
'''


def forget_plugin(monkeypatch, entries: dict, path: Path) -> None:
    """This process as a new one: the activation registry without the plugin, the plugin not imported."""
    monkeypatch.setattr(ACTIVATIONS, "_entries", dict(entries))
    for name in [n for n in sys.modules if n.startswith(f"gptlab_plugin_{path.stem}_")]:
        monkeypatch.delitem(sys.modules, name)


def test_sample_and_the_report_import_the_plugins_of_the_sweep_that_trained_the_run(tmp_path, corpus, capsys,
                                                                                      monkeypatch):
    plugin = tmp_path / "loose_ends_act.py"
    plugin.write_text(PLUGIN)
    empty = tmp_path / "registers_nothing.py"
    empty.write_text('"""A plugin that registers nothing."""\n')
    entries = dict(ACTIVATIONS._entries)
    monkeypatch.setattr(ACTIVATIONS, "_entries", dict(entries))  # the sweep's import registers into a copy
    config = tiny_config(corpus, max_iters=10, eval_interval=10, log_interval=10)
    spec = {"name": "plug", "description": "a run with a plugin activation", "plugins": ["loose_ends_act.py"],
            "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"model.activation": ["loose_ends_gelu"]}, "seeds": 1,
            "executor": {"backend": "loky", "n_jobs": 2}}  # as in test_sweep: one pool of workers serves both
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    monkeypatch.setattr("gptlab.report.write_report", lambda *a, **k: tmp_path)  # its samples are checked below
    assert sweep_main([str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results"),
                       "--reports-dir", str(tmp_path / "reports")]) == 0
    results = tmp_path / "results" / "plug"
    assert yaml.safe_load((results / "sweep.yaml").read_text())["plugins"] == [str(plugin.resolve())]
    (run,) = (results / "runs").iterdir()
    monkeypatch.chdir(results)  # not the sweep's folder: the plugin is found from sweep.yaml

    forget_plugin(monkeypatch, entries, plugin)
    capsys.readouterr()
    assert sample_main([str(run), "--tokens", "12", "--prompt", "The"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("The") and len(text) > len("The")
    assert "loose_ends_gelu" in ACTIVATIONS.names()

    # --plugin names them instead: a plugin that does not register the activation leaves it unknown
    forget_plugin(monkeypatch, entries, plugin)
    assert sample_main([str(run), "--tokens", "12", "--plugin", str(empty)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "loose_ends_gelu" in err and "\n" not in err

    # the report samples a checkpoint whose run kept no sample.txt: with the plugin, not "(sampling failed ...)"
    forget_plugin(monkeypatch, entries, plugin)
    (run / "sample.txt").unlink()
    (cell, run_id, sample), = samples(load_results(results))
    assert run_id == run.name and sample and not sample.startswith("(")


def test_sample_names_the_sweep_yaml_when_a_plugin_it_lists_is_gone(tmp_path, capsys):
    run = tmp_path / "results" / "gone" / "runs" / "r_s0_0123456789"
    run.mkdir(parents=True)
    (tmp_path / "results" / "gone" / "sweep.yaml").write_text(yaml.safe_dump({"plugins": [str(tmp_path / "moved.py")]}))
    assert sample_main([str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert "moved.py" in err and "sweep.yaml" in err and "--plugin" in err and "\n" not in err


# -- the "same config" error names the keys that made two cells one ------------------------------------
def test_two_cells_with_one_config_are_refused_naming_the_ignored_key_and_the_exclude_that_fixes_it(
        tmp_path, corpus, capsys):
    config = tiny_config(corpus)
    spec = {"name": "same", "description": "char ignores vocab_size", "plugins": [],
            "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"data.tokenizer": ["char", "bpe"], "data.vocab_size": [256, 1024]}, "seeds": 1}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    args = [str(path), "--dry-run", "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "rep")]
    assert sweep_main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: grid: cells (char, 256) and (char, 1024) resolve to the same config: they differ only in "
                   "data.vocab_size, which data.tokenizer=char ignores; exclude one of them "
                   "(e.g. exclude: [{data.tokenizer: char, data.vocab_size: 1024}])")
    spec["exclude"] = yaml.safe_load(err.split("(e.g. exclude: ", 1)[1][:-1])  # the suggested exclude, as given
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert sweep_main(args) == 0
    assert not (tmp_path / "results").exists()


def test_levels_that_resolve_to_one_value_are_named_as_such(tmp_path, corpus, capsys):
    config = tiny_config(corpus)
    config["data"]["tokenizer"] = "bpe"
    spec = {"name": "same", "description": "bpe without a size is bpe 1024", "plugins": [],
            "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"model.norm": ["pre", "post"], "data.vocab_size": [None, 1024]}, "seeds": 1}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert sweep_main([str(path), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: grid: cells (pre, null) and (pre, 1024) resolve to the same config: they differ only in "
                   "data.vocab_size, whose levels resolve to the same value; exclude one of them "
                   "(e.g. exclude: [{model.norm: pre, data.vocab_size: 1024}])")


# -- a numeric factor draws no categorical-units message -------------------------------------------
NUMERIC_GRID = {"model.norm": ["pre", "post"], "train.warmup_iters": [0, 100, 200]}


def test_best_loss_per_level_puts_numeric_levels_on_ticks_without_the_category_axis(tmp_path, caplog, monkeypatch):
    res = load_results(make_results(tmp_path, NUMERIC_GRID, 2))
    drawn = []
    monkeypatch.setattr(F, "to_png", lambda fig: drawn.append(fig) or b"png")
    caplog.set_level(logging.INFO, logger="matplotlib.category")
    assert F.level_effects(res, analyses.level_table(res)) == b"png"
    assert not [r for r in caplog.records if r.name.startswith("matplotlib")], caplog.records
    norm, warmup = drawn[0].axes
    assert [t.get_text() for t in warmup.get_xticklabels()] == ["0", "100", "200"]
    assert [t.get_text() for t in norm.get_xticklabels()] == ["pre", "post"]
    dots = warmup.collections[:3]  # one scatter per level, then the error bars
    for i, level in enumerate(["0", "100", "200"]):
        x, y = dots[i].get_offsets().T
        runs = res.runs[res.runs["train.warmup_iters"] == level]
        assert len(x) == len(runs) and all(abs(x - i) <= 0.1)  # at the level's tick, jittered
        assert sorted(y) == pytest.approx(sorted(runs["best_val_loss"]))


def test_a_report_of_a_numeric_factor_logs_no_category_message(tmp_path, caplog):
    results = make_results(tmp_path, {"train.warmup_iters": [0, 100]}, 2)
    caplog.set_level(logging.INFO, logger="matplotlib.category")
    write_report(results, tmp_path / "report")
    assert (tmp_path / "report" / "figures" / "level_effects.png").is_file()
    assert not [r for r in caplog.records if r.name == "matplotlib.category"], [r.getMessage() for r in caplog.records]
