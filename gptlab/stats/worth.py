"""What an arm is worth in the baseline's training steps: the baseline's loss against length, and step and wall-time multipliers.

The baseline trains to K lengths (e.g. 0.5x, 1x, 2x, 4x the study's S steps), each a fully decayed
warmup-stable-decay run, on the same seeds (shared trunks: a seed's lengths share its first steps, so its
losses correlate across lengths). Its curve is a monotone cubic (PCHIP) through the per-length mean losses
against log2 steps: `BaselineCurve`. The arm's multiplier m = s*/S solves curve(s*) = the arm's mean loss at S.

Why PCHIP and not a saturating power law E + A s^-alpha: with 4 lengths the power law has one residual
df, alpha and E are barely identified (the lab's curves fall almost linearly in log steps, where the fit runs
to alpha -> 0, E -> -inf), and a curve that is not a power law biases it; PCHIP passes through the means,
is monotone where they are and only interpolates, its error between doublings small beside the seeds'
(calibration/worth_sim.py measures both, docs/STATISTICS.md "What each choice is worth").

The CI inverts a test (Fieller's idea, not a delta method on m): log2 s lies in the 95% CI when the arm's
mean minus curve(s) is within t sd of 0. At each s that difference is, to first order, the contrast
arm - sum_k c_k(s) mean_k (c: the curve's gradient in the means, summing to 1), whose variance is

    s_arm^2 / n_arm  +  var_seeds(sum_k c_k y[seed, k]) / n0  +  the text's (when blocks are given)

the baseline's part paired by seed (any correlation across lengths counted; seeds without every length left
out, with a note), the text's as in `text_share`'s `own` model for two cells (the arm, and the baseline's
per-seed curve contrast): the variance over blocks of the per-block contrast less each side's run x block
noise, times sum w^2; Satterthwaite df over all terms. Never extrapolated: an arm beyond the longest length
is censored `above` (multiplier NaN), one worse than the shortest `below`; a CI that reaches a range end is
open there (`ci_low_open`, `ci_high_open`: its bound is the range's end, the truth may lie beyond).

The anchor (`step_multiplier(..., anchor=)`: the baseline's runs at S under the study's own schedule, e.g.
cosine, when the curve's are wsd) places the arm on the curve's shape: diff(x) = (arm - anchor) -
(curve(x) - curve(x0)), x0 = log2 S; the gradient rows become C(x) - C(x0) (summing to 0), the anchor's seed
variance is a term of its own and, with blocks, the per-block contrast is arm - anchor - the curve's (each
side's run x block noise subtracted). The anchor's seeds are the curve's, so they covary; leaving that out
is conservative: diff holds -anchor + sum_k (C_k(x0) - C_k(x)) y_k, whose covariance term is
-2 (c_0 - sum_k C_k(x) c_k), c_k = cov(anchor, y_k), c_0 at S: <= 0 when a cosine run covaries with its
seed's wsd run at the same length at least as much as with its other lengths (C(x) is nearly a convex
weighting). calibration/worth_sim.py plants that correlation and measures coverage and width.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize
from scipy import stats as st
from scipy.interpolate import PchipInterpolator

from gptlab.stats.text_share import Blocks

CURVES = ("pchip", "power")  # pchip: the lab's; power: the saturating power law, kept for the calibration
CENSORED = ("", "above", "below")
GRID = 481  # candidate log2 steps over the lengths' range (3 doublings: 1/160 doubling apart)
_H = 1e-6  # the step of the curve's numerical gradient in the means (nats)


@dataclass(frozen=True)
class BaselineCurve:
    """The baseline's loss against length: losses[seed, length] (complete seeds), optional blocks, the curve kind."""
    steps: np.ndarray  # (K,) increasing
    losses: np.ndarray  # (n0, K)
    blocks: np.ndarray | None = None  # (n0, K, B) per-block losses, or None
    weights: np.ndarray | None = None  # (B,) block weights, sum 1
    curve: str = "pchip"
    left_out: int = 0  # runs of seeds lacking a length
    extra_var: np.ndarray | None = None  # (K,) a known variance of each length's mean beyond its seeds' (a shift)

    @property
    def means(self) -> np.ndarray:
        return self.losses.mean(axis=0)

    @property
    def x(self) -> np.ndarray:
        """log2 of the lengths."""
        return np.log2(self.steps)

    def at(self, x: np.ndarray, means: np.ndarray | None = None) -> np.ndarray:
        """The curve at log2 steps x (from `means`, default the per-length means)."""
        means = self.means if means is None else means
        if self.curve == "pchip":
            return PchipInterpolator(self.x, means)(x)
        e, a, alpha = fit_power(self.x, means)
        return e + a * np.exp2(-alpha * np.asarray(x, float))

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """d curve(x) / d means: (len(x), K); each row sums to 1 (a shift of every mean shifts the curve)."""
        base = self.at(x)
        return np.stack([(self.at(x, self.means + _H * np.eye(len(self.steps))[k]) - base) / _H
                         for k in range(len(self.steps))], axis=1)


