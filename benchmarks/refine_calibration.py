"""Calibration of the refining tuner: refine against the grid at one and two seeds, on planted asymmetric lr curves.

    python benchmarks/refine_calibration.py [--studies 1000] [--seed 0] [--quick | --variants | --cliff]

For each world of `calibration.refine_sim.WORLDS` (which states the model: the `tuned` study's 2x2,
activation x tying; per cell a loss curve steeper below its optimum, optima log-uniform over 1.5e-3 ..
6e-3, curvature 0.013 .. 0.05 per squared octave; run SD 0.006; three estimation seeds with a seed
block), and for world (a) with symmetric, diverging or flatter curves or 5 estimation seeds, it
simulates `--studies` studies, answers each with every tuner on the same draws, and prints one row per
world and tuner: the pick's regret (median and 90th percentile over cells), the coverage of the 95% CIs
of every printed effect (against the contrast of the true minima, and of the true losses at the
picks), false better/worse calls (studies with one; share of the truly-zero effects), the power on the
activation main effect, the selection runs per cell (mean, 90th percentile, multiple of today's 5) and
the share of picks below and above the lattice's best lr. Then the issue's goals for refine, met or
not. Deterministic for a given --seed.

`--cliff` (issue 39): world (a) and `CLIFF_WORLDS` (a stability cliff 0.5-1.5 or 0-0.5 octaves above each
optimum) under refine as shipped, refine at tolerance 0.001, copies of it without the cliff rule, without
closing curves or without overruling a beaten fit, and the grid: regret against the curve's minimum and
against the best tried lr where no run can fail, runs, how often a failed run's lr entered the final fit,
how often an lr where no run can fail was called beyond the cliff, and picks where a run may fail.
`--quick`: the four main worlds only, with the three main tuners. `--variants`: worlds (a) and (a)
with 5 estimation seeds (the same studies as the main table's rows) under copies of refine's decisions,
each with one thing changed (noise SD known or drawn from its df, window, no quadratic, a cubic, outer
points down-weighted, one half-step, replicates at the window's ends), under stricter rules and smaller
budgets, and the oracle pick of the lattice (the best any picker on it could do): what each changes.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.refine_sim import CLIFF_WORLDS, TUNERS, WORLDS, Summary, Tuner, World, run  # noqa: E402
from gptlab.stats import refine  # noqa: E402
from gptlab.stats.lr_model import NoiseSums, noise_of, replicate_sums  # noqa: E402
from gptlab.stats.refine import CellDecision, Lattice, RefineRule  # noqa: E402

STRICT = Tuner("refine, confidence 0.95, tolerance 0.0005", rule=RefineRule(confidence=0.95, tolerance=0.0005))
EXTRA_TUNERS = (Tuner("refine, confidence 0.9", rule=RefineRule(confidence=0.9, tolerance=0.001)),
                Tuner("refine, tolerance 0.002", rule=RefineRule(tolerance=0.002)))


# --variants: copies of `stats.refine`'s `judge` and `decide` with one thing changed each, to measure what it does
# (stats/refine.py itself is unchanged; with no change the copies decide exactly as it does: a test checks).


def _design(x: np.ndarray, degree: int) -> np.ndarray:
    return np.stack([x ** p for p in range(degree, -1, -1)], axis=1)


def judge_variant(obs, sigma: float, seed: int = 0, *, window: int = refine.WINDOW, smooth: bool = True,
                  df: int | None = None, degree: int = 2, outer: float = 1.0, cliff: bool = True,
                  beaten: bool = True, cell_df: float = math.inf) -> CellDecision:
    """`refine.judge` with another window, without the quadratic, with the noise SD drawn from its df, a cubic
    (`degree` 3, with 4 points or more), the window's outer points down-weighted by `outer`, without the cliff rule
    (`cliff`: every run that trained enters) or without overruling a fit's minimum that a tried point beats."""
    runs, edge = sum(len(v) for v in obs.values()), refine.cliff(obs) if cliff else None
    finite = {k: v for k, v in refine._means(refine.trained_side(obs) if cliff else obs).items() if math.isfinite(v[0])}
    if not finite:
        return CellDecision(reason="no ok run", runs=runs, cliff=edge)
    best = min(sorted(finite), key=lambda k: finite[k][0])
    ks = refine._window(finite, best) if window == refine.WINDOW else \
        sorted(k for k, (m, n) in finite.items() if abs(k - best) <= window and n > 0)
    y, n = np.array([finite[k][0] for k in ks]), np.array([finite[k][1] for k in ks], float)
    x = np.asarray(ks, float) - best
    deg = degree if len(ks) > degree else 2
    w = n * np.where(np.abs(x) > window / 2, outer, 1.0)
    X = _design(x, deg)
    coef = np.linalg.lstsq(X * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0] if smooth and len(ks) >= 3 else None
    convex = coef is not None and coef[-3] > 0  # the quadratic term (at the lowest mean, for a cubic)
    centre = X @ coef if convex else y
    pick, lost = ks[int(np.argmin(centre))], None
    known = math.isfinite(sigma) and sigma > 0
    i, j = ks.index(pick), ks.index(best)
    if beaten and known and y[i] - y[j] > refine.BEATEN * sigma * math.sqrt(1 / n[i] + 1 / n[j]):
        pick, lost, convex, centre = best, pick, False, y
    noise = {"noise_sd": sigma, "noise_df": cell_df}
    if not known:
        return CellDecision(pick=pick, runs=runs, cliff=edge, window=tuple(ks), beaten=lost, **noise)
    rng = np.random.default_rng([seed, len(ks), int(n.sum())])
    scale = sigma if df is None else sigma * np.sqrt(df / rng.chisquare(df, (refine.BOOTSTRAP_DRAWS, 1)))
    draws = centre + rng.standard_normal((refine.BOOTSTRAP_DRAWS, len(ks))) * scale / np.sqrt(n)
    if convex:
        sw = np.sqrt(w)
        draws = (X @ np.linalg.lstsq(X * sw[:, None], (draws * sw).T, rcond=None)[0]).T
    i = ks.index(pick)
    return CellDecision(pick=pick, p_best=float(np.mean(np.argmin(draws, axis=1) == i)),
                        expected_regret=float(np.mean(draws[:, i] - draws.min(axis=1))), runs=runs, cliff=edge,
                        window=tuple(ks), beaten=lost, **noise)


