"""Simulated arms studies with stability cliffs, slow seeds and failures that grow with the lr: the worlds and their truths.

Owns the planted side of `calibration.verdicts_sim` (which runs the tuner and the report's chain on them). A study is
an arms sweep (`arms:`): a baseline and three arms (`ARMS`), each tuned over lr on `tune.space` 5e-4 .. 8e-3 (factor
2; `LATTICE`: refine's half-steps and edge extensions). Each arm has a true curve (`ArmCurve`), in u = log2(lr /
best_lr): best_loss + c u^2 above its optimum, `skew` times steeper below it (refine_sim's curves), and three
kinds of trouble:

- **a stability cliff**: from `cliff` octaves above its optimum a run fails with a probability rising linearly to 1
  over `width` octaves; or a **wall**: from `wall` octaves above the optimum a run trains (status ok) but lands
  `jump` nats higher (study 8's SwiGLU at 1.13e-2: +0.75 nats, runs that learned);
- **failure probability rising with lr**: `floor`, the probability that a run fails at every lr below the cliff
  (the failure-prone arm, `PRONE`), rising to 1 beyond it as above. A failed run is `collapsed` (its loss on the
  unigram plateau, `CEILING` less 0 to 0.02), `unstable` (it learned, then blew up: 0.3 to 0.9 nats above its
  curve) or `diverged` (no loss), in the shares of `World.kinds`;
- **slow seeds**: a run that trains lags with probability `World.slow` (status ok, `lag` nats above its siblings).

Every other run is its curve plus Gaussian noise (`run_sd`). The truths, per arm at an lr (`Truth`): the expected
loss of a run that trains there (`ok_mean`: the curve plus the slow seeds' mean lag), the expected value of a run
counted the way the arms table counts every run (`all_mean`: a failed run at its own loss, a diverged one at the
unigram loss, each weighted by its probability), the failure probability itself, and the arm's optimum: the lowest
`ok_mean` over the lrs where its failure probability is at its floor (below the cliff: the best stable lr), and
the same over the lattice's half-steps alone (`lattice_optimum`: the best a tuner on this lattice can reach). An
effect's truth at the picks is the arm's value at its pick minus the baseline's at its pick; its truth at the
optima (what the tuning check's calls claim) is the difference of their optima. Draws (`Draws`) are fixed per
(arm, half-step, replicate) for the selection runs and per (arm, seed) for the estimation runs, so every setup of a
study sees the same runs. Numbers only: no files.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from gptlab.stats.refine import Lattice
from gptlab.statuses import COLLAPSED, DIVERGED, OK, UNSTABLE

SPACE = (5e-4, 1e-3, 2e-3, 4e-3, 8e-3)  # tune.space: the coarse grid, factor 2
LATTICE = Lattice(SPACE)  # half-steps -4 .. 12: 1.25e-4 .. 3.2e-2
BASELINE, PROBE, PLAIN, PRONE = "baseline", "arm1", "arm2", "arm3"  # the probe: an artefact or a planted effect
ARMS = (BASELINE, PROBE, PLAIN, PRONE)
CEILING = 3.33  # the unigram loss of the validation split (nats/char): study 8's
U_FINE = np.round(np.arange(-3.0, 3.0 + 1e-9, 0.01), 6)  # octaves around an optimum where the truths look for it


@dataclass(frozen=True)
class ArmCurve:
    """One arm's true loss against lr and its trouble (see the module docstring)."""

    best_loss: float
    best_lr: float
    curvature: float  # loss per squared octave above the optimum
    skew: float = 2.0  # the low side's curvature over `curvature`
    cliff: float = math.inf  # octaves above best_lr where the failure probability starts rising
    width: float = 0.5  # octaves over which it rises to 1
    floor: float = 0.0  # the failure probability below the cliff
    wall: float = math.inf  # octaves above best_lr from which a run that trains lands `jump` higher
    jump: float = 0.0

    def failure(self, lr: float) -> float:
        """The probability that a run at `lr` fails to train."""
        rise = min(max((math.log2(lr / self.best_lr) - self.cliff) / self.width, 0.0), 1.0)
        return self.floor + (1.0 - self.floor) * rise

    def trained(self, lr: float) -> float:
        """The loss of a run that trains at `lr`, noise and lag aside."""
        u = math.log2(lr / self.best_lr)
        return self.best_loss + self.curvature * (self.skew if u < 0 else 1.0) * u * u + (self.jump if u >= self.wall
                                                                                          else 0.0)


