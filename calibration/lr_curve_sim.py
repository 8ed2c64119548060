"""Simulated selection runs on planted loss-against-lr curves: how often `lr_curves`' 95% CIs cover the truth.

Owns the check behind `benchmarks/lr_curve_calibration.py` and `tests/stats/test_lr_curves.py`. Each
simulated sweep has `cells` cells; each cell a planted curve in d = log2(lr / optimum),
    loss = best + c d^2 exp(asymmetry d),
with c drawn uniformly from `curvature` (nats per octave^2, `lr_curves`' curvature at the optimum),
the optimum uniformly over the grid's log2 span `inset` octaves inside its ends, and the bend a
(the high-lr side steeper when a > 0; a parabola when 0) from N(asymmetry, asymmetry_sd^2). Selection runs: `seeds`
per lr of the grid (factor 2,
five lrs, as the `tuned` study's), each loss + N(0, noise_sd^2) + its seed's offset N(0, seed_sd^2)
(shared by every run of the seed, as the lab's batch order is). With `midpoints`, refine's second
round: the geometric midpoints on both sides of each cell's pick, and one grid step beyond a pick on
the edge, at the same seeds. The pick is then `stats.picks`' rule over every lr, and
`estimation_seeds` fresh seeds at it are the replicates that inform the noise, as a tuned sweep's
estimation runs do. The truths come from the planted curves alone: the optimum, and the loss left =
the curve at the pick minus its minimum. With `cliff`, a stability cliff: from that many octaves above
each optimum (uniform over the range) a run fails with a probability rising linearly to 1 over
`cliff_width` octaves: it blew up after learning, 0.3-0.9 above the best loss (status unstable, as the
status rule judges such a curve) or, half of them, at the unigram loss (status collapsed); the pick is
then `stats.picks`' (its cliff rule). Deterministic for a given RNG seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gptlab.stats.lr_curves import ASYMMETRY, NOT_CONVEX, UNBOUNDED, CurveFit, fit_curves
from gptlab.stats.lr_model import beyond, cliff_edge
from gptlab.statuses import COLLAPSED, OK, UNSTABLE

GRID = (5e-4, 1e-3, 2e-3, 4e-3, 8e-3)  # the `tuned` study's space
BENT = 0.25  # the RMS bend of results/tuned's four curves
# The benchmark's rows (benchmarks/lr_curve_calibration.py): parabolas and curves bent as the real ones, on the
# five-lr grid and with refine's midpoints, with one and two selection seeds; then two stress rows.
SCENARIOS: dict[str, "CurveScenario"] = {}


@dataclass(frozen=True)
class CurveScenario:
    """What one simulated sweep plants and samples."""

    seeds: int = 1  # selection seeds per lr
    midpoints: bool = False  # refine's half-step midpoints around each pick (and an edge extension)
    asymmetry: float = 0.0  # a of the planted exp(a d): 0 a parabola, > 0 steeper at high lr
    asymmetry_sd: float = 0.0  # each cell's a drawn from N(asymmetry, asymmetry_sd^2)
    curvature: tuple[float, float] = (0.013, 0.05)  # range of c, nats per octave^2
    noise_sd: float = 0.006  # SD of one run's loss about its cell's curve
    seed_sd: float = 0.0  # SD of an offset shared by every run of a seed
    cells: int = 4  # cells per sweep (they pool their noise)
    estimation_seeds: int = 3  # replicates at each cell's pick
    inset: float = 0.5  # octaves between the grid's ends and the range of planted optima
    grid: tuple[float, ...] = GRID  # the lrs of the first round, ascending, factor-spaced
    cliff: tuple[float, float] | None = None  # octaves above each optimum where runs start to fail (uniform range)
    cliff_width: float = 1.0  # octaves over which a run's failure probability rises from 0 to 1


@dataclass(frozen=True)
class Coverage:
    """How one scenario's CIs did over many simulated cells."""

    scenario: CurveScenario  # what was simulated
    cells: int  # cells simulated
    convex: float  # share of cells with a convex fit (an optimum reported)
    optimum_coverage: float  # of those, share whose optimum 95% set holds the planted optimum
    bounded: float  # of those, share whose optimum CI is a bounded interval
    optimum_coverage_bounded: float  # coverage among the bounded ones
    optimum_width: float  # median width of the bounded ones, octaves
    loss_left_coverage: float  # share of loss-left CIs (convex fits) holding the true loss left
    loss_left_bounded: float  # share of those with a finite upper end
    loss_left_coverage_bounded: float  # coverage among those
    loss_left_width: float  # median width of the finite ones (nats)
    true_loss_left: float  # mean true loss left by the picks (nats)
    noise_df: float  # mean pooled df per sweep
    cut: float = math.nan  # share of cells with an lr where no run can fail called beyond the cliff
    failed_in_fit: float = math.nan  # share of cells whose fit took a failed run's lr

    def se(self, p: float, n: float) -> float:
        """Monte-Carlo SE of a share p of n."""
        return math.sqrt(max(p * (1 - p), 1e-12) / max(n, 1))


