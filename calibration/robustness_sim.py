"""Simulated tuned 2x2 studies with planted effects: the tuning check's calls scored against the truth at the cells' true optima.

Owns the simulation behind `benchmarks/robustness_calibration.py` and `tests/simulations/test_robustness_sim.py`.
The world is `calibration.refine_sim`'s, reused as it is (`World`, `Curve`, `Noise`, `grid_picks`): the
`tuned` study's 2x2, activation (gelu, relu) x tying (tied, untied), each cell a true loss curve in
log2(lr) steeper below its optimum, selection runs on the grid 5e-4 .. 8e-3 (factor 2) at one or two
seeds (`grid_picks`: `stats.picks`' rule), run SD 0.006, then `Setup.estimation_seeds` fresh seeds at
each cell's pick with a seed block (36% of the run variance). `ArmOptima` adds a world whose optima
differ by arm and not by chance: gelu's on a grid lr, relu's midway between two (its pick always
misses), so that the picks plant an effect the optima do not have. `GridOptima` puts every optimum
on a grid lr (near-optimal picks) for the power to certify true effects of k standard errors
(`power_world`: k times the relu main effect's SE at the picks, `main_se`).

Each study then goes the report's way: `lr_curves.fit_curves` on the selection runs (step one octave,
the estimation runs as the noise's replicates) gives each cell's loss left (estimate and 95% upper
end), and `effects.analyse(..., loss_left=...)` every printed effect (main, interaction, simple; one
Holm family) with its call at the picks (`call_at_picks`) and after the check (`call`,
`robustness.DEPENDS` where it does not survive); beside it the rule the check replaced, each cell's
upper end added to the test (`calls_sum`), on the same curves. Both are scored against the truth at the
optima: the contrast of the curves' minima
(`calibration.PlantedTruth`), never the design's contrasts. A `better`/`worse` call is false when
that truth is 0 or of the other sign, an `equivalent` call when |truth| >= the margin; every other
call but `inconclusive` and DEPENDS is true. The check's cost is the share of true calls at the picks
that it turns into DEPENDS. Common random numbers: every setup of a study sees the same curves and
draws (the 3 estimation seeds are the first 3 of the 5). Numbers only: no files.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from calibration.effects_sim import PlantedTruth, printed_effects
from calibration.refine_sim import ACTIVATION, CELLS, DESIGN, LATTICE, Curve, Noise, World, grid_picks
from gptlab.stats.calls import DECISIVE, DEFAULT_MARGIN, DIRECTIONAL, EQUIVALENT, WORSE
from gptlab.stats.effects import analyse
from gptlab.stats.lr_curves import fit_curves
from gptlab.stats.robustness import DEPENDS
from gptlab.statuses import DIVERGED, OK

MAIN = ("term", f"{ACTIVATION}=relu")  # the key of the activation main effect (the planted one)
STEP = 1.0  # the grid's step in octaves: the report's `step` for tune.space 5e-4 .. 8e-3


@dataclass(frozen=True)
class ArmOptima(World):
    """`World` with the optima set by arm: gelu's cells at `gelu_lr`, relu's at `relu_lr` (curvatures still drawn)."""

    gelu_lr: float = 2e-3  # on the grid: its pick can be right
    relu_lr: float = 2e-3 * math.sqrt(2)  # midway between 2e-3 and 4e-3: its pick always leaves loss on the table

    def draw(self, rng: np.random.Generator) -> tuple[Curve, ...]:
        out = []
        for act, _ in CELLS:
            k = math.exp(rng.uniform(*(math.log(v) for v in self.curvature)))
            relu = act == "relu"
            out.append(Curve(self.best_loss + (self.effect if relu else 0.0), self.relu_lr if relu else self.gelu_lr,
                             k, self.skew, self.diverge))
        return tuple(out)


@dataclass(frozen=True)
class GridOptima(World):
    """`World` with every cell's optimum on a grid lr, 2e-3 or 4e-3 at random: picks can be exact (near-optimal)."""

    def draw(self, rng: np.random.Generator) -> tuple[Curve, ...]:
        out = []
        for act, _ in CELLS:
            k = math.exp(rng.uniform(*(math.log(v) for v in self.curvature)))
            out.append(Curve(self.best_loss + (self.effect if act == "relu" else 0.0), float(rng.choice([2e-3, 4e-3])),
                             k, self.skew, self.diverge))
        return tuple(out)