@dataclass(frozen=True)
class World:
    """How a study's arms and runs are drawn. Ranges are uniform (`optima`, `curvature`: log-uniform)."""

    effect: float = 0.0  # the probe's best loss minus the baseline's (nats)
    optima: tuple[float, float] | None = (1.5e-3, 6e-3)  # each arm's optimum; None: 2e-3 or 4e-3 (a grid lr)
    curvature: tuple[float, float] = (0.013, 0.025)
    cliff: tuple[float, float] = (1.0, 1.5)  # every arm's cliff, octaves above its optimum
    width: float = 0.5
    wall: tuple[float, float] | None = None  # every arm's wall instead of a cliff of failures, octaves above
    jump: tuple[float, float] = (0.2, 0.6)
    prone: float = 0.1  # the failure-prone arm's failure probability below its cliff
    artefact: str = ""  # "cliff" or "wall": the probe's optimum 0.4 octave above 2e-3, its trouble 0.05 above that
    artefact_curvature: tuple[float, float] = (0.03, 0.05)
    slow: float = 0.1  # the probability that a run which trains lags
    lag: tuple[float, float] = (0.02, 0.05)
    kinds: tuple[float, float, float] = (0.5, 0.25, 0.25)  # failed runs: collapsed, unstable, diverged
    stuck: tuple[float, float] = (0.3, 0.9)  # an unstable run's loss above its curve
    best_loss: float = 1.73
    run_sd: float = 0.006

    def draw(self, rng: np.random.Generator) -> tuple[ArmCurve, ...]:
        """One study's curves, in `ARMS` order."""
        out = []
        for arm in ARMS:
            c = math.exp(rng.uniform(*np.log(self.curvature)))
            lr = math.exp(rng.uniform(*np.log(self.optima))) if self.optima else float(rng.choice([2e-3, 4e-3]))
            curve = ArmCurve(self.best_loss + (self.effect if arm == PROBE else 0.0), lr, c, width=self.width,
                             floor=self.prone if arm == PRONE else 0.0)
            if self.wall is not None:
                curve = replace(curve, wall=rng.uniform(*self.wall), jump=rng.uniform(*self.jump))
            else:
                curve = replace(curve, cliff=rng.uniform(*self.cliff))
            out.append(curve)
        if self.artefact:
            c = math.exp(rng.uniform(*np.log(self.artefact_curvature)))
            trouble = {"wall": 0.05, "jump": rng.uniform(*self.jump)} if self.artefact == "wall" else \
                {"cliff": 0.05, "width": 0.05, "wall": math.inf, "jump": 0.0}
            out[1] = replace(out[1], best_lr=2e-3 * 2 ** 0.4, curvature=c, **trouble)
        return tuple(out)

    @property
    def slow_mean(self) -> float:
        """The mean lag a run that trains carries (every arm alike)."""
        return self.slow * sum(self.lag) / 2

    @property
    def total_sd(self) -> float:
        """The SD of a trained run's loss, its lag included: sqrt(run_sd^2 + p (var + mean^2) - (p mean)^2)."""
        lo, hi = self.lag
        second = (hi - lo) ** 2 / 12 + ((lo + hi) / 2) ** 2
        return math.sqrt(self.run_sd ** 2 + self.slow * second - self.slow_mean ** 2)

    def probe_se(self, seeds: int, baseline_seeds: int) -> float:
        """The SD of the probe's effect at the picks (its trained runs' mean minus the baseline's), none failing."""
        return self.total_sd * math.sqrt(1 / seeds + 1 / baseline_seeds)


