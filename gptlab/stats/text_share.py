"""The text's share of the error: CIs of contrasts of cell means that count both the seeds and the text's blocks.

A run's test loss is a weighted mean over contiguous blocks of the test split (`test_blocks.csv`). The
seed model (`models`) treats that text as fixed; a rerun scored on other text would move every effect
by its arm x block interaction, a source of variation no seed-only CI counts. The model here, for the
loss y[r, b] of run r on block b, blocks a random sample of text:

    y[r, b] = mu[cell r] + g[b] + a[cell r, b] + (the seed model's seed and run terms) + e[r, b]

g: a block's difficulty (shared by every cell, so it cancels in contrasts); a[., b] ~ (0, Sigma_a):
the cells' arm x block interaction; e[r, b] ~ (0, s2_e): the run x block noise. The estimate of a
contrast c is the seed model's (the run losses are the blocks' weighted means), and its variance

    Var(c) = Var_seed(c) + c' Sigma_a c * sum_b w_b^2        (w: the blocks' weights, sum 1; 1/B if equal)

Var_seed is the seed model's (pure, welch, own, stein or pooled, as `models.fit_cells` chose). Sigma_a comes
from the per-block cell means m_b = M y[:, b] (M: the seed model's linear map from runs to cell means):
their covariance over blocks Q has expectation Sigma_a + M M' s2_e (plus terms equal in every cell,
which cancel in contrasts), and s2_e is the mean square of the seed model's residuals' interaction
with the blocks, on (N - p)(B - 1) df. So c' Sigma_a c = c'Qc - c'MM'c s2_e, floored at 0, and the
degrees of freedom are Satterthwaite's over the three estimates. With two cells and paired seeds this
is the crossed seed x block ANOVA of D[s, b] (the contrast for seed s on block b):
Var = (MS_seed + MS_block - MS_err) / (S B). `text_share` is the text term's share of Var(c).
Where every cell keeps its own variance (`own`, `stein own`: an arms sweep) the run x block noise is
each cell's own too: c'MM'c s2_e becomes the sum over cells i of c'M_i M_i'c s2_e,i (M_i: M's columns
of cell i's runs; s2_e,i on (n_i - 1)(B - 1) df, a single-run cell the pooled one), each a term of
the Satterthwaite df, so a noisy arm's run x block noise is not taken from the other arms' Q.
Chosen over a paired seed x block bootstrap, which under-covers with 3 seeds (docs/STATISTICS.md).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from gptlab.stats.calls import ALPHA
from gptlab.stats.design import Design
from gptlab.stats.models import CellFit, Test, pooled_matrix, t_quantile, t_two_sided_p


@dataclass(frozen=True)
class Blocks:
    """Every run's losses per block of its test text (runs x blocks, the outcome's unit) and their weights.

    `weights[r]` are the shares of run r's loss its blocks carry (tokens, or characters for bits/char;
    each row sums to 1): run r's loss is `(losses[r] * weights[r]).sum()`.
    """
    losses: np.ndarray
    weights: np.ndarray

    def __post_init__(self) -> None:
        losses, weights = np.asarray(self.losses, float), np.asarray(self.weights, float)
        if losses.ndim != 2 or losses.shape != weights.shape or losses.shape[1] < 2:
            raise ValueError(f"blocks: losses {losses.shape} and weights {weights.shape} must be runs x (>= 2) blocks")
        object.__setattr__(self, "losses", losses)
        object.__setattr__(self, "weights", weights / weights.sum(axis=1, keepdims=True))

    @property
    def run_losses(self) -> np.ndarray:
        """Each run's loss: its blocks' weighted mean."""
        return (self.losses * self.weights).sum(axis=1)


@dataclass(frozen=True)
class TextTest(Test):
    """A contrast's test under the seed x block model, with the share of its variance due to the text."""
    text_share: float = math.nan


