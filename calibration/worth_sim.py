"""Simulated length studies with planted baseline curves and arms at known multipliers: the check of `worth`'s CIs.

Owns `WorthWorld` (a planted curve, the seeds, the noise), `simulate` (one study: the baseline's runs at
each length, and one arm per planted multiplier, with their test blocks), `calibrate` (each multiplier's
CI coverage, censoring and width, for the PCHIP or the power-law curve) and `WORLDS`, the rows of
benchmarks/worth_calibration.py; tests/stats/test_worth.py runs a small version.

The planted model, for seed s at length k on block b (and an arm's run r):

    y[s, k, b] = L(steps_k) + g[b] + a[k, b] + sd (sqrt(rho) u[s] + sqrt(1 - rho) v[s, k]) + h[s, b] + e[s, k, b]
    y[r, b]    = L(m S)      + g[b] + a[arm, b] + sd w[r] + h'[r, b] + e[r, b]

L: the curve (`CURVES`); g: a block's difficulty (cancels); a[k, .]: the length x block interaction, a
random walk over lengths (neighbouring lengths alike), a[arm, .] each arm's own; u: the seed's share
across its lengths (shared trunks, rho); h: the seed's taste in text; e: run x block noise. The truth
is the multiplier m itself (on all text: a, h and e have mean 0 over the population of blocks).

An anchored world (`anchor_offset` set: a study on cosine, its baseline's curve on wsd) adds the baseline's
cosine runs at S on the same seeds and moves every arm by the same offset (cosine against wsd at S):

    y[s, b] = L(S) + offset + g[b] + a[S, b] + c[b] + sd (sqrt(q) z[s, S] + sqrt(1 - q) v'[s]) + h[s, b] + e'[s, b]

z[s, S] the seed's standardised level in its wsd run at S (q = `schedule_rho`: the two schedules share a
seed's data order and start), c the schedule's own x block interaction; the same h (the seed's taste).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gptlab.stats.text_share import Blocks
from gptlab.stats.worth import arm_runs, baseline_curve, step_multiplier

CURVES = {  # name -> the planted loss against steps (nats/char)
    "lab": lambda s: 1.289 + 4.80 * s ** -0.294,  # the power law through study 6's GELU tied means (1000-8000 steps)
    "saturating": lambda s: 1.5 + 47.8 * s ** -0.6,  # 2.0 at 2000 steps, flattening
    "two laws": lambda s: 1.25 + 3.0 * s ** -0.25 + 400.0 / s,  # fast early, slow late: not one power law
}
MULTIPLIERS = (0.35, 0.7, 1.0, 1.4, 2.5, 5.0)  # 0.35 and 5 lie beyond 0.5x-4x: censored


@dataclass(frozen=True)
class WorthWorld:
    """One row of the calibration."""
    curve: str = "lab"
    n0: int = 9  # baseline seeds (every length)
    n_arm: int = 3
    seed_sd: float = 0.006
    rho: float = 0.5  # share of a seed's variance common to its lengths
    n_blocks: int = 20  # test blocks per run (each run's loss is their mean)
    use_blocks: bool = True  # False: the CI sees only the run losses (seeds only)
    inter_sd: float = 0.01  # cell x block interaction (an arm's; a length's random walk step is half of it)
    err_sd: float = 0.02  # run x block noise
    taste_sd: float = 0.005  # a seed's own taste in text
    study_steps: float = 2000.0
    lengths: tuple = (1000.0, 2000.0, 4000.0, 8000.0)
    multipliers: tuple = field(default=MULTIPLIERS)
    anchor_offset: float | None = None  # cosine's loss over wsd's at S; None: the study runs wsd, no anchor
    schedule_rho: float = 0.8  # share of a seed's level common to its cosine and wsd runs at S
    schedule_inter_sd: float = 0.005  # the cosine anchor's own x block interaction


def simulate(w: WorthWorld, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, Blocks | None,
                                                               list[tuple[np.ndarray, Blocks | None]],
                                                               tuple[np.ndarray, Blocks | None] | None]:
    """One study: the baseline's (steps, seeds, losses, blocks), each planted arm's (losses, blocks), the anchor's."""
    L, K, B = CURVES[w.curve], len(w.lengths), w.n_blocks
    g = rng.normal(0, 0.1, B)
    walk = np.cumsum(rng.normal(0, w.inter_sd / 2, (K, B)), axis=0) + rng.normal(0, w.inter_sd, B)
    u = rng.normal(0, 1, w.n0)
    rows, steps, seeds, tastes, at_study = [], [], [], [], []
    k0 = list(w.lengths).index(w.study_steps)
    for s in range(w.n0):
        taste = rng.normal(0, w.taste_sd, B)
        tastes.append(taste)
        for k, n in enumerate(w.lengths):
            level = w.seed_sd * (np.sqrt(w.rho) * u[s] + np.sqrt(1 - w.rho) * rng.normal())
            if k == k0:
                at_study.append(level / w.seed_sd if w.seed_sd > 0 else 0.0)
            rows.append(L(n) + g + walk[k] + level + taste + rng.normal(0, w.err_sd, B))
            steps.append(n)
            seeds.append(s)
    Y = np.array(rows)
    weights = np.ones_like(Y)
    base_blocks = Blocks(Y, weights) if w.use_blocks else None
    anchor, offset = None, 0.0
    if w.anchor_offset is not None:
        offset, q = w.anchor_offset, w.schedule_rho
        c = rng.normal(0, w.schedule_inter_sd, B)
        A = np.array([L(w.study_steps) + offset + g + walk[k0] + c + tastes[s] + rng.normal(0, w.err_sd, B)
                      + w.seed_sd * (np.sqrt(q) * at_study[s] + np.sqrt(1 - q) * rng.normal()) for s in range(w.n0)])
        anchor = (A.mean(axis=1), Blocks(A, np.ones_like(A)) if w.use_blocks else None)
    arms = []
    for m in w.multipliers:
        a = rng.normal(0, w.inter_sd, B)
        A = np.array([L(m * w.study_steps) + offset + g + a + w.seed_sd * rng.normal() + rng.normal(0, w.taste_sd, B)
                      + rng.normal(0, w.err_sd, B) for _ in range(w.n_arm)])
        arms.append((A.mean(axis=1), Blocks(A, np.ones_like(A)) if w.use_blocks else None))
    base = Y.mean(axis=1)
    return np.array(steps), np.array(seeds), base, base_blocks, arms, anchor


