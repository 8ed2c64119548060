"""The pieces of the statistics layer: contrasts, estimability, error models, Holm, calls, precision."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import statsmodels.formula.api as smf
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from calibration.effects_sim import simulate_runs
from gptlab.errors import GptlabError
from gptlab.stats.calls import call, check_margin, holm
from gptlab.stats.design import Design, estimability
from gptlab.stats.effects import analyse
from gptlab.stats.models import fit_cells

TWO = {"a": ("0", "1"), "b": ("0", "1")}


def design(factors, cells=None):
    grid = list(itertools.product(*factors.values()))
    return Design(tuple(factors), factors, {k: v[0] for k, v in factors.items()}, tuple(cells or grid))


def label(f, lv):
    return f"{f}={lv}"


def test_contrast_vectors_of_a_two_by_two():
    d = design(TWO)  # cells 00, 01, 10, 11
    assert list(d.interaction((("a", "1"),))) == [-0.5, -0.5, 0.5, 0.5]
    assert list(d.interaction((("a", "1"), ("b", "1")))) == [1, -1, -1, 1]
    assert list(d.simple("a", "1", {"b": "1"})) == [0, -1, 0, 1]
    assert list(d.marginal({"b": "1"})) == [0, 0.5, 0, 0.5]
    assert design(TWO, [("0", "0"), ("1", "0")]).interaction((("a", "1"),)) is None  # needs every cell


def test_three_way_contrast_is_the_difference_of_two_way_contrasts():
    d = design({"a": ("0", "1"), "b": ("0", "1"), "c": ("0", "1")})
    mu = np.random.default_rng(0).normal(size=8)
    m = dict(zip(d.cells, mu))
    ab = [m["1", "1", c] - m["1", "0", c] - m["0", "1", c] + m["0", "0", c] for c in "01"]
    assert d.interaction((("a", "1"), ("b", "1"), ("c", "1"))) @ mu == pytest.approx(ab[1] - ab[0])


def test_estimability_of_one_at_a_time_plus_all():
    f = {"x": ("0", "1"), "y": ("0", "1"), "z": ("0", "1")}
    d = design(f, [("0", "0", "0"), ("1", "0", "0"), ("0", "1", "0"), ("0", "0", "1"), ("1", "1", "1")])
    est = estimability(d)
    assert set(est.contrasts) == {(("x", "1"),), (("y", "1"),), (("z", "1"),)}
    assert list(est.contrasts[(("x", "1"),)]) == [-1, 1, 0, 0, 0]
    group = est.aliases[(("x", "1"), ("y", "1"))]
    assert len(group) == 4 and est.aliases[(("y", "1"), ("z", "1"))] == group
    assert list(est.alias_contrasts[group]) == pytest.approx([2, -1, -1, -1, 1])  # all - singles + 2 x baseline


def test_no_baseline_cell_means_nothing_against_it():
    d = design(TWO, [("0", "1"), ("1", "1")])
    est = estimability(d)
    assert est.contrasts == {} and est.aliases


def test_holm_equals_statsmodels_and_skips_nan():
    p = np.array([0.01, 0.04, np.nan, 0.03, 0.005, 0.5])
    ours = holm(p)
    ref = multipletests(p[~np.isnan(p)], method="holm")[1]
    assert np.isnan(ours[2]) and np.allclose(ours[~np.isnan(p)], ref)


@pytest.mark.parametrize("args, expected", [
    ((-0.05, 0.001, -0.06, -0.04, 0.01), "better"), ((0.05, 0.001, 0.04, 0.06, 0.01), "worse"),
    ((0.001, 0.5, -0.004, 0.006, 0.01), "equivalent"), ((0.001, 0.5, -0.004, 0.011, 0.01), "inconclusive"),
    ((0.005, 0.01, 0.002, 0.008, 0.01), "worse"),  # significant beats equivalent
    ((0.0, math.nan, math.nan, math.nan, 0.01), "inconclusive")])
def test_calls(args, expected):
    assert call(*args) == expected


@pytest.mark.parametrize("bad", ["abc", math.nan, math.inf, -0.01, 0, True, None, [0.1]])
def test_margin_rejects_bad_values(bad):
    with pytest.raises(GptlabError, match="report.equivalence_margin"):
        check_margin(bad)


def test_margin_accepts_numbers_and_numeric_text():
    assert check_margin(0.02) == 0.02 and check_margin("0.005") == 0.005 and check_margin(1) == 1.0


def test_pure_error_ignores_interactions_while_additive_model_pools_them():
    d = design({"a": ("0", "1"), "b": ("0", "1"), "c": ("0", "1")})
    mu = np.array([1.5 + 0.3 * (c[0] == c[1]) for c in d.cells])  # a pure a x b interaction, huge
    y, cells, seeds = simulate_runs(d.cells, mu, 3, np.random.default_rng(1), noise_sd=0.01, seed_sd=0.0)
    fit = fit_cells(y, np.array([d.cells.index(c) for c in cells]), seeds, d)
    assert fit.kind == "pure" and fit.resid_sd == pytest.approx(0.01, rel=0.4)
    import pandas as pd
    df = pd.DataFrame({"y": y, "a": [c[0] for c in cells], "b": [c[1] for c in cells], "c": [c[2] for c in cells],
                       "seed": seeds})
    additive = smf.ols("y ~ C(a) + C(b) + C(c) + C(seed)", df).fit()
    assert math.sqrt(additive.scale) > 10 * fit.resid_sd  # the old model's error was the interaction


def test_unreplicated_three_factors_pool_higher_order_terms():
    f = {"a": ("0", "1"), "b": ("0", "1", "2"), "c": ("0", "1", "2")}
    d = design(f)
    mu = np.array([1.5 + 0.1 * (c[0] == "1") + 0.05 * (c[1] == "2") for c in d.cells])
    y, cells, seeds = simulate_runs(d.cells, mu, 1, np.random.default_rng(2), noise_sd=0.01, seed_sd=0.0)
    a = analyse(y, cells, seeds, d, label, 0.01)
    assert a.fit.kind == "pooled" and a.fit.df == 18 - 1 - 1 - 2 - 2 - (2 + 2 + 4)
    assert a.higher.empty and a.higher_joint is None  # the higher-order terms are the error
    row = a.main.set_index("factor").loc["a"]
    assert row["call"] == "worse" and row["ci_low"] < 0.1 < row["ci_high"]


def test_unreplicated_two_factors_give_estimates_without_calls():
    d = design(TWO)
    y, cells, seeds = simulate_runs(d.cells, [1.5, 1.5, 1.6, 1.6], 1, np.random.default_rng(3))
    a = analyse(y, cells, seeds, d, label, 0.01)
    assert a.fit.kind == "none" and a.main["ci_low"].isna().all() and (a.main["call"] == "").all()
    assert not a.main["estimate"].isna().any()


def test_seeds_needed_shrink_the_ci_to_the_margin():
    """`seeds_needed` (stats.to_decide) is the fewest seeds n with t(0.975, (C-1)(n-1)) se sqrt(3/n) <= margin."""
    d = design(TWO)
    y, cells, seeds = simulate_runs(d.cells, [1.5] * 4, 3, np.random.default_rng(4), noise_sd=0.02)
    a = analyse(y, cells, seeds, d, label, 0.01)
    n = int(a.main.iloc[0]["seeds_needed"])
    assert n > 3
    se = a.fit.test(d.interaction((("a", "1"),))).se

    def hw(k: int) -> float:
        return float(st.t.ppf(0.975, 3 * (k - 1))) * se * math.sqrt(3 / k)
    assert hw(n) <= 0.01 < hw(n - 1)


def _two_way_residuals(y: np.ndarray) -> np.ndarray:
    """Residuals of y[cell, seed] ~ cell + seed (balanced), by plain row and column means."""
    return y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()


def _brute_force_seeds(c: np.ndarray, cell_var: np.ndarray, df_at, margin: float) -> float:
    """The first n = 2, 3, ... with t_0.975(df(n)) * sqrt(sum c_i^2 var_i / n) <= margin (NaN past 10,000).

    The variance of a contrast of balanced cell means with n seeds per cell is sum_i c_i^2 var_i / n (the
    seed block cancels in a contrast); `df_at(n, parts)` is the error's degrees of freedom at n seeds. Every
    n is evaluated (one array), and the first that reaches the margin is taken.
    """
    n = np.arange(2, 10_001, dtype=float)
    parts = np.outer(1.0 / n, c ** 2 * cell_var)  # (n, cells): each cell's share of the variance at n seeds
    df = df_at(n, parts)
    half = st.t.ppf(0.975, df) * np.sqrt(parts.sum(1))
    ok = np.flatnonzero(half <= margin)
    return float(n[ok[0]]) if ok.size else math.nan


@pytest.mark.parametrize("factors, n_seeds, noise_sd, margin, kind", [
    (TWO, 3, 0.02, 0.01, "pure"),
    (TWO, 2, 0.004, 0.01, "pure"),  # already precise: the fewest seeds, 2
    ({"a": ("0", "1"), "b": ("0", "1", "2")}, 4, 0.015, 0.005, "pure"),
    ({"a": ("0", "1"), "b": ("0", "1"), "c": ("0", "1")}, 3, 0.03, 0.01, "pure"),
    ({"a": ("0", "1"), "b": ("0", "1"), "c": ("0", "1")}, 5, 0.01, 0.002, "stein"),
    (TWO, 4, 0.02, 0.008, "stein"),
    ({"a": ("0", "1"), "b": ("0", "1", "2")}, 6, (0.002, 0.002, 0.002, 0.002, 0.002, 0.08), 0.02, "welch"),
    (TWO, 3, 0.05, 1e-4, "pure"),  # more than 10,000 seeds: NaN
])
def test_seeds_needed_matches_a_brute_force_search(factors, n_seeds, noise_sd, margin, kind):
    """The report's seeds_needed column against an independent search: one more seed at a time, with scipy's
    t quantile and the model's variance (pure: pooled residual variance on (cells - 1)(n - 1) df; stein: round 1's
    variance and df, whatever n; welch: per-cell variances, Welch-Satterthwaite df with n - 1 per cell)."""
    d = design(factors)
    K = len(d.cells)
    y, cells, seeds = simulate_runs(d.cells, [1.5] * K, n_seeds, np.random.default_rng(7), noise_sd=noise_sd,
                                    seed_sd=0.01)
    first = 2 if kind == "stein" else n_seeds
    a = analyse(y, cells, seeds, d, label, margin, error_mask=seeds < first if kind == "stein" else None)
    assert a.fit.kind == kind
    Y = y.reshape(K, n_seeds)  # simulate_runs: cell-major, seeds 0..n-1
    if kind == "welch":
        r = _two_way_residuals(Y)
        per_cell_df = (n_seeds - 1) * (K - 1) / K  # the seed block's df spread over the cells
        cell_var = (r ** 2).sum(1) / per_cell_df
        def df_at(n, parts):
            return parts.sum(-1) ** 2 / np.sum(parts ** 2, -1) * ((n - 1) * (K - 1) / K)

    else:
        r = _two_way_residuals(Y[:, :first])
        df0 = (K - 1) * (first - 1)
        cell_var = np.full(K, (r ** 2).sum() / df0)
        df_at = (lambda n, parts: np.full_like(n, df0)) if kind == "stein" else (lambda n, parts: (K - 1) * (n - 1))
    rows = [(r_, d.interaction(((r_["factor"], r_["level"]),))) for r_ in a.main.to_dict("records")]
    rows += [(r_, d.interaction(((r_["factor_a"], r_["level_a"]), (r_["factor_b"], r_["level_b"]))))
             for r_ in a.interactions.to_dict("records")]
    for row, c in rows:
        expected = _brute_force_seeds(c, cell_var, df_at, margin)
        # the model's half-width at today's seeds is the same formula at n = n_seeds
        now = np.array([float(n_seeds)])
        assert row["ci95"] == pytest.approx(float(st.t.ppf(0.975, df_at(now, np.outer(1 / now, c ** 2 * cell_var)))[0])
                                            * math.sqrt(float(np.sum(c ** 2 * cell_var)) / n_seeds), rel=1e-6)
        if math.isnan(expected):
            assert math.isnan(row["seeds_needed"]), row
        else:
            assert row["seeds_needed"] == expected, (row, expected)
    assert any(math.isnan(r_["seeds_needed"]) for r_, _ in rows) == (margin < 1e-3)


def test_holm_family_counts_identical_contrasts_once():
    f = {"x": ("0", "1"), "y": ("0", "1")}
    d = design(f, [("0", "0"), ("1", "0"), ("0", "1")])
    y, cells, seeds = simulate_runs(d.cells, [1.5, 1.6, 1.5], 3, np.random.default_rng(5))
    a = analyse(y, cells, seeds, d, label, 0.01)
    # main effects, cells vs baseline and simple effects are the same two contrasts
    assert a.n_tests == 2
    main = a.main.set_index("factor")
    cells_ = a.cells_vs_baseline.set_index("cell")
    assert main.loc["x", "p_adjusted"] == cells_.loc["x=1, y=0", "p_adjusted"]


def test_unequal_variances_switch_to_welch_only_when_every_cell_is_replicated():
    d = design({"a": ("0", "1"), "b": ("0", "1", "2")})
    sd = [0.001, 0.001, 0.001, 0.001, 0.001, 0.2]
    y, cells, seeds = simulate_runs(d.cells, [1.5] * 6, 6, np.random.default_rng(6), noise_sd=sd, seed_sd=0.0)
    index = np.array([d.cells.index(c) for c in cells])
    assert fit_cells(y, index, seeds, d).kind == "welch"
    keep = np.ones(len(y), bool)
    keep[np.flatnonzero(index == 0)[1:]] = False  # cell 0 keeps a single run
    fit = fit_cells(y[keep], index[keep], seeds[keep], d)
    assert fit.kind == "pure" and fit.bartlett_p < 0.01


def test_design_cells_is_the_grid_minus_its_excludes_in_grid_order():
    from gptlab.stats.design import design_cells
    grid = {"a": ["0", "1"], "b": ["x", "y", "z"]}
    assert design_cells(grid) == [("0", "x"), ("0", "y"), ("0", "z"), ("1", "x"), ("1", "y"), ("1", "z")]
    assert design_cells(grid, [{"a": "1", "b": "y"}, {"b": "z"}]) == [("0", "x"), ("0", "y"), ("1", "x")]
    assert design_cells(grid, [{"c": "9"}]) == design_cells(grid)  # names no grid factor: excludes nothing