@dataclass(frozen=True)
class TextError:
    """The text's component of the variance of any contrast of cell means (see the module docstring)."""
    spread: np.ndarray  # Q: covariance over blocks of the per-block cell means (cells x cells)
    seed_noise: np.ndarray  # M M': what run x block noise adds to Q, per unit of s2_e
    s2_err: float  # run x block noise variance
    df_err: float  # its degrees of freedom, (N - p)(B - 1)
    n_blocks: int
    sum_w2: float  # sum of the squared block weights (1/B for equal blocks)
    # per-cell run x block noise (`own` seed models; None: the pooled s2_err): M_i M_i' per cell, s2_e,i, df
    cell_noise: np.ndarray | None = None  # (cells, cells, cells)
    cell_s2: np.ndarray | None = None
    cell_df: np.ndarray | None = None

    def noise(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What run x block noise puts in c'Qc for every row c of C, per noise term (rows x terms, times sum w^2),
        and each term's df: one pooled term, or one per cell."""
        if self.cell_noise is None:
            k = np.einsum("mi,ij,mj->m", C, self.seed_noise, C)[:, None] * self.s2_err
            return k * self.sum_w2, np.array([self.df_err])
        return np.einsum("mi,gij,mj->mg", C, self.cell_noise, C) * self.cell_s2 * self.sum_w2, self.cell_df

    def add(self, C: np.ndarray, var: np.ndarray, df: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The seed model's variances and df of the rows of C with the text's added: (variance, Satterthwaite df,
        text share), arrays; a row whose text variance is 0 keeps its df."""
        q = np.einsum("mi,ij,mj->m", C, self.spread, C) * self.sum_w2
        k, k_df = self.noise(C)
        text = np.maximum(q - k.sum(axis=1), 0.0)
        total = var + text
        with np.errstate(divide="ignore", invalid="ignore"):
            denom = var ** 2 / df + q ** 2 / (self.n_blocks - 1) + (k ** 2 / k_df).sum(axis=1)
            return total, np.where(text == 0, df, total ** 2 / denom), text / total

    def parts(self, c: np.ndarray) -> tuple[float, float]:
        """(c'Qc, c'MM'c s2_e), each times sum w^2: the text variance of c is their difference, floored at 0."""
        return float(c @ self.spread @ c) * self.sum_w2, float(self.noise(np.asarray(c, float)[None, :])[0].sum())

    def variance(self, c: np.ndarray) -> float:
        """c' Sigma_a c sum w^2: what the text adds to the variance of contrast c."""
        q, k = self.parts(c)
        return max(q - k, 0.0)

    def variance_df(self, c: np.ndarray) -> tuple[float, float]:
        """The text's variance of contrast c and its Satterthwaite degrees of freedom (0 and inf when none)."""
        q = float(c @ self.spread @ c) * self.sum_w2
        k, k_df = self.noise(np.asarray(c, float)[None, :])
        if q <= k.sum():
            return 0.0, math.inf
        return q - k.sum(), (q - k.sum()) ** 2 / (q ** 2 / (self.n_blocks - 1) + float((k ** 2 / k_df).sum()))

    @property
    def sd_err(self) -> float:
        """The run x block noise SD (a block's loss around its run's and cell's profile)."""
        return math.sqrt(self.s2_err)

    def test(self, seed: Test, c: np.ndarray | None) -> TextTest:
        """`seed` (the seed model's test of c) with the text's variance added: Satterthwaite df, and the text share."""
        fields = dataclasses.asdict(seed)
        if c is None or not seed.se > 0 or not seed.df > 0:
            return TextTest(**fields)
        (var,), (df,), (share,) = self.add(np.asarray(c, float)[None, :], np.array([seed.se ** 2]), np.array([seed.df]))
        return _test(seed.estimate, math.sqrt(var), float(df), float(share))

    def joint(self, fit: CellFit, C: np.ndarray) -> tuple[float, int, float, float]:
        """Wald F test that every row of C is zero, the text's covariance added (its PSD part); Satterthwaite
        denominator df from the traces of the three terms. (F, numerator df, denominator df, p)."""
        if not fit.has_error or C.size == 0:
            return math.nan, 0, math.nan, math.nan
        noise = self.seed_noise * self.s2_err if self.cell_noise is None else \
            np.einsum("gij,g->ij", self.cell_noise, self.cell_s2)
        vals, vecs = np.linalg.eigh(self.spread - noise)
        text = (vecs * np.clip(vals, 0, None)) @ vecs.T * self.sum_w2
        seed_v, text_v = C @ fit.cov @ C.T, C @ text @ C.T
        V = seed_v + text_v
        rank = np.linalg.matrix_rank(V, tol=1e-12 * max(1.0, float(np.abs(V).max())))
        if rank == 0:
            return math.nan, 0, math.nan, math.nan
        est = C @ fit.means
        F = float(est @ np.linalg.pinv(V, hermitian=True) @ est) / rank
        a, t = float(np.trace(seed_v)), float(np.trace(text_v))
        q = float(np.trace(C @ self.spread @ C.T)) * self.sum_w2
        k = np.array([float(np.trace(C @ g @ C.T)) for g in self._noise_mats()]) * self.sum_w2
        k_df = np.array([self.df_err]) if self.cell_noise is None else self.cell_df
        df2 = fit.df if t <= 0 else \
            (a + t) ** 2 / (a ** 2 / fit.df + q ** 2 / (self.n_blocks - 1) + float((k ** 2 / k_df).sum()))
        return F, rank, df2, float(st.f.sf(F, rank, df2))


    def _noise_mats(self) -> list[np.ndarray]:
        """Each noise term's covariance (cells x cells): MM' s2_e, or M_i M_i' s2_e,i per cell."""
        if self.cell_noise is None:
            return [self.seed_noise * self.s2_err]
        return [g * s2 for g, s2 in zip(self.cell_noise, self.cell_s2)]


def _test(est: float, se: float, df: float, share: float) -> TextTest:
    t95, t90 = t_quantile(1 - ALPHA / 2, df), t_quantile(1 - ALPHA, df)
    p = t_two_sided_p(abs(est) / se, df)
    return TextTest(est, se, df, est - t95 * se, est + t95 * se, est - t90 * se, est + t90 * se, p, share)


def seed_matrices(cell_idx: np.ndarray, seed: np.ndarray, design: Design,
                  fit: CellFit) -> tuple[np.ndarray, np.ndarray]:
    """(X, rows): the seed model's design matrix over the runs and the rows that turn its fit into cell means.

    The same matrices as `models.fit_cells` (cells, plus seed dummies when `fit.seed_block`; under
    `pooled`, main effects and two-way interactions), so that rows @ pinv(X) @ y is `fit.means`.
    """
    n_cells = len(design.cells)
    if fit.kind == "pooled":
        cells_X = pooled_matrix(design, design.cells)
        return cells_X[cell_idx], cells_X
    D = np.zeros((len(cell_idx), n_cells))
    D[np.arange(len(cell_idx)), cell_idx] = 1.0
    seeds = sorted(set(np.asarray(seed).tolist()))
    extra = seeds[1:] if fit.seed_block else []
    S = np.stack([(seed == s).astype(float) for s in extra], axis=1) if extra else np.zeros((len(cell_idx), 0))
    rows = np.hstack([np.eye(n_cells), np.full((n_cells, S.shape[1]), 1.0 / len(seeds))])
    return np.hstack([D, S]), rows


def text_error(blocks: Blocks, cell_idx: np.ndarray, seed: np.ndarray, design: Design,
               fit: CellFit) -> TextError | None:
    """The text component of the seed model `fit` of these runs (None when `fit` has no error estimate)."""
    if not fit.has_error:
        return None
    X, rows = seed_matrices(np.asarray(cell_idx), np.asarray(seed), design, fit)
    pinv = np.linalg.pinv(X)
    M = rows @ pinv
    Y = blocks.losses
    n_runs, n_blocks = Y.shape
    resid = Y - X @ (pinv @ Y)
    resid -= resid.mean(axis=1, keepdims=True)  # the run's own level is the seed model's error, not the text's
    df_err = (n_runs - np.linalg.matrix_rank(X)) * (n_blocks - 1)
    if df_err <= 0:
        return None
    w = blocks.weights.mean(axis=0)
    w = w / w.sum()
    s2_err = float((resid ** 2).sum() / df_err)
    own = {}
    if fit.kind in ("own", "stein own"):  # each cell's own run x block noise, as its own seed variance
        cell_idx = np.asarray(cell_idx)
        n_cells = len(design.cells)
        counts = np.bincount(cell_idx, minlength=n_cells)
        cell_df = np.where(counts < 2, df_err, (counts - 1) * df_err / (n_runs - n_cells))  # a seed block's share
        ss = np.bincount(cell_idx, weights=(resid ** 2).sum(axis=1), minlength=n_cells)
        own = {"cell_noise": np.stack([M[:, cell_idx == i] @ M[:, cell_idx == i].T for i in range(n_cells)]),
               "cell_s2": np.where(counts < 2, s2_err, ss / np.maximum(cell_df, 1e-300)), "cell_df": cell_df}
    return TextError(np.atleast_2d(np.cov(M @ Y, ddof=1)), M @ M.T, s2_err, float(df_err), n_blocks, float(w @ w),
                     **own)
