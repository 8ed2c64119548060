"""Simulated one-at-a-time (`arms:`) studies: the check of `stats.arms`' allocation and of its unblocked comparisons.

Owns `ArmsWorld` (k arms and a baseline, their noise, the planted effects), `Setup` (how many seeds the
baseline and each arm train, and how the study is analysed), `simulate` (in-memory studies scored block
by block, each analysed the report's way: `effects.analyse(..., blocks=..., block_seeds=False)`),
`summarise` (coverage, familywise false calls, CI half-width, power) and `WORLDS`, the rows of
benchmarks/arms_calibration.py; tests/test_arms_sim.py runs small versions. Numbers only: no files.

The planted model, for arm a (0: the baseline), seed s and block b of the test text (every term drawn
afresh per study, so each study scores a new sample of text and the truth is the effect on all text):

    y[a, s, b] = 1.5 + mu[a] + g[b] + i[a, b] + u[a, s] + e[a, s, b]
    u[a, s] = run_sd (sqrt(rho) z[s] + sqrt(1 - rho) z[a, s])
    e[a, s, b] = err_sd (sqrt(block_rho) t[s, b] + sqrt(1 - block_rho) t[a, s, b])

g: the block's difficulty (in every arm; it cancels); i: the arm x block interaction (`inter_sd`, every
arm and the baseline its own, so an arm-minus-baseline contrast varies over blocks with SD
sqrt(2) inter_sd); u: the run, of which the share `rho` is the seed's and shared by every arm with that
seed (this lab's seeds fix the batch order); e: the run x block noise, of which the share `block_rho`
is the seed's taste in text, shared likewise. Every arm trains seeds 0 .. n - 1, the baseline 0 .. n0 - 1:
its seeds beyond n have no partner run in any arm. The truth of arm a is mu[a] - mu[0].

Every setup of one study sees the same draws (common random numbers: the seeds a setup does not use are
simply left out). A setup whose arms differ in seeds (`equal_total`: the total runs spread as evenly as
integers allow) gives its extra seeds to arms drawn afresh per study, so that no planted effect is
favoured.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from gptlab.stats.arms import baseline_seed_count
from gptlab.stats.calls import DEFAULT_MARGIN
from gptlab.stats.design import Design
from gptlab.stats.effects import Analysis, analyse
from gptlab.stats.text_share import Blocks

FACTOR = "arm"
BASELINE = "baseline"
PLANTED = (0.02, -0.02, 0.01, -0.01)  # the planted world's nonzero effects (nats); every other arm is at 0
DIRECTIONAL = ("better", "worse")


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
        return 1.5 + mu[:, None, None] + g + inter[:, None, :] + u[:, :, None] + e

    def contrast_variance(self, n_arm: int, n_base: int) -> float:
        """The true variance of one arm's estimate (its runs' mean minus the baseline's), text included.

        The arm's seeds 0 .. n_arm - 1 and the baseline's 0 .. n_base - 1 share min(n_arm, n_base) seeds,
        whose shared parts (rho, block_rho) cancel."""
        shared = min(n_arm, n_base) / (n_arm * n_base)
        unpaired = 1 / n_arm + 1 / n_base
        return (self.run_sd ** 2 * (unpaired - 2 * self.rho * shared)
                + self.err_sd ** 2 / self.n_blocks * (unpaired - 2 * self.block_rho * shared)
                + 2 * self.inter_sd ** 2 / self.n_blocks)


@dataclass(frozen=True)
class Setup:
    """How many seeds the baseline and the arms train, and how the study is analysed.

    `arm_seeds` are handed to the arms in an order drawn per study (only matters where they differ).
    `paired`: with the seed block (possible where every arm has the baseline's seeds); the arms design
    itself has none. `blocks`: the CIs count the text (seed x block model); False: seeds only."""
    name: str
    baseline: int
    arm_seeds: tuple[int, ...]
    paired: bool = False
    blocks: bool = True

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
    return Setup("equal n, seed block" if paired else "equal n", world.seeds, (world.seeds,) * world.arms, paired)


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
    ci_low: np.ndarray
    ci_high: np.ndarray
    half_width: np.ndarray
    p_adjusted: np.ndarray  # Holm over the k comparisons
    call: np.ndarray  # str
    text_share: np.ndarray  # NaN without blocks
    welch: np.ndarray  # (studies,) the seed model chose per-cell variances (Bartlett)


def _label(factor: str, level: str) -> str:
    return f"{factor}={level}"


def analyse_study(data: np.ndarray, setup: Setup, counts: np.ndarray, design: Design, margin: float) -> Analysis:
    """`effects.analyse` of one study's runs: the baseline's first `counts[0]` seeds, arm a's first `counts[a]`.

    `endpoint=False` leaves out the simple effects, which in one factor are the main effects again (the same
    contrasts, counted once in the Holm family): the main table is the report's (a test checks)."""
    cell = np.repeat(np.arange(len(counts)), counts)
    seed = np.concatenate([np.arange(c) for c in counts])
    blocks = Blocks(data[cell, seed], np.ones((len(cell), data.shape[2])))
    return analyse(blocks.run_losses, [design.cells[c] for c in cell], seed, design, _label, margin, endpoint=False,
                   blocks=blocks if setup.blocks else None, block_seeds=setup.paired)


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
    cols = ("estimate", "ci_low", "ci_high", "ci95", "p_adjusted", "call")
    out: dict[str, dict[str, list]] = {s.name: {c: [] for c in cols + ("text_share", "seeds", "welch")} for s in chosen}
    for _ in range(studies):
        data = world.draw(rng, max_seeds)
        order = rng.permutation(world.arms)  # which arm gets which of a setup's seed counts
        for s in chosen:
            counts = np.concatenate([[s.baseline], np.asarray(s.arm_seeds)[order]])
            a = analyse_study(data, s, counts, design, margin)
            main, rec = a.main, out[s.name]
            for c in cols:
                rec[c].append(main[c].to_numpy())
            rec["text_share"].append(main["text_share"].to_numpy() if "text_share" in main
                                     else np.full(world.arms, np.nan))
            rec["seeds"].append(counts[1:])
            rec["welch"].append(a.fit.kind == "welch")
    return {s.name: Records(s, world.truth, np.array(r["seeds"]), np.array(r["estimate"], float),
                            np.array(r["ci_low"], float), np.array(r["ci_high"], float), np.array(r["ci95"], float),
                            np.array(r["p_adjusted"], float), np.array(r["call"], dtype=object),
                            np.array(r["text_share"], float), np.array(r["welch"], bool))
            for s in chosen for r in [out[s.name]]}


@dataclass(frozen=True)
class Summary:
    """How one setup did on one world's studies."""
    setup: Setup
    studies: int
    coverage: float  # share of the arms' 95% CIs (unadjusted) containing the arm's true effect
    coverage_se: float  # its Monte-Carlo SE, from the studies' coverage shares (the arms share the baseline)
    familywise: float  # share of studies with a false better/worse call (truth 0, or the other sign; Holm)
    false_rate: float  # share of the truly-zero comparisons called better or worse
    half_width: float  # mean 95% CI half-width
    error_sd: float  # root mean square of estimate minus truth
    true_sd: float  # root mean of `ArmsWorld.contrast_variance` over the comparisons
    text_share: float  # mean share of a comparison's variance due to the text (NaN: seeds only)
    power: tuple[tuple[float, float], ...]  # (|effect|, share of those comparisons called in the right direction)
    welch: float  # share of studies whose seed model used per-cell variances

    def power_at(self, size: float) -> float:
        return dict(self.power).get(size, math.nan)


def summarise(world: ArmsWorld, rec: Records) -> Summary:
    truth = rec.truth[None, :]
    covered = (rec.ci_low <= truth) & (truth <= rec.ci_high)
    directional = np.isin(rec.call, DIRECTIONAL)
    right = np.where(truth > 0, rec.call == "worse", rec.call == "better")
    false = directional & ((truth == 0) | ~right)
    zero = np.broadcast_to(truth == 0, rec.call.shape)
    per_study = covered.mean(axis=1)
    var = np.vectorize(world.contrast_variance)(rec.arm_seeds, rec.setup.baseline)
    sizes = sorted({abs(float(t)) for t in rec.truth if t != 0})
    power = tuple((size, float(right[:, np.abs(rec.truth) == size].mean())) for size in sizes)
    n = len(per_study)
    return Summary(rec.setup, n, float(covered.mean()), float(per_study.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan,
                   float(false.any(axis=1).mean()), float(false[zero].mean()) if zero.any() else math.nan,
                   float(rec.half_width.mean()), float(np.sqrt(((rec.estimate - truth) ** 2).mean())),
                   float(np.sqrt(var.mean())), float(np.nanmean(rec.text_share)) if rec.setup.blocks else math.nan,
                   power, float(rec.welch.mean()))


def run(world: ArmsWorld, studies: int, chosen: Sequence[Setup] | None = None, rng_seed: int | Sequence[int] = 0,
        margin: float = DEFAULT_MARGIN) -> dict[str, Summary]:
    """`simulate` and `summarise`: one Summary per setup (by name)."""
    return {name: summarise(world, rec) for name, rec in simulate(world, studies, chosen, rng_seed, margin).items()}


@dataclass(frozen=True)
class Calibration:
    """One setup on one world: its null version (every effect 0) and its planted one (`PLANTED`), on separate draws."""
    null: Summary
    planted: Summary


def calibrate(world: ArmsWorld, studies: int, chosen: Sequence[Setup] | None = None, rng_seed: int = 0,
              margin: float = DEFAULT_MARGIN) -> dict[str, Calibration]:
    """`studies` null and `studies` planted studies of `world` (rng streams (rng_seed, 0) and (rng_seed, 1))."""
    null = run(world.null(), studies, chosen, (rng_seed, 0), margin)
    planted = run(world.planted(), studies, chosen, (rng_seed, 1), margin)
    return {name: Calibration(null[name], planted[name]) for name in null}


def _main_setups(world: ArmsWorld) -> tuple[Setup, ...]:
    return setups(world) + (seeds_only(world),)


def _two_setups(world: ArmsWorld) -> tuple[Setup, ...]:
    return dunnett(world), equal(world)


WORLDS = {  # name -> (world, its setups): benchmarks/arms_calibration.py's rows (each world null and planted)
    "rho 0": (ArmsWorld(rho=0.0), _main_setups),
    "rho 0.5": (ArmsWorld(rho=0.5), setups),
    "rho 0.5, seed's text taste shared (block rho 0.5)": (ArmsWorld(rho=0.5, block_rho=0.5), _two_setups),
    "rho 0, arm x block SD 0.003": (ArmsWorld(rho=0.0, inter_sd=0.003), _two_setups),
}
