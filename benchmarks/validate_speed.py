"""How long loading a large sweep takes: a 10,000-run spec validated and expanded, as every sweep command does first.

The spec is 1,000 cells (train.lr x train.warmup_iters x model.n_embd, 10 levels each) x 10 seeds on a
small generated corpus; every run's config is resolved, checked and hashed into its run id.

Run: python benchmarks/validate_speed.py [--repeat 3]
Prints the runs and the seconds of each repeat, and the median. Target: under 2 s.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from helpers import make_corpus, tiny_config  # noqa: E402

from gptlab.sweep.spec import validate_spec  # noqa: E402


def big_spec(corpus: Path) -> dict:
    config = tiny_config(corpus)
    for section, key in (("train", "lr"), ("train", "warmup_iters"), ("model", "n_embd")):
        config[section].pop(key, None)
    config["train"]["min_lr"] = 1e-5
    return {"name": "big", "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"train.lr": [1e-4 * (i + 1) for i in range(10)], "train.warmup_iters": list(range(10, 110, 10)),
                     "model.n_embd": [32 + 8 * i for i in range(10)]}, "seeds": 10}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed loads (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = big_spec(make_corpus(Path(tmp) / "corpus.txt"))
        seconds = []
        for _ in range(args.repeat):
            tick = time.perf_counter()
            runs = len(validate_spec(spec, Path(tmp) / "sweep.yaml", {}, {}).runs)
            seconds.append(time.perf_counter() - tick)
    print(f"{runs:,} runs validated in " + ", ".join(f"{s:.2f}" for s in seconds)
          + f" s; median {statistics.median(seconds):.2f} s (target: under 2 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
