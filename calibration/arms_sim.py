"""Simulated one-at-a-time (`arms:`) studies: the check of `stats.arms`' allocation and of its unblocked comparisons.

Owns `ArmsWorld` (k arms, a baseline, their noise, planted effects, one arm noisier than the rest or none),
`Setup` (seeds per arm and baseline, seed block or not, text or not, each arm's own variance or one pooled),
the allocations (`dunnett`, `equal`, `equal_total`, `seeds_only`, `pooled`) and `simulate` (in-memory studies
analysed the report's way through `comparisons`, `effects.analyse`'s main table to 1e-9, faster). Their
scores (coverage, false calls, widths, power) and the benchmark's worlds: `calibration.arms_scores`.

The planted model, for arm a (0: the baseline), seed s and block b of the test text (every term drawn
afresh per study, so each study scores a new sample of text and the truth is the effect on all text):

    y[a, s, b] = 1.5 + mu[a] + g[b] + i[a, b] + u[a, s] + e[a, s, b]
    u[a, s] = run_sd (sqrt(rho) z[s] + sqrt(1 - rho) z[a, s])
    e[a, s, b] = err_sd (sqrt(block_rho) t[s, b] + sqrt(1 - block_rho) t[a, s, b])

g: block difficulty (cancels); i: arm x block interaction (`inter_sd`, each arm its own); u: the run, its
share `rho` the seed's, shared by every arm with that seed (seeds fix the batch order); e: run x block noise,
its share `block_rho` the seed's, shared likewise. The noisy arm's u (`noisy_arm`) is `noise_ratio` times
as large, its e too with `noisy_blocks` (an arm that trains erratically: in study 9 NoPE's run SD was 0.031
and 0.032 where the other arms' were 0.004-0.015, its run x block SD like theirs).
Arms train seeds 0..n-1, the baseline 0..n0-1 (no partner beyond n). The truth of arm a is mu[a] - mu[0]:
`PLANTED` on the first four arms, 0 on the rest. Every setup of a study sees the same draws; `equal_total`
gives its extra seeds to arms drawn afresh per study.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as st

from gptlab.stats import calls
from gptlab.stats.arms import ARM as FACTOR
from gptlab.stats.arms import baseline_seed_count
from gptlab.stats.calls import ALPHA, DEFAULT_MARGIN
from gptlab.stats.design import Design
from gptlab.stats.effects import Analysis, analyse
from gptlab.stats.models import PER_CELL, fit_cells
from gptlab.stats.text_share import Blocks, text_error

BASELINE = "baseline"
PLANTED = (0.02, -0.02, 0.01, -0.01)  # the planted world's nonzero effects (nats); every other arm is at 0


def arms_design(arms: int) -> Design:
    """The one-factor design of an arms study: factor `arm`, the baseline first, then arm1 .. armk.

    It is a full factorial, so its main effects are exactly each arm minus the baseline."""
    levels = (BASELINE,) + tuple(f"arm{i}" for i in range(1, arms + 1))
    return Design((FACTOR,), {FACTOR: levels}, {FACTOR: BASELINE}, tuple((lv,) for lv in levels))


def planted_effects(arms: int, sizes: Sequence[float] = PLANTED) -> tuple[float, ...]:
    """`sizes` on the first arms and 0 on the rest (`arms` effects against the baseline)."""
    return tuple((list(sizes) + [0.0] * arms)[:arms])


@dataclass(frozen=True)
class ArmsWorld:
    """k arms and a baseline: the seeds, the noise (nats) and the planted effects (see the module docstring)."""
    arms: int = 10
    seeds: int = 3  # n: every arm's seeds
    rho: float = 0.0  # share of a run's variance that is its seed's, shared by every arm with that seed
    run_sd: float = 0.006
    inter_sd: float = 0.01  # per block, each arm's own (the arm x block interaction)
    err_sd: float = 0.02  # per run and block
    block_rho: float = 0.0  # share of the run x block variance that is the seed's, shared by every arm
    n_blocks: int = 20
    block_sd: float = 0.1
    effects: tuple[float, ...] = ()  # each arm minus the baseline; () is the null world (every effect 0)
    noisy_arm: int = 0  # the arm (1..k) whose run term u is `noise_ratio` times the others' SD; 0: none
    noise_ratio: float = 5.0
    noisy_blocks: bool = False  # its run x block noise e too

    @property
    def noise_scale(self) -> np.ndarray:
        """Each cell's factor on its run term (the baseline first)."""
        scale = np.ones(self.arms + 1)
        scale[self.noisy_arm] = self.noise_ratio if self.noisy_arm else 1.0
        return scale

    @property
    def truth(self) -> np.ndarray:
        return np.array(self.effects if self.effects else (0.0,) * self.arms, float)

    def null(self) -> "ArmsWorld":
        return dataclasses.replace(self, effects=())

    def planted(self, sizes: Sequence[float] = PLANTED) -> "ArmsWorld":
        return dataclasses.replace(self, effects=planted_effects(self.arms, sizes))

    def draw(self, rng: np.random.Generator, max_seeds: int) -> np.ndarray:
        """One study's block losses for seeds 0 .. max_seeds - 1 of every arm: (arms + 1, max_seeds, n_blocks)."""
        k1, S, B = self.arms + 1, max_seeds, self.n_blocks
        g = rng.normal(0.0, self.block_sd, B)
        inter = rng.normal(0.0, self.inter_sd, (k1, B))
        u = self.run_sd * (math.sqrt(self.rho) * rng.standard_normal((1, S))
                           + math.sqrt(1 - self.rho) * rng.standard_normal((k1, S)))
        e = self.err_sd * (math.sqrt(self.block_rho) * rng.standard_normal((1, S, B))
                           + math.sqrt(1 - self.block_rho) * rng.standard_normal((k1, S, B)))
        mu = np.concatenate([[0.0], self.truth])
        f = self.noise_scale[:, None, None]
        return 1.5 + mu[:, None, None] + g + inter[:, None, :] + f * u[:, :, None] + (f if self.noisy_blocks else 1) * e

    def contrast_variance(self, n_arm: int, n_base: int, arm: int = 1) -> float:
        """The true variance of arm `arm`'s estimate (its runs' mean minus the baseline's), text included.

        The arm's seeds 0 .. n_arm - 1 and the baseline's 0 .. n_base - 1 share min(n_arm, n_base) seeds,
        whose shared parts (rho, block_rho) cancel where the two cells' noise is alike."""
        f = float(self.noise_scale[arm])
        fe = f if self.noisy_blocks else 1.0
        both = min(n_arm, n_base) / (n_arm * n_base)
        return (self.run_sd ** 2 * (f ** 2 / n_arm + 1 / n_base - 2 * self.rho * f * both)
                + self.err_sd ** 2 / self.n_blocks * (fe ** 2 / n_arm + 1 / n_base - 2 * self.block_rho * fe * both)
                + 2 * self.inter_sd ** 2 / self.n_blocks)