def _every_run_sums(obs) -> NoiseSums:
    """A cell's replicate sums as they were before the cliff rule: every run that trained, whatever its lr."""
    return replicate_sums({k: [v for v in losses if math.isfinite(v)] for k, losses in obs.items()})


def decide_variant(*, one_sided: bool = False, known_sigma: float | None = None, t_sigma: bool = False,
                   window: int = refine.WINDOW, smooth: bool = True, degree: int = 2, outer: float = 1.0,
                   ends: bool = False, cliff: bool = True, close: bool = True, beaten: bool = True):
    """A `decide_all` like `refine.decide_all`, with the one change named."""

    def decide(obs, lattice: Lattice, rule: RefineRule, sigma: float, df: int, seed: int) -> CellDecision:
        means, runs = refine._means(obs), sum(len(v) for v in obs.values())
        edge = refine.cliff(obs, lattice.octaves) if cliff else None
        side = refine.trained_side(obs, lattice.octaves) if cliff else obs
        finite = {k: v for k, v in refine._means(side).items() if math.isfinite(v[0])}
        (low, high), room = lattice.bounds, rule.max_runs_per_cell - runs
        high = high if edge is None else min(high, edge - 1)
        if finite and room > 0:
            best, tried = min(sorted(finite), key=lambda k: finite[k][0]), sorted(means)
            for end, step in ((tried[-1], 2), (tried[0], -2)):
                if best == end and low <= best + step <= high:
                    return CellDecision(add=(best + step,), pick=best, reason="edge", runs=runs, cliff=edge)
            missing = [k for k in (best - 1, best + 1) if low <= k <= high and k not in means]
            if one_sided:  # only while neither half-step is tried: the one towards the lower tried neighbour
                side = {s: min((means[best + s * j][0] for j in (1, 2) if best + s * j in means), default=math.inf)
                        for s in (-1, 1)}
                missing = [] if len(missing) < 2 else [best - 1] if side[-1] < side[1] else [best + 1]
            if missing:
                return CellDecision(add=tuple(missing[:room]), pick=best, reason="refine", runs=runs, cliff=edge)
        v = judge_variant(obs, sigma, seed, window=window, smooth=smooth, df=df if t_sigma and df > 0 else None,
                          degree=degree, outer=outer, cliff=cliff, beaten=beaten, cell_df=df)
        if v.pick is None:
            return v
        if close and room > 0 and math.isfinite(sigma) and sigma > 0:
            add = refine.open_sides(finite, sigma, df, low, high, sorted(means))
            if add:
                return dataclasses.replace(v, add=add[:room], reason="close")
        if v.p_best >= rule.confidence or v.expected_regret <= rule.tolerance:
            return dataclasses.replace(v, reason="confident" if v.p_best >= rule.confidence else "tolerance")
        rival = min((k for k in finite if k != v.pick), key=lambda k: (finite[k][0], k), default=None)
        add = tuple(k for k in (v.pick, rival) if k is not None)
        if ends:  # the window's two ends instead: they fix the fitted slope, so the fitted vertex, the most
            tried = sorted(k for k, (m, n) in finite.items() if abs(k - v.pick) <= window)
            add = (tried[0], tried[-1]) if len(tried) >= 3 else add
        add = add[:max(room, 0)]
        return dataclasses.replace(v, add=add, reason="replicate" if add else "budget")

    def decide_all(cells, lattice: Lattice, rule: RefineRule):
        sums = [refine.noise_sums(obs, lattice.octaves) if cliff else _every_run_sums(obs) for obs in cells]
        pool = sum(sums, NoiseSums())
        out = []
        for i, (obs, own) in enumerate(zip(cells, sums)):
            sd, df, _ = noise_of(own, pool)
            sd, df = (known_sigma, math.inf) if known_sigma is not None else (sd, df)
            out.append(decide(obs, lattice, rule, sd, df, i))
        return out, pool.sd, pool.df

    return decide_all


