"""The sweep spec loader under fuzzing (hypothesis), and the loader's own refusals, case by case.

Property, for any bytes in a sweep file and any `--set`/`--jobs`/`--margin`: `python -m gptlab.sweep
SPEC --dry-run` either accepts the spec or exits 2 with exactly one line `error: ...` that names a
key (or the file and line); never a traceback, never a file written (the results folder and the
current directory stay as they were). Specs are drawn at random and mutated from the shipped
`ablations/*.yaml`: wrong types at every key, NaN/inf/huge/negative numbers, unicode and control
characters, long strings and lists, deep nesting, duplicate and unknown keys, anchors and aliases
(an alias bomb among them) and non-UTF-8 bytes. Time and memory per spec are measured by
`benchmarks/fuzz_spec.py`, which runs the same generators for 10,000 specs and more; the tests
here run a few hundred, reproducibly (derandomized), and are not timed.

The generators and the `check_spec` harness are plain functions so that the benchmark imports them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import re
import tracemalloc
import typing
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from helpers import REPO, make_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gptlab.sweep.estimate
import gptlab.sweep.loader
from gptlab.errors import GptlabError
from gptlab.executors.base import ExecutorConfig
from gptlab.model import REGISTRIES
from gptlab.run.config import LIMITS, SECTIONS, coerce, resolve_run_config, valid_keys
from gptlab.sweep.kinds import SWEEP_KINDS
from gptlab.sweep.loader import MAX_SPEC_BYTES, load_yaml, parse_overrides, read_spec_file
from gptlab.sweep.spec import TOP_KEYS
from gptlab.sweep_cli import main as sweep_main

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

SHIPPED = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted((REPO / "ablations").glob("*.yaml"))}
RUN_KEYS = [k for k in valid_keys() if k != "seed"]
# What an error line may name: a key of the spec or of a run config, a CLI option, or the file (YAML errors).
KEY_WORDS = [*TOP_KEYS, *SWEEP_KINDS, *RUN_KEYS, "model", "train", "data", "seed", "--set", "--jobs", "--margin", "fuzz.yaml"]


# ---- a small YAML emitter: specs may hold what PyYAML's dumper never writes -------------------------

@dataclasses.dataclass(frozen=True)
class Raw:
    """Emitted verbatim: a tag, an invalid date, an undefined alias, a deep bracket nest."""

    text: str  # the YAML text


@dataclasses.dataclass(frozen=True)
class Pairs:
    """A mapping written pair by pair, so that a key may appear twice."""

    items: tuple[tuple[Any, Any], ...]  # (key, value) in order


@dataclasses.dataclass(frozen=True)
class Anchor:
    """`&name value`."""

    name: str  # the anchor
    value: Any  # what it names


@dataclasses.dataclass(frozen=True)
class Alias:
    """`*name`."""

    name: str  # the anchor it repeats


@dataclasses.dataclass(frozen=True)
class FileRef:
    """A path to one of the fuzz files (`FuzzFiles`), filled in when the spec is written."""

    name: str  # corpus | empty | binary | folder | short | missing | plugin


def emit(value: Any, files: "FuzzFiles") -> str:
    """Flow-style YAML for `value` (every string double-quoted, so it stays a string)."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Anchor):
        return f"&{value.name} {emit(value.value, files)}"
    if isinstance(value, Alias):
        return f"*{value.name}"
    if isinstance(value, FileRef):
        return json.dumps(str(files.path(value.name)))
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        mantissa, e, exponent = repr(value).partition("e")
        return (mantissa if "." in mantissa else mantissa + ".0") + (e + exponent)  # YAML 1.1 wants the dot
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are YAML double-quoted escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(emit(v, files) for v in value) + "]"
    items = value.items if isinstance(value, Pairs) else tuple(value.items())
    return "{" + ", ".join(f"{emit(k, files)}: {emit(v, files)}" for k, v in items) + "}"


def emit_document(spec: Any, files: "FuzzFiles") -> str:
    """A spec as a file: a top-level mapping in block style (one key a line), the rest in flow style."""
    if isinstance(spec, (dict, Pairs)):
        items = spec.items if isinstance(spec, Pairs) else tuple(spec.items())
        return "".join(f"{emit(k, files)}: {emit(v, files)}\n" for k, v in items)
    return emit(spec, files) + "\n"


# ---- the files a spec may point at, and the harness ----------------------------------------------

