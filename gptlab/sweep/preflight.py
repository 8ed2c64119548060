"""Checks that need the machine or the data, run before anything is built or written.

`load_spec` validates what the YAML says; `preflight` asks whether this machine can do it: the
devices exist, every corpus is UTF-8 text long enough for its block size, and the largest run fits
in the memory a run gets. It also warns (logged, nothing refused) where a valid setting will not
measure what it names: a warmup as long as the run never reaches its lr. `--dry-run` runs the same
checks first.
"""
from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from gptlab.errors import GptlabError
from gptlab.executors.plan import estimate_run_bytes
from gptlab.executors.populations import batched_members
from gptlab.run.config import DataConfig, RunConfig
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.textscan import scan_corpus
from gptlab.sweep.runs import SweepSpec

MEMORY_SHARE = 0.8  # of the memory available now, what one run may plan to use
log = logging.getLogger(__name__)


def check_devices(spec: SweepSpec) -> str:
    """Resolve every `train.device` of the sweep here; return the device type of the first run."""
    from gptlab.run.device import resolve_device

    kinds = {name: resolve_device(name).type for name in {r.config.train.device for r in spec.runs}}
    return kinds[spec.runs[0].config.train.device]


@dataclass(frozen=True)
class Corpus:
    """What the plan needs to know of one corpus: its vocabulary size and a run's peak bytes for its copy."""

    vocab_size: int
    memory_bytes: int


def check_datasets(spec: SweepSpec) -> dict[DataConfig, Corpus]:
    """Find every corpus the runs need (downloading if allowed) and check it fits each block size.

    A char-tokenized corpus is scanned 1 MiB at a time (`gptlab.run.textscan`): its characters are
    its tokens, so the driver never holds the text. A BPE corpus is loaded as a run loads it, to
    train its tokenizer and count its tokens. Returns each corpus, keyed by its data settings.
    """
    from gptlab.run.data import check_split_tokens, load_run_dataset, resolve_dataset, split_points

    corpora: dict[DataConfig, Corpus] = {}
    checked: set[tuple[DataConfig, int]] = set()
    for run in spec.runs:
        d, block = run.config.data, run.config.model.block_size
        if (d, block) in checked:  # a corpus is hashed and read once per sweep, not once per run
            continue
        where = f"data {d.path or d.dataset}"
        scan = scan_corpus(resolve_dataset(d.dataset, d.path).resolve())
        if d.tokenizer == "char":
            start_val, start_test = split_points(scan.chars, d.val_fraction, d.test_fraction)
            check_split_tokens(start_val, start_test - start_val,
                               scan.chars - start_test if d.test_fraction > 0 else None, block, where)
            corpora[d] = Corpus(len(scan.vocab), scan.corpus_bytes())
        else:
            dataset = load_run_dataset(d)
            dataset.check_fits(block, where)
            corpora[d] = Corpus(dataset.tokenizer.vocab_size, scan.corpus_bytes())
        checked.add((d, block))
    return corpora


def memory_budget(device: str) -> tuple[int, str]:
    """Bytes one run may use on `device`, and where they come from (for the message)."""
    if device == "cuda":
        import torch

        total = min(torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count()))
        return int(MEMORY_SHARE * total), "of one GPU's memory"
    import psutil

    return int(MEMORY_SHARE * psutil.virtual_memory().available), "of the memory available now"


def check_memory(spec: SweepSpec, device: str, corpora: dict[DataConfig, Corpus]) -> int:
    """Refuse a sweep whose largest run would not fit; return that run's estimated bytes (its corpus counted), as a
    population of `executor.population`'s size where the sweep batches runs (at most as many as it has)."""
    members = min(batched_members(spec.executor, device), len(spec.runs))
    sizes = {r.run_id: estimate_run_bytes(r.config, corpora[r.config.data].vocab_size,
                                          corpora[r.config.data].memory_bytes, members) for r in spec.runs}
    largest = max(spec.runs, key=lambda r: sizes[r.run_id])
    budget, where = memory_budget(device)
    if sizes[largest.run_id] > budget:
        m, t = largest.config.model, largest.config.train
        shape = (f"n_layer {m.n_layer}, n_embd {m.n_embd}, n_head {m.n_head}, block_size {m.block_size}, "
                 f"batch_size {t.batch_size}, eval_batch_size {t.eval_batch_size}")
        who = f"run {largest.run_id}" if members == 1 else f"a population of {members} runs like {largest.run_id}"
        fix = "" if members == 1 else ", or lower executor.population"
        raise GptlabError(f"model/train sizes: {who} needs about {_gib(sizes[largest.run_id])} "
                          f"({shape}), more than the {_gib(budget)} a run can have here "
                          f"({MEMORY_SHARE:.0%} {where}); make the model or the batches smaller{fix}")
    return sizes[largest.run_id]


