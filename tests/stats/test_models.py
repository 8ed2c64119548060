"""Each arm's own variance (`models` kind `own`, `stein own`; `text_share`'s per-cell run x block noise).

Checked against hand computations (scipy's Welch t test, statsmodels' unequal-variance CI, the
Satterthwaite df written out), the single-run fallback to the pooled variance, Stein's rule with each
arm's first-round variance, and a small simulation with one arm five times noisier than the rest:
each arm's own variance covers it, the pooled variance does not.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW

from calibration.arms_scores import run
from calibration.arms_sim import ArmsWorld, arms_design, dunnett, pooled
from gptlab.stats import calls
from gptlab.stats.calls import DEFAULT_MARGIN
from gptlab.stats.effects import OWN_COLS, analyse
from gptlab.stats.models import fit_cells, t_quantile, t_two_sided_p
from gptlab.stats.text_share import Blocks


def _label(f: str, lv: str) -> str:
    return f"{f}={lv}"


def _runs(groups: list[np.ndarray]) -> tuple[np.ndarray, list[tuple[str, ...]], np.ndarray]:
    """Run losses, cells and seeds of groups[0] (the baseline), groups[1] (arm1), ... (each seeds 0..n-1)."""
    design = arms_design(len(groups) - 1)
    y = np.concatenate(groups)
    cells = [design.cells[i] for i, g in enumerate(groups) for _ in g]
    seeds = np.concatenate([np.arange(len(g)) for g in groups])
    return y, cells, seeds


def _arms(groups, **kw):
    y, cells, seeds = _runs(groups)
    return analyse(y, cells, seeds, arms_design(len(groups) - 1), _label, DEFAULT_MARGIN, block_seeds=False,
                   own_variance=True, **kw)


def test_each_arm_against_the_baseline_is_welchs_t_test():
    rng = np.random.default_rng(0)
    base, arm1, arm2 = rng.normal(1.5, 0.01, 6), rng.normal(1.52, 0.01, 3), rng.normal(1.5, 0.05, 4)
    a = _arms([base, arm1, arm2])
    assert a.fit.kind == "own" and list(a.main.columns[a.main.columns.get_loc("call") + 1:][:2]) == OWN_COLS
    ps = []
    for arm, row in zip((arm1, arm2), a.main.to_dict("records")):
        welch = st.ttest_ind(arm, base, equal_var=False)
        lo, hi = CompareMeans(DescrStatsW(arm), DescrStatsW(base)).tconfint_diff(usevar="unequal")
        v = arm.var(ddof=1) / len(arm) + base.var(ddof=1) / len(base)
        df = v ** 2 / ((arm.var(ddof=1) / len(arm)) ** 2 / (len(arm) - 1)
                       + (base.var(ddof=1) / len(base)) ** 2 / (len(base) - 1))
        assert row["estimate"] == pytest.approx(arm.mean() - base.mean(), abs=1e-12)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo, hi), rel=1e-9)
        assert row["p_value"] == pytest.approx(welch.pvalue, rel=1e-9)
        assert row["df"] == pytest.approx(df, rel=1e-9) == pytest.approx(welch.df, rel=1e-9)
        assert row["variance"] == "own"
        ps.append(welch.pvalue)
    assert a.main["p_adjusted"].tolist() == pytest.approx(calls.holm(ps), rel=1e-9)
    pooled_fit = _arms_pooled([base, arm1, arm2])
    assert pooled_fit.main["ci95"].iloc[1] < 0.6 * a.main["ci95"].iloc[1]  # the noisy arm: far too narrow pooled


def _arms_pooled(groups):
    y, cells, seeds = _runs(groups)
    return analyse(y, cells, seeds, arms_design(len(groups) - 1), _label, DEFAULT_MARGIN, block_seeds=False,
                   allow_welch=False)


def test_a_single_run_arm_borrows_the_pooled_variance_and_says_so():
    rng = np.random.default_rng(1)
    base, arm1, arm2 = rng.normal(1.5, 0.01, 5), rng.normal(1.5, 0.01, 1), rng.normal(1.5, 0.02, 4)
    a = _arms([base, arm1, arm2])
    assert a.fit.borrowed.tolist() == [False, True, False]
    one, two = a.main.to_dict("records")
    assert (one["variance"], two["variance"]) == ("pooled for a single-run cell", "own")
    ss = ((base - base.mean()) ** 2).sum() + ((arm2 - arm2.mean()) ** 2).sum()
    s2, df_pooled = ss / (10 - 3), 10 - 3  # the pooled variance of the cells with replicates, on N - cells df
    v_arm, v_base = s2 / 1, base.var(ddof=1) / 5
    df = (v_arm + v_base) ** 2 / (v_arm ** 2 / df_pooled + v_base ** 2 / 4)
    assert one["df"] == pytest.approx(df, rel=1e-9)
    assert one["ci95"] == pytest.approx(st.t.ppf(0.975, df) * math.sqrt(v_arm + v_base), rel=1e-9)


def test_the_text_term_uses_each_cells_own_run_by_block_noise():
    rng = np.random.default_rng(2)
    n0, n1, B = 5, 3, 8
    profile = rng.normal(0, 0.1, B)
    base = 1.5 + profile + rng.normal(0, 0.01, (n0, 1)) + rng.normal(0, 0.02, (n0, B))
    arm = 1.52 + profile + rng.normal(0, 0.1, B) + rng.normal(0, 0.03, (n1, 1)) + rng.normal(0, 0.06, (n1, B))
    Y = np.vstack([base, arm])
    blocks = Blocks(Y, np.ones_like(Y))
    a = _arms([base.mean(axis=1), arm.mean(axis=1)], blocks=blocks)
    row = a.main.to_dict("records")[0]
    # by hand: the seed part (Welch on the run means), then the text part from the per-block differences
    ra, rb = arm.mean(axis=1), base.mean(axis=1)
    va, vb = ra.var(ddof=1) / n1, rb.var(ddof=1) / n0
    seed_var = va + vb
    seed_df = seed_var ** 2 / (va ** 2 / (n1 - 1) + vb ** 2 / (n0 - 1))
    q = (arm.mean(axis=0) - base.mean(axis=0)).var(ddof=1) / B

    def noise(x):  # the cell's run x block mean square, over its B blocks' mean (1/B: equal weights)
        r = x - x.mean(axis=0) - x.mean(axis=1, keepdims=True) + x.mean()
        n = len(x)
        return (r ** 2).sum() / ((n - 1) * (B - 1)) / n / B, (n - 1) * (B - 1)

    (ka, dfa), (kb, dfb) = noise(arm), noise(base)
    text = q - ka - kb
    assert text > 0
    total = seed_var + text
    df = total ** 2 / (seed_var ** 2 / seed_df + q ** 2 / (B - 1) + ka ** 2 / dfa + kb ** 2 / dfb)
    assert row["estimate"] == pytest.approx(ra.mean() - rb.mean(), abs=1e-12)
    assert row["df"] == pytest.approx(df, rel=1e-9)
    assert row["ci95"] == pytest.approx(st.t.ppf(0.975, df) * math.sqrt(total), rel=1e-9)
    assert row["text_share"] == pytest.approx(text / total, rel=1e-9)
    assert row["p_value"] == pytest.approx(2 * st.t.sf(abs(row["estimate"]) / math.sqrt(total), df), rel=1e-9)


def test_steins_rule_per_arm_takes_each_arms_first_round_variance():
    rng = np.random.default_rng(3)
    base, arm = rng.normal(1.5, 0.01, 7), rng.normal(1.5, 0.04, 5)
    y, cells, seeds = _runs([base, arm])
    first = seeds < 3  # round 1: seeds 0..2 of every cell
    fit = fit_cells(y, np.array([c != ("baseline",) for c in cells], int), seeds, arms_design(1),
                    error_mask=first, block_seeds=False, own_variance=True)
    t = fit.test(np.array([-1.0, 1.0]))
    va, vb = arm[:3].var(ddof=1) / 5, base[:3].var(ddof=1) / 7  # round 1's variance over all N runs' mean
    assert fit.kind == "stein own"
    assert t.estimate == pytest.approx(arm.mean() - base.mean(), abs=1e-12)
    assert t.se == pytest.approx(math.sqrt(va + vb), rel=1e-9)
    assert t.df == pytest.approx((va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 2), rel=1e-9)


def test_one_noisy_arm_is_covered_by_its_own_variance_and_not_by_the_pooled_one():
    w = ArmsWorld(arms=6, noisy_arm=2).null()  # arm2's run SD five times the others'
    own, one = dunnett(w), pooled(w)
    s = run(w, 120, (own, one), rng_seed=21)
    mine, before = s[own.name], s[one.name]
    # 120 studies: a coverage's Monte-Carlo SE is about 0.02, so 0.87 is some 4 SEs below 0.95
    assert mine.noisy_coverage >= 0.87 and min(mine.arm_coverage) >= 0.87 and mine.familywise <= 0.12, mine
    assert before.noisy_coverage < 0.85 and before.familywise > 0.12, before  # the same bounds fail pooled
    assert mine.half_width > before.half_width  # the price: an arm's 2 df instead of the pooled ones


def test_the_t_helpers_give_scipy_stats_t_to_the_last_bit():
    """`t_quantile` and `t_two_sided_p` call scipy's special functions directly (60x faster than `scipy.stats.t`):
    the numbers must be the distribution's own, bit for bit, over the df the fits give (Welch's are fractional)."""
    rng = np.random.default_rng(7)
    dfs = np.concatenate([rng.uniform(0.05, 5, 300), rng.uniform(5, 5000, 300), [1, 2, 30, 1e9, np.inf]])
    ts = np.concatenate([rng.exponential(2, 300), rng.uniform(0, 60, 300), [0, 1e-300, 1e300, np.inf, np.nan]])
    for df, t in zip(dfs.tolist(), ts.tolist()):
        for q in (0.975, 0.95, 0.995):
            assert t_quantile(q, df) == float(st.t.ppf(q, df)), (q, df)
        p, expected = t_two_sided_p(t, df), float(2 * st.t.sf(abs(t), df))
        assert p == expected or (math.isnan(p) and math.isnan(expected)), (t, df)
    assert t_two_sided_p(-2.0, 10.0) == t_two_sided_p(2.0, 10.0) > 0.05