@dataclass(frozen=True)
class WorthScore:
    """How one planted multiplier's CIs did."""
    multiplier: float
    coverage: float  # share of CIs (open ends extended) containing the truth
    censored_above: float  # share of estimates censored `above`
    censored_below: float
    log2_half_width: float  # median half-width of the CI in doublings (closed CIs only; NaN if none)
    median_estimate: float  # of the uncensored estimates
    excludes_one: float  # share of CIs (open ends extended) without 1: power where m != 1, false calls where m = 1


def calibrate(w: WorthWorld, studies: int, rng_seed: int = 0, curve: str = "pchip") -> list[WorthScore]:
    """Simulate `studies` studies of `w` and score every planted multiplier's CI."""
    rng = np.random.default_rng(rng_seed)
    results: list[list] = [[] for _ in w.multipliers]
    for _ in range(studies):
        steps, seeds, base, blocks, arms, anchor = simulate(w, rng)
        fit = baseline_curve(steps, seeds, base, blocks, curve)
        base_at_s = None if anchor is None else arm_runs(*anchor)
        for i, (losses, arm_blocks) in enumerate(arms):
            results[i].append(step_multiplier(fit, w.study_steps, arm_runs(losses, arm_blocks), anchor=base_at_s))
    scores = []
    for m, res in zip(w.multipliers, results):
        closed = [np.log2(r.ci_high / r.ci_low) / 2 for r in res if not (r.ci_low_open or r.ci_high_open)]
        est = [r.multiplier for r in res if not r.censored]
        scores.append(WorthScore(m, float(np.mean([r.covers(m) for r in res])),
                                 float(np.mean([r.censored == "above" for r in res])),
                                 float(np.mean([r.censored == "below" for r in res])),
                                 float(np.median(closed)) if closed else float("nan"),
                                 float(np.median(est)) if est else float("nan"),
                                 float(np.mean([not r.covers(1.0) for r in res]))))
    return scores


WORLDS = {  # name -> (world, studies, rng seed): benchmarks/worth_calibration.py's rows (20 blocks each)
    "lab curve, 3 baseline seeds": (WorthWorld(n0=3), 200, 1),
    "lab curve, 9 seeds": (WorthWorld(), 200, 2),
    "lab curve, 16 seeds (5 per arm)": (WorthWorld(n0=16, n_arm=5), 200, 3),
    "lab curve, 9 seeds, seed SD 0.03": (WorthWorld(seed_sd=0.03), 200, 4),
    "lab curve, 9 seeds, no text interaction, seeds only": (WorthWorld(inter_sd=0.0, use_blocks=False), 200, 5),
    "lab curve, 9 seeds, seeds-only CI": (WorthWorld(use_blocks=False), 200, 6),
    "saturating curve, 9 seeds": (WorthWorld(curve="saturating"), 200, 7),
    "two power laws, 9 seeds": (WorthWorld(curve="two laws"), 200, 8),
    "two power laws, 16 seeds (5 per arm)": (WorthWorld(curve="two laws", n0=16, n_arm=5), 200, 9),
    "lab curve, 9 seeds, cosine anchor": (WorthWorld(anchor_offset=0.04), 200, 10),
    "lab curve, 9 seeds, cosine anchor, schedules alike 0.95": (WorthWorld(anchor_offset=0.04, schedule_rho=0.95),
                                                                 200, 11),
    "lab curve, 9 seeds, cosine anchor, schedules unrelated": (WorthWorld(anchor_offset=0.04, schedule_rho=0.0),
                                                              200, 12),
    "lab curve, 3 seeds, cosine anchor": (WorthWorld(n0=3, anchor_offset=0.04), 200, 13),
    "lab curve, 16 seeds (5 per arm), cosine anchor": (WorthWorld(n0=16, n_arm=5, anchor_offset=0.04), 200, 14),
    "two power laws, 9 seeds, cosine anchor": (WorthWorld(curve="two laws", anchor_offset=0.04), 200, 15),
    "lab curve, 9 seeds, cosine anchor, seed SD 0.03": (WorthWorld(seed_sd=0.03, anchor_offset=0.04), 200, 16),
}
