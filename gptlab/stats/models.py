"""The statistical models of the report, stated once, and the error of any contrast of cell means.

Owns the choice of error term, the fit (statsmodels OLS) and `CellFit.test`, which turns a weight
vector over cells (from `design`) into an estimate, standard error, degrees of freedom, CI and p.

Models (y = a run's loss; cell = its combination of factor levels; seed = its seed):

- `pure`: the cell-means model   y ~ 0 + C(cell) + C(seed)
  Every cell has its own mean, so no interaction of any order leaks into the error; the error is
  pure replication error (seed-to-seed noise within cells). C(seed) is a blocking term, used when
  there is more than one seed, it leaves residual degrees of freedom and the seeds link every cell
  (else a cell whose seeds no other cell has would have no mean at the average seed): in this lab a
  seed fixes the batch order in every cell, so runs with the same seed are paired.
- `welch`: the same model when cell variances differ strongly (Bartlett's test on the cells'
  residuals, p < 0.01, e.g. a cell that never trains): each cell keeps its own residual
  variance; a contrast's variance is the sandwich sum over cells and its degrees of freedom
  come from Welch-Satterthwaite.
- `pooled`: unreplicated designs (one run per cell, so no pure error) with three or more factors:
  y ~ (C(f1) + C(f2) + ... + C(fk))**2
  Main effects and two-way interactions only; every interaction of three or more factors is
  ASSUMED to be zero and pooled as error. Calls made under this model carry that assumption.
- `stein`: an adaptive sweep (`stats.adaptive_seeds`): the cell means of every run, with the pure
  error of the first round's runs alone (its variance and its degrees of freedom), so that the
  number of seeds, chosen from that variance, leaves every CI exact (Stein's two-stage rule).
- `own` (an arms sweep, `own_variance`): the cell-means model with every cell's own residual variance
  whatever Bartlett says, a contrast's variance the sandwich sum over cells (for an arm minus the
  baseline s_a^2/n_a + s_0^2/n_0) on Welch-Satterthwaite df. A cell with a single run has no variance
  of its own: it borrows the pooled one (on the pooled df), and `CellFit.borrowed` flags it.
- `stein own`: `stein` with `own_variance`: every cell's variance and df from its own first-round runs
  (the Welch analogue of Stein's rule: round 2 never re-estimates a variance), the means from every run.
- `none`: no error estimate at all (one run per cell and fewer than three factors): estimates
  are reported without CIs, p-values or calls.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import special
from scipy import stats as st

from gptlab.stats.calls import ALPHA
from gptlab.stats.design import Design

POWER = 0.8
HETERO_P = 0.01  # Bartlett p below which per-cell variances are used
FORMULAS = {
    "pure": "y ~ 0 + C(cell) + C(seed)",
    "welch": "y ~ 0 + C(cell) + C(seed), per-cell residual variances (Welch-Satterthwaite df)",
    "pooled": "y ~ (C(f1) + ... + C(fk))**2, interactions of 3+ factors pooled as error (assumed zero)",
    "stein": "y ~ 0 + C(cell) + C(seed), error variance and df from the first round's runs only (Stein two-stage)",
    "own": "y ~ 0 + C(cell), each cell's own residual variance (a single-run cell: the pooled one), "
           "Welch-Satterthwaite df",
    "stein own": "y ~ 0 + C(cell), each cell's own variance and df from its first-round runs (Stein two-stage), "
                 "Welch-Satterthwaite df",
    "none": "cell means only (no error estimate)",
}
PER_CELL = ("welch", "own", "stein own")  # kinds whose contrasts sum each cell's own variance (Welch-Satterthwaite)
OWN = ("own", "stein own")  # an arms design's kinds: each cell its own variance, whatever Bartlett says
FIXED_DF = ("stein", "stein own")  # kinds whose df are the first round's, whatever the seeds


# Student t through the special functions `scipy.stats.t` itself calls (stdtrit, stdtr): the same numbers to the
# last bit (a test checks), without the distribution object's argument handling, which took 100 us a call.
@lru_cache(maxsize=4096)
def t_quantile(q: float, df: float) -> float:
    """Student t quantile, `scipy.stats.t.ppf(q, df)` (cached: the report asks for the same few df thousands of times)."""
    return float(special.stdtrit(df, q))


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p of a t statistic on `df` degrees of freedom, `2 * scipy.stats.t.sf(abs(t), df)`."""
    return float(2 * special.stdtr(df, -abs(t)))


