"""Simulated tuned 2x2 studies on planted asymmetric lr curves: the calibration of the refining tuner against the grid.

Owns the simulation behind `benchmarks/refine_calibration.py` and `tests/simulations/test_refine_sim.py` (issue 28,
point 4). A study is the `tuned` reference study's design: activation (gelu, relu) x tying (tied,
untied), each cell with a true loss curve in u = log2(lr / lr*) (`Curve`): a quadratic steeper on the
low-lr side (right-side curvature log-uniform in `World.curvature`, the left side `skew` times it;
optima log-uniform over `World.optima`), optionally diverging `diverge` octaves above the optimum, or
with a stability cliff (`World.cliff`): past it a run fails with a probability rising linearly to 1 over
`cliff_width` octaves: it blew up after learning (status `unstable`) or collapsed, and either way did not
train (an infinite loss to the tuner: `gptlab.statuses.judge` decides that from the run's own curve, its
confusion table is `calibration.failure_sim`'s; no loss is a cut here).
Selection runs are the curve plus independent noise (`World.run_sd`); each is a fixed draw per (cell,
half-step, replicate), shared by every tuner of the study (common random numbers: paired comparisons).
The tuners, each picking every cell's lr from selection runs alone (`Tuner`):

- `grid`: the `tune.space` grid (5e-4 .. 8e-3, factor 2) at `seeds` seeds, picked by `stats.picks`;
- `refine`: `stats.refine.decide_all` (or a variant) on all cells, one round of additions at a time,
  from the coarse grid at one seed until no cell adds a run, as the sweep's planner calls it;
- `oracle`: each cell's half-step with the lowest true loss, with no run (the lattice's floor).

Then `World.seeds` (3) estimation seeds train at each cell's pick: the curve at the pick plus a seed
offset shared by the study's cells (the seed block) and independent noise, `World.run_sd` in all. They
are analysed by the report's `effects.analyse` (main effects, interaction and simple effects, one Holm
family) and scored against truths from the curves alone (`calibration.PlantedTruth` of the cells' true
minimum losses, and of their true losses at the picks). The regret of a pick is its true loss minus the
curve's minimum over every lr, or minus the best tried lr's where no run can fail (`cliff_scores`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from calibration.effects_sim import PlantedTruth, printed_effects
from calibration.tuning_sim import SPACE
from gptlab.stats import refine
from gptlab.stats.calls import BETTER, DEFAULT_MARGIN, WORSE
from gptlab.stats.design import Design
from gptlab.stats.effects import analyse
from gptlab.stats.picks import Trial, pick_rows, picks
from gptlab.stats.refine import Lattice, RefineRule
from gptlab.statuses import COLLAPSED, OK

ACTIVATION, TYING = "model.activation", "model.tying"
CELLS = (("gelu", "tied"), ("gelu", "untied"), ("relu", "tied"), ("relu", "untied"))
DESIGN = Design((ACTIVATION, TYING), {ACTIVATION: ("gelu", "relu"), TYING: ("tied", "untied")},
                {ACTIVATION: "gelu", TYING: "tied"}, CELLS)
LATTICE = Lattice(SPACE)  # half-steps -4 .. 12: 1.25e-4 .. 3.2e-2
GRID_RUNS = len(SPACE)  # today's selection runs per cell: the 5-point grid at one seed


@dataclass(frozen=True)
class Curve:
    """One cell's true loss against lr: a quadratic in log2(lr / best_lr), steeper below the optimum."""

    best_loss: float  # the minimum over every lr (nats/char)
    best_lr: float
    curvature: float  # loss per squared octave above the optimum
    skew: float = 2.0  # the low-lr side's curvature over `curvature`
    diverge: float = math.inf  # octaves above best_lr beyond which a run diverges (an infinite loss)
    cliff: float = math.inf  # octaves above best_lr where runs start to fail (a stability cliff)
    cliff_width: float = 1.0  # octaves over which the failure probability rises from 0 to 1

    def failure(self, lr: float) -> float:
        """The probability that a run at `lr` fails (lands stuck or collapses)."""
        return min(max((math.log2(lr / self.best_lr) - self.cliff) / self.cliff_width, 0.0), 1.0)

    def loss(self, lr: float) -> float:
        u = math.log2(lr / self.best_lr)
        if u > self.diverge:
            return math.inf
        return self.best_loss + self.curvature * (self.skew if u < 0 else 1.0) * u * u