def main_se(world: World, estimation_seeds: int) -> float:
    """The relu main effect's SE at the picks: relu's 2 cells against gelu's, seeds blocked (their share cancels)."""
    return world.run_sd * math.sqrt(1 - world.seed_share) / math.sqrt(estimation_seeds)


def power_world(k: float, estimation_seeds: int) -> GridOptima:
    """A world whose relu is better at the optima by `k` of its main effect's SEs at `estimation_seeds` seeds."""
    return GridOptima(effect=-k * main_se(GridOptima(), estimation_seeds))


@dataclass(frozen=True)
class Setup:
    """How a study is tuned and estimated: the grid at `selection_seeds` seeds, `estimation_seeds` at the picks."""

    selection_seeds: int
    estimation_seeds: int

    @property
    def name(self) -> str:
        return f"grid {self.selection_seeds} seed(s), {self.estimation_seeds} estimation seeds"


SETUPS = tuple(Setup(s, n) for s in (1, 2) for n in (3, 5))


@dataclass(frozen=True)
class StudyRecord:
    """One setup on one study: per printed effect, its truth at the optima and its two calls; per cell, L^hi."""

    truths: tuple[float, ...]  # contrast of the curves' minima, per printed effect
    at_picks: tuple[str, ...]  # `call_at_picks`
    calls: tuple[str, ...]  # `call` (after the check)
    calls_sum: tuple[str, ...]  # the call after the rule it replaced: each cell's upper end added to the test
    keys: tuple[tuple, ...]  # `calibration.printed_effects`' keys
    loss_left_high: tuple[float, ...]  # per cell: the upper end of the loss left's 95% CI (inf: unbounded; NaN: no fit)
    loss_left: tuple[float, ...]  # per cell: the true loss left by the pick (the curve there minus its minimum)


def false_call(call: str, truth: float, margin: float) -> bool:
    """Whether `call` is false against `truth` (the effect at the optima)."""
    if call in DIRECTIONAL:
        return abs(truth) < 1e-12 or (truth > 0) != (call == WORSE)
    return call == EQUIVALENT and abs(truth) >= margin


def true_call(call: str, truth: float, margin: float) -> bool:
    """Whether `call` is a call (better, worse, equivalent) and true against `truth`."""
    return call in DECISIVE and not false_call(call, truth, margin)


def _label(factor: str, level: str) -> str:
    return f"{factor}={level}"


def selection_frame(curves: Sequence[Curve], noise: Noise, seeds: int) -> pd.DataFrame:
    """The selection runs `grid_picks` saw, as `fit_curves` reads them: cell (index), lr, loss, status."""
    rows = [{"cell": c, "lr": LATTICE.value(k), "loss": y, "status": OK if math.isfinite(y) else DIVERGED}
            for c, cv in enumerate(curves) for k in LATTICE.coarse() for r in range(seeds)
            for y in [noise.run(cv, c, k, r)]]
    return pd.DataFrame(rows)