def fit_power(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least-squares E + A 2^(-alpha x) through (x, y): (E, A, alpha), alpha in [0.01, 3] (profiled: E, A linear)."""
    def sse(alpha: float) -> float:
        X = np.stack([np.ones_like(x), np.exp2(-alpha * x)], axis=1)
        return float(np.sum((y - X @ np.linalg.lstsq(X, y, rcond=None)[0]) ** 2))
    alpha = optimize.minimize_scalar(sse, bounds=(0.01, 3.0), method="bounded", options={"xatol": 1e-6}).x
    X = np.stack([np.ones_like(x), np.exp2(-alpha * x)], axis=1)
    e, a = np.linalg.lstsq(X, y, rcond=None)[0]
    return float(e), float(a), float(alpha)


def baseline_curve(steps: np.ndarray, seeds: np.ndarray, losses: np.ndarray, blocks: Blocks | None = None,
                   curve: str = "pchip") -> BaselineCurve:
    """The baseline's curve from its runs (one loss per run; `blocks`: the same runs' per-block losses, in order).

    Runs of a seed that lacks any length are left out (the CI pairs lengths by seed); needs >= 3 lengths
    and >= 2 complete seeds.
    """
    steps, seeds, losses = np.asarray(steps, float), np.asarray(seeds), np.asarray(losses, float)
    if curve not in CURVES:
        raise ValueError(f"worth: curve {curve!r} is not one of {CURVES}")
    if not (steps.shape == seeds.shape == losses.shape) or steps.ndim != 1:
        raise ValueError(f"worth: steps {steps.shape}, seeds {seeds.shape}, losses {losses.shape} must be equal 1-d")
    if blocks is not None and blocks.losses.shape[0] != len(losses):
        raise ValueError(f"worth: {blocks.losses.shape[0]} runs of blocks for {len(losses)} runs")
    lengths = np.unique(steps)
    if len(lengths) < 3 or lengths[0] <= 0:
        raise ValueError(f"worth: the baseline needs >= 3 positive lengths, got {lengths.tolist()}")
    complete = [s for s in np.unique(seeds) if set(steps[seeds == s]) == set(lengths)]
    if len(complete) < 2:
        raise ValueError("worth: fewer than 2 baseline seeds have every length")
    rows, block_rows = [], []
    for s in complete:
        idx = [int(np.flatnonzero((seeds == s) & (steps == n))[0]) for n in lengths]
        rows.append(losses[idx])
        if blocks is not None:
            block_rows.append(blocks.losses[idx])
    kept = len(complete) * len(lengths)
    return BaselineCurve(lengths, np.array(rows), np.array(block_rows) if blocks is not None else None,
                         blocks.weights.mean(axis=0) if blocks is not None else None, curve, len(losses) - kept)


@dataclass(frozen=True)
class Worth:
    """An arm's multiplier (steps, or wall time) with its 95% CI; NaN where censored (see the module docstring)."""
    multiplier: float
    ci_low: float
    ci_high: float
    censored: str  # "", "above" (beyond the longest length), "below" (worse than the shortest)
    ci_low_open: bool  # the CI reaches the shortest length: its low bound is that end, the truth may be lower
    ci_high_open: bool
    lowest: float  # the shortest and longest lengths over the study's steps (e.g. 0.5 and 4)
    highest: float
    df: float  # Satterthwaite df at the estimate (or at the range's end when censored)
    note: str = ""

    def covers(self, truth: float) -> bool:
        """Whether the CI, open ends extended to 0 or infinity, contains `truth`."""
        low = 0.0 if self.ci_low_open else self.ci_low
        high = math.inf if self.ci_high_open else self.ci_high
        return bool(low * (1 - 1e-12) <= truth <= high * (1 + 1e-12))


@dataclass(frozen=True)
class ArmLoss:
    """The arm's loss at the study's length: its runs (`arm_runs`, with their blocks), or a summary (mean, SE, df).

    A summary carries no blocks: the CI then counts the text only as far as its SE does.
    """
    mean: float
    se: float
    df: float
    runs: np.ndarray | None = None  # (n,) run losses
    blocks: np.ndarray | None = None  # (n, B)