def warmup_warnings(spec: SweepSpec) -> list[str]:
    """One line per distinct (warmup, length, lr) of the sweep whose warmup lasts the whole run: its lr never reaches
    `train.lr` (a 60-step smoke sweep at the default warmup of 100 ends at 59% of it, and reads as not learning)."""
    from gptlab.run.trainer import lr_at

    seen: dict[tuple[int, int, float], list] = {}
    for run in spec.runs:
        t = run.config.train
        if t.warmup_iters >= t.max_iters:
            seen.setdefault((t.warmup_iters, t.max_iters, t.lr), []).append(run)
    return [f"train.warmup_iters {w} is not below train.max_iters {n} ({len(runs)} run(s), e.g. {runs[0].run_id}): the "
            f"lr warms up for the whole run and ends at {lr_at(n - 1, runs[0].config.train):.3g} of its peak {lr:g}; set "
            "train.warmup_iters below train.max_iters to measure the setting, not a warmup"
            for (w, n, lr), runs in seen.items()]


def preflight(spec: SweepSpec) -> tuple[str, int]:
    """All the checks, in order; returns (device type, estimated bytes of the largest run). Warnings are logged once
    every check has passed (a refusal stays the one line it is)."""
    device = check_devices(spec)
    corpora = check_datasets(spec)
    largest = check_memory(spec, device, corpora)
    for line in warmup_warnings(spec):
        log.warning("warning: %s", line)
    return device, largest


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


CHECKPOINT_BYTES_PER_PARAM = 12  # fp32 weights and Adam's two moments (measured: 9.7 MB for 0.8M parameters)


def checkpoint_bytes(config: RunConfig, vocab_size: int) -> int:
    """Disk a finished run keeps: its two checkpoints (best and last), each 12 bytes per parameter."""
    m = config.model
    params = 12 * m.n_layer * m.n_embd ** 2 + 2 * vocab_size * m.n_embd + m.block_size * m.n_embd
    return 2 * CHECKPOINT_BYTES_PER_PARAM * params


def check_folders(spec: SweepSpec, results_dir: ResultsDir, reports_dir: Path) -> None:
    """Refuse, before anything is trained, a results or reports folder the sweep cannot use: something other than
    a folder where one goes, a folder it may not write, or a disk without room for the first stage's checkpoints."""
    what = {results_dir.path: "a folder", results_dir.runs_dir: "a folder", results_dir.lock: "a file",
            results_dir.summary_csv: "a file", reports_dir: "a folder"}
    for path, kind in what.items():
        if path.exists() and (path.is_dir() != (kind == "a folder")):
            raise GptlabError(f"{path} is {'a folder' if path.is_dir() else 'a file'} where the sweep keeps {kind}; "
                              "move it away, or give another --results-dir / --reports-dir")
    for path in (results_dir.path, reports_dir):
        existing = _nearest_existing(path)
        if not os.access(existing, os.W_OK | os.X_OK):
            raise GptlabError(f"cannot write to {existing} (permission denied), where the sweep writes {path}; "
                              "give another --results-dir / --reports-dir")
    pending = [r for r in spec.runs if results_dir.run(r.run_id).state() == "pending"]
    corpora = check_datasets(spec) if pending else {}  # cached: `preflight` read the corpora
    need = sum(checkpoint_bytes(r.config, corpora[r.config.data].vocab_size) for r in pending)
    free = shutil.disk_usage(_nearest_existing(results_dir.path)).free
    if need > free:
        raise GptlabError(f"disk full: the {len(pending)} runs to train first keep about {_gib(need)} of checkpoints "
                          f"under {results_dir.path}, and {_gib(free)} is free there; free some space or give "
                          "another --results-dir")


def _nearest_existing(path: Path) -> Path:
    """`path`, or its closest ancestor that exists."""
    path = path.resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