VARIANT_WORLDS = ("a: best losses equal", "a, 5 estimation seeds")
DEFAULT = RefineRule(tolerance=0.001)  # the rule these variants were measured against
VARIANT_TUNERS = (
    Tuner("refine (stats/refine.py)", rule=DEFAULT),
    Tuner("copy, unchanged", rule=DEFAULT, decide_all=decide_variant()),
    Tuner("copy, noise SD known (0.006)", rule=DEFAULT, decide_all=decide_variant(known_sigma=0.006)),
    Tuner("copy, noise SD drawn from its df", rule=DEFAULT, decide_all=decide_variant(t_sigma=True)),
    Tuner("copy, window 4 half-steps", rule=DEFAULT, decide_all=decide_variant(window=4)),
    Tuner("copy, no quadratic (lowest mean)", rule=DEFAULT, decide_all=decide_variant(smooth=False)),
    Tuner("copy, a cubic (asymmetric curves)", rule=DEFAULT, decide_all=decide_variant(degree=3)),
    Tuner("copy, outer points at half weight", rule=DEFAULT, decide_all=decide_variant(outer=0.5)),
    Tuner("copy, one half-step (the lower side)", rule=DEFAULT, decide_all=decide_variant(one_sided=True)),
    Tuner("copy, replicates at the window's ends", rule=DEFAULT, decide_all=decide_variant(ends=True)),
    Tuner("refine, max_runs_per_cell 8", rule=RefineRule(max_runs_per_cell=8, tolerance=0.001)),
    Tuner("refine, max_runs_per_cell 7 (no replicates)", rule=RefineRule(max_runs_per_cell=7, tolerance=0.001)),
    STRICT,
    Tuner("oracle: the best half-step of the true curve (no runs)", oracle=True),
)


def variants(quick: bool) -> list[tuple[str, World, tuple[Tuner, ...]]]:
    """(label, world, tuners): the four worlds, then (a) with symmetric, diverging or flatter curves, or 5 estimation
    seeds."""
    a, b = (next(w for name, w in WORLDS.items() if name.startswith(x)) for x in ("a:", "b:"))
    out = [(name, world, TUNERS if quick or world not in (a, b) else TUNERS + EXTRA_TUNERS)
           for name, world in WORLDS.items()]
    if quick:
        return out
    return out + [
        ("a, symmetric curves (0.013 .. 0.025 both sides)", dataclasses.replace(a, skew=1.0),
         TUNERS + (EXTRA_TUNERS[1], STRICT)),
        ("a, runs diverge 2 octaves above the optimum", dataclasses.replace(a, diverge=2.0), TUNERS),
        ("a, flatter curves (0.008 .. 0.013, low side x2)", dataclasses.replace(a, curvature=(0.008, 0.013)),
         TUNERS + EXTRA_TUNERS[1:]),
        ("a, 5 estimation seeds (as ablations/tuned_refine.yaml)", dataclasses.replace(a, seeds=5),
         TUNERS + EXTRA_TUNERS[1:])]


CLIFF_TUNERS = (
    TUNERS[0],
    Tuner("refine (stats/refine.py, tolerance 0.002)", rule=RefineRule()),
    Tuner("refine, tolerance 0.001", rule=RefineRule(tolerance=0.001)),
    Tuner("copy, without the cliff rule (every run that trained enters)", rule=RefineRule(),
          decide_all=decide_variant(cliff=False)),
    Tuner("copy, without closing curves", rule=RefineRule(), decide_all=decide_variant(close=False)),
    Tuner("copy, without overruling a beaten fit", rule=RefineRule(), decide_all=decide_variant(beaten=False)),
)


