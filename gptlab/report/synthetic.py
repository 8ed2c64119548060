"""Synthetic sweep results with planted effects, for tests, benchmarks and demos of the report.

Owns `simulate_runs` and `calibrate` (in-memory datasets with known effects, and how often the
report's CIs cover them and its calls are false; the true effects come from `PlantedTruth`, group
means of the planted cells, never from the `Design` contrasts under test), and `make_results`,
which writes a results directory in the layout of docs/CONTRACTS.md
(sweep.yaml, summary.csv, runs/RUN_ID/{config.yaml, metrics.csv, summary.json}) without
training anything: each run's best val loss is `base_loss` + the planted effects of its cell +
a per-seed offset (shared by all cells, so seeds pair) + independent noise.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pandas as pd
import yaml

from gptlab.layout import RUNS, SUMMARY_CSV, SWEEP_YAML, run_path
from gptlab.run.rundir import RunDir
from gptlab.cells import design_cells

if TYPE_CHECKING:
    from gptlab.report.design import Design
    from gptlab.report.effects import Analysis

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
    "diverged" or "failed" (default "ok"). Failed runs have empty metrics and an error.
    """
    effects = effects or {}
    status = status or {}
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    rng = np.random.default_rng(rng_seed)
    seed_offset = {s: rng.normal(0.0, seed_sd) for s in seeds}
    out = Path(root) / "results" / name
    (out / RUNS).mkdir(parents=True, exist_ok=True)
    factors = list(grid)
    spec = {"name": name, "description": f"synthetic sweep over {', '.join(factors) or 'nothing'}",
            "plugins": [], "base": {"model": {"n_layer": 2, "n_embd": 64}, "train": {"max_iters": max_iters}},
            "grid": {f: list(v) for f, v in grid.items()}, "seeds": seeds, "exclude": [dict(e) for e in exclude],
            "executor": {"backend": "loky", "n_jobs": 2}, "command": f"python -m gptlab.sweep ablations/{name}.yaml"}
    if baseline:
        spec["baseline"] = dict(baseline)
    (out / SWEEP_YAML).write_text(yaml.safe_dump(spec, sort_keys=False))
    rows = []
    combos = design_cells(grid, exclude)
    for ci, combo in enumerate(combos):
        cell = dict(zip(factors, combo))
        for seed in seeds:
            run_id = f"run{ci:02d}s{seed}"
            st = status.get((tuple(combo), seed), "ok")
            best = base_loss + _loss(cell, effects) + seed_offset[seed] + rng.normal(0.0, noise_sd)
            rows.append(_write_run(run_path(out, run_id), run_id, seed, cell, st, best,
                                   100_000 + 1_000 * ci, max_iters, eval_interval, rng))
    pd.DataFrame(rows).to_csv(out / SUMMARY_CSV, index=False)
    return out


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
    stop = len(steps) if status == "ok" else (len(steps) // 2 if status == "diverged" else 0)
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
               tokens_per_sec=None if status == "failed" else float(5_000 + rng.normal(0, 100)),
               wall_s=round(elapsed + 1.0, 3),
               error={"failed": "RuntimeError: CUDA out of memory", "diverged": "loss is nan"}.get(status, ""))
    summary = {**row, "eval_s": 0.1, "diverged_step": steps[stop] if status == "diverged" else None,
               "environment": ENVIRONMENT, "config": config}
    (run_dir / RunDir.SUMMARY).write_text(json.dumps(summary, default=str))
    return row


def simulate_runs(cells: Sequence[tuple], means: Sequence[float], seeds: int, rng: np.random.Generator, *,
                  noise_sd: float | Sequence[float] = 0.01, seed_sd: float = 0.01
                  ) -> tuple[np.ndarray, list[tuple], np.ndarray]:
    """In-memory runs for calibration: y = mean(cell) + seed offset (shared by cells) + noise.

    `noise_sd` is one SD for every cell or one per cell. Returns (y, cell of each run, seed of each run).
    """
    sd = np.broadcast_to(np.asarray(noise_sd, float), (len(cells),))
    offsets = rng.normal(0.0, seed_sd, seeds)
    y = np.array([m + offsets[s] + rng.normal(0.0, sd[i]) for i, m in enumerate(means) for s in range(seeds)])
    return y, [c for c in cells for _ in range(seeds)], np.tile(np.arange(seeds), len(cells))


