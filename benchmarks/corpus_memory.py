"""Planned against measured memory for large corpora: the dry run, and a worker training on the corpus.

For each corpus size (MB) and kind (ASCII text; text with Latin-1 letters, one byte a character in Python;
text with letters past Latin-1, two bytes a character), writes a corpus of
random words, a one-run sweep of a small model on it (`data.path`), and measures:

- the dry run's peak resident memory (the whole process, from `getrusage` of a fresh child);
- the worker's peak resident memory while training, against the memory the plan gave it
  (both from the sweep's line "peak resident memory per worker: X MiB (planned Y MiB per run)").

Run: python benchmarks/corpus_memory.py --sizes 1 100 300 [--kinds ascii utf8 wide]
Prints one row per corpus; exits 1 if a worker's measured peak is above its plan or a dry run
peaks above 1 GiB.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

DRY_RUN_LIMIT_MIB = 1024
WORDS = ["the", "of", "and", "to", "a", "in", "that", "it", "was", "her", "she", "he", "not", "be", "with",
         "had", "as", "for", "his", "you", "which", "but", "have", "could", "would", "very", "Elizabeth"]
ACCENTED = ["café", "naïve", "£5", "déjà", "Zoë"]  # Latin-1: still one byte a character in a Python str
WIDE = ["ĉu", "ŝi", "ĝardeno", "Ŭkrainio"]  # Esperanto letters past Latin-1: two bytes a character


def write_corpus(path: Path, megabytes: int, kind: str, seed: int = 0) -> None:
    """About `megabytes` MB of random words, in lines of 12; `utf8` mixes in words with é, ï, £, `wide` with ĉ, ŝ."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array(WORDS + {"ascii": [], "utf8": ACCENTED, "wide": WIDE}[kind])
    target = megabytes * 10**6
    with open(path, "w", encoding="utf-8") as f:
        written = 0
        while written < target:
            words = vocabulary[rng.integers(len(vocabulary), size=120_000)].reshape(-1, 12)
            block = "\n".join(" ".join(line) for line in words) + "\n"
            f.write(block)
            written += len(block.encode("utf-8"))


def write_spec(folder: Path, corpus: Path) -> Path:
    spec = {"name": "corpus_memory", "seeds": [0], "executor": {"n_jobs": 1},
            "base": {"model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64},
                     "train": {"max_iters": 4, "eval_interval": 4, "log_interval": 2, "batch_size": 8,
                               "eval_batch_size": 32, "lr": 1e-3},
                     "data": {"path": str(corpus), "val_fraction": 0.001}},
            "grid": {"model.activation": ["gelu"]}}
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def peak_of(command: list[str]) -> tuple[int, str]:
    """Run `command` in a fresh child of a fresh Python; its peak RSS in MiB (ru_maxrss is KiB on Linux) and output."""
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stdout.write(p.stdout + p.stderr); "
             "print('\\nPEAK', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True).stdout
    peak = int(re.search(r"PEAK (\d+)", out).group(1)) // 1024
    return peak, out


def measure(folder: Path, megabytes: int, kind: str) -> dict[str, object]:
    corpus = folder / f"{kind}-{megabytes}mb.txt"
    write_corpus(corpus, megabytes, kind)
    (folder / corpus.stem).mkdir()
    spec = write_spec(folder / corpus.stem, corpus)
    sweep = [sys.executable, "-m", "gptlab.sweep", str(spec), "--results-dir", str(folder / corpus.stem / "results"),
             "--reports-dir", str(folder / corpus.stem / "reports")]
    dry_peak, _ = peak_of([*sweep, "--dry-run"])
    _, out = peak_of(sweep)
    found = re.search(r"peak resident memory per worker: (\d+) MiB \(planned (\d+) MiB per run\)", out)
    if found is None:
        raise SystemExit(f"no memory line from the sweep on {corpus}:\n{out[-2000:]}")
    worker, planned = int(found.group(1)), int(found.group(2))
    size_mb = corpus.stat().st_size / 10**6
    corpus.unlink()
    return {"corpus": f"{size_mb:.0f} MB {kind}", "dry_run_mib": dry_peak, "worker_mib": worker,
            "planned_mib": planned, "ok": worker <= planned and dry_peak <= DRY_RUN_LIMIT_MIB}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 300], help="corpus sizes in MB")
    parser.add_argument("--kinds", nargs="+", default=["ascii"], choices=["ascii", "utf8", "wide"], help="kinds of text")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds:
            for size in args.sizes:
                row = measure(Path(tmp), size, kind)
                rows.append(row)
                print(f"{row['corpus']:>14}  dry run {row['dry_run_mib']:>5} MiB  worker {row['worker_mib']:>5} MiB  "
                      f"planned {row['planned_mib']:>5} MiB  {'ok' if row['ok'] else 'OVER'}", flush=True)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; dry run limit {DRY_RUN_LIMIT_MIB} MiB")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
