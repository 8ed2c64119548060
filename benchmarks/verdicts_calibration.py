"""Calibration of a tuned arms study's verdicts in worlds with stability cliffs, slow seeds and failure-prone arms.

    python benchmarks/verdicts_calibration.py [--sims 300] [--seed 0] [--worlds cliff wall artefact artefact-wall]
                                              [--power 2 3 5] [--slow P]

Each study (`calibration.verdicts_sim`, worlds `calibration.cliff_worlds.WORLDS`): a baseline and three arms (the
probe, a plain arm, a failure-prone arm failing 10% of its runs below its cliff), tuned by refine's rounds
(`stats.refine.decide_all`) on 5e-4 .. 8e-3, then 3 or 5 estimation seeds per arm at each pick (the baseline 5 or 9),
and the report's chain: `lr_curves.fit_curves` on every run of each arm, the arms table's effect among the runs
that trained with the tuning check, its failure count and its effect counting every run.

Part 1, for each null world of `--worlds` (every effect 0 at the optima): studies with a false better/worse call at
the picks, and certified by the check (`tuning` robust: false certification; goal <= 0.05), also against the best
stable half-steps; the calls at the picks a cell without a bound left unchecked; each cell's L^hi.
Part 2, power: for each k of `--power`, `cliff_worlds.power_world(k, ...)` (optima on grid lrs, the probe better by
k of its SEs at the setup's seeds): the probe called better at the picks, certified (goal >= 0.90 at 5 SE).
Part 3, for every world run: where each cell's L^hi comes from (its curve's CI, the bound against the lrs tried) or
why it has none, and how often the bound against the lrs tried covers the true loss left; then the coverage (goal
0.93 .. 0.97) of every arm's three intervals: its effect among the runs that trained (truth: E[trained run] at its
pick minus the baseline's), its effect counting every run (truth: E[run counted as the table counts it] at its pick
minus the baseline's), its failure rate at its pick (truth: the failure probability there). `--slow 0`: every
world without slow seeds (the same draws otherwise), a control. Deterministic for a given --seed.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.cliff_worlds import WORLDS, power_world  # noqa: E402
from calibration.verdicts_sim import COMPARED, SETUPS, Summary, run  # noqa: E402

ROLES = "probe / plain / failure-prone"
BOUNDS = ("curve", "tried", "not convex", "beyond the search", "too few points", "no loss left", "unbounded")


def _f(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.3f}"


def _seeds(s: Summary) -> str:
    return f"{s.setup.seeds} / {s.setup.baseline_seeds}"


def _false_row(world: str, s: Summary) -> str:
    return (f"| {world} | {_seeds(s)} | {_f(s.false_picks)} -> **{_f(s.false_checked)}** | {_f(s.false_lattice)} | "
            f"{_f(s.not_checked)} | {_f(s.high_covers)} | {s.high_median:.4f} / {s.left_mean:.4f} | {_f(s.unbounded)} | "
            f"{_f(s.on_ramp)} | {s.runs:.2f} |")


def _power_row(k: float, se: float, s: Summary) -> str:
    return (f"| {k:g} | {se:.4f} | {_seeds(s)} | {_f(s.probe_picks)} | **{_f(s.probe_certified)}** | "
            f"{_f(s.probe_lost[0])} / {_f(s.probe_lost[1])} | {_f(s.false_checked)} | {_f(s.high_covers)} | "
            f"{s.high_median:.4f} / {s.left_mean:.4f} |")


def _coverage_row(world: str, s: Summary) -> str:
    cells = [" / ".join(_f(s.covered[a][i]) for a in COMPARED) for i in range(3)]
    return (f"| {world} | {_seeds(s)} | {cells[0]} | {cells[1]} | {cells[2]} | {_f(s.prone_failed)} | "
            f"{_f(min(s.estimable.values()))} |")


def _null_worlds(worlds: dict, sims: int, seed: int) -> list[tuple[str, Summary]]:
    print("| world | seeds (arm / baseline) | false better/worse (studies): at picks -> certified | certified, false "
          "against the best stable half-steps | calls at picks not checked | L^hi >= true L (cells) | median finite L^hi "
          "/ mean true L | L^hi unbounded or none (cells) | picks where failures rise (cells) | selection runs per cell |")
    print("|" + "---|" * 10)
    out = []
    for name, world in worlds.items():  # a world's draws depend on its place in WORLDS, not on the others run
        for s in run(world, sims, SETUPS, rng_seed=seed + 1000 * list(WORLDS).index(name)):
            print(_false_row(name.split(":")[0], s), flush=True)
            out.append((name.split(":")[0], s))
    return out


def _power(ks: list[float], sims: int, seed: int, slow: float | None) -> list[tuple[str, Summary]]:
    print("\n| effect (SEs) | SE (nats) | seeds (arm / baseline) | probe called better at the picks | certified | "
          "of its calls at the picks: depends / not checked | false certification (studies) | L^hi >= true L (cells) | "
          "median finite L^hi / mean true L |")
    print("|" + "---|" * 9)
    out = []
    for j, k in enumerate(ks):
        for i, setup in enumerate(SETUPS):
            world = power_world(k, setup.seeds, setup.baseline_seeds, slow)
            s, = run(world, sims, (setup,), rng_seed=seed + 7919 * (j + 1) + i)
            print(_power_row(k, -world.effect / k, s), flush=True)
            out.append((f"power, {k:g} SE", s))
    return out


def _bounds_and_coverage(summaries: list[tuple[str, Summary]]) -> None:
    print("\n| world | seeds (arm / baseline) | " + " | ".join(BOUNDS) + " | bounds against the lrs tried >= true L |")
    print("|" + "---|" * (len(BOUNDS) + 3))
    for name, s in summaries:
        print(f"| {name} | {_seeds(s)} | " + " | ".join(_f(s.bounds.get(k, 0.0)) for k in BOUNDS) +
              f" | {_f(s.tried_covers)} |")
    print(f"\n| world | seeds (arm / baseline) | trained: {ROLES} | every run: {ROLES} | failure rate: {ROLES} | "
          "failure-prone arm with a failed run at its pick | least estimable share |")
    print("|" + "---|" * 7)
    for name, s in summaries:
        print(_coverage_row(name, s))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sims", type=int, default=300, help="simulated studies per world (every setup on the same ones)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--worlds", nargs="*", default=[n.split(":")[0] for n in WORLDS], help="first words of the null worlds")
    p.add_argument("--power", nargs="*", type=float, default=[2.0, 3.0, 5.0], help="the probe's effects (SEs), part 2")
    p.add_argument("--slow", type=float, default=None, help="every world's slow-seed probability instead of its own "
                   "(0: a control without slow seeds)")
    args = p.parse_args()
    if args.sims < 2:
        p.error(f"--sims must be >= 2, got {args.sims}")
    worlds = {n: w if args.slow is None else dataclasses.replace(w, slow=args.slow) for n, w in WORLDS.items()
              if n.split(":")[0] in args.worlds}
    if len(worlds) != len(args.worlds):
        p.error(f"--worlds: pick among {[n.split(':')[0] for n in WORLDS]}")
    start = time.perf_counter()
    print(f"{args.sims} studies per row; MC SE of a share p: sqrt(p(1-p)/{args.sims}) "
          f"({math.sqrt(0.05 * 0.95 / args.sims):.3f} at 0.05 and 0.95)\n")
    summaries = _null_worlds(worlds, args.sims, args.seed) + _power(args.power, args.sims, args.seed, args.slow)
    _bounds_and_coverage(summaries)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