class FuzzFiles:
    """A scratch tree: the corpus and odd files specs point at, an empty working directory, and where
    the spec is written. No /dev paths: a device as data.path is the corpus checks' business."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cwd = root / "cwd"  # the working directory during a dry run: must stay empty
        self.spec_dir = root / "spec"
        self.spec = self.spec_dir / "fuzz.yaml"
        self.results = root / "results"  # --results-dir: must never be created
        self.reports = root / "reports"
        files = root / "files"
        for folder in (self.cwd, self.spec_dir, files / "folder"):
            folder.mkdir(parents=True, exist_ok=True)
        make_corpus(files / "corpus.txt")
        (files / "empty.txt").write_bytes(b"")
        (files / "binary.bin").write_bytes(bytes(range(256)) * 16)
        (files / "short.txt").write_text("To be, or not to be.\n", encoding="utf-8")
        self._paths = {"corpus": files / "corpus.txt", "empty": files / "empty.txt", "binary": files / "binary.bin",
                       "short": files / "short.txt", "folder": files / "folder", "missing": files / "missing.txt",
                       "plugin": REPO / "ablations" / "plugins" / "scaled_sinusoidal.py"}

    def path(self, name: str) -> Path:
        return self._paths[name]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one dry run did."""

    code: int  # exit status
    out: str  # stdout
    err: str  # stderr


def check_spec(document: str | bytes, argv: list[str], files: FuzzFiles) -> Outcome:
    """Write `document` as the spec, dry-run it in-process from `files.cwd`, and assert the property.

    An exception from the sweep (a traceback on the command line) propagates to the caller.
    """
    outcome, cwd_before = run_spec(document, argv, files)
    assert_property(outcome, files, cwd_before)
    return outcome


def run_spec(document: str | bytes, argv: list[str], files: FuzzFiles) -> tuple[Outcome, list[str]]:
    """Dry-run `document` in-process from `files.cwd`; returns what it did and the listing of the cwd before."""
    files.spec.write_bytes(document.encode("utf-8", "surrogatepass") if isinstance(document, str) else document)
    before = sorted(os.listdir(files.cwd))
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(files.cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = sweep_main([str(files.spec), "--dry-run", "--results-dir", str(files.results),
                               "--reports-dir", str(files.reports), *argv])
    finally:
        os.chdir(cwd)
    return Outcome(code, out.getvalue(), err.getvalue()), before


def assert_property(outcome: Outcome, files: FuzzFiles, cwd_before: list[str]) -> None:
    if outcome.code == 0:
        assert "runs:" in outcome.out, outcome.out
    else:
        lines = outcome.err.strip().splitlines()
        assert outcome.code == 2, outcome.err
        assert len(lines) == 1 and lines[0].startswith("error: "), outcome.err
        assert any(word in lines[0] for word in KEY_WORDS), f"names no key: {lines[0]}"
        assert outcome.out == "", outcome.out
    assert not files.results.exists() and not files.reports.exists(), "the dry run wrote results"
    assert sorted(os.listdir(files.cwd)) == cwd_before, "the dry run wrote into the working directory"


# ---- generators ----------------------------------------------------------------------------------

# No tcp:// scheduler addresses: a dask dry run probes one (5 s when nothing answers), the network's
# time rather than validation's ('local' is here: it starts nothing in a dry run).
TRICKY_STRINGS = ["", " ", "pre", "post", "gelu", "relu", "learned", "tied", "auto", "cpu", "cuda", "cuda:99", "mps",
                  "float32", "bpe", "char", "loky", "dask", "local", "retry", "tinyshakespeare", "1e4", "2e30", "1e-3",
                  "nan", "inf", "-inf", ".inf", "-1", "0x1f", "1_000", "yes", "~", "null", "a\nb", "\t", "\x00", "\x1b[31m",
                  "é", "😀", "\u202e", "../..", "/", ".", "~/x", "C:\\x", "model.norm", "train.lr", "grid", "base",
                  "x" * 101, "plugins/scaled_sinusoidal.py", "{a: 1}", "[1]", "&a", "*a"]
EDGE_NUMBERS = [0, 1, -1, 2, 3, 7, 64, 255, 256, 257, 65536, 65537, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 2**128,
                10**8, 10**8 + 1, 2**20 + 1, 10**400, -(2**128), 0.0, -0.0, 0.5, 1.0, 1e-300, 1e300, 2e30, 1.5,
                float("nan"), float("inf"), float("-inf")]
RAW_SCALARS = ["1e400", "-1e400", "+.inf", ".NaN", "0o17", "0b101", "0x_ff", "1:20", "190:20:30.15", "1_0.5", "-0",
               "2001-13-45", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "!!binary aGVsbG8=", "!!binary ***",
               "!!set {a, b}", "!!omap [{a: 1}, {b: 2}]", "!!pairs [{a: 1}]", "!!int abc", "!!float x", "!!str 5",
               "!!python/object/apply:os.system [echo]", "!foo bar", "*undefined", "? [a]\n: b", "1" * 5000,
               "-" + "9" * 4400, "'unterminated", "{a: 1", "[1, 2", "|\n  block", ">-\n  folded", "@reserved", "`tick"]
KEY_TEXT = st.one_of(st.sampled_from([*KEY_WORDS, "lol", "Model.Norm", "grid ", "train.lr.x", ""]),
                     st.text(max_size=12))


def _safe_text(text: str) -> str:
    # Never a device or kernel file: a /dev path as data.path is checked by the corpus checks (before any read)
    # and a plugin path is imported, so neither is this fuzzer's to try.
    return "gptlab-fuzz" + text if text.lstrip().startswith(("/dev", "/proc", "/sys")) else text


texts = st.one_of(st.sampled_from(TRICKY_STRINGS), st.text(max_size=20)).map(_safe_text)
numbers = st.one_of(st.sampled_from(EDGE_NUMBERS), st.integers(), st.floats(),
                    st.integers(-1100, 1100).map(lambda e: 2.0 ** e if e < 1024 else 2**e),  # past float's range
                    st.integers(1, 4299).map(lambda d: -(10**d) if d % 2 else 10**d))  # str() stops at 4,300 digits
files_refs = st.sampled_from(["corpus", "empty", "binary", "folder", "short", "missing"]).map(FileRef)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts, st.sampled_from(RAW_SCALARS).map(Raw), files_refs)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=6),
                                                        st.dictionaries(KEY_TEXT, inner, max_size=4)), max_leaves=12)