@dataclass(frozen=True)
class Setup:
    """How many seeds the baseline and the arms train, and how the study is analysed.

    `arm_seeds` are handed to the arms in an order drawn per study (only matters where they differ).
    `paired`: with the seed block (possible where every arm has the baseline's seeds); the arms design
    itself has none. `blocks`: the CIs count the text (seed x block model); False: seeds only.
    `own_variance`: each arm's own variance (the arms design's); False: one pooled variance (Welch only where
    Bartlett finds the variances differ), a grid's model and the arms design's before each arm kept its own."""
    name: str
    baseline: int
    arm_seeds: tuple[int, ...]
    paired: bool = False
    blocks: bool = True
    own_variance: bool = True

    @property
    def runs(self) -> int:
        return self.baseline + sum(self.arm_seeds)

    @property
    def seeds_label(self) -> str:
        lo, hi = min(self.arm_seeds), max(self.arm_seeds)
        return f"{self.baseline} / {lo}" if lo == hi else f"{self.baseline} / {lo}-{hi}"


def dunnett(world: ArmsWorld) -> Setup:
    """The arms design: the baseline trains `arms.baseline_seed_count` seeds (Dunnett's sqrt(k) n), each arm n."""
    return Setup("Dunnett sqrt(k)", baseline_seed_count(world.seeds, world.arms), (world.seeds,) * world.arms)