@dataclass(frozen=True)
class Truth:
    """What a world's runs are worth in expectation, per arm."""

    world: World

    def ok_mean(self, curve: ArmCurve, lr: float) -> float:
        """The expected loss of a run that trains at `lr` (its lag included)."""
        return curve.trained(lr) + self.world.slow_mean

    def failed_mean(self, curve: ArmCurve, lr: float) -> float:
        """The expected value of a failed run as the arms table counts it (diverged: the unigram loss)."""
        c, u, d = self.world.kinds
        return c * (CEILING - 0.01) + u * (curve.trained(lr) + sum(self.world.stuck) / 2) + d * CEILING

    def all_mean(self, curve: ArmCurve, lr: float) -> float:
        """The expected value of a run at `lr` counting every run (a failed one as `failed_mean`)."""
        q = curve.failure(lr)
        return (1 - q) * self.ok_mean(curve, lr) + q * self.failed_mean(curve, lr)

    def optimum(self, curve: ArmCurve) -> float:
        """The lowest `ok_mean` over the lrs where the failure probability is at its floor (the best stable lr)."""
        lrs = curve.best_lr * 2.0 ** U_FINE
        stable = [self.ok_mean(curve, lr) for lr in lrs if curve.failure(lr) <= curve.floor + 1e-12]
        return min(stable)

    def lattice_optimum(self, curve: ArmCurve) -> float:
        """The lowest `ok_mean` over the lattice's lrs (refine's half-steps) where the failure probability is at its
        floor: the best stable lr a tuner on this lattice can reach."""
        lrs = [LATTICE.value(k) for k in LATTICE.steps()]
        return min(self.ok_mean(curve, lr) for lr in lrs if curve.failure(lr) <= curve.floor + 1e-12)


@dataclass(frozen=True)
class Draws:
    """One study's random numbers: selection runs (arm, half-step - low bound, replicate) and estimation runs (arm,
    seed), each with 7 columns: fail, kind, slow, lag, noise (standard normal), stuck, collapsed offset."""

    selection: np.ndarray
    estimation: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator, replicates: int, seeds: int) -> "Draws":
        low, high = LATTICE.bounds
        shape_s, shape_e = (len(ARMS), high - low + 1, replicates, 7), (len(ARMS), seeds, 7)
        sel, est = rng.uniform(size=shape_s), rng.uniform(size=shape_e)
        sel[..., 4], est[..., 4] = rng.standard_normal(shape_s[:-1]), rng.standard_normal(shape_e[:-1])
        return cls(sel, est)

    def selection_run(self, world: World, curve: ArmCurve, arm: int, k: int, replicate: int) -> tuple[str, float]:
        """The status and loss of arm `arm`'s `replicate`-th selection run at half-step k."""
        return outcome(world, curve, LATTICE.value(k), self.selection[arm, k - LATTICE.bounds[0], replicate])

    def estimation_run(self, world: World, curve: ArmCurve, arm: int, lr: float, seed: int) -> tuple[str, float]:
        """The status and loss of arm `arm`'s estimation run with `seed` at `lr`."""
        return outcome(world, curve, lr, self.estimation[arm, seed])


def outcome(world: World, curve: ArmCurve, lr: float, d: np.ndarray) -> tuple[str, float]:
    """A run at `lr` from its draws `d` (`Draws`' columns): (status, loss; NaN where it diverged)."""
    fail, kind, slow, lag, z, stuck, offset = d
    if fail < curve.failure(lr):
        collapsed, unstable, _ = world.kinds
        if kind < collapsed:
            return COLLAPSED, CEILING - 0.02 * offset
        if kind < collapsed + unstable:
            return UNSTABLE, curve.trained(lr) + world.stuck[0] + (world.stuck[1] - world.stuck[0]) * stuck
        return DIVERGED, math.nan
    lagging = world.lag[0] + (world.lag[1] - world.lag[0]) * lag if slow < world.slow else 0.0
    return OK, curve.trained(lr) + world.run_sd * z + lagging


WORLDS: dict[str, World] = {
    "cliff: each arm's cliff 0-1 octave above its optimum, optima per arm": World(cliff=(0.0, 1.0)),
    "wall: each arm's loss jumps 0.2-0.6 (runs ok) from 0.25-1 octave above its optimum": World(wall=(0.25, 1.0)),
    "artefact: the probe's optimum 0.4 octave above 2e-3, its runs failing from 0.05 above it": World(
        optima=None, artefact="cliff"),
    "artefact-wall: as artefact, its loss jumping instead (runs ok)": World(optima=None, artefact="wall"),
}
"""The null worlds: every arm's best stable loss equal (every effect 0 at the optima), the failure-prone arm included."""


def power_world(k: float, seeds: int, baseline_seeds: int, slow: float | None = None) -> World:
    """Optima on grid lrs (near-optimal picks), cliffs 1-1.5 octaves above: the probe better by `k` of its SEs at
    `seeds` per arm and `baseline_seeds` (its lag's share included); `slow`: the slow-seed probability, else World's."""
    base = World(optima=None) if slow is None else World(optima=None, slow=slow)
    return replace(base, effect=-k * base.probe_se(seeds, baseline_seeds))