# Values a key could well hold, so that more specs get past the first check to the later ones.
NAMES = sorted({n for r in REGISTRIES.values() for n in r.names()} | {"char", "bpe", "cpu", "auto", "loky", "local"})
plausible = st.one_of(st.integers(0, 3000), st.floats(0, 1), st.booleans(), st.sampled_from(NAMES))


def similar(value: Any) -> st.SearchStrategy:
    """A value of the same type as `value` and of a like size: specs that stay valid, or fail late (shapes, data)."""
    if isinstance(value, bool) or value is None:
        return st.sampled_from([True, False, None])
    if isinstance(value, int):
        return st.integers(0, 2 * abs(value) + 2)
    if isinstance(value, float):
        return st.floats(0, 2 * abs(value) + 1 if abs(value) < 1e300 else 1.0)  # NaN, inf: up to 1
    if isinstance(value, str):
        return st.sampled_from(NAMES + [value])
    return st.just(value)


def _weird(big: bool) -> st.SearchStrategy:
    """Any value: mostly small odd ones, sometimes long (strings, lists) or deeply nested; `big` for the benchmark."""
    long_lists = st.tuples(st.integers(100, 12_000 if big else 1_500), scalars).map(lambda t: [t[1]] * t[0])
    long_texts = st.integers(1_000, 300_000 if big else 20_000).map(lambda n: "y" * n)
    deep = st.integers(20, 3_000 if big else 100).map(lambda n: Raw("[" * n + "1" + "]" * n))
    return st.one_of(values, values, values, plausible, plausible, long_lists, long_texts, deep)


WEIRD = {False: _weird(False), True: _weird(True)}
# Plugins are imported: only names that cannot exist, paths that do not, and the shipped example plugin.
plugin_entries = st.one_of(st.just(FileRef("plugin")), st.text(max_size=10).map(lambda t: "gptlab_fuzz_absent_" + t),
                           st.text(max_size=10).map(lambda t: t + "_absent.py"), st.none(), numbers)


