"""Simulated sweeps scored block by block, with planted arm x block interactions: the check of `text_share`'s CIs.

Owns `TextScenario` (a 2x2 design like results/tuned with its noise and its planted text interaction),
`simulate_blocks` (in-memory runs, each a loss per block of its test text), `calibrate_text` (coverage
of the planted effects on the whole population of text, false calls on effects that are 0, and CI
width, for the seed-only CI against the seed x block CI, both from `effects.analyse`), with the paired
seed x block bootstrap as a third method on the main effects. `TEXT_SCENARIOS` are the rows of
benchmarks/text_share_calibration.py; tests/stats/test_text_share.py runs small versions.

The planted model, for cell c, seed s and block b of the test text (every term drawn afresh per
dataset, so each dataset scores a new sample of text and the truth is the effect on all text):

    y[c, s, b] = mu[c] + g[b] + a[c, b] + seed[s] + h[s, b] + u[c, s] + e[c, s, b]

g: the block's difficulty (SD 0.1, in every cell); a: the arm x block interaction (`inter_sd`, each
cell its own, so a main effect's SD over blocks is `inter_sd`); seed: shared by every cell of a seed;
h: a seed's own taste in text, shared by its cells; u: the run; e: the run x block noise. The truths
come from `calibration.PlantedTruth` (group means of mu), never from the contrasts under test.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from calibration.effects_sim import PlantedTruth, printed_effects
from gptlab.stats.calls import DIRECTIONAL
from gptlab.stats.design import Design
from gptlab.stats.effects import Analysis, analyse
from gptlab.stats.text_share import Blocks

FACTORS = {"activation": ("gelu", "relu"), "tying": ("tied", "untied")}
DESIGN = Design(tuple(FACTORS), FACTORS, {f: v[0] for f, v in FACTORS.items()},
                tuple(itertools.product(*FACTORS.values())))
METHODS = ("seeds only", "seeds x blocks", "bootstrap")


@dataclass(frozen=True)
class TextScenario:
    """One row of the calibration: the design's seeds and noise, and the planted text interaction."""
    seeds: int = 3
    inter_sd: float = 0.007  # SD over blocks of each cell's deviation (the arm x block interaction)
    layout: str = "paired"  # the last cell's seeds: "paired" (every cell's), "unpaired" (1..S: it lacks seed 0 and
    # has one no other cell has), "disjoint" (S..2S-1, none of the others'), "single" (seed 0 alone)
    unequal: bool = False  # blocks of unequal size (token counts 0.5x to 1.5x), weighted by them
    relu: float = -0.012  # the planted main effect of activation=relu (tying and the interaction are 0)
    n_blocks: int = 20
    seed_sd: float = 0.004  # shared by every cell of a seed
    run_sd: float = 0.006  # each run's own (with the blocks' noise, a run's SD is about 0.0065, as in results/tuned)
    err_sd: float = 0.01  # run x block
    taste_sd: float = 0.005  # seed x block, shared by the seed's cells
    block_sd: float = 0.1  # the blocks' difficulty

    @property
    def means(self) -> tuple[float, ...]:
        return tuple(1.5 + self.relu * (c[0] == "relu") for c in DESIGN.cells)

    def seeds_of(self, cell: int) -> list[int]:
        if cell < len(DESIGN.cells) - 1 or self.layout == "paired":
            return list(range(self.seeds))
        return {"unpaired": list(range(1, self.seeds + 1)), "disjoint": list(range(self.seeds, 2 * self.seeds)),
                "single": [0]}[self.layout]


def simulate_blocks(sc: TextScenario, rng: np.random.Generator) -> tuple[Blocks, list[tuple], np.ndarray]:
    """One simulated sweep: (the runs' blocks, each run's cell, each run's seed)."""
    B, n_seeds = sc.n_blocks, 2 * sc.seeds
    g, a = rng.normal(0, sc.block_sd, B), rng.normal(0, sc.inter_sd, (len(DESIGN.cells), B))
    seed, taste = rng.normal(0, sc.seed_sd, n_seeds), rng.normal(0, sc.taste_sd, (n_seeds, B))
    tokens = rng.uniform(0.5, 1.5, B) if sc.unequal else np.ones(B)
    losses, cells, seeds = [], [], []
    for i, mu in enumerate(sc.means):
        for s in sc.seeds_of(i):
            losses.append(mu + g + a[i] + seed[s] + taste[s] + rng.normal(0, sc.run_sd) + rng.normal(0, sc.err_sd, B))
            cells.append(DESIGN.cells[i])
            seeds.append(s)
    return Blocks(np.array(losses), np.tile(tokens, (len(losses), 1))), cells, np.array(seeds)


def _label(factor: str, level: str) -> str:
    return f"{factor}={level}"