def cliff_row(world: str, s: Summary) -> str:
    reasons = ", ".join(f"{k} {v:.2f}" for k, v in s.reasons.items()) or "-"
    return (f"| {world} | {s.tuner} | {s.regret_median:.4f} | {s.regret_p90:.4f} | {s.regret_tried_median:.4f} | "
            f"{s.regret_tried_p90:.4f} | {s.runs_mean:.2f} | {s.runs_p90:.0f} | {s.cliff_in_fit:.3f} | "
            f"{s.wrongly_cut:.3f} | {s.may_fail:.3f} | {s.coverage:.3f} | {s.false_per_study:.3f} | {reasons} |")


def cliff_table(studies: int, seed: int) -> None:
    """`--cliff`: world (a) and the worlds with a stability cliff, under refine, its copies without each of issue
    39's rules, and the grid."""
    print("| world | tuner | regret median | regret p90 | vs best tried: median | p90 | runs/cell | runs p90 | "
          "failed run's lr in the fit | good lr cut | picks where a run may fail | coverage | false calls: studies | "
          "stopped by |")
    print("|" + "---|" * 14)
    worlds = {"a: best losses equal, optima per cell": WORLDS["a: best losses equal, optima per cell"], **CLIFF_WORLDS}
    verdicts = []
    for i, (name, world) in enumerate(worlds.items()):
        for s in run(world, studies, CLIFF_TUNERS, rng_seed=seed * 100 + 50 + i):
            print(cliff_row(name, s), flush=True)
            if s.tuner.startswith("refine (stats"):
                verdicts.append(f"- {name}: {goals(s, True)}; failed runs in fits {s.cliff_in_fit:.3f}, "
                                f"good lrs cut {s.wrongly_cut:.3f}")
    print("\nGoals for refine:\n" + "\n".join(verdicts))


def row(world: str, s: Summary) -> str:
    reasons = ", ".join(f"{k} {v:.2f}" for k, v in s.reasons.items()) or "-"
    return (f"| {world} | {s.tuner} | {s.regret_median:.4f} | {s.regret_p90:.4f} | {s.coverage:.3f} | "
            f"{s.coverage_picked:.3f} | {s.coverage_se:.3f} | {s.false_per_study:.3f} | "
            f"{s.false_per_null_effect:.3f} | {s.power:.3f} | {s.runs_mean:.2f} | {s.runs_p90:.0f} | "
            f"{s.runs_ratio:.2f}x | {s.below:.3f} / {s.above:.3f} | {reasons} |")


def goals(s: Summary, null: bool) -> str:
    checks = [("median regret <= 0.002", s.regret_median <= 0.002), ("p90 regret <= 0.005", s.regret_p90 <= 0.005),
              ("coverage 93-97%", 0.93 <= s.coverage <= 0.97), ("runs <= 1.5x", s.runs_ratio <= 1.5)]
    if null:
        checks.append(("false calls <= 5% of studies", s.false_per_study <= 0.05))
    return "; ".join(f"{name}: {'met' if ok else 'MISSED'}" for name, ok in checks)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--studies", type=int, default=1000, help="simulated studies per world")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="the four main worlds and the three main tuners only")
    p.add_argument("--cliff", action="store_true", help="instead: world (a) and the worlds with a stability cliff "
                   "under refine and copies without each of its cliff, closing and overruling rules")
    p.add_argument("--variants", action="store_true",
                   help="instead: worlds (a) and (a) with 5 estimation seeds under copies of refine's decisions "
                        "with one thing changed each")
    args = p.parse_args()
    if args.studies < 1:
        p.error(f"--studies must be >= 1, got {args.studies}")
    start = time.perf_counter()
    if args.cliff:
        cliff_table(args.studies, args.seed)
        print(f"\n{time.perf_counter() - start:.0f} s")
        return
    print("| world | tuner | regret median | regret p90 | coverage (true minima) | coverage (at the picks) | "
          "MC SE (coverage) | false calls: studies | false calls: zero effects | power (activation) | runs/cell | "
          "runs p90 | x today | picks below / above the lattice's best | refine stopped by |")
    print("|" + "---|" * 15)
    verdicts = []
    plan = list(enumerate(variants(args.quick and not args.variants)))
    if args.variants:  # the same studies as the main table's rows of these worlds (same simulation seeds)
        plan = [(i, (name, world, VARIANT_TUNERS)) for i, (name, world, _) in plan if name.startswith(VARIANT_WORLDS)]
    for i, (name, world, tuners) in plan:
        for s in run(world, args.studies, tuners, rng_seed=args.seed * 100 + i):
            print(row(name, s), flush=True)
            if s.tuner in ("refine", "refine (stats/refine.py)"):
                verdicts.append(f"- {name}: {goals(s, world.effect == 0)}")
    print(
        "\nGoals for refine (tolerance 0.001, the default when first measured; 0.002 is the default now):\n" + "\n".join(verdicts)
    )
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