def billion_laughs(levels: int = 9) -> str:
    """The classic alias bomb: 10 ** levels strings from a few lines of YAML."""
    lines = ['lol0: &lol0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"lol{i}: &lol{i} [" + ", ".join([f"*lol{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def shipped_spec(name: str) -> dict[str, Any]:
    """A shipped ablation with its data pointed at the small generated corpus (BPE trains on it in ms)."""
    spec = json.loads(json.dumps(SHIPPED[name]))
    spec["base"].setdefault("data", {})["path"] = FileRef("corpus")
    spec["base"]["data"]["dataset"] = "fuzz"
    if "plugins" in spec:  # relative to ablations/, which is not where the fuzz spec is written
        spec["plugins"] = [FileRef("plugin")]
    return spec


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a spec tree, in document order (the order anchors must respect)."""
    found = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            found += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += _paths(v, prefix + (i,))
    return found


def _get(node: Any, path: tuple) -> Any:
    for part in path:
        node = node[part]
    return node


def _set(root: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(root, path[:-1])[path[-1]] = value
    return root


@st.composite
def mutated_specs(draw: st.DrawFn, big: bool = False) -> Any:
    """A shipped ablation with one to four edits: replace, delete, add, duplicate or alias a key or value."""
    weird = WEIRD[big]
    spec: Any = shipped_spec(draw(st.sampled_from(sorted(SHIPPED))))
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3, 4]))):
        if not isinstance(spec, dict):
            break
        paths = _paths(spec)
        op = draw(st.sampled_from(["replace", "replace", "similar", "similar", "similar", "plausible", "number",
                                   "delete", "add", "duplicate", "alias", "bomb"]))
        if op in ("similar", "plausible", "number"):  # a leaf: the spec keeps its shape and often stays valid
            paths = [p for p in paths if not isinstance(_get(spec, p), (dict, list))] or paths
        path = draw(st.sampled_from(paths))
        target = _get(spec, path)
        if path[:1] == ("plugins",):
            spec = _set(spec, path, draw(plugin_entries))
        elif op == "replace":
            spec = _set(spec, path, draw(weird))
        elif op == "number":
            spec = _set(spec, path, draw(numbers))
        elif op == "plausible":
            spec = _set(spec, path, draw(plausible))
        elif op == "similar":
            spec = _set(spec, path, draw(similar(target)))
        elif op == "delete" and path:
            parent = _get(spec, path[:-1])
            del parent[path[-1]]
        elif op == "add" and isinstance(target, dict):
            target[draw(KEY_TEXT)] = draw(weird)
        elif op == "duplicate" and isinstance(target, dict) and target:
            key = draw(st.sampled_from(list(target)))
            again = draw(st.one_of(st.just(target[key]), weird))
            pairs = Pairs(tuple(target.items()) + ((key, again),))
            if not path:
                return pairs
            spec = _set(spec, path, pairs)
            break  # a Pairs is not a dict: no further edits inside it
        elif op == "alias" and len(paths) > 2:
            later = draw(st.sampled_from(paths[paths.index(path) + 1:] or [path]))
            if path and later != path:
                shared = _get(spec, path)
                spec = _set(spec, later, Alias("a"))  # may land inside the anchor's own value: a cycle
                spec = _set(spec, path, Anchor("a", shared))
                break  # the tree now holds markers: stop editing it
        elif op == "bomb" and path:
            spec = _set(spec, path, Raw("&b0 [" + ", ".join(['"lol"'] * 10) + "]"))
            return Raw(billion_laughs(draw(st.integers(2, 9))) + emit_document(spec, FILES_PLACEHOLDER))
    return spec


class _Placeholder:
    """Paths are filled in at write time; a bomb document is emitted early, so it uses the same names."""

    def path(self, name: str) -> str:
        return f"@FILE:{name}@"


FILES_PLACEHOLDER: Any = _Placeholder()


CLUSTER_KEYS = ["type", "partition", "account", "cores", "memory", "walltime", "jobs", "min_jobs", "max_jobs",
                "job_extra_directives", "job_script_prologue", "python", "local_directory", "log_directory",
                "interface", "job_name", "patience", "queue", "x"]
CLUSTER_VALUES = ["slurm", "pbs", "gpu", "4GB", "16GiB", "4 gigs", "01:00:00", "25:99:99", "0", "1-12:00:00", "0:05",
                  ["--gres=gpu:1"], ["#SBATCH --gres=gpu:1"], ["module load x\nrm -rf /"], "a b", 43200]


def clusters(weird: st.SearchStrategy) -> st.SearchStrategy:
    """`executor.cluster` sections: SLURM's keys (and dask-jobqueue's names for them) with odd and plausible values."""
    value = st.one_of(weird, st.sampled_from(CLUSTER_VALUES), st.integers(-2, 20_000))
    any_keys = st.builds(lambda keys, vals: dict(zip(keys, vals)),
                         st.lists(st.sampled_from(CLUSTER_KEYS), max_size=5, unique=True),
                         st.lists(value, min_size=5, max_size=5))
    # valid keys under a valid type: the checks of each key's value are reached, not only the first refusal
    slurm_keys = st.builds(lambda keys, vals: {"type": "slurm", **dict(zip(keys, vals))},
                           st.lists(st.sampled_from([k for k in CLUSTER_KEYS if k not in ("type", "queue", "x")]),
                                    max_size=3, unique=True),
                           st.lists(value, min_size=3, max_size=3))
    return st.one_of(weird, any_keys, slurm_keys, slurm_keys)


@st.composite
def executors(draw: st.DrawFn, weird: st.SearchStrategy) -> dict[str, Any]:
    """`executor:` sections: its keys with odd and plausible values, half of them with a SLURM `cluster`."""
    section = {k: draw(st.one_of(weird, st.sampled_from(["auto", "loky", "dask", "local", 1, 2])))
               for k in draw(st.lists(st.sampled_from(["backend", "n_jobs", "threads", "runs_per_gpu", "scheduler",
                                                       "shared_dir", "on_worker_lost", "x"]), max_size=3, unique=True))}
    if draw(st.booleans()):
        section["cluster"] = draw(clusters(weird))
        section["backend"] = draw(st.sampled_from(["dask", "dask", "loky"]))  # a cluster is dask's
    return section


def tunes(weird: st.SearchStrategy) -> st.SearchStrategy:
    """`tune:` sections: a space of lrs (or of any key), seeds, a method and its options, given picks."""
    lrs = st.one_of(st.lists(st.sampled_from([1e-4, 3e-4, 1e-3, 3e-3, 0, -1e-3, 1e10]), min_size=1, max_size=5),
                    weird)
    space = st.one_of(st.dictionaries(st.sampled_from(["train.lr", "train.warmup_iters", "model.norm", "lr", "x"]),
                                      lrs, max_size=2), weird)
    return st.fixed_dictionaries({"space": space}, optional={
        "seeds": st.one_of(st.integers(-1, 200), weird),
        "method": st.one_of(st.sampled_from(["grid", "refine", "optuna", ""]), weird),
        "confidence": st.one_of(st.floats(-1, 2), weird), "max_runs_per_cell": st.one_of(st.integers(-1, 10**6), weird),
        "tolerance": st.one_of(numbers, weird), "picks": st.one_of(st.lists(st.dictionaries(
            st.sampled_from(["train.lr", "model.norm", "x"]), scalars, max_size=2), max_size=3), weird),
        "picked_by": st.one_of(texts, weird), "x": weird})


@st.composite
def sectioned_specs(draw: st.DrawFn, big: bool = False) -> Any:
    """A shipped spec whose `tune:` and `executor:` sections are generated: the rest stays valid, so those
    sections' own checks are reached (a random spec is mostly refused before them)."""
    spec = shipped_spec(draw(st.sampled_from(sorted(SHIPPED))))
    weird = WEIRD[big]
    if draw(st.integers(0, 3)):
        spec["tune"] = draw(st.one_of(tunes(weird), weird))
    if draw(st.integers(0, 3)):
        spec["executor"] = draw(executors(weird))
    return spec