def _truth(x: np.ndarray, opt: float, best: float, c: float, a: float) -> np.ndarray:
    d = np.asarray(x, dtype=float) - opt
    return best + c * d * d * np.exp(a * d)


def _pick(frame: pd.DataFrame) -> float:
    """The lowest mean of the runs that trained, on the trained side of the cliff (`stats.lr_model`)."""
    edge = cliff_edge(zip(frame["x"], frame["loss"], frame["status"] == OK))
    means = frame[(frame["status"] == OK) & ~beyond(frame["x"].to_numpy(float), edge)].groupby("x")["loss"].mean()
    return float(means.idxmin())


def simulate_sweep(sc: CurveScenario, rng: np.random.Generator, prior: float = ASYMMETRY) -> list[dict]:
    """One sweep: per cell, the fit's CIs (bend prior SD `prior`) against the planted truth (one dict per cell)."""
    grid = np.log2(np.asarray(sc.grid, dtype=float))
    step = float(np.median(np.diff(grid)))
    offsets = rng.normal(0, sc.seed_sd, sc.seeds + sc.estimation_seeds) if sc.seed_sd else \
        np.zeros(sc.seeds + sc.estimation_seeds)
    planted = [(rng.uniform(grid[0] + sc.inset, grid[-1] - sc.inset), rng.uniform(1.7, 1.8),
                rng.uniform(*sc.curvature), sc.asymmetry + sc.asymmetry_sd * rng.standard_normal())
               for _ in range(sc.cells)]
    cliffs = rng.uniform(*sc.cliff, sc.cells) if sc.cliff else np.full(sc.cells, np.inf)
    rows, reps, truths, safe = [], [], {}, {}
    for cell, (opt, best, c, a) in enumerate(planted):
        fails = lambda x: min(max((x - opt - cliffs[cell]) / sc.cliff_width, 0.0), 1.0)  # noqa: E731

        def run(x: float, s: int) -> dict:
            row = {"cell": cell, "x": x, "seed": s, "loss": float(_truth(x, opt, best, c, a) + offsets[s]
                                                                  + rng.normal(0, sc.noise_sd)), "status": OK}
            if sc.cliff and rng.uniform() < fails(x):  # drawn only with a cliff: the other scenarios keep theirs
                stuck = rng.uniform() < 0.5
                row.update(loss=best + rng.uniform(0.3, 0.9) if stuck else 3.33, status=UNSTABLE if stuck else COLLAPSED)
            return row

        def sample(xs: np.ndarray, seeds: range) -> list[dict]:
            return [run(x, s) for x in xs for s in seeds]
        mine = sample(grid, range(sc.seeds))
        if sc.midpoints:
            pick = _pick(pd.DataFrame(mine))
            extra = [pick - step / 2, pick + step / 2]
            if pick in (grid[0], grid[-1]):
                extra += [pick - step] if pick == grid[0] else [pick + step]
            mine += sample(np.array(extra), range(sc.seeds))
        pick = _pick(pd.DataFrame(mine))
        reps += sample(np.array([pick]), range(sc.seeds, sc.seeds + sc.estimation_seeds))
        rows += mine
        truths[cell] = (opt, float(_truth(pick, opt, best, c, a) - best))
        frame = pd.DataFrame(mine)
        edge = cliff_edge(zip(frame["x"], frame["loss"], frame["status"] == OK))
        safe[cell] = (any(beyond(x, edge) and fails(x) == 0 for x in frame["x"]),
                      {x for x, y in zip(frame["x"], frame["loss"]) if y > _truth(x, opt, best, c, a) + 0.25})
    runs = pd.DataFrame(rows).assign(lr=lambda f: 2.0 ** f["x"])
    replicates = pd.DataFrame(reps).assign(lr=lambda f: 2.0 ** f["x"])
    curves = fit_curves(runs[["cell", "lr", "loss", "status"]], step=step,
                        replicates=replicates[["cell", "lr", "loss", "status"]], asymmetry=prior)
    return [_scored(fit, *truths[fit.cell], *safe[fit.cell], curves.noise.df) for fit in curves.fits]