def arm_runs(losses: np.ndarray, blocks: Blocks | None = None) -> ArmLoss:
    """The arm's runs (>= 2; a lone run has no variance of its own) as an `ArmLoss`."""
    y = np.asarray(losses, float)
    if y.ndim != 1 or len(y) < 2:
        raise ValueError(f"worth: the arm needs >= 2 runs at the study's length, got {y.size}")
    return ArmLoss(float(y.mean()), float(y.std(ddof=1) / math.sqrt(len(y))), len(y) - 1.0, y,
                   None if blocks is None else blocks.losses)


def _double_centred_s2(z: np.ndarray) -> np.ndarray:
    """Run x block noise of units z[unit, ..., block]: the mean square of the double-centred residual."""
    n, b = z.shape[0], z.shape[-1]
    r = z - z.mean(axis=0, keepdims=True) - z.mean(axis=-1, keepdims=True) + z.mean(axis=(0, -1), keepdims=True)
    return (r ** 2).sum(axis=(0, -1)) / ((n - 1) * (b - 1))


def _variance(curve: BaselineCurve, arm: ArmLoss, C: np.ndarray, anchor: ArmLoss | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Variance and Satterthwaite df of arm [- anchor] - curve contrast at each grid row of C (its gradients)."""
    n0 = curve.losses.shape[0]
    z = curve.losses @ C.T  # (n0, G): each seed's curve contrast
    v0, df0 = z.var(axis=0, ddof=1) / n0, n0 - 1.0
    sides = [arm] if anchor is None else [arm, anchor]  # the cells measured at the study's length
    seeds = [np.full(len(C), a.se ** 2) for a in sides] + [v0]
    dfs = [a.df for a in sides] + [df0]
    if curve.extra_var is not None:  # known (infinite df) variance of shifted means: no df term
        seeds.append(C ** 2 @ curve.extra_var)
        dfs.append(math.inf)
    seed_var = sum(seeds)
    seed_den = sum(t ** 2 / f for t, f in zip(seeds, dfs))
    seed_df = np.divide(seed_var ** 2, seed_den, out=np.full(len(C), math.inf), where=seed_den > 0)
    if curve.blocks is None or any(a.blocks is None for a in sides):
        return seed_var, seed_df
    B, sw2 = curve.blocks.shape[2], float(curve.weights @ curve.weights)
    zb = np.einsum("skb,gk->sgb", curve.blocks, C)  # each seed's per-block curve contrast
    cells = arm.blocks.mean(axis=0) - (0.0 if anchor is None else anchor.blocks.mean(axis=0))
    q = (cells[None, :] - zb.mean(axis=0)).var(axis=1, ddof=1) * sw2  # over blocks, (G,)
    noise = [np.full(len(C), float(_double_centred_s2(a.blocks)) / a.blocks.shape[0] * sw2) for a in sides]
    noise_df = [(a.blocks.shape[0] - 1.0) * (B - 1) for a in sides]
    noise += [_double_centred_s2(zb) / n0 * sw2]
    noise_df += [(n0 - 1.0) * (B - 1)]
    text = np.maximum(q - sum(noise), 0.0)
    total = seed_var + text
    denom = seed_den + q ** 2 / (B - 1) + sum(k ** 2 / f for k, f in zip(noise, noise_df))
    return total, np.where(text > 0, total ** 2 / np.where(denom > 0, denom, 1.0), seed_df)


def _crossing(x: np.ndarray, f: np.ndarray, i: int) -> float:
    """Where f crosses 0 between grid points i and i + 1 (linear)."""
    return float(x[i] + (x[i + 1] - x[i]) * f[i] / (f[i] - f[i + 1]))


def step_multiplier(curve: BaselineCurve, study_steps: float, arm: ArmLoss, level: float = 0.95,
                    anchor: ArmLoss | None = None) -> Worth:
    """The baseline's steps that match the arm's loss, over `study_steps`, with its CI by test inversion.

    `anchor`: the baseline's own runs at `study_steps` under the study's schedule when the curve's are another
    (cosine against wsd): the arm is then placed on the curve's shape only, arm - anchor = curve(x) - curve(x0).
    The anchor shares seeds with the curve; leaving that covariance out is conservative (the module docstring).
    """
    if not curve.steps[0] <= study_steps <= curve.steps[-1]:
        raise ValueError(f"worth: the study's {study_steps:g} steps lie outside the lengths {curve.steps.tolist()}")
    x = np.linspace(curve.x[0], curve.x[-1], GRID)
    x0 = math.log2(study_steps)
    C = curve.gradient(x)
    if anchor is None:
        diff = arm.mean - curve.at(x)  # increases with x where the curve falls
    else:
        diff = (arm.mean - anchor.mean) - (curve.at(x) - float(curve.at(np.array([x0]))[0]))
        C = C - curve.gradient(np.array([x0]))  # rows sum to 0: a shift of every mean cancels
    var, df = _variance(curve, arm, C, anchor)
    half = st.t.ppf(0.5 + level / 2, df) * np.sqrt(np.maximum(var, 0.0))
    g_lo, g_hi = diff + half, diff - half  # x is in the CI where g_lo >= 0 and g_hi <= 0 (each rises with x)
    notes = [f"{curve.left_out} baseline runs of seeds without every length left out"] if curve.left_out else []
    flips = np.flatnonzero(np.sign(diff[:-1]) != np.sign(diff[1:]))
    if diff[0] > 0 and len(flips) == 0:
        censored, est, at = "below", math.nan, 0
    elif diff[-1] < 0 and len(flips) == 0:
        censored, est, at = "above", math.nan, GRID - 1
    else:
        censored = ""
        roots = [_crossing(x, diff, i) for i in flips] or [float(x[np.argmin(np.abs(diff))])]
        if len(roots) > 1:
            notes.append("the baseline's mean loss does not fall at every length: several steps match the arm")
        est = 2 ** (float(np.median(roots)) - x0)
        at = int(np.argmin(np.abs(x - np.median(roots))))
    lo_ok, hi_ok = np.flatnonzero(g_lo >= 0), np.flatnonzero(g_hi <= 0)
    if len(lo_ok) == 0 or len(hi_ok) == 0:  # the whole range is rejected: the CI lies beyond one end
        end = x[-1] if len(lo_ok) == 0 else x[0]
        low = high = 2 ** (float(end) - x0)
        low_open, high_open = len(hi_ok) == 0, len(lo_ok) == 0
    else:
        i, j = lo_ok[0], hi_ok[-1]
        lo = float(x[0]) if i == 0 else _crossing(x, g_lo, i - 1)
        hi = float(x[-1]) if j == GRID - 1 else _crossing(x, g_hi, j)
        low, high, low_open, high_open = 2 ** (lo - x0), 2 ** (hi - x0), bool(i == 0), bool(j == GRID - 1)
    return Worth(est, low, high, censored, low_open, high_open, float(curve.steps[0] / study_steps),
                 float(curve.steps[-1] / study_steps), float(df[at]), "; ".join(notes))


@dataclass(frozen=True)
class StepCost:
    """The arm's time per training step over the baseline's (geometric mean of per-round ratios), with its 95% CI."""
    ratio: float
    ci_low: float
    ci_high: float
    df: float


def step_cost(arm_seconds: np.ndarray, base_seconds: np.ndarray, level: float = 0.95) -> StepCost:
    """Relative time per step from timings paired by round (`step_times.csv`: in each round every arm is timed,
    alternated, in one process): the geometric mean of the per-round ratios, its CI a t interval on their logs
    (df = rounds - 1). What a round does to every arm (the machine slower for a while) cancels in its ratio,
    where an unpaired comparison would count it as noise (study 9's first timings, 5 rounds: the median CI's
    high over low end 1.48 unpaired, 1.32 paired)."""
    a, b = np.asarray(arm_seconds, float), np.asarray(base_seconds, float)
    if a.shape != b.shape or a.ndim != 1 or len(a) < 2 or np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("worth: paired step times need positive seconds, one per round a side, >= 2 rounds")
    logs = np.log(a / b)
    half = float(st.t.ppf(0.5 + level / 2, len(logs) - 1)) * float(logs.std(ddof=1)) / math.sqrt(len(logs))
    ratio = math.exp(float(logs.mean()))
    return StepCost(ratio, ratio * math.exp(-half), ratio * math.exp(half), float(len(logs) - 1))


def wall_multiplier(worth: Worth, cost: StepCost) -> Worth:
    """The step multiplier over the relative step cost, its CI by MOVER (Zou & Donner) on the log scale.

    Censored or open bounds stay so: a bound at a range end (or beyond it) is only a bound.
    """
    def log(v: float) -> float:
        return math.log(v) if v > 0 else math.nan
    lr, lr_lo, lr_hi = log(cost.ratio), log(cost.ci_low), log(cost.ci_high)
    lm, lo, hi = log(worth.multiplier), log(worth.ci_low), log(worth.ci_high)
    if math.isnan(lm):  # censored: each bound moves by the cost's far end
        low, high = math.exp(lo - lr_hi), math.exp(hi - lr_lo)
        est = math.nan
    else:
        est = math.exp(lm - lr)
        low = math.exp(lm - lr - math.hypot(lm - lo, lr_hi - lr))
        high = math.exp(lm - lr + math.hypot(hi - lm, lr - lr_lo))
    return replace(worth, multiplier=est, ci_low=low, ci_high=high, lowest=worth.lowest / cost.ratio,
                   highest=worth.highest / cost.ratio)