def _label(factor: str, level: str) -> str:
    return f"{factor}={level}"


def _changes(label: str) -> list[tuple[str, str]]:
    """'a=1 x b=2' -> [('a', '1'), ('b', '2')] (the labels `printed_effects` keys use)."""
    return [tuple(part.split("=", 1)) for part in label.split(" x ")]  # type: ignore[misc]


class PlantedTruth:
    """The true value of a printed effect, computed from the planted cell means alone.

    Deliberately independent of `Design`'s contrast vectors and of `estimability` (a wrong contrast
    there must not move the truth with the estimate): plain pandas group means and look-ups of cells.

    - averaged term of a full factorial (main effect, k-way interaction): the k-th order difference of
      the group means over the term's factors (`groupby`), i.e. averaged over the other factors;
    - treatment-coded term (any other set of cells): the same difference of the cells whose other
      factors sit at their baselines;
    - simple effect, cell against the baseline: a difference of two cells;
    - aliased sum: its host cell (every change of the group) against the baseline cell, minus the
      treatment-coded terms inside the host that are not in the group.

    A key that needs a cell without data raises AssertionError (the analysis printed something the
    cells cannot estimate).
    """

    def __init__(self, design: "Design", means: Sequence[float]) -> None:
        self.factors = list(design.factors)
        self.baseline = dict(design.baseline)
        self.full = set(itertools.product(*(design.levels[f] for f in self.factors))) <= set(design.cells)
        self.frame = pd.DataFrame([list(c) for c in design.cells], columns=self.factors).assign(mu=list(means))
        self.mu = {tuple(c): m for c, m in zip(design.cells, means)}

    def _cell(self, assignment: Mapping[str, str]) -> float:
        key = tuple(assignment.get(f, self.baseline[f]) for f in self.factors)
        if key not in self.mu:
            raise AssertionError(f"the cell {dict(zip(self.factors, key))} has no data")
        return float(self.mu[key])

    def _difference(self, term: list[tuple[str, str]], averaged: bool) -> float:
        """sum over subsets S of the term of (-1)^(k - |S|) x mean(S at their levels, the rest at baseline)."""
        names = [f for f, _ in term]
        if averaged:
            means = self.frame.groupby(names)["mu"].mean()
            at = lambda levels: float(means.loc[levels if len(levels) > 1 else levels[0]])
        else:
            at = lambda levels: self._cell(dict(zip(names, levels)))
        total = 0.0
        for mask in itertools.product((0, 1), repeat=len(term)):
            levels = tuple(lv if m else self.baseline[f] for (f, lv), m in zip(term, mask))
            try:
                total += (-1) ** (len(term) - sum(mask)) * at(levels)
            except KeyError:
                raise AssertionError(f"no data at {dict(zip(names, levels))}") from None
        return total

    def __call__(self, key: tuple) -> float:
        kind = key[0]
        if kind == "term":
            return self._difference(_changes(key[1]), averaged=self.full)
        if kind == "simple":
            _, factor, level, at = key
            fixed = dict(p.split("=", 1) for p in at.split(", ")) if at else {}
            return self._cell({**fixed, factor: level}) - self._cell({**fixed, factor: self.baseline[factor]})
        if kind == "cell":
            return self._cell(dict(p.split("=", 1) for p in key[1].split(", "))) - self._cell({})
        if kind == "alias":
            group = [tuple(_changes(t)) for t in key[1].removesuffix(", aliased").split(" + ")]
            host = sorted({c for t in group for c in t}, key=lambda c: self.factors.index(c[0]))
            inside = [list(s) for k in range(1, len(host) + 1) for s in itertools.combinations(host, k)]
            return self._cell(dict(host)) - self._cell({}) - sum(
                self._difference(s, averaged=False) for s in inside if tuple(s) not in group)
        raise ValueError(f"unknown effect key {key!r}")


def printed_effects(a: "Analysis") -> list[tuple[tuple, dict]]:
    """(key, row) for every effect of an analysis that has a CI."""
    out = [(("term", _label(r["factor"], r["level"])), r) for r in a.main.to_dict("records")]
    out += [(("term", f"{_label(r['factor_a'], r['level_a'])} x {_label(r['factor_b'], r['level_b'])}"), r)
            for r in a.interactions.to_dict("records")]
    out += [(("term", r["term"]), r) for r in a.higher.to_dict("records")]
    out += [(("alias", r["aliased"]), r) for r in a.aliases.to_dict("records")]
    out += [(("cell", r["cell"]), r) for r in a.cells_vs_baseline.to_dict("records")]
    out += [(("simple", r["factor"], r["level"], r["at"]), r) for r in a.simple.to_dict("records")]
    return [(k, r) for k, r in out if not math.isnan(r["ci_low"])]