@dataclass(frozen=True)
class Test:
    """One contrast: estimate, standard error, df, 95% and 90% CIs, two-sided p."""
    estimate: float
    se: float = math.nan
    df: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    ci90_low: float = math.nan
    ci90_high: float = math.nan
    p_value: float = math.nan

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2


@dataclass
class CellFit:
    """Fitted cell means (at the average seed) with the covariance the chosen error gives them."""
    kind: str  # "pure", "welch", "own", "pooled", "stein", "stein own" or "none"
    means: np.ndarray  # (n_cells,) cell means, design.cells order
    cov: np.ndarray  # (n_cells, n_cells) covariance of `means` (NaN when kind == "none")
    df: float  # residual degrees of freedom of the model (0 when kind == "none")
    resid_sd: float  # pooled residual SD (NaN when kind == "none")
    seed_block: bool
    bartlett_p: float = math.nan  # test of equal cell variances (pure error only)
    # Welch: per-cell variance weights a_i(c) = sum over the cell's runs of (c . B)_j^2
    _B: np.ndarray | None = field(default=None, repr=False)  # (n_cells, n_runs) means = B @ y
    _cell_of_run: np.ndarray | None = field(default=None, repr=False)
    _cell_var: np.ndarray | None = field(default=None, repr=False)
    _cell_df: np.ndarray | None = field(default=None, repr=False)
    borrowed: np.ndarray | None = None  # `own`: the cells (bool, design.cells order) with the pooled variance

    @property
    def has_error(self) -> bool:
        return self.kind != "none"

    @property
    def cell_df(self) -> np.ndarray | None:
        """Per-cell kinds (`PER_CELL`): each cell's variance df, design.cells order; None for the others."""
        return None if self._cell_df is None else self._cell_df.copy()

    def test(self, c: np.ndarray | None) -> Test:
        """Estimate and inference for the contrast (or weighted mean) `c` of the cell means."""
        if c is None:
            return Test(math.nan)
        est = float(c @ self.means)
        if not self.has_error:
            return Test(est)
        (var,), (df,) = self.variance_df(np.asarray(c, float)[None, :])
        if not var > 0 or not df > 0:
            return Test(est)
        se = math.sqrt(var)
        t95, t90 = t_quantile(1 - ALPHA / 2, df), t_quantile(1 - ALPHA, df)
        p = t_two_sided_p(abs(est) / se, df)
        return Test(est, se, df, est - t95 * se, est + t95 * se, est - t90 * se, est + t90 * se, p)

    def variance_df(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The variance of every row of C (contrasts over the cells) and its degrees of freedom (arrays)."""
        if self.kind in PER_CELL:  # sum over cells of a_i(c) s_i^2; df from Welch-Satterthwaite over the cells
            w = C @ self._B
            a = np.stack([np.bincount(self._cell_of_run, weights=row ** 2, minlength=len(self.means)) for row in w])
            parts = a * self._cell_var
            var = parts.sum(axis=1)
            denom = np.where(parts > 0, parts ** 2 / self._cell_df, 0.0).sum(axis=1)
            df = np.divide(var ** 2, denom, out=np.full(len(C), self.df), where=denom > 0)
            return var, df
        return np.einsum("ij,jk,ik->i", C, self.cov, C), np.full(len(C), self.df)

    def variance_note(self, c: np.ndarray | None) -> str:
        """Whose variance contrast c uses under `own`: "own", or "pooled for a single-run cell" where a cell it
        weighs has one run (no variance of its own; "" for other kinds or no contrast)."""
        if self.kind not in OWN or c is None:
            return ""
        return "pooled for a single-run cell" if bool((self.borrowed & (np.abs(c) > 0)).any()) else "own"

    def joint(self, C: np.ndarray) -> tuple[float, int, float, float]:
        """Wald F test that every row of C (contrasts) is zero: (F, numerator df, denominator df, p)."""
        if not self.has_error or C.size == 0:
            return math.nan, 0, math.nan, math.nan
        est = C @ self.means
        if self.kind in PER_CELL:
            resid_cov = (C @ self._B) * self._cell_var[self._cell_of_run]
            V = resid_cov @ (C @ self._B).T
        else:
            V = C @ self.cov @ C.T
        rank = np.linalg.matrix_rank(V, tol=1e-12 * max(1.0, float(np.abs(V).max())))
        if rank == 0:
            return math.nan, 0, math.nan, math.nan
        F = float(est @ np.linalg.pinv(V, hermitian=True) @ est) / rank
        return F, rank, self.df, float(st.f.sf(F, rank, self.df))


def _ols(y: np.ndarray, X: np.ndarray):
    # Imported here: statsmodels takes about a second to import, and the sweep's command line imports this module
    # for its planning numbers (a dry run, a bad YAML's one-line error) but fits only in an adaptive sweep's rounds.
    from statsmodels.regression.linear_model import OLS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OLS(y, X).fit()


def fit_cells(y: np.ndarray, cell_idx: np.ndarray, seed: np.ndarray, design: Design,
              allow_welch: bool = True, error_mask: np.ndarray | None = None, block_seeds: bool = True,
              own_variance: bool = False) -> CellFit:
    """Fit the model the data support (see the module docstring) to runs y in cells `cell_idx`.

    `error_mask` (an adaptive sweep's first-round runs) makes it `stein`: the error comes from those runs only.
    `block_seeds` False drops C(seed) (an arms design: the baseline's extra seeds have no partner to pair with).
    `own_variance` (an arms design): every cell keeps its own variance (`own`, `stein own`), Bartlett or not.
    """
    if error_mask is not None:
        return _stein(y, cell_idx, seed, design, np.asarray(error_mask, bool), block_seeds, own_variance)
    n_cells = len(design.cells)
    counts = np.bincount(cell_idx, minlength=n_cells)
    D = np.zeros((len(y), n_cells))
    D[np.arange(len(y)), cell_idx] = 1.0
    seeds = sorted(set(seed.tolist()))
    S = np.stack([(seed == s).astype(float) for s in seeds[1:]], axis=1) if len(seeds) > 1 else np.zeros((len(y), 0))
    seed_block = block_seeds and S.shape[1] > 0 and len(y) - n_cells - S.shape[1] > 0
    if seed_block and np.linalg.matrix_rank(np.hstack([D, S])) < n_cells + S.shape[1]:
        seed_block = False  # seeds that do not link every cell: a cell's mean at the average seed is not estimable
    if not seed_block:
        S = S[:, :0]
    df = len(y) - n_cells - S.shape[1]
    if df <= 0:
        return _pooled_or_none(y, cell_idx, design)
    X = np.hstack([D, S])
    fit = _ols(y, X)
    if fit.ssr <= (1e-9 * max(1.0, float(np.abs(y).mean()))) ** 2 * len(y):  # no variation at all, e.g. every
        return _pooled_or_none(y, cell_idx, design, degenerate=True)     # cell at the same loss at step 0
    XtX_inv = np.linalg.pinv(X.T @ X)
    rows = np.hstack([np.eye(n_cells), np.full((n_cells, S.shape[1]), 1.0 / len(seeds))])  # average seed
    means = rows @ fit.params
    sigma2 = float(fit.ssr / df)
    cov = rows @ XtX_inv @ rows.T * sigma2
    out = CellFit("pure", means, cov, float(df), math.sqrt(sigma2), seed_block)
    resid = y - X @ fit.params
    groups = [resid[cell_idx == i] for i in range(n_cells) if counts[i] >= 2]
    if len(groups) >= 2 and all(np.ptp(g) > 0 for g in groups):
        out.bartlett_p = float(st.bartlett(*groups).pvalue)
    if own_variance or (allow_welch and out.bartlett_p < HETERO_P and (counts >= 2).all()):
        scale = df / (len(y) - n_cells)  # the seed block's df, spread over the cells
        borrowed = counts < 2  # no variance of its own: the pooled one, on the pooled df
        cell_df = np.where(borrowed, df, (counts - 1) * scale)
        cell_var = np.where(borrowed, sigma2, np.bincount(cell_idx, weights=resid ** 2, minlength=n_cells) / cell_df)
        B = rows @ XtX_inv @ X.T
        cov = (B * cell_var[cell_idx]) @ B.T
        out = CellFit("own" if own_variance else "welch", means, cov, float(df), math.sqrt(sigma2), seed_block,
                      out.bartlett_p, B, cell_idx, cell_var, cell_df, borrowed)
    return out


def _stein(y: np.ndarray, cell_idx: np.ndarray, seed: np.ndarray, design: Design, first: np.ndarray,
           block_seeds: bool = True, own_variance: bool = False) -> CellFit:
    """Means from every run; variance and df from the first round's pure error alone (per cell: `stein own`)."""
    every = fit_cells(y, cell_idx, seed, design, allow_welch=False, block_seeds=block_seeds, own_variance=own_variance)
    round1 = fit_cells(y[first], cell_idx[first], seed[first], design, allow_welch=False, block_seeds=block_seeds,
                       own_variance=own_variance)
    if own_variance and every.kind == round1.kind == "own":  # each cell's round-1 variance over its N runs' mean
        cov = (every._B * round1._cell_var[every._cell_of_run]) @ every._B.T
        return CellFit("stein own", every.means, cov, round1.df, round1.resid_sd, every.seed_block, round1.bartlett_p,
                       every._B, every._cell_of_run, round1._cell_var, round1._cell_df, round1.borrowed)
    if every.kind != "pure" or round1.kind != "pure":  # no replication: nothing to scale (never for min >= 2)
        return every
    scale = (round1.resid_sd / every.resid_sd) ** 2
    return CellFit("stein", every.means, every.cov * scale, round1.df, round1.resid_sd, every.seed_block,
                   round1.bartlett_p)


def _pooled_or_none(y: np.ndarray, cell_idx: np.ndarray, design: Design, degenerate: bool = False) -> CellFit:
    """No pure error: main effects + two-way interactions with higher-order terms pooled, if that leaves df."""
    n_cells = len(design.cells)
    means = np.bincount(cell_idx, weights=y, minlength=n_cells) / np.maximum(np.bincount(cell_idx, minlength=n_cells), 1)
    none = CellFit("none", means, np.full((n_cells, n_cells), np.nan), 0.0, math.nan, False)
    if degenerate or len(design.factors) < 3 or not design.full_factorial:
        return none
    cells_X = pooled_matrix(design, design.cells)
    X = cells_X[cell_idx]
    rank = np.linalg.matrix_rank(X)
    df = len(y) - rank
    if df <= 0:
        return none
    fit = _ols(y, X)
    if fit.ssr <= (1e-9 * max(1.0, float(np.abs(y).mean()))) ** 2 * len(y):
        return none
    sigma2 = float(fit.ssr / df)
    XtX_inv = np.linalg.pinv(X.T @ X)
    return CellFit("pooled", cells_X @ fit.params, cells_X @ XtX_inv @ cells_X.T * sigma2, float(df),
                   math.sqrt(sigma2), False)


def pooled_matrix(design: Design, cells: list | tuple) -> np.ndarray:
    """Treatment-coded rows of `cells` for y ~ (C(f1) + ... + C(fk))**2: intercept, mains, two-way products."""
    cols = [np.ones(len(cells))]
    dummies = {}
    for i, f in enumerate(design.factors):
        for lv in design.non_baseline(f):
            dummies[f, lv] = np.array([c[i] == lv for c in cells], dtype=float)
            cols.append(dummies[f, lv])
    keys = list(dummies)
    for (fa, la), (fb, lb) in ((a, b) for i, a in enumerate(keys) for b in keys[i + 1:] if a[0] != b[0]):
        cols.append(dummies[fa, la] * dummies[fb, lb])
    return np.stack(cols, axis=1)


def mde80(t: Test) -> float:
    """Minimum detectable effect at 80% power, two-sided alpha 0.05: (t_0.975 + t_0.8) x SE."""
    if math.isnan(t.se):
        return math.nan
    return float((t_quantile(1 - ALPHA / 2, t.df) + t_quantile(POWER, t.df)) * t.se)


MIN_RESIDUAL_DF = 3  # fewer leave t_0.975 at 12.7 (1 df) or 4.3 (2 df): every CI too wide to call much


def planned_df(cells: int, seeds: int, baseline_seeds: int | None = None) -> float:
    """The residual df that `cells` cells x `seeds` seeds leave the effects' noise, as `fit_cells` will fit them.

    A grid (`pure`): n - cells - (seeds - 1) = (cells - 1)(seeds - 1) with the seed block, or cells (seeds - 1)
    where the block would leave none (one cell). An arms design (`own`, `baseline_seeds` given): an arm against the
    baseline on the Welch-Satterthwaite df of their own variances, at equal variances. 0: no replication."""
    if seeds < 2:
        return 0.0
    if baseline_seeds is None:
        blocked = (cells - 1) * (seeds - 1)
        return float(blocked if blocked > 0 else cells * (seeds - 1))
    v_arm, v_base = 1 / seeds, 1 / baseline_seeds
    parts = v_arm ** 2 / (seeds - 1) + (v_base ** 2 / (baseline_seeds - 1) if baseline_seeds > 1 else 0.0)
    return (v_arm + v_base) ** 2 / parts