def equal(world: ArmsWorld, paired: bool = False) -> Setup:
    """n seeds everywhere, the baseline too; `paired`: analysed with the seed block (a factorial's model)."""
    return Setup("equal n, seed block" if paired else "equal n", world.seeds, (world.seeds,) * world.arms, paired,
                 own_variance=not paired)


def equal_total(world: ArmsWorld) -> Setup:
    """Dunnett's total runs spread over the k + 1 cells as evenly as integers allow (the baseline gets one of
    the larger counts)."""
    total = dunnett(world).runs
    q, r = divmod(total, world.arms + 1)
    counts = [q + 1] * r + [q] * (world.arms + 1 - r)
    return Setup("equal, Dunnett's total", counts[0], tuple(counts[1:]))


def seeds_only(world: ArmsWorld) -> Setup:
    """Dunnett's allocation with the seed-only CI (the blocks ignored): what leaving the text out costs."""
    return dataclasses.replace(dunnett(world), name="Dunnett, seeds-only CI", blocks=False)


def pooled(world: ArmsWorld) -> Setup:
    """Dunnett's allocation with one pooled variance for every arm: the arms design's model before each arm kept its
    own (`models`, `own`)."""
    return dataclasses.replace(dunnett(world), name="Dunnett, pooled variance", own_variance=False)


def setups(world: ArmsWorld) -> tuple[Setup, ...]:
    """The setups the benchmark compares: Dunnett, equal n (unblocked and blocked) and equal at Dunnett's total."""
    return dunnett(world), equal(world), equal_total(world), equal(world, paired=True)


@dataclass(frozen=True)
class Records:
    """One setup's analyses of every simulated study of one world: per study (rows) and arm (columns)."""
    setup: Setup
    truth: np.ndarray  # (arms,) each arm minus the baseline
    arm_seeds: np.ndarray  # (studies, arms) the seeds each arm trained
    estimate: np.ndarray
    df: np.ndarray  # the degrees of freedom of each comparison's t (Satterthwaite's with the text)
    ci_low: np.ndarray
    ci_high: np.ndarray
    half_width: np.ndarray
    p_adjusted: np.ndarray  # Holm over the k comparisons
    call: np.ndarray  # str
    text_share: np.ndarray  # NaN without blocks
    welch: np.ndarray  # (studies,) the seed model used per-cell variances (always with `own_variance`; else Bartlett)


def _label(factor: str, level: str) -> str:
    return f"{factor}={level}"


def _runs(data: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, Blocks]:
    """(each run's cell, each run's seed, their blocks): the baseline's first `counts[0]` seeds, arm a's `counts[a]`."""
    cell = np.repeat(np.arange(len(counts)), counts)
    seed = np.concatenate([np.arange(c) for c in counts])
    return cell, seed, Blocks(data[cell, seed], np.ones((len(cell), data.shape[2])))


def analyse_study(data: np.ndarray, setup: Setup, counts: np.ndarray, design: Design, margin: float) -> Analysis:
    """`effects.analyse` of one study's runs (the report's path; `comparisons` is the same main table, faster).

    `endpoint=False` leaves out the simple effects, which in one factor are the main effects again (the same
    contrasts, counted once in the Holm family), so the main table is the report's (a test checks)."""
    cell, seed, blocks = _runs(data, counts)
    return analyse(blocks.run_losses, [design.cells[c] for c in cell], seed, design, _label, margin, endpoint=False,
                   blocks=blocks if setup.blocks else None, block_seeds=setup.paired,
                   own_variance=setup.own_variance)


