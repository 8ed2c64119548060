"""Plain helpers shared by the tests (no fixtures: those live in conftest.py).

Test modules import these with `from helpers import ...`; pytest puts this folder on sys.path
(rootdir-based conftest insertion), so no package is needed.
"""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("GPTLAB_DATA_DIR") or REPO.parent / "shared" / "data")
SHAKESPEARE = SHARED_DATA / "tinyshakespeare" / "input.txt"


def shipped_studies(folder: str = "results") -> list[str]:
    """The shipped reference studies, as .gitignore lists them (`!results/NAME/`): the one list of them.

    A folder a user's own sweep makes in results/ (quick, or any other) is not shipped, and no test takes it for one."""
    lines = (REPO / ".gitignore").read_text(encoding="utf-8").splitlines()
    return sorted(line[len(folder) + 2:].strip("/") for line in lines
                  if line.startswith(f"!{folder}/") and line.rstrip("/").count("/") == 1 and not line.endswith(".gitkeep"))


def make_corpus(path: Path, n_chars: int = 20_000, seed: int = 0) -> Path:
    """A small text with learnable structure: words from a fixed list, in short lines."""
    rng = random.Random(seed)
    words = ["the", "king", "queen", "shall", "speak", "to", "my", "lord", "and", "thou", "art", "good"]
    lines = []
    size = 0
    while size < n_chars:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(3, 8))).capitalize() + "."
        lines.append(line)
        size += len(line) + 1
    path.write_text("\n".join(lines)[:n_chars], encoding="utf-8")
    return path


def tiny_config(corpus_path: Path, **train) -> dict:
    """A run config that trains in about a second on one CPU core."""
    return {
        "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32},
        "train": {"max_iters": 40, "batch_size": 8, "lr": 3e-3, "min_lr": 3e-4, "warmup_iters": 5,
                  "eval_interval": 20, "log_interval": 10, "eval_batch_size": 64, "device": "cpu", **train},
        "data": {"dataset": "tiny", "path": str(corpus_path)},
        "seed": 0,
    }


def skip_figures(mp, keep: tuple[str, ...] = ()) -> None:
    """Stub the report's figures (seconds each) on a `pytest.MonkeyPatch`: text and tables are still written.

    `keep`: `make_figures` where the report's own figures are drawn, and the kinds whose figures are drawn (by key:
    `seeds`, `scale`, `tune`, `worth`; every other kind's `figures` hook draws none)."""
    from gptlab.report import figures
    from gptlab.report.kinds import REPORT_KINDS, ReportKind

    if "make_figures" not in keep:
        mp.setattr(figures, "make_figures", lambda *args, **kw: figures.Figures())
    for key in REPORT_KINDS.names():
        if key not in keep:
            mp.setattr(REPORT_KINDS.get(key), "figures", ReportKind.figures)


def python_m(module: str, figures: bool = True) -> list[str]:
    """`python -m MODULE` as a command line; figures=False: the same process with the report's figures
    stubbed (`skip_figures`), for process tests about something else (kills, signals, locks)."""
    if figures:
        return [sys.executable, "-m", module]
    code = ("import runpy, sys; import gptlab.report as report; write = report.write_report\n"
            "def write_report(*args, **kw):\n"
            "    from gptlab.report import figures\n"
            "    figures.make_figures = lambda *a, **k: figures.Figures()\n"
            "    from gptlab.report.kinds import REPORT_KINDS, ReportKind\n"
            "    for key in REPORT_KINDS.names():\n"
            "        REPORT_KINDS.get(key).figures = ReportKind.figures\n"
            "    return write(*args, **kw)\n"
            f"report.write_report = write_report; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", code]


def with_dataset(mp, name: str, source) -> None:
    """Register `source` as data.dataset `name` for one test (a copy of the registry: nothing leaks out)."""
    from gptlab.run.corpora import DATASETS

    mp.setattr(DATASETS, "_entries", {**DATASETS._entries, name: source})


def write_tuned_results(results: Path, rows: list[dict], tune: dict, corpus: Path) -> Path:
    """A tuned activation sweep's results folder written by hand: summary.csv from `rows`, a sweep.yaml with
    `tune`, and the first run's config (the report finds the corpus through it)."""
    import pandas as pd
    import yaml

    from gptlab.run.resultsdir import SUMMARY_CSV
    from gptlab.run.rundir import RunDir

    results.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(results / SUMMARY_CSV, index=False)
    sweep = {"name": results.name, "grid": {"model.activation": ["gelu", "relu"]}, "seeds": [0, 1, 2], "tune": tune}
    (results / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    config = {"data": {"dataset": "tiny", "path": str(corpus), "val_fraction": 0.1, "test_fraction": 0.05}}
    folder = RunDir(results / "runs" / rows[0]["run_id"]).path
    folder.mkdir(parents=True)
    (folder / RunDir.CONFIG).write_text(yaml.safe_dump(config))
    return results