@st.composite
def random_specs(draw: st.DrawFn, big: bool = False) -> Any:
    """A spec with the right shape and random contents: keys valid and not, values of any type."""
    weird = WEIRD[big]
    spec: dict[Any, Any] = {}
    for key in draw(st.lists(st.sampled_from([*TOP_KEYS, *SWEEP_KINDS, "model", "lol"]), max_size=8, unique=True)):
        if key == "base":
            spec[key] = {section: {k: draw(weird) for k in draw(st.lists(
                             st.sampled_from([k.split(".", 1)[1] for k in RUN_KEYS if k.startswith(section + ".")]
                                             or ["lol"]), max_size=4, unique=True))}
                         for section in draw(st.lists(st.sampled_from(["model", "train", "data", "x"]), max_size=3,
                                                      unique=True))}
        elif key == "grid":
            spec[key] = {k: draw(st.one_of(st.lists(scalars, min_size=1, max_size=4), weird))
                         for k in draw(st.lists(st.sampled_from(RUN_KEYS), max_size=3, unique=True))}
        elif key == "plugins":
            spec[key] = draw(st.lists(plugin_entries, max_size=2))
        elif key == "executor":
            spec[key] = draw(executors(weird))
        elif key == "tune":
            spec[key] = draw(st.one_of(tunes(weird), weird))
        elif key == "seeds":
            spec[key] = draw(st.one_of(numbers, st.lists(numbers, max_size=5), weird, st.fixed_dictionaries(
                {"min": numbers, "max": numbers, "precision": numbers}, optional={"precision_for": weird, "x": weird})))
        elif key == "report":
            spec[key] = draw(st.one_of(st.fixed_dictionaries({"equivalence_margin": st.one_of(numbers, weird)}), weird))
        elif key == "name":
            spec[key] = draw(st.one_of(st.just("fuzz"), texts))
        else:
            spec[key] = draw(weird)
    return spec


def cli_extras(big: bool = False) -> st.SearchStrategy:
    """Mostly none; else up to two of --set KEY=VALUE, --jobs N, --margin X (each is checked before the spec)."""
    option = st.one_of(
        st.tuples(st.sampled_from([*RUN_KEYS, "seed", "lol", "train", ""]), WEIRD[big]).map(lambda kv: ("set", kv)),
        numbers.filter(lambda n: isinstance(n, int)).map(lambda n: ("jobs", n)),
        st.one_of(texts, numbers).map(lambda m: ("margin", m)))
    return st.one_of(st.just([]), st.just([]), st.just([]), st.lists(option, min_size=1, max_size=2))


def render(spec: Any, extras: list[tuple[str, Any]], files: FuzzFiles) -> tuple[str, list[str]]:
    """The spec's text and the command-line options, with file paths filled in."""
    text = spec.text if isinstance(spec, Raw) else emit_document(spec, files)
    for name in ("corpus", "empty", "binary", "folder", "short", "missing", "plugin"):
        text = text.replace(f"@FILE:{name}@", str(files.path(name)))
    argv = []
    for kind, value in extras:
        if kind == "set":
            key, v = value
            argv.append(f"--set={key}={emit(v, files)}")
        elif kind == "jobs":
            argv.append(f"--jobs={value}")
        else:
            argv.append(f"--margin={value}")
    return text, argv


@st.composite
def byte_mutations(draw: st.DrawFn, text: str) -> bytes:
    """The text as bytes, with bytes inserted (often not UTF-8), a span cut, a line doubled, or the end cut."""
    data = text.encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["insert", "cut", "double-line", "truncate"]))
        if op == "insert":
            data = data[:at] + draw(st.one_of(st.binary(min_size=1, max_size=6),
                                              st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\t",
                                                               b"\r", b"\n  ", b": ", b"- ", b"&x ", b"*x", b"!!",
                                                               b"\xef\xbb\xbf", b"#", b"'", b'"', b"{", b"]"]))) + data[at:]
        elif op == "cut":
            data = data[:at] + data[at + draw(st.integers(1, 20)):]
        elif op == "double-line":
            lines = data.split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            data = b"\n".join(lines[:i + 1] + lines[i:])
        else:
            data = data[:at]
    return data


# ---- the properties (a few hundred examples in all) ----------------------------------------------