def comparisons(data: np.ndarray, setup: Setup, counts: np.ndarray, design: Design,
                margin: float) -> tuple[dict[str, np.ndarray], str]:
    """`analyse_study`'s main table (estimate, CIs, p, Holm, call, text share per arm) and the seed model's kind.

    The models are the report's own (`models.fit_cells`, `text_share.text_error`); only `CellFit.test`,
    `TextError.test`, Holm and the calls are applied to the k comparisons at once, with the same formulas
    (tests/simulations/test_arms_sim.py checks them against `effects.analyse` to 1e-9, Welch fits included): the
    minimum detectable effects and seeds needed that `analyse` also computes are most of its time."""
    cell, seed, blocks = _runs(data, counts)
    fit = fit_cells(blocks.run_losses, cell, seed, design, True, None, setup.paired, setup.own_variance)
    text = text_error(blocks, cell, seed, design, fit) if setup.blocks else None
    C = np.stack([design.interaction(t) for t in design.terms(1)])  # (arms, cells): each arm minus the baseline
    est = C @ fit.means
    n = len(est)
    if not fit.has_error:
        nan = np.full(n, np.nan)
        empty = dict.fromkeys(("df", "ci_low", "ci_high", "ci95", "ci90_low", "ci90_high", "p_value", "p_adjusted",
                               "text_share"), nan)
        return {"estimate": est, **empty, "call": np.full(n, "", dtype=object)}, fit.kind
    var, df = fit.variance_df(C)  # `CellFit.test`'s formulas, every row at once
    ok = (var > 0) & (df > 0)
    share = np.zeros(n)
    if text is not None:  # `TextError.test`: the text's variance added, Satterthwaite df
        var, df, share = text.add(C, var, df)
    se = np.sqrt(np.where(ok, var, np.nan))
    df = np.where(ok, df, np.nan)
    t95, t90 = st.t.ppf(1 - ALPHA / 2, df), st.t.ppf(1 - ALPHA, df)
    p = 2 * st.t.sf(np.abs(est) / se, df)
    out = {"estimate": est, "df": df, "ci_low": est - t95 * se, "ci_high": est + t95 * se, "ci95": t95 * se,
           "ci90_low": est - t90 * se, "ci90_high": est + t90 * se, "p_value": p, "p_adjusted": calls.holm(p),
           "text_share": np.where(ok, share, np.nan) if text is not None else np.full(n, np.nan)}
    out["call"] = np.array(["" if math.isnan(pv) else calls.call(e, pa, lo, hi, margin) for e, pv, pa, lo, hi in
                            zip(est, p, out["p_adjusted"], out["ci90_low"], out["ci90_high"])], dtype=object)
    return out, fit.kind


def simulate(world: ArmsWorld, studies: int, chosen: Sequence[Setup] | None = None,
             rng_seed: int | Sequence[int] = 0, margin: float = DEFAULT_MARGIN) -> dict[str, Records]:
    """`studies` simulated studies of `world`, each analysed under every setup on the same draws (by setup name)."""
    chosen = tuple(setups(world) if chosen is None else chosen)
    for s in chosen:
        if len(s.arm_seeds) != world.arms:
            raise ValueError(f"setup {s.name!r} has {len(s.arm_seeds)} arms, the world {world.arms}")
    design = arms_design(world.arms)
    rng = np.random.default_rng(rng_seed)
    max_seeds = max(max(s.baseline, *s.arm_seeds) for s in chosen)
    cols = ("estimate", "df", "ci_low", "ci_high", "ci95", "p_adjusted", "call", "text_share")
    out: dict[str, dict[str, list]] = {s.name: {c: [] for c in cols + ("seeds", "welch")} for s in chosen}
    for _ in range(studies):
        data = world.draw(rng, max_seeds)
        order = rng.permutation(world.arms)  # which arm gets which of a setup's seed counts
        for s in chosen:
            counts = np.concatenate([[s.baseline], np.asarray(s.arm_seeds)[order]])
            main, kind = comparisons(data, s, counts, design, margin)
            rec = out[s.name]
            for c in cols:
                rec[c].append(main[c])
            rec["seeds"].append(counts[1:])
            rec["welch"].append(kind in PER_CELL)
    floats = ("estimate", "df", "ci_low", "ci_high", "ci95", "p_adjusted")
    return {s.name: Records(s, world.truth, np.array(r["seeds"]), *(np.array(r[c], float) for c in floats),
                            np.array(r["call"], dtype=object), np.array(r["text_share"], float),
                            np.array(r["welch"], bool))
            for s in chosen for r in [out[s.name]]}