def score(curves: Sequence[Curve], lrs: Sequence[float], selection: pd.DataFrame, noise: Noise,
          margin: float = DEFAULT_MARGIN) -> StudyRecord:
    """The report's path on one study: fit the curves, analyse the estimation runs at `lrs` with the check, score."""
    at = [cv.loss(lr) for cv, lr in zip(curves, lrs)]
    n = noise.seed_offsets.size
    y = (np.array(at)[:, None] + noise.seed_offsets[None, :] + noise.estimation).ravel()
    estimation = pd.DataFrame({"cell": np.repeat(np.arange(len(curves)), n), "lr": np.repeat(lrs, n), "loss": y,
                               "status": OK})
    fits = fit_curves(selection, STEP, picks=dict(enumerate(lrs)), replicates=estimation)
    high = np.array([f.loss_left_ci_high for f in fits.fits], float)
    left = np.column_stack([[f.loss_left for f in fits.fits], high, [f.noise_df for f in fits.fits]])
    cells, seeds = [c for c in CELLS for _ in range(n)], np.tile(np.arange(n), len(CELLS))
    effects = printed_effects(analyse(y, cells, seeds, DESIGN, _label, margin, loss_left=left))
    summed = dict(printed_effects(analyse(y, cells, seeds, DESIGN, _label, margin, loss_left=high)))
    best = PlantedTruth(DESIGN, [cv.best_loss for cv in curves])
    return StudyRecord(tuple(best(k) for k, _ in effects), tuple(str(r["call_at_picks"]) for _, r in effects),
                       tuple(str(r["call"]) for _, r in effects), tuple(str(summed[k]["call"]) for k, _ in effects),
                       tuple(k for k, _ in effects), tuple(float(h) for h in high),
                       tuple(a_ - cv.best_loss for a_, cv in zip(at, curves)))


def simulate(world: World, studies: int, setups: Sequence[Setup] = SETUPS, rng_seed: int = 0,
             margin: float = DEFAULT_MARGIN) -> dict[Setup, list[StudyRecord]]:
    """`studies` simulated studies of `world`, each answered by every setup on the same draws."""
    rng = np.random.default_rng(rng_seed)
    big = dataclasses.replace(world, seeds=max(s.estimation_seeds for s in setups))
    replicates = max(s.selection_seeds for s in setups)
    out: dict[Setup, list[StudyRecord]] = {s: [] for s in setups}
    for _ in range(studies):
        curves = big.draw(rng)
        noise = Noise.draw(big, rng, replicates)
        for seeds in sorted({s.selection_seeds for s in setups}):
            ks, _ = grid_picks(curves, noise, seeds)
            lrs = [LATTICE.value(k) for k in ks]
            selection = selection_frame(curves, noise, seeds)
            for s in (s for s in setups if s.selection_seeds == seeds):
                n = s.estimation_seeds
                sub = Noise(noise.selection, noise.seed_offsets[:n], noise.estimation[:, :n])
                out[s].append(score(curves, lrs, selection, sub, margin))
    return out


@dataclass(frozen=True)
class Summary:
    """One setup over `studies` studies of one world. False rates are per study (one false call among its effects
    or more: what Holm bounds at 5% for better/worse); the rest per printed effect or per cell."""

    setup: Setup
    studies: int
    false_dir_picks: float  # studies with a false better/worse call at the picks (`call_at_picks`)
    false_dir: float  # ... after the check (`call`)
    false_dir_sum: float  # ... after the rule it replaced (`calls_sum`)
    false_eq_picks: float  # studies with a false equivalent call at the picks
    false_eq: float  # ... after the check
    true_picks: float  # printed effects with a true call at the picks
    true_checked: float  # ... after the check
    true_sum: float  # ... after the rule it replaced
    cost: float  # of the true calls at the picks, the share turned into DEPENDS
    depends: dict[str, float]  # per call at the picks (better, worse, equivalent): the share turned into DEPENDS
    main_right_picks: float  # studies whose relu main effect has a true call at the picks
    main_right: float  # ... after the check
    main_called_picks: float  # studies whose relu main effect is called better or worse, right, at the picks
    main_certified: float  # ... after the check (the power to certify)
    main_certified_sum: float  # ... by the rule it replaced
    unbounded: float  # cells whose L^hi is inf (every call using them against it is DEPENDS)
    unchecked: float  # cells with no L^hi (NaN: no fit; the calls using them pass unchecked)
    high_covers: float  # cells with a finite L^hi whose L^hi >= the true loss left
    high_median: float  # median finite L^hi per cell (nats)
    loss_left: float  # mean true loss left per cell (nats)

    def rate_se(self, rate: float) -> float:
        """Monte-Carlo SE of a share of the studies."""
        return math.sqrt(max(rate * (1 - rate), 0.0) / self.studies)


