"""Synthetic results folders with planted effects, for the tests, benchmarks and demos of the report.

Owns `make_results`, which writes a results directory in the layout of docs/CONTRACTS.md
(sweep.yaml, summary.csv, runs/RUN_ID/{config.yaml, metrics.csv, summary.json}) without training
anything: each run's best val loss is `base_loss` + the planted effects of its cell + a per-seed
offset (shared by all cells, so seeds pair) + independent noise. The in-memory simulations (and the
calibration of the statistics on them) are `calibration.effects_sim`'s.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import yaml

from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir
from gptlab.stats.design import design_cells
from gptlab.statuses import COLLAPSED, DIVERGED, FAILED, OK, STATUS_RULE, UNSTABLE

Effects = Mapping[tuple[tuple[str, Any], ...], float]
ENVIRONMENT = {"device": "cpu", "torch": "2.13.0", "python": "3.11.9", "platform": "Linux-x86_64",
               "gptlab": "0.1.0", "threads": 2}


def _loss(cell: dict[str, Any], effects: Effects) -> float:
    """Sum of the planted effects whose (factor, level) conditions all hold in `cell`."""
    return sum(delta for cond, delta in effects.items() if all(cell[f] == v for f, v in cond))


def make_results(root: Path, grid: Mapping[str, Sequence[Any]], seeds: int | Sequence[int] = 3, *,
                 name: str = "synth", effects: Effects | None = None, base_loss: float = 1.5,
                 seed_sd: float = 0.005, noise_sd: float = 0.002,
                 status: Mapping[tuple[tuple[Any, ...], int], str] | None = None,
                 exclude: Sequence[Mapping[str, Any]] = (), baseline: Mapping[str, Any] | None = None,
                 max_iters: int = 1000, eval_interval: int = 125, rng_seed: int = 0) -> Path:
    """Write `root/results/NAME/` for `grid` x `seeds` and return its path.

    `effects` maps a tuple of (factor, level) conditions to the loss added when all hold,
    e.g. `{(("model.norm", "post"),): 0.05}`. `status` maps (cell levels tuple, seed) to
    "diverged", "collapsed", "unstable" or "failed" (default "ok"). Failed runs have empty metrics and an error.
    """
    effects = effects or {}
    status = status or {}
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    rng = np.random.default_rng(rng_seed)
    seed_offset = {s: rng.normal(0.0, seed_sd) for s in seeds}
    out = ResultsDir(Path(root) / "results" / name)
    out.runs_dir.mkdir(parents=True, exist_ok=True)
    factors = list(grid)
    base = {"model": {"n_layer": 2, "n_embd": 64}, "train": {"max_iters": max_iters}}
    for factor in factors:  # a key lives in base or the grid, never both (as a sweep writes it)
        section, _, key = factor.partition(".")
        base.get(section, {}).pop(key, None)
    spec = {"name": name, "description": f"synthetic sweep over {', '.join(factors) or 'nothing'}",
            "plugins": [], "base": base,
            "grid": {f: list(v) for f, v in grid.items()}, "seeds": seeds, "exclude": [dict(e) for e in exclude],
            "executor": {"backend": "loky", "n_jobs": 2}, "command": f"python -m gptlab.sweep ablations/{name}.yaml"}
    if baseline:
        spec["baseline"] = dict(baseline)
    out.sweep_yaml.write_text(yaml.safe_dump(spec, sort_keys=False))
    rows = []
    combos = design_cells(grid, exclude)
    for ci, combo in enumerate(combos):
        cell = dict(zip(factors, combo))
        for seed in seeds:
            run_id = f"run{ci:02d}s{seed}"
            st = status.get((tuple(combo), seed), OK)
            best = base_loss + _loss(cell, effects) + seed_offset[seed] + rng.normal(0.0, noise_sd)
            rows.append(_write_run(out.run(run_id).path, run_id, seed, cell, st, best,
                                   100_000 + 1_000 * ci, max_iters, eval_interval, rng))
    pd.DataFrame(rows).to_csv(out.summary_csv, index=False)
    return out.path


def _write_run(run_dir: Path, run_id: str, seed: int, cell: dict[str, Any], status: str, best: float,
               params: int, max_iters: int, eval_interval: int, rng: np.random.Generator) -> dict:
    """Write one run's files and return its summary.csv row."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {"model": {}, "train": {"max_iters": max_iters}, "data": {}, "seed": seed}
    for key, level in cell.items():
        section, _, field = key.partition(".")
        config.setdefault(section, {})[field] = level
    (run_dir / RunDir.CONFIG).write_text(yaml.safe_dump(config))
    steps = list(range(0, max_iters + 1, eval_interval))
    stop = len(steps) if status in (OK, COLLAPSED, UNSTABLE) else (len(steps) // 2 if status == DIVERGED else 0)
    metrics, elapsed = [], 0.0
    for i, step in enumerate(steps[:stop]):
        val = best + (4.2 - best) * math.exp(-4.0 * step / max_iters)
        elapsed = 0.02 * step + 0.5
        metrics.append({"step": step, "train_loss": val - 0.02, "val_loss": val, "lr": 1e-3,
                        "grad_norm": 1.0, "tokens": step * 768, "elapsed_s": elapsed})
        if i + 1 < stop:  # a training-only row between evaluations (empty val_loss)
            metrics.append({"step": step + eval_interval // 2, "train_loss": val - 0.01, "val_loss": None,
                            "lr": 1e-3, "grad_norm": 1.0, "tokens": 0, "elapsed_s": elapsed + 0.1})
    cols = ["step", "train_loss", "val_loss", "lr", "grad_norm", "tokens", "elapsed_s"]
    pd.DataFrame(metrics, columns=cols).to_csv(run_dir / RunDir.METRICS, index=False)
    evals = [m["val_loss"] for m in metrics if m["val_loss"] is not None]
    row: dict[str, Any] = {"run_id": run_id, "seed": seed, **cell, "status": status}
    if evals:
        row.update(best_val_loss=min(evals), best_step=steps[len(evals) - 1],
                   final_val_loss=evals[-1] + 0.001, final_train_loss=evals[-1] - 0.03)
    else:
        row.update(best_val_loss=None, best_step=None, final_val_loss=None, final_train_loss=None)
    row.update(params=params, params_non_embedding=params - 8_000,
               tokens_per_sec=None if status == FAILED else float(5_000 + rng.normal(0, 100)),
               wall_s=round(elapsed + 1.0, 3),
               error={FAILED: "RuntimeError: CUDA out of memory", DIVERGED: "loss is nan",
                      COLLAPSED: "stuck on the unigram plateau", UNSTABLE: "blew up"}.get(status, ""))
    summary = {**row, "status_rule": STATUS_RULE, "eval_s": 0.1,
               "diverged_step": steps[stop] if status == DIVERGED else None,
               "environment": ENVIRONMENT, "config": config}
    (run_dir / RunDir.SUMMARY).write_text(json.dumps(summary, default=str))
    return row
