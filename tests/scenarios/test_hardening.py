"""Odd but plausible input: each case is refused in one line (exit 2) before anything is written."""
from __future__ import annotations

import copy
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from helpers import REPO, tiny_config

from gptlab.run.config import resolve_run_config
from gptlab.sweep_cli import main as sweep_main


def base_spec(corpus: Path) -> dict:
    config = tiny_config(corpus)
    return {"name": "odd", "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"model.norm": ["pre", "post"]}, "seeds": 1, "executor": {"backend": "loky", "n_jobs": 1}}


def setting(spec: dict, dotted: str, value) -> dict:
    spec = copy.deepcopy(spec)
    node = spec
    *parents, leaf = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return spec


def binary_file(folder: Path) -> str:
    path = folder / "blob.bin"
    path.write_bytes(bytes(range(256)) * 64)
    return str(path)


def short_corpus(folder: Path) -> str:
    path = folder / "short.txt"
    path.write_text("To be, or not to be: that is the question.\n" * 2, encoding="utf-8")
    return str(path)


# (id, how to change the spec, words the one-line error must contain)
CASES = [
    ("name-newline", lambda s, d: {**s, "name": "quick\n"}, "name: must be a folder-safe name"),
    ("name-300", lambda s, d: {**s, "name": "a" * 300}, "1 to 100 characters"),
    ("name-101", lambda s, d: {**s, "name": "a" * 101}, "... (101 characters)"),
    (
        "grid-40-and-40.0",
        lambda s, d: {**s, "grid": {"train.max_iters": [40, 40.0]}},
        "grid.train.max_iters: lists a level twice (40 and 40.0 are one level)",
    ),
    ("seed-2^64", lambda s, d: {**s, "seeds": [2**64]}, "seeds: each seed must be in [0, 2**63)"),
    ("seeds-billion", lambda s, d: {**s, "seeds": 1_000_000_000}, "seeds: a count must be between 1 and 10,000"),
    ("binary-corpus", lambda s, d: setting(s, "base.data.path", binary_file(d)), "is not UTF-8 text"),
    ("short-corpus", lambda s, d: setting(s, "base.data.path", short_corpus(d)), "too few for model.block_size"),
    ("device-cuda-x", lambda s, d: setting(s, "base.train.device", "cuda:x"), "train.device must be auto, cpu"),
    ("lr-inf", lambda s, d: setting(s, "base.train.lr", float("inf")), "train.lr must be a finite number"),
    ("min_lr-nan", lambda s, d: setting(s, "base.train.min_lr", float("nan")), "train.min_lr must be a finite number"),
    ("grad_clip-nan", lambda s, d: setting(s, "base.train.grad_clip", float("nan")), "train.grad_clip must be a finite"),
    ("weight_decay-nan", lambda s, d: setting(s, "base.train.weight_decay", float("nan")), "train.weight_decay must be a finite"),
    (
        "grid-level-nan",
        lambda s, d: {**s, "grid": {"train.weight_decay": [0.1, float("nan")]}},
        "train.weight_decay must be a finite number",
    ),
    ("threads-100000", lambda s, d: setting(s, "executor.threads", 100_000), "executor.threads: 100000 threads per run"),
    (
        "shared_dir-relative",
        lambda s, d: {**s, "executor": {"backend": "dask", "scheduler": "local", "shared_dir": "scratch"}},
        "executor.shared_dir: must be an absolute path",
    ),
    (
        "scheduler-with-loky",
        lambda s, d: setting(s, "executor.scheduler", "tcp://127.0.0.1:8786"),
        "executor.scheduler: only the dask backend uses it",
    ),
    (
        "exclude-int-for-bool",
        lambda s, d: {**s, "grid": {"model.bias": [True, False]}, "exclude": [{"model.bias": 1}]},
        "model.bias level 1 (int) is not in the grid",
    ),
    (
        "baseline-str-for-float",
        lambda s, d: {**s, "grid": {"train.beta2": [0.95, 0.99]}, "baseline": {"train.beta2": "0.999"}},
        "level '0.999' (str) is not in the grid",
    ),
    ("block_size-1M", lambda s, d: setting(s, "base.model.block_size", 1_000_000), "too few for model.block_size"),
    (
        "n_layer-1000",
        lambda s, d: setting(setting(setting(s, "base.model.n_layer", 1_000), "base.model.n_embd", 1024), "base.model.n_head", 4),
        "more than the",
    ),
    ("n_layer-10000", lambda s, d: setting(s, "base.model.n_layer", 10_000), "model.n_layer must be at most 1,024"),
    *(
        [("device-mps", lambda s, d: setting(s, "base.train.device", "mps"), "MPS (Apple GPUs) is not available")]
        if not torch.backends.mps.is_available()
        else []
    ),
    *(
        [("device-cuda", lambda s, d: setting(s, "base.train.device", "cuda:0"), "CUDA is not available here")]
        if not torch.cuda.is_available()
        else [("device-cuda-99", lambda s, d: setting(s, "base.train.device", "cuda:99"), "GPU(s): cuda:0 to")]
    ),
    (
        "n_embd-huge",
        lambda s, d: setting(setting(s, "base.model.n_embd", 65536), "base.model.n_head", 1),
        "make the model or the batches smaller",
    ),
]


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize("case, change, words", CASES, ids=[c[0] for c in CASES])
def test_odd_input_is_refused_in_one_line_before_anything_is_written(case, change, words, dry_run, tmp_path, corpus, capsys):
    spec_path = tmp_path / "odd.yaml"
    spec_path.write_text(yaml.safe_dump(change(base_spec(corpus), tmp_path), sort_keys=False))
    results = tmp_path / "results"
    argv = [str(spec_path), "--results-dir", str(results), "--reports-dir", str(tmp_path / "reports")]
    code = sweep_main(argv + (["--dry-run"] if dry_run else []))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert words in err
    assert not results.exists() and not (tmp_path / "reports").exists()


@pytest.mark.slow
def test_a_huge_model_is_refused_without_being_built(tmp_path, corpus):
    """The memory estimate refuses it: the refusing process never grows past a few hundred MiB."""
    spec = setting(setting(base_spec(corpus), "base.model.n_layer", 1_000), "base.model.n_embd", 2048)
    spec = setting(spec, "base.model.n_head", 8)
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump(spec))
    # The child reports its own peak: VmHWM of its own address space. Not RUSAGE_CHILDREN (it counts workers of
    # earlier tests reaped since), nor the child's ru_maxrss (Linux carries the forking parent's peak over exec).
    measured = ("import re, resource, runpy, sys\nsys.argv = ['gptlab.sweep'] + sys.argv[1:]\ntry:\n"
                "    runpy.run_module('gptlab.sweep', run_name='__main__')\nfinally:\n"
                "    try:\n"
                "        peak = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
                "    except (OSError, AttributeError):\n"
                "        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
                "    print('PEAK_KIB', peak, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", measured, str(path), "--results-dir", str(tmp_path / "r")],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and "make the model or the batches smaller" in proc.stderr
    assert "Traceback" not in proc.stderr
    peak_mib = int(proc.stderr.split("PEAK_KIB")[1].split()[0]) / 1024
    assert peak_mib < 600, f"the refusing process peaked at {peak_mib:.0f} MiB"


