"""Simulated sweeps with planted effects: how often the statistics' CIs cover them and their calls are false.

Owns `simulate_runs` (in-memory runs: a cell mean, a seed offset shared by every cell, noise) and
`calibrate`, which analyses simulated datasets with `effects.analyse` and scores every printed CI
and call against the planted truth. The true effects come from `PlantedTruth`, group means of the
planted cells, never from the `Design` contrasts under test. `CALIBRATION_DESIGNS` are the designs
the tests and `benchmarks/effects_calibration.py` calibrate. Results folders on disk are
`calibration.synthetic`'s.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from gptlab.stats.calls import DIRECTIONAL
from gptlab.stats.design import Design
from gptlab.stats.effects import Analysis, analyse


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

    def __init__(self, design: Design, means: Sequence[float]) -> None:
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
            def at(levels):
                return float(means.loc[levels if len(levels) > 1 else levels[0]])
        else:
            def at(levels):
                return self._cell(dict(zip(names, levels)))
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


def printed_effects(a: Analysis) -> list[tuple[tuple, dict]]:
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


def calibrate(design: Design, means: Sequence[float], datasets: int, seeds: int, *, noise_sd=0.01,
              seed_sd: float = 0.02, margin: float = 0.01, rng_seed: int = 0) -> Calibration:
    """Simulate `datasets` sweeps of `design` with cell means `means`, analyse each, score the CIs and calls."""
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
                false_calls.append(r["call"] in DIRECTIONAL)
        analyses.append(a)
    return Calibration(float(np.mean(covered)), float(np.mean(false_calls)) if false_calls else math.nan,
                       len(covered), len(false_calls), analyses)


@dataclass(frozen=True)
class CalibrationCase:
    """One design of the calibration suite with its planted cell means."""
    design: Design
    means: tuple[float, ...]
    datasets: int
    seeds: int
    noise_sd: float | tuple[float, ...]
    rng_seed: int


def _calibration_designs() -> dict[str, CalibrationCase]:
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