@dataclass
class Calibration:
    """How the report's statistics did on datasets simulated with known effects."""
    coverage: float  # share of 95% CIs that contain the planted effect
    false_calls: float  # share of truly-zero effects called better or worse
    n_intervals: int  # CIs checked
    n_null: int  # truly-zero effects checked
    analyses: list  # one `effects.Analysis` per dataset


def calibrate(design: "Design", means: Sequence[float], datasets: int, seeds: int, *, noise_sd=0.01,
              seed_sd: float = 0.02, margin: float = 0.01, rng_seed: int = 0) -> Calibration:
    """Simulate `datasets` sweeps of `design` with cell means `means`, analyse each, score the CIs and calls."""
    from gptlab.report.effects import analyse
    rng = np.random.default_rng(rng_seed)
    planted = PlantedTruth(design, means)
    truth: dict[tuple, float] = {}
    covered, false_calls, analyses = [], [], []
    for _ in range(datasets):
        y, cells, seed = simulate_runs(design.cells, means, seeds, rng, noise_sd=noise_sd, seed_sd=seed_sd)
        a = analyse(y, cells, seed, design, _label, margin)
        for key, r in printed_effects(a):
            if key not in truth:
                try:
                    truth[key] = planted(key)
                except AssertionError as e:
                    raise AssertionError(f"the analysis printed {key}, which the design cannot estimate: {e}") from None
            covered.append(r["ci_low"] <= truth[key] <= r["ci_high"])
            if abs(truth[key]) < 1e-12:
                false_calls.append(r["call"] in ("better", "worse"))
        analyses.append(a)
    return Calibration(float(np.mean(covered)), float(np.mean(false_calls)) if false_calls else math.nan,
                       len(covered), len(false_calls), analyses)


@dataclass(frozen=True)
class CalibrationCase:
    """One design of the calibration suite with its planted cell means."""
    design: "Design"
    means: tuple[float, ...]
    datasets: int
    seeds: int
    noise_sd: float | tuple[float, ...]
    rng_seed: int


def _calibration_designs() -> dict[str, CalibrationCase]:
    from gptlab.report.design import Design
    fac = {"a": ("0", "1"), "b": ("0", "1"), "c": ("0", "1", "2")}
    grid = list(itertools.product(*fac.values()))
    full = Design(tuple(fac), fac, {k: v[0] for k, v in fac.items()}, tuple(grid))
    # strong interactions: b x c of 0.06 and a x b x c of -0.08 against a noise SD of 0.01
    mu = tuple(1.5 + 0.05 * (c[0] == "1") + 0.06 * (c[1] == "1") * (c[2] == "2")
               - 0.08 * (c[0] == "1") * (c[1] == "1") * (c[2] != "0") for c in grid)
    two = {"x": ("0", "1"), "y": ("0", "1"), "z": ("0", "1")}
    base = {k: "0" for k in two}
    oat = Design(tuple(two), two, base, (("0", "0", "0"), ("1", "0", "0"), ("0", "1", "0"), ("0", "0", "1"),
                                         ("1", "1", "1")))
    dead = Design(tuple(two), two, base, tuple(c for c in itertools.product(*two.values()) if c != ("1", "1", "0")))
    noisy = tuple(0.1 if i == 5 else 0.01 for i in range(len(grid)))
    return {
        "factorial, strong interactions": CalibrationCase(full, mu, 200, 3, 0.01, 11),
        # x has no effect alone; all three together are not additive
        "one at a time plus all": CalibrationCase(oat, (1.5, 1.5, 1.42, 1.45, 1.30), 150, 3, 0.01, 12),
        "factorial, a cell with no ok run": CalibrationCase(
            dead, tuple(1.5 + 0.03 * (c[0] == "1") - 0.02 * (c[2] == "1") * (c[1] == "1") for c in dead.cells),
            200, 3, 0.01, 13),
        "factorial, one cell 10x noisier": CalibrationCase(full, mu, 150, 3, noisy, 14),
    }


CALIBRATION_DESIGNS = _calibration_designs()