FUZZ = settings(max_examples=120, deadline=None, derandomize=True, database=None, print_blob=False,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large, HealthCheck.filter_too_much])
# deadline=None: the suite has no timed tests; benchmarks/fuzz_spec.py reports the slowest spec.


@pytest.fixture(scope="module")
def fuzz_files(tmp_path_factory) -> FuzzFiles:
    return FuzzFiles(tmp_path_factory.mktemp("fuzz"))


STEP_TIMING = gptlab.sweep.estimate.StepTiming(1e-3, 1e-2)


@pytest.fixture
def fast_estimate(monkeypatch):
    """An accepted spec's dry run times six training steps of its first run (seconds on Tiny Shakespeare,
    with the data loaded). The property is about validation, so the estimator answers a constant here."""
    monkeypatch.setattr(gptlab.sweep.estimate, "time_run", lambda config, steps=6, **kwargs: STEP_TIMING)
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # a dry run sets the plan's thread count for this process


@FUZZ
@given(spec=mutated_specs(), extras=cli_extras())
def test_mutated_shipped_specs_are_accepted_or_refused_in_one_line(spec, extras, fuzz_files, fast_estimate):
    text, argv = render(spec, extras, fuzz_files)
    check_spec(text, argv, fuzz_files)


@FUZZ
@given(spec=sectioned_specs(), extras=cli_extras())
def test_generated_tune_and_executor_sections_are_accepted_or_refused_in_one_line(spec, extras, fuzz_files,
                                                                                  fast_estimate):
    text, argv = render(spec, extras, fuzz_files)
    check_spec(text, argv, fuzz_files)


@FUZZ
@given(spec=random_specs(), extras=cli_extras())
def test_random_specs_are_accepted_or_refused_in_one_line(spec, extras, fuzz_files, fast_estimate):
    text, argv = render(spec, extras, fuzz_files)
    check_spec(text, argv, fuzz_files)


@settings(FUZZ, max_examples=80)
@given(data=st.data())
def test_mangled_bytes_are_accepted_or_refused_in_one_line(data, fuzz_files, fast_estimate):
    spec = data.draw(st.one_of(mutated_specs(), st.sampled_from(sorted(SHIPPED)).map(shipped_spec)))
    text, argv = render(spec, [], fuzz_files)
    check_spec(data.draw(byte_mutations(text)), argv, fuzz_files)


# ---- the loader's refusals, case by case (each also a regression the fuzzer found or guards) ------