def bootstrap_ci(blocks: Blocks, cells: list[tuple], seeds: np.ndarray, c: np.ndarray, rng: np.random.Generator,
                 n_boot: int = 999) -> tuple[float, float]:
    """95% percentile CI of contrast c (paired seeds only): seeds and blocks resampled with replacement.

    D[s, b] is the contrast of the cells' losses for seed s on block b; each resample's estimate is the
    block-weighted mean over its blocks of the mean over its seeds.
    """
    index = {cell: i for i, cell in enumerate(DESIGN.cells)}
    order = sorted(set(seeds.tolist()))
    D = np.zeros((len(order), blocks.losses.shape[1]))
    for r, (cell, s) in enumerate(zip(cells, seeds)):
        D[order.index(s)] += c[index[cell]] * blocks.losses[r]
    w = blocks.weights[0]
    S, B = D.shape
    rs, rb = rng.integers(0, S, (n_boot, S)), rng.integers(0, B, (n_boot, B))
    sample = D[rs[:, :, None], rb[:, None, :]].mean(axis=1)  # (n_boot, B): mean over the resampled seeds
    est = (sample * w[rb]).sum(axis=1) / w[rb].sum(axis=1)
    lo, hi = np.percentile(est, [2.5, 97.5])
    return float(lo), float(hi)


@dataclass
class TextCalibration:
    """How one method's CIs did on one scenario's simulated sweeps."""
    method: str
    coverage: float  # share of 95% CIs containing the planted effect (main effects, interaction, simple effects)
    false_calls: float  # share of truly-zero effects called better or worse (NaN: the bootstrap makes no calls)
    half_width: float  # mean 95% CI half-width of the main effects
    text_share: float  # mean share of the main effects' variance due to the blocks (NaN: seeds only)
    n_intervals: int
    n_null: int


def calibrate_text(sc: TextScenario, datasets: int, rng_seed: int = 0, margin: float = 0.01,
                   bootstrap: int = 0) -> dict[str, TextCalibration]:
    """Simulate `datasets` sweeps of `sc`, analyse each with and without its blocks, score the CIs and calls.

    `bootstrap` (> 0: resamples; paired layouts only) adds the paired seed x block bootstrap of the main effects.
    """
    rng = np.random.default_rng(rng_seed)
    planted, truths = PlantedTruth(DESIGN, sc.means), {}

    def truth_of(key: tuple) -> float:  # group means, computed once per printed effect
        return truths[key] if key in truths else truths.setdefault(key, planted(key))

    scores: dict[str, dict[str, list]] = {m: {"cover": [], "false": [], "half": [], "share": []} for m in METHODS}
    for _ in range(datasets):
        blocks, cells, seeds = simulate_blocks(sc, rng)
        y = blocks.run_losses
        for method, a in (("seeds only", analyse(y, cells, seeds, DESIGN, _label, margin)),
                          ("seeds x blocks", analyse(y, cells, seeds, DESIGN, _label, margin, blocks=blocks))):
            _score(scores[method], a, truth_of)
        if bootstrap and sc.layout == "paired":
            for f, lv in ((f, v[1]) for f, v in FACTORS.items()):
                lo, hi = bootstrap_ci(blocks, cells, seeds, DESIGN.interaction(((f, lv),)), rng, bootstrap)
                scores["bootstrap"]["cover"].append(lo <= truth_of(("term", _label(f, lv))) <= hi)
                scores["bootstrap"]["half"].append((hi - lo) / 2)
    return {m: TextCalibration(m, _mean(s["cover"]), _mean(s["false"]), _mean(s["half"]), _mean(s["share"]),
                               len(s["cover"]), len(s["false"])) for m, s in scores.items() if s["cover"]}


def _score(into: dict[str, list], a: Analysis, truth_of: Callable[[tuple], float]) -> None:
    for key, r in printed_effects(a):
        truth = truth_of(key)
        into["cover"].append(r["ci_low"] <= truth <= r["ci_high"])
        if abs(truth) < 1e-12:
            into["false"].append(r["call"] in DIRECTIONAL)
    into["half"] += a.main["ci95"].tolist()
    if "text_share" in a.main:
        into["share"] += a.main["text_share"].tolist()


def _mean(values: list) -> float:
    return float(np.mean(values)) if values else math.nan


TEXT_SCENARIOS = {  # name -> (scenario, datasets, rng seed): benchmarks/text_share_calibration.py's rows
    **{f"{s} seeds, no text interaction": (TextScenario(s, 0.0), 1000, 100 + s) for s in (3, 5)},
    **{f"{s} seeds, interaction SD 0.007": (TextScenario(s, 0.007), 1000, 200 + s) for s in (3, 5)},
    **{f"{s} seeds, interaction SD 0.02": (TextScenario(s, 0.02), 1000, 300 + s) for s in (3, 5)},
    "3 seeds, SD 0.007, unpaired seeds": (TextScenario(3, 0.007, layout="unpaired"), 1000, 401),
    "3 seeds, SD 0.007, a cell's seeds no other's": (TextScenario(3, 0.007, layout="disjoint"), 1000, 404),
    "3 seeds, SD 0.007, a cell with one seed": (TextScenario(3, 0.007, layout="single"), 1000, 402),
    "3 seeds, SD 0.007, unequal blocks": (TextScenario(3, 0.007, unequal=True), 1000, 403),
}