@dataclass(frozen=True)
class World:
    """How a simulated study's four cells and its runs are drawn."""

    effect: float = 0.0  # relu's best loss minus gelu's (the planted activation main effect, nats/char)
    shared_optima: bool = False  # one optimum per study for every cell (else one per cell)
    optima: tuple[float, float] = (1.5e-3, 6e-3)  # log-uniform range of the optima
    curvature: tuple[float, float] = (0.013, 0.025)  # log-uniform range of the above-optimum curvature
    skew: float = 2.0  # low side 0.026 .. 0.05 at the default: the shipped study's curves
    diverge: float = math.inf  # octaves above the optimum where runs diverge
    cliff: tuple[float, float] | None = None  # uniform range of each cell's cliff, octaves above its optimum
    cliff_width: float = 1.0  # octaves over which a run's failure probability rises from 0 to 1
    best_loss: float = 1.73  # gelu's best loss
    run_sd: float = 0.006  # SD of one run's loss (selection and estimation alike)
    seed_share: float = 0.36  # estimation: the share of the run variance that a seed shifts every cell by
    seeds: int = 3  # estimation seeds per cell

    def draw(self, rng: np.random.Generator) -> tuple[Curve, ...]:
        lo, hi = (math.log(v) for v in self.optima)
        shared = math.exp(rng.uniform(lo, hi))
        out = []
        for act, _ in CELLS:
            lr = shared if self.shared_optima else math.exp(rng.uniform(lo, hi))
            k = math.exp(rng.uniform(*(math.log(v) for v in self.curvature)))
            out.append(Curve(self.best_loss + (self.effect if act == "relu" else 0.0), lr, k, self.skew, self.diverge))
        cliffs = [] if self.cliff is None else rng.uniform(*self.cliff, len(out))  # last: other worlds keep their draws
        return tuple(replace(c, cliff=x, cliff_width=self.cliff_width) for c, x in zip(out, cliffs)) or tuple(out)


DecideAll = Callable[[Sequence[refine.Observations], Lattice, RefineRule], tuple[list[refine.CellDecision], float, int]]


@dataclass(frozen=True)
class Tuner:
    """A way to pick each cell's lr: the grid at `seeds` seeds, or refine under `rule` (with `decide_all`)."""

    name: str
    seeds: int = 1  # grid: selection seeds per lr
    rule: RefineRule | None = None  # refine's settings; None: the grid
    decide_all: DecideAll = field(default=refine.decide_all, compare=False)
    oracle: bool = False  # instead: the lattice's lr with the lowest true loss, with no run (the lattice's floor)


TUNERS = (Tuner("grid, 1 seed"), Tuner("grid, 2 seeds", seeds=2), Tuner("refine", rule=RefineRule(tolerance=0.001)))


@dataclass(frozen=True)
class Noise:
    """One study's random draws, shared by every tuner: selection runs and estimation runs."""

    selection: np.ndarray  # (cell, half-step - low bound, replicate): SD run_sd
    seed_offsets: np.ndarray  # (estimation seeds,)
    estimation: np.ndarray  # (cell, estimation seeds)
    fail: np.ndarray | None = None  # (cell, half-step - low, replicate): uniform; a run fails below its probability

    @classmethod
    def draw(cls, world: World, rng: np.random.Generator, replicates: int) -> "Noise":
        low, high = LATTICE.bounds
        shape = (len(CELLS), high - low + 1, replicates)
        sel = rng.normal(0.0, world.run_sd, shape)
        seed_sd, est_sd = (world.run_sd * math.sqrt(share) for share in (world.seed_share, 1 - world.seed_share))
        out = cls(sel, rng.normal(0.0, seed_sd, world.seeds), rng.normal(0.0, est_sd, (len(CELLS), world.seeds)))
        if world.cliff is None:
            return out
        return replace(out, fail=rng.uniform(size=shape))

    def failed(self, curve: Curve, cell: int, k: int, replicate: int) -> bool:
        """Whether `cell`'s `replicate`-th run at half-step k fails (beyond its curve's cliff)."""
        return self.fail is not None and self.fail[cell, k - LATTICE.bounds[0], replicate] < curve.failure(LATTICE.value(k))

    def run(self, curve: Curve, cell: int, k: int, replicate: int) -> float:
        """The selection loss of `cell`'s `replicate`-th run at half-step k (inf: it did not train)."""
        if self.failed(curve, cell, k, replicate):
            return math.inf
        return curve.loss(LATTICE.value(k)) + self.selection[cell, k - LATTICE.bounds[0], replicate]


