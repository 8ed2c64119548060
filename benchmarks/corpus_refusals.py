"""How fast an unusable `data.path` is refused: /dev/zero, a FIFO, a directory, a sparse 3 GiB file.

Each case runs `python -m gptlab.sweep SPEC --dry-run` as a fresh process and prints its exit status,
its one line of error, the whole process's wall time (Python start and imports included) and the
time `load_spec` itself took in-process. Nothing is written: the results folder is checked.

    python benchmarks/corpus_refusals.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

SPEC = {"name": "odd", "base": {"model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32},
                                "train": {"max_iters": 40, "batch_size": 8}, "data": {"dataset": "tiny"}},
        "grid": {"model.norm": ["pre", "post"]}, "seeds": 1}


def cases(folder: Path) -> dict[str, str]:
    fifo = folder / "corpus.fifo"
    os.mkfifo(fifo)
    sparse = folder / "sparse.txt"
    with open(sparse, "wb") as f:
        f.truncate(3 * 2**30)
    return {"/dev/zero": "/dev/zero", "/dev/urandom": "/dev/urandom", "FIFO": str(fifo), "directory": str(folder),
            "sparse 3 GiB file": str(sparse)}


def in_process_seconds(spec_path: Path) -> float:
    from gptlab.errors import GptlabError
    from gptlab.sweep.spec import load_spec

    start = time.perf_counter()
    try:
        load_spec(spec_path)
    except GptlabError:
        pass
    return time.perf_counter() - start


def main() -> None:
    import gptlab.sweep.spec  # noqa: F401  (imports paid once, before the in-process timings)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"{'case':<18} {'exit':>4} {'process s':>9} {'load_spec s':>11}  message")
        for name, path in cases(folder).items():
            spec = {**SPEC, "base": {**SPEC["base"], "data": {"dataset": "tiny", "path": path}}}
            spec_path = folder / "odd.yaml"
            spec_path.write_text(yaml.safe_dump(spec))
            results = folder / "results"
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "gptlab.sweep", str(spec_path), "--dry-run",
                                   "--results-dir", str(results)], capture_output=True, text=True, timeout=120)
            wall = time.perf_counter() - start
            line = done.stderr.strip()
            assert not results.exists(), f"{name}: something was written"
            print(f"{name:<18} {done.returncode:>4} {wall:>9.2f} {in_process_seconds(spec_path):>11.4f}  {line}")


if __name__ == "__main__":
    main()
