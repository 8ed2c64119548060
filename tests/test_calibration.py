"""Calibration of the report's statistics by simulation with planted effects (stats layer only, no files).

600 simulated datasets over four designs: a full factorial with strong interactions, one-at-a-time
changes plus all changes together, a full factorial whose cell has no successful run, and a full
factorial with one cell ten times noisier than the others. For each design: 95% CIs cover the
planted effects 93-97% of the time; effects that are truly zero get `better`/`worse` at most 5%
of the time; in the full factorial, CI half-widths match the analytic pure-error value within 10%
and main effects four times the noise SD are called.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as st

from gptlab.report.design import Design, estimability
from gptlab.report.effects import analyse, term_label
from gptlab.report.synthetic import simulate_runs


def label(f: str, lv: str) -> str:
    return f"{f}={lv}"


def _at(at: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in at.items())


def truths(d: Design, mu: np.ndarray) -> dict[tuple, float]:
    """The planted value of every effect the analysis can print, keyed like `row_key`."""
    out: dict[tuple, float] = {}
    if d.full_factorial:
        for k in range(1, len(d.factors) + 1):
            for t in d.terms(k):
                out[("term", term_label(t, label))] = float(d.interaction(t) @ mu)
    else:
        est = estimability(d)
        for t, c in est.contrasts.items():
            out[("term", term_label(t, label))] = float(c @ mu)
        for group, c in est.alias_contrasts.items():
            out[("alias", " + ".join(term_label(t, label) for t in group) + ", aliased")] = float(c @ mu)
        for c in d.cells:
            if c != d.baseline_cell:
                out[("cell", ", ".join(label(f, v) for f, v in zip(d.factors, c)))] = float(d.versus_baseline(c) @ mu)
    for f in d.factors:
        rest = d.others([f])
        for combo in d.combos(rest):
            at = dict(zip(rest, combo))
            for lv in d.non_baseline(f):
                c = d.simple(f, lv, at)
                if c is not None:
                    out[("simple", f, lv, _at(at))] = float(c @ mu)
    return out


def rows(a) -> list[tuple[tuple, dict]]:
    """(key, row) for every printed effect with a CI."""
    out = []
    for r in a.main.to_dict("records"):
        out.append((("term", label(r["factor"], r["level"])), r))
    for r in a.interactions.to_dict("records"):
        out.append((("term", f"{label(r['factor_a'], r['level_a'])} x {label(r['factor_b'], r['level_b'])}"), r))
    out += [(("term", r["term"]), r) for r in a.higher.to_dict("records")]
    out += [(("alias", r["aliased"]), r) for r in a.aliases.to_dict("records")]
    out += [(("cell", r["cell"]), r) for r in a.cells_vs_baseline.to_dict("records")]
    out += [(("simple", r["factor"], r["level"], r["at"]), r) for r in a.simple.to_dict("records")]
    return [(k, r) for k, r in out if not math.isnan(r["ci_low"])]


def simulate(d: Design, mu: np.ndarray, n: int, seeds: int, noise_sd, rng_seed: int):
    """Analyse n simulated datasets; return coverage, null false-call rate, per-dataset analyses."""
    rng = np.random.default_rng(rng_seed)
    truth = truths(d, mu)
    covered, false_calls, analyses = [], [], []
    for _ in range(n):
        y, cells, seed = simulate_runs(d.cells, mu, seeds, rng, noise_sd=noise_sd, seed_sd=0.02)
        a = analyse(y, cells, seed, d, label, margin=0.01)
        for key, r in rows(a):
            assert key in truth, key  # every printed effect is one the design can estimate
            covered.append(r["ci_low"] <= truth[key] <= r["ci_high"])
            if abs(truth[key]) < 1e-12:
                false_calls.append(r["call"] in ("better", "worse"))
        analyses.append(a)
    return float(np.mean(covered)), float(np.mean(false_calls)), len(covered), analyses


FACTORIAL = {"a": ("0", "1"), "b": ("0", "1"), "c": ("0", "1", "2")}


def factorial_design() -> tuple[Design, np.ndarray]:
    grid = list(itertools.product(*FACTORIAL.values()))
    d = Design(tuple(FACTORIAL), FACTORIAL, {k: v[0] for k, v in FACTORIAL.items()}, tuple(grid))
    # strong interactions: b x c and a three-way term of 0.04, four times the noise SD (0.01)
    mu = np.array([1.5 + 0.05 * (c[0] == "1") + 0.06 * (c[1] == "1") * (c[2] == "2")
                   - 0.08 * (c[0] == "1") * (c[1] == "1") * (c[2] != "0") for c in grid])
    return d, mu


def test_full_factorial_with_strong_interactions():
    d, mu = factorial_design()
    coverage, false_rate, n, analyses = simulate(d, mu, 200, 3, 0.01, rng_seed=11)
    assert 0.93 <= coverage <= 0.97, (coverage, n)
    assert false_rate <= 0.05
    # pure error: the main-effect CI half-width is t_22 x sigma x sqrt(c'c / seeds), within 10%
    c = d.interaction((("a", "1"),))
    analytic = st.t.ppf(0.975, 12 * 3 - 12 - 2) * 0.01 * math.sqrt(c @ c / 3)
    half = np.mean([a.main.set_index("factor").loc["a", "ci95"] for a in analyses])
    assert abs(half / analytic - 1) < 0.10, (half, analytic)
    # a's averaged main effect is 0.05 - 0.08 * 2/6 = 0.0233, about 2.3 noise SDs: called worse nearly always,
    # which the additive model (interactions pooled into its error) does not manage
    truth = float(c @ mu)
    assert truth == pytest.approx(0.05 - 0.08 / 3)
    called = np.mean([a.main.set_index("factor").loc["a", "call"] == "worse" for a in analyses])
    assert called >= 0.95, called
    assert {a.fit.kind for a in analyses} <= {"pure", "welch"}
    assert np.mean([a.fit.kind == "pure" for a in analyses]) >= 0.95  # equal variances seldom look unequal


def test_one_at_a_time_plus_all():
    f = {"x": ("0", "1"), "y": ("0", "1"), "z": ("0", "1")}
    cells = (("0", "0", "0"), ("1", "0", "0"), ("0", "1", "0"), ("0", "0", "1"), ("1", "1", "1"))
    d = Design(tuple(f), f, {k: "0" for k in f}, cells)
    mu = np.array([1.5, 1.5, 1.42, 1.45, 1.30])  # x has no effect alone; all three together are non-additive
    coverage, false_rate, n, analyses = simulate(d, mu, 150, 3, 0.01, rng_seed=12)
    assert 0.93 <= coverage <= 0.97, (coverage, n)
    assert false_rate <= 0.05
    a = analyses[0]
    assert list(a.main["kind"].str.startswith("simple effect")) == [True] * 3
    assert a.interactions["estimate"].isna().all()
    alias = "x=1 x y=1 + x=1 x z=1 + y=1 x z=1 + x=1 x y=1 x z=1, aliased"
    assert set(a.interactions["alias"]) == {alias} and list(a.aliases["aliased"]) == [alias]


def test_cell_without_successful_runs():
    f = {"x": ("0", "1"), "y": ("0", "1"), "z": ("0", "1")}
    grid = list(itertools.product(*f.values()))
    dead = ("1", "1", "0")
    d = Design(tuple(f), f, {k: "0" for k in f}, tuple(c for c in grid if c != dead))
    assert not d.full_factorial
    mu = np.array([1.5 + 0.03 * (c[0] == "1") - 0.02 * (c[2] == "1") * (c[1] == "1") for c in d.cells])
    coverage, false_rate, n, analyses = simulate(d, mu, 100, 3, 0.01, rng_seed=13)
    assert 0.93 <= coverage <= 0.97, (coverage, n)
    assert false_rate <= 0.05
    inter = analyses[0].interactions.set_index(["factor_a", "factor_b"])
    assert math.isnan(inter.loc[("x", "y"), "estimate"])
    assert inter.loc[("x", "y"), "alias"] == "x=1 x y=1 + x=1 x y=1 x z=1, aliased"
    assert not math.isnan(inter.loc[("x", "z"), "estimate"])


def test_unequal_variances_use_per_cell_variances():
    d, mu = factorial_design()
    sd = np.full(len(d.cells), 0.01)
    sd[5] = 0.1  # a cell ten times noisier (e.g. one that sometimes fails to train)
    coverage, false_rate, n, analyses = simulate(d, mu, 150, 3, sd, rng_seed=14)
    assert np.mean([a.fit.kind == "welch" for a in analyses]) >= 0.7
    assert 0.93 <= coverage <= 0.97, (coverage, n)
    assert false_rate <= 0.05
    # contrasts that avoid the noisy cell keep narrow CIs; those through it are wide
    welch = next(a for a in analyses if a.fit.kind == "welch")
    simple = welch.simple.set_index(["factor", "at"])
    narrow = simple.loc[("a", "b=0, c=0"), "ci95"]
    wide = simple.loc[("a", "b=1, c=2"), "ci95"]  # cell 5 is a=0, b=1, c=2
    assert wide > 5 * narrow