def grid_picks(curves: Sequence[Curve], noise: Noise, seeds: int) -> tuple[list[int], list[int]]:
    """Each cell's picked half-step by `stats.picks` from the coarse grid at `seeds` seeds; runs per cell."""
    key, coarse = "train.lr", LATTICE.coarse()
    trials = [Trial((("cell", c),), ((key, LATTICE.value(k)),), OK if math.isfinite(y) else COLLAPSED, y)
              for c, curve in enumerate(curves) for k in coarse for y in (noise.run(curve, c, k, r) for r in range(seeds))]
    chosen = picks(pick_rows(trials, [(("cell", c),) for c in range(len(curves))],
                             [((key, LATTICE.value(k)),) for k in coarse], {key: [LATTICE.value(k) for k in coarse]}))
    lrs = [dict(chosen[(("cell", c),)].setting)[key] for c in range(len(curves))]
    return [next(k for k in coarse if LATTICE.value(k) == lr) for lr in lrs], [GRID_RUNS * seeds] * len(curves)


def refine_rounds(curves: Sequence[Curve], noise: Noise, rule: RefineRule, decide_all: DecideAll = refine.decide_all
                  ) -> tuple[list[refine.CellDecision], list[dict[int, list[float]]]]:
    """Refine from the coarse grid at one seed, a round of additions for every cell at a time, until none adds:
    each cell's last decision and its runs (half-step -> losses)."""
    obs = [{k: [noise.run(cv, c, k, 0)] for k in LATTICE.coarse()} for c, cv in enumerate(curves)]
    while True:
        decisions, _, _ = decide_all(obs, LATTICE, rule)
        adds = [(c, k) for c, d in enumerate(decisions) for k in d.add]
        if not adds:
            return decisions, obs
        for c, k in adds:
            runs = obs[c].setdefault(k, [])
            runs.append(noise.run(curves[c], c, k, len(runs)))


def refine_picks(curves: Sequence[Curve], noise: Noise, rule: RefineRule, decide_all: DecideAll = refine.decide_all
                 ) -> tuple[list[int | None], list[int], list[str]]:
    """`refine_rounds`' final pick (a half-step), selection runs and the reason it stopped, per cell."""
    decisions, _ = refine_rounds(curves, noise, rule, decide_all)
    return [d.pick for d in decisions], [d.runs for d in decisions], [d.reason for d in decisions]


def cliff_scores(curves: Sequence[Curve], noise: Noise, obs: Sequence[Mapping[int, Sequence[float]]],
                 ks: Sequence[int], windows: Sequence[Sequence[int]]) -> tuple[tuple[float, ...], tuple[bool, ...], ...]:
    """Per cell: the pick's true loss minus the lowest true loss among the tried lrs where no run can fail (or the
    pick), whether a failed run's lr entered the fit (`windows`: its half-steps; the grid's: its pick), whether an lr
    where no run can fail was called beyond the cliff, and whether a run may fail at the pick."""
    rows = []
    for c, (cv, mine, k, window) in enumerate(zip(curves, obs, ks, windows)):
        lr, edge = LATTICE.value(k), refine.cliff(mine, LATTICE.octaves)
        safe = [cv.loss(LATTICE.value(j)) for j in mine if cv.failure(LATTICE.value(j)) == 0]
        rows.append((cv.loss(lr) - min([cv.loss(lr), *safe]),
                     any(noise.failed(cv, c, j, r) for j in window for r in range(len(mine.get(j, ())))),
                     edge is not None and any(j >= edge and cv.failure(LATTICE.value(j)) == 0 for j in mine),
                     cv.failure(lr) > 0))
    return tuple(zip(*rows))