def _scored(fit: CurveFit, opt: float, left: float, cut: bool, failed: set[float], df: float) -> dict:
    """One cell's fit scored against its planted truth: the optimum `opt` (log2 lr) and the loss left at its pick
    `left`. `cut`: an lr whose runs never fail was read as beyond the cliff; `failed`: the log2 lrs with a run far
    above the truth (a failure), counted when one lies in the fit's window; `df`: the pooled noise's."""
    convex = NOT_CONVEX not in fit.flags and math.isfinite(fit.curvature)
    return {"convex": convex, "covers": fit.covers_optimum(2.0 ** opt) if convex else math.nan,
            "bounded": UNBOUNDED not in fit.flags if convex else math.nan,
            "width": math.log2(fit.optimum_lr_high / fit.optimum_lr_low)
            if convex and UNBOUNDED not in fit.flags and fit.optimum_lr_low > 0 else math.nan,
            "left_covers": (fit.loss_left_ci_low - 1e-9 <= left <= fit.loss_left_ci_high + 1e-9)
            if math.isfinite(fit.loss_left_ci_low) else math.nan,
            "left_bounded": math.isfinite(fit.loss_left_ci_high) if math.isfinite(fit.loss_left_ci_low)
            else math.nan,
            "left_width": fit.loss_left_ci_high - fit.loss_left_ci_low
            if math.isfinite(fit.loss_left_ci_high) else math.nan,
            "true_left": left, "df": df, "cut": cut,
            "failed_in_fit": any(fit.window_lr_low * (1 - 1e-9) <= 2.0 ** x <= fit.window_lr_high * (1 + 1e-9)
                                 for x in failed) if fit.n_points else False}


def calibrate_curves(sc: CurveScenario, sims: int, seed: int = 0, prior: float = ASYMMETRY) -> Coverage:
    """`sims` simulated sweeps of scenario `sc`, fitted with the bend prior SD `prior`, scored against the truths."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame([row for _ in range(sims) for row in simulate_sweep(sc, rng, prior)])
    convex = df[df["convex"]]
    bounded = convex[convex["bounded"].astype(bool)]
    left = df[df["left_covers"].notna()]
    mean = lambda s: float(s.astype(float).mean()) if len(s) else math.nan  # noqa: E731
    return Coverage(sc, len(df), mean(df["convex"]), mean(convex["covers"]), mean(convex["bounded"]),
                    mean(bounded["covers"]), float(bounded["width"].median()) if len(bounded) else math.nan,
                    mean(left["left_covers"]), mean(left["left_bounded"]),
                    mean(left.loc[left["left_bounded"].astype(bool), "left_covers"]),
                    float(left["left_width"].median()) if left["left_width"].notna().any() else math.nan,
                    mean(df["true_left"]), float(df["df"].mean()), mean(df["cut"]), mean(df["failed_in_fit"]))


for _bend in (0.0, BENT):
    for _mid in (False, True):
        for _seeds in (1, 2):
            SCENARIOS[f"{'bent, a ~ N(0, 0.25^2)' if _bend else 'parabola'}, {_seeds} seed(s)"
                      f"{', + midpoints' if _mid else ''}"] = CurveScenario(_seeds, _mid, asymmetry_sd=_bend)
SCENARIOS["bent beyond the prior, a = 0.5, 1 seed"] = CurveScenario(asymmetry=0.5)
SCENARIOS["bent, seed offsets (run SD 0.0065, seed SD 0.005), 1 seed"] = CurveScenario(
    asymmetry_sd=BENT, noise_sd=0.0065, seed_sd=0.005)
for _near, _width, _text in (((0.5, 1.5), 1.0, "0.5-1.5"), ((0.0, 0.5), 0.5, "0-0.5")):
    SCENARIOS[f"bent, a stability cliff {_text} octaves above the optimum, 1 seed + midpoints"] = CurveScenario(
        midpoints=True, asymmetry_sd=BENT, cliff=_near, cliff_width=_width)