def summarise(setup: Setup, records: Sequence[StudyRecord], margin: float = DEFAULT_MARGIN) -> Summary:
    """Rates of `records` against their truths at the optima."""
    def certified(calls: str) -> float:
        return float(np.mean([any(k == MAIN and c in DIRECTIONAL and true_call(c, t, margin)
                                  for k, t, c in zip(r.keys, r.truths, getattr(r, calls))) for r in records]))

    def per_study(calls: str, kind: Sequence[str]) -> float:
        return float(np.mean([any(false_call(c, t, margin) and c in kind for c, t in zip(getattr(r, calls), r.truths))
                              for r in records]))

    effects = [(t, p, c) for r in records for t, p, c in zip(r.truths, r.at_picks, r.calls)]
    true_p = [true_call(p, t, margin) for t, p, _ in effects]
    true_c = [true_call(c, t, margin) for t, _, c in effects]
    true_s = [true_call(c, t, margin) for r in records for t, c in zip(r.truths, r.calls_sum)]
    lost = [c == DEPENDS for (_, _, c), tp in zip(effects, true_p) if tp]
    depends = {w: float(np.mean([c == DEPENDS for _, p, c in effects if p == w]))
               if any(p == w for _, p, _ in effects) else math.nan for w in DECISIVE}
    main = [[true_call(x, t, margin) for k, t, x in zip(r.keys, r.truths, calls) if k == MAIN]
            for r in records for calls in (r.at_picks, r.calls)]
    high = np.array([h for r in records for h in r.loss_left_high])
    left = np.array([x for r in records for x in r.loss_left])
    finite = np.isfinite(high)
    directional = DIRECTIONAL
    return Summary(setup, len(records), per_study("at_picks", directional), per_study("calls", directional),
                   per_study("calls_sum", directional), per_study("at_picks", (EQUIVALENT,)),
                   per_study("calls", (EQUIVALENT,)), float(np.mean(true_p)), float(np.mean(true_c)),
                   float(np.mean(true_s)), float(np.mean(lost)) if lost else math.nan, depends,
                   float(np.mean([any(m) for m in main[0::2]])), float(np.mean([any(m) for m in main[1::2]])),
                   certified("at_picks"), certified("calls"), certified("calls_sum"),
                   float(np.mean(np.isinf(high))), float(np.mean(np.isnan(high))),
                   float(np.mean(high[finite] >= left[finite] - 1e-9)) if finite.any() else math.nan,
                   float(np.median(high[finite])) if finite.any() else math.nan, float(left.mean()))


def run(world: World, studies: int, setups: Sequence[Setup] = SETUPS, rng_seed: int = 0) -> list[Summary]:
    """`simulate` then `summarise`: one summary per setup."""
    return [summarise(s, recs) for s, recs in simulate(world, studies, setups, rng_seed).items()]


WORLDS: dict[str, World] = {
    "a: best losses equal, optima per cell": World(),
    "a': best losses equal, gelu's optima on the grid, relu's midway": ArmOptima(),
    "a'': as a', curves steeper (0.025 .. 0.04 per octave^2 above): relu's picks leave 0.004 or more": ArmOptima(
        curvature=(0.025, 0.04)),
    "b: relu better by 0.015, optima per cell": World(effect=-0.015),
    "b': relu better by 0.012, gelu's optima on the grid, relu's midway": ArmOptima(effect=-0.012),
    "c: relu worse by 0.004 (inside the margin), optima per cell": World(effect=0.004),
}