@dataclass(frozen=True)
class StudyOutcome:
    """One tuner on one simulated study."""

    regrets: tuple[float, ...]  # per cell: true loss at the pick minus the curve's minimum
    runs: tuple[int, ...]  # per cell: selection runs
    reasons: tuple[str, ...]  # per cell: why refine stopped ("" for the grid)
    offsets: tuple[int, ...]  # per cell: the pick's half-step minus that of the lattice's lr with the lowest true loss
    covered: tuple[bool, ...]  # per printed effect: the 95% CI contains the contrast of the true minima
    covered_picked: tuple[bool, ...]  # ... the contrast of the true losses at the picks
    false_calls: tuple[bool, ...]  # per printed effect: better/worse although the true effect is 0 or of the other sign
    null: tuple[bool, ...]  # per printed effect: its true value (at the optima) is 0
    main_called: bool  # the activation main effect called better or worse, in the true direction
    regrets_tried: tuple[float, ...] = ()  # per cell: true loss at the pick minus the best tried where none can fail
    cliff_in_fit: tuple[bool, ...] = ()  # per cell: a failed run's lr in the final fit (grid: at the pick)
    wrongly_cut: tuple[bool, ...] = ()  # per cell: an lr where no run can fail called beyond the cliff
    may_fail: tuple[bool, ...] = ()  # per cell: a run at the pick may fail


def _label(factor: str, level: str) -> str:
    return f"{factor}={level}"


def _score(curves: Sequence[Curve], lrs: Sequence[float], noise: Noise) -> tuple:
    """The report's analysis of the estimation runs at `lrs`, scored against the planted truths."""
    at = [cv.loss(lr) for cv, lr in zip(curves, lrs)]
    y = (np.array(at)[:, None] + noise.seed_offsets[None, :] + noise.estimation).ravel()
    seeds = noise.seed_offsets.size
    a = analyse(y, [c for c in CELLS for _ in range(seeds)], np.tile(np.arange(seeds), len(CELLS)), DESIGN, _label,
                DEFAULT_MARGIN)
    best, picked = PlantedTruth(DESIGN, [cv.best_loss for cv in curves]), PlantedTruth(DESIGN, at)
    covered, covered_picked, false, null, main = [], [], [], [], False
    for key, row in printed_effects(a):
        t, call = best(key), row["call"]
        covered.append(bool(row["ci_low"] <= t <= row["ci_high"]))
        covered_picked.append(bool(row["ci_low"] <= picked(key) <= row["ci_high"]))
        sign = -1 if call == BETTER else 1 if call == WORSE else 0
        null.append(abs(t) < 1e-12)
        false.append(sign != 0 and (null[-1] or sign * t < 0))
        if key == ("term", _label(ACTIVATION, "relu")):
            main = sign != 0 and sign * t > 0
    return tuple(covered), tuple(covered_picked), tuple(false), tuple(null), main


def simulate(world: World, studies: int, tuners: Sequence[Tuner] = TUNERS, rng_seed: int = 0
             ) -> dict[str, list[StudyOutcome]]:
    """`studies` simulated studies of `world`, each answered by every tuner on the same draws."""
    rng = np.random.default_rng(rng_seed)
    replicates = max([t.seeds for t in tuners] + [t.rule.max_runs_per_cell for t in tuners if t.rule])
    out: dict[str, list[StudyOutcome]] = {t.name: [] for t in tuners}
    for _ in range(studies):
        curves = world.draw(rng)
        noise = Noise.draw(world, rng, replicates)
        memo: dict[tuple, tuple] = {}  # tuners with the same picks analyse the same estimation runs
        best = [min(LATTICE.steps(), key=lambda k: cv.loss(LATTICE.value(k))) for cv in curves]
        for tuner in tuners:
            if tuner.oracle:
                ks, runs, reasons = best, [0] * len(curves), [""] * len(curves)
                obs, windows = [{k: []} for k in ks], [()] * len(ks)
            elif tuner.rule is None:
                ks, runs = grid_picks(curves, noise, tuner.seeds)
                reasons, windows = [""] * len(ks), [(k,) for k in ks]
                obs = [{k: [noise.run(cv, c, k, r) for r in range(tuner.seeds)] for k in LATTICE.coarse()}
                       for c, cv in enumerate(curves)]
            else:
                decisions, obs = refine_rounds(curves, noise, tuner.rule, tuner.decide_all)
                ks, runs, reasons = [d.pick for d in decisions], [d.runs for d in decisions], [d.reason for d in decisions]
                windows = [d.window for d in decisions]
            lrs = tuple(LATTICE.value(k) for k in ks)
            if lrs not in memo:
                memo[lrs] = _score(curves, lrs, noise)
            regrets = tuple(cv.loss(lr) - cv.best_loss for cv, lr in zip(curves, lrs))
            offsets = tuple(k - b for k, b in zip(ks, best))
            out[tuner.name].append(StudyOutcome(regrets, tuple(runs), tuple(reasons), offsets, *memo[lrs],
                                                *cliff_scores(curves, noise, obs, ks, windows)))
    return out