def _dry_run(tmp_path: Path, text: str | bytes, *argv: str) -> tuple[int, str]:
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(text.encode() if isinstance(text, str) else text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = sweep_main([str(spec), "--dry-run", "--results-dir", str(tmp_path / "results"), *argv])
    assert not (tmp_path / "results").exists()
    return code, err.getvalue().strip()


def _spec_text(corpus: Path, grid: str = "  model.norm: [pre, post]\n", extra: str = "") -> str:
    return (f"name: t\nbase:\n  model: {{n_layer: 1, n_head: 2, n_embd: 16, block_size: 16}}\n"
            f"  train: {{max_iters: 20, device: cpu}}\n  data: {{dataset: t, path: {json.dumps(str(corpus))}}}\n"
            f"grid:\n{grid}{extra}")


@pytest.mark.parametrize("grid, extra, words", [
    ("  model.norm: [pre, post]\n  model.activation: [gelu]\n  model.norm: [post]\n", "",
     "line 9, column 3: key 'model.norm' under grid is written twice (first at line 7)"),
    ("  model.norm: [pre, post]\n", "seeds: 2\nseeds: 3\n", "line 9, column 1: key 'seeds' at the top level is written"),
    ("  model.norm: [pre, post]\n", "executor: {backend: loky, n_jobs: 1, n_jobs: 2}\n", "key 'n_jobs' under executor"),
    ("  model.norm: [pre, post]\n", "exclude: [{model.norm: pre, model.norm: post}]\n", "under exclude[0] is written"),
    ("  model.bias: [true, false]\n", "baseline: {model.bias: true}\nbaseline: {model.bias: false}\n", "'baseline'"),
])
def test_a_key_written_twice_is_refused_naming_it_and_its_line(grid, extra, words, tmp_path, corpus):
    code, err = _dry_run(tmp_path, _spec_text(corpus, grid, extra))
    assert code == 2 and err.startswith("error: ") and "\n" not in err, err
    assert words in err and "written twice" in err


def test_two_spellings_of_one_key_are_a_duplicate_and_a_merge_key_may_be_overridden():
    with pytest.raises(GptlabError, match="key True under a is written twice"):
        load_yaml("a: {true: 1, yes: 2}\n", "s.yaml")  # YAML 1.1: both are the boolean true
    merged = load_yaml("d: &d {x: 1, y: 2}\ne: {<<: *d, x: 3}\n", "s.yaml")
    assert merged["e"] == {"x": 3, "y": 2}  # overriding a merged key is what `<<` is for


def test_set_values_go_through_the_same_loader_and_a_key_may_be_set_once():
    assert parse_overrides(["train.lr=3e-4", "model.norm=post", "train.max_iters=1e3"]) == {
        "train.lr": "3e-4", "model.norm": "post", "train.max_iters": "1e3"}  # YAML 1.1: strings, read as numbers later
    with pytest.raises(
        GptlabError, match=r"--set 'x': invalid YAML at line 1, column 8: key 'a' at the top level is written twice"
    ):
        parse_overrides(["x={a: 1, a: 2}"])
    with pytest.raises(GptlabError, match="--set 'train.lr': given twice"):
        parse_overrides(["train.lr=1e-3", "train.lr = 2e-3"])
    with pytest.raises(GptlabError, match="more than 20,000 values once aliases are expanded"):
        parse_overrides(["x={" + billion_laughs(6).strip().replace("\n", ", ") + "}"])


def test_an_alias_bomb_is_refused_without_being_expanded(tmp_path):
    tracemalloc.start()
    try:
        with pytest.raises(GptlabError, match=r"line 5, column 7: lol4: more than 20,000 values once aliases are "
                                              "expanded"):
            load_yaml(billion_laughs(9), "bomb.yaml")  # 10^9 strings if expanded
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, f"loading the bomb allocated {peak / 2**20:.0f} MiB"
    code, err = _dry_run(tmp_path, "name: bomb\ngrid: {model.norm: [pre]}\n" + billion_laughs(9))
    assert code == 2 and "lol4: more than 20,000 values" in err and "\n" not in err


@pytest.mark.parametrize("text, words", [
    ("a: &a [1, *a]\n", "line 1, column 4: a[1]: an alias refers to a mapping or list that contains it"),
    ("a: &a {b: {<<: *a}}\n", "a.b.<<: an alias refers to a mapping or list that contains it"),
    ("a: " + "[" * 100_000 + "]" * 100_000 + "\n", "line 1, column 35: nested more than 32 levels deep"),
    ("a: &a [[[[[[[[1]]]]]]]]\nb: &b [[[[[[[[*a]]]]]]]]\nc: &c [[[[[[[[*b]]]]]]]]\nd: [[[[[[[[*c]]]]]]]]\n",
     "d: nested more than 32 levels deep once aliases are expanded"),
    ("a: [" + ", ".join(["0"] * 20_001) + "]\n", "more than 20,000 values; a sweep has a few dozen"),
    ("a: b\x00c\n", "line 1: the character U+0000 is not allowed in YAML"),
    ("a: 1\nb: \x1b[31m\n", "line 2: the character U+001B is not allowed"),
    ("a: !!int abc\n", "line 1, column 4: cannot read the value 'abc': invalid literal for int()"),
    ("a: 2001-13-45\n", "line 1, column 4: cannot read the value '2001-13-45': month must be in 1..12"),
    ("a: " + "1" * 5000 + "\n", "line 1, column 4: cannot read the value '1111"),
    ("a: !!python/object/apply:os.system [echo]\n", "could not determine a constructor for the tag"),
    ("a: *nothing\n", "found undefined alias 'nothing'"),
])
def test_what_the_loader_refuses_is_one_line_naming_the_line(text, words):
    with pytest.raises(GptlabError) as caught:
        load_yaml(text, "s.yaml")
    message = str(caught.value)
    assert message.startswith("s.yaml: invalid YAML") and words in message and len(message.splitlines()) == 1, message


def test_a_sweep_file_over_1_mib_or_not_a_regular_file_is_refused_before_parsing(tmp_path, monkeypatch):
    def never(*args):
        raise AssertionError("parsed")

    monkeypatch.setattr(gptlab.sweep.loader, "load_yaml", never)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * MAX_SPEC_BYTES)
    with pytest.raises(GptlabError, match=r"big.yaml: over 1 MiB \(1,048,578 bytes\)"):
        read_spec_file(big)
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # opening it to read would block until a writer came
    with pytest.raises(GptlabError, match="pipe.yaml is not a regular file"):
        read_spec_file(fifo)
    with pytest.raises(GptlabError, match="not found"):
        read_spec_file(tmp_path)


def test_a_non_utf8_sweep_file_is_refused_naming_the_byte(tmp_path):
    code, err = _dry_run(tmp_path, b"name: t\ngrid: {model.norm: [pre\xff]}\n")
    assert code == 2 and "not UTF-8 text (byte 31)" in err


# ---- absurd but finite numbers -------------------------------------------------------------------

@pytest.mark.parametrize("written, shown", [("340282366920938463463374607431768211456",
"340282366920938463463374607431768211456"),
                                            ("2e30", "'2e30'"), ("2.0e+30", "2e+30"), ("100000001", "100000001")])
def test_an_absurd_step_count_is_refused_naming_the_key_the_bound_and_the_value(written, shown, tmp_path, corpus):
    text = _spec_text(corpus).replace("max_iters: 20", f"max_iters: {written}")
    code, err = _dry_run(tmp_path, text)
    assert code == 2 and "\n" not in err, err
    assert f"train.max_iters must be at most 100,000,000, got {shown}" in err