@pytest.mark.parametrize("written, meant", [("1e4", 10000), (10000.0, 10000), ("2.5e3", 2500)])
def test_an_integral_number_in_any_spelling_is_an_int(written, meant):
    cfg = resolve_run_config({"train": {"max_iters": written}})
    assert cfg.train.max_iters == meant and isinstance(cfg.train.max_iters, int)


@pytest.mark.parametrize("written", ["1.5e3x", 12.5, True])
def test_a_non_integral_value_for_an_int_is_refused(written):
    from gptlab.errors import GptlabError

    with pytest.raises(GptlabError, match="train.max_iters must be int"):
        resolve_run_config({"train": {"max_iters": written}})


def test_a_sweep_with_max_iters_1e4_and_huge_intervals_is_accepted(tmp_path, corpus, capsys):
    spec = setting(base_spec(corpus), "base.train.max_iters", "1e4")
    spec = setting(setting(spec, "base.train.eval_interval", 10**8), "base.train.log_interval", 10**8)
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert sweep_main([str(path), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 0
    assert "2 runs: 0 finished, 2 to train" in capsys.readouterr().out


def test_a_warmup_as_long_as_the_run_is_warned_before_anything_trains(tmp_path, corpus, capsys, caplog):
    """Issue 55: a 60-step sweep at the default warmup (100) never reaches its lr; the dry run (and the sweep, which
    runs the same preflight) says so in one line naming both settings, and a warmup below the length says nothing."""
    spec = setting(setting(base_spec(corpus), "base.train.max_iters", 60), "base.train.warmup_iters", 100)
    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump(spec))
    with caplog.at_level(logging.WARNING, logger="gptlab"):
        assert sweep_main([str(path), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 0
    lines = [r.getMessage() for r in caplog.records if "warmup_iters" in r.getMessage()]
    assert len(lines) == 1 and "train.warmup_iters 100 is not below train.max_iters 60 (2 run(s)" in lines[0]
    peak = spec["base"]["train"].get("lr", 1e-3)
    assert f"ends at {peak * 60 / 101:.3g} of its peak {peak:g}" in lines[0]  # linear warmup: step 59 of 100
    caplog.clear()
    path.write_text(yaml.safe_dump(setting(spec, "base.train.warmup_iters", 10)))
    with caplog.at_level(logging.WARNING, logger="gptlab"):
        assert sweep_main([str(path), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 0
    assert not [r for r in caplog.records if "warmup_iters" in r.getMessage()]


def test_a_nan_margin_is_echoed_as_nan(tmp_path, corpus, capsys):
    spec_path = tmp_path / "odd.yaml"
    spec_path.write_text(yaml.safe_dump(base_spec(corpus), sort_keys=False))
    assert sweep_main([str(spec_path), "--results-dir", str(tmp_path / "r"), "--margin", "nan"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --margin: must be a positive finite number of nats/char (e.g. 0.01), got nan"


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


# -- a folder named gptlab that is not the package (issue 55): refused at once, not after every run has trained --

def _shadowed(tmp_path: Path, monkeypatch) -> Path:
    """`gptlab` as Python imports it from a folder holding a bare gptlab/ (no __init__.py) when the package is
    installed editable: a namespace package whose __init__ never ran (no __version__), its submodules the
    installed ones."""
    import types

    folder = tmp_path / "gptlab"
    folder.mkdir()
    shadow = types.ModuleType("gptlab")
    shadow.__path__ = [str(folder)]
    monkeypatch.setitem(sys.modules, "gptlab", shadow)
    return folder


def _entry_points():
    from gptlab.export import main as export_main
    from gptlab.prepare import main as prepare_main
    from gptlab.report.__main__ import main as report_main
    from gptlab.sample import main as sample_main
    from gptlab.train import main as train_main

    return {"sweep": (sweep_main, ["{tmp}/s.yaml", "--results-dir", "{tmp}/results"]),
            "train": (train_main, ["--config", "{tmp}/run.yaml", "--out", "{tmp}/results"]),
            "report": (report_main, ["{tmp}/results", "--out", "{tmp}/results"]),
            "export": (export_main, ["{tmp}/results", "--tensorboard", "{tmp}/results"]),
            "sample": (sample_main, ["{tmp}/results"]),
            "prepare": (prepare_main, ["austen", "--out", "{tmp}/results", "--from", "{tmp}/nowhere"])}


@pytest.mark.parametrize("command", ["sweep", "train", "report", "export", "sample", "prepare"])
def test_a_folder_named_gptlab_that_hides_the_package_is_refused_in_one_line(command, tmp_path, corpus, monkeypatch,
                                                                             capsys):
    main, argv = _entry_points()[command]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(base_spec(corpus)))  # tiny: today's code trains them
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(tiny_config(corpus, max_iters=2, eval_interval=2)))
    folder = _shadowed(tmp_path, monkeypatch)
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {folder} is not the gptlab package") and "\n" not in err, err
    assert not (tmp_path / "results").exists()


def test_a_run_under_a_hidden_package_fails_before_it_trains(tmp_path, corpus, monkeypatch):
    from gptlab.errors import GptlabError
    from gptlab.run.population_run import train_population
    from gptlab.run.runner import train_run

    config = resolve_run_config(tiny_config(corpus))
    folder = _shadowed(tmp_path, monkeypatch)
    with pytest.raises(GptlabError, match=f"^{folder} is not the gptlab package"):
        train_run(config, tmp_path / "run")  # a worker elsewhere (dask, SLURM) started in such a folder
    with pytest.raises(GptlabError, match=f"^{folder} is not the gptlab package"):
        train_population([config, config.with_settings({"seed": 1})], [tmp_path / "run", tmp_path / "run1"])
    assert not (tmp_path / "run").exists() and not (tmp_path / "run1").exists()


# An editable install's finder (setuptools'): on sys.meta_path after PathFinder, which sees the folder first.
EDITABLE = """import runpy, sys
from importlib.machinery import PathFinder
root, module, *args = sys.argv[1:]
class Installed:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname == "gptlab" or fullname.rpartition(".")[0] == "gptlab":
            return PathFinder.find_spec(fullname, [root] if fullname == "gptlab" else [root + "/gptlab"])
        return None
sys.meta_path.insert(sys.meta_path.index(PathFinder) + 1, Installed)
sys.argv = [module, *args]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@pytest.mark.slow
def test_a_sweep_started_in_a_folder_holding_a_bare_gptlab_folder_refuses_before_planning(tmp_path, corpus):
    import os

    (tmp_path / "gptlab").mkdir()
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(base_spec(corpus)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the package only through the finder
    proc = subprocess.run([sys.executable, "-c", EDITABLE, str(REPO), "gptlab.sweep", "s.yaml", "--dry-run"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (f"error: {tmp_path / 'gptlab'} is not the gptlab package (a folder named gptlab "
                                   "without __init__.py, which Python imports in its place); run from another "
                                   "folder, or rename that one"), proc.stderr