@dataclass(frozen=True)
class Summary:
    """One tuner over `studies` studies of one world (regrets and runs per cell; coverage per printed CI)."""

    tuner: str
    studies: int
    regret_median: float  # nats/char, over cells x studies
    regret_p90: float
    coverage: float  # 95% CIs (every printed effect) containing the contrast of the true minima
    coverage_picked: float  # ... the contrast of the true losses at the picks (exact by design)
    false_per_study: float  # studies with a false better/worse call among their effects (what Holm bounds at 5%)
    false_per_null_effect: float  # better/worse calls among the truly-zero effects
    power: float  # studies calling the activation main effect in its true direction
    runs_mean: float  # selection runs per cell
    runs_p90: float
    reasons: dict[str, float]  # refine: share of cells by stopping reason
    coverage_se: float  # Monte-Carlo SE of `coverage`, from the studies' shares (a study's CIs are correlated)
    below: float  # cells picked below the lattice's lr with the lowest true loss (a half-step or more)
    above: float  # ... above it
    regret_tried_median: float = math.nan  # against the best tried lr where no run can fail
    regret_tried_p90: float = math.nan
    cliff_in_fit: float = math.nan  # cells whose final fit took a failed run's lr (the grid: picked it)
    wrongly_cut: float = math.nan  # cells with an lr where no run can fail called beyond the cliff
    may_fail: float = math.nan  # cells picked where a run may fail

    @property
    def runs_ratio(self) -> float:
        """Selection runs per cell over today's (the 5-point grid at one seed)."""
        return self.runs_mean / GRID_RUNS

    def rate_se(self, rate: float) -> float:
        """Monte-Carlo SE of a share of the studies."""
        return math.sqrt(max(rate * (1 - rate), 0.0) / self.studies)


def summarise(tuner: str, outcomes: Sequence[StudyOutcome]) -> Summary:
    regrets = np.concatenate([o.regrets for o in outcomes])
    runs = np.concatenate([o.runs for o in outcomes])
    offsets = np.concatenate([o.offsets for o in outcomes])
    nulls = [f for o in outcomes for f, n in zip(o.false_calls, o.null) if n]
    reasons = [r for o in outcomes for r in o.reasons if r]
    tried = np.concatenate([o.regrets_tried for o in outcomes])
    share = lambda name: float(np.mean(np.concatenate([getattr(o, name) for o in outcomes])))  # noqa: E731
    return Summary(
        tuner, len(outcomes), float(np.median(regrets)), float(np.quantile(regrets, 0.9)),
        float(np.mean(np.concatenate([o.covered for o in outcomes]))),
        float(np.mean(np.concatenate([o.covered_picked for o in outcomes]))),
        float(np.mean([any(o.false_calls) for o in outcomes])), float(np.mean(nulls)) if nulls else math.nan,
        float(np.mean([o.main_called for o in outcomes])), float(runs.mean()), float(np.quantile(runs, 0.9)),
        {r: reasons.count(r) / len(reasons) for r in sorted(set(reasons))},
        float(np.std([np.mean(o.covered) for o in outcomes], ddof=1) / math.sqrt(len(outcomes)))
        if len(outcomes) > 1 else math.nan, float(np.mean(offsets < 0)), float(np.mean(offsets > 0)),
        float(np.median(tried)), float(np.quantile(tried, 0.9)), share("cliff_in_fit"), share("wrongly_cut"),
        share("may_fail"))


def run(world: World, studies: int, tuners: Sequence[Tuner] = TUNERS, rng_seed: int = 0) -> list[Summary]:
    """`simulate` then `summarise`: one summary per tuner."""
    return [summarise(name, outs) for name, outs in simulate(world, studies, tuners, rng_seed).items()]


WORLDS: dict[str, World] = {
    "a: best losses equal, optima per cell": World(),
    "a': best losses equal, one optimum per study": World(shared_optima=True),
    "b: relu better by 0.01, optima per cell": World(effect=-0.01),
    "b': relu better by 0.01, one optimum per study": World(effect=-0.01, shared_optima=True),
}
CLIFF_WORLDS: dict[str, World] = {"c: a stability cliff 0.5-1.5 octaves above each optimum": World(cliff=(0.5, 1.5)),
                                   "c': a cliff 0-0.5 octaves above each optimum, failures certain 0.5 beyond":
                                   World(cliff=(0.0, 0.5), cliff_width=0.5)}  # world (a) with a stability cliff