def test_every_count_and_size_of_a_run_config_is_bounded():
    counts = [f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)
              if int in (typing.get_args(typing.get_type_hints(cls)[f.name]) or (typing.get_type_hints(cls)[f.name],))
              and f"{s}.{f.name}" != "model.vocab_size"]  # set from the tokenizer, never by hand
    assert sorted(counts) == sorted(LIMITS), "an int setting without an upper bound (or a bound on no setting)"
    for key, limit in LIMITS.items():
        assert coerce(key, limit, int) == limit
        with pytest.raises(GptlabError, match=f"{re.escape(key)} must be at most {limit:,}, got {limit + 1}"):
            coerce(key, limit + 1, int)


@pytest.mark.parametrize("key, value, words", [
    ("train.lr", 10**400, "train.lr must be a finite number, got 1000000000"),  # float() would overflow
    ("train.lr", "1e400", "train.lr must be a finite number, got '1e400'"),
    ("model.n_layer", 2.0**70, "model.n_layer must be at most 1,024, got 1.1805916207174113e+21"),
])
def test_numbers_beyond_a_float_or_a_bound_are_refused_in_one_line(key, value, words):
    section, name = key.split(".")
    with pytest.raises(GptlabError) as caught:
        resolve_run_config({section: {name: value}})
    assert words in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("extra, words", [
    ("report: {equivalence_margin: 1" + "0" * 400 + "}", "report.equivalence_margin: must be a positive finite number"),
    ("report: {equivalence_margin: -1" + "0" * 400 + "}", "report.equivalence_margin: must be a positive finite"),
    ("seeds: {min: 2, max: 3, precision: 1" + "0" * 400 + "}", "seeds.precision: must be a positive number of nats"),
])
def test_an_integer_past_the_float_range_is_refused_where_a_float_is_expected(extra, words, tmp_path, corpus):
    code, err = _dry_run(tmp_path, _spec_text(corpus, extra=extra))
    assert code == 2 and words in err and "\n" not in err, err


@pytest.mark.parametrize("key, value, words", [
    ("n_jobs", 10**6, "executor.n_jobs: must be at most 10,000, got 1000000"),
    ("n_jobs", 2**128, "executor.n_jobs: must be at most 10,000"),
    ("threads", 100_000, "executor.threads: must be at most 4,096"),  # dask: loky refuses more threads than cores
    ("runs_per_gpu", 1000, "executor.runs_per_gpu: must be at most 256"),
])
def test_executor_counts_are_bounded(key, value, words):
    with pytest.raises(GptlabError, match=re.escape(words)):
        ExecutorConfig.from_mapping({"backend": "dask", "scheduler": "local", key: value})


@pytest.mark.parametrize("grid, extra, words", [
    ("".join(f"  model.{k}: [a, b]\n" for k in ("norm", "activation", "position", "tying", "norm_type"))
     + "".join(f"  train.{k}: [1, 2]\n" for k in ("beta2", "batch_size", "warmup_iters", "eval_interval",
                                                   "log_interval", "eval_batch_size", "lr_decay_iters", "beta1", "lr")),
     "", "grid: 16,384 cells (before exclude) x 1 seeds is 16,384 runs; a sweep may have at most 10,000"),
    ("  model.norm: [pre, post]\n", "seeds: 10000\n", "grid: 2 cells (before exclude) x 10,000 seeds is 20,000 runs"),
    ("  model.norm: [pre, post]\n", "exclude: [" + ", ".join(["{model.norm: post}"] * 257) + "]\n",
     "exclude: lists 257 rules; at most 256"),
])
def test_a_sweep_too_large_to_validate_quickly_is_refused_before_it_is_expanded(grid, extra, words, tmp_path, corpus):
    code, err = _dry_run(tmp_path, _spec_text(corpus, grid, extra))
    assert code == 2 and words in err, err


# ---- messages that quote the user's text stay on one line ---------------------------------------

@pytest.mark.parametrize("grid, extra, words", [
    ("  model.norm: [pre, post]\n", 'plugins: ["gptlab_fuzz_absent\\nx"]\n', "gptlab_fuzz_absent\\nx"),
    ('  model.norm: ["pre\\npost"]\n', "", "model.norm=pre\\npost"),
    ('  "model.norm\\n": [pre]\n', "", "grid: unknown key 'model.norm\\n'"),
    ("  model.norm: [pre]\n", 'report: {"margin\\u2028": 1}\n', "unknown key 'report.margin\\u2028'"),
    ("  model.norm: [pre]\n", 'executor: {"jobs\\r": 1}\n', "executor: unknown key 'jobs\\r'"),
    ("  model.norm: [pre]\n", "scale: [[model.norm]]\n", "scale: must be a list of grid keys"),
])
def test_a_message_quoting_odd_user_text_is_one_line(grid, extra, words, tmp_path, corpus):
    code, err = _dry_run(tmp_path, _spec_text(corpus, grid, extra))
    assert code == 2 and len(err.splitlines()) == 1 and words in err, err
