"""Calibration of the tuning check: false certification where the picks make the effect, and power where they do not.

    python benchmarks/robustness_calibration.py [--sims 100] [--seed 0] [--worlds a a' b b' c] [--power 2 3 5]

Part 1, for each world of `calibration.robustness_sim.WORLDS` named by `--worlds` (their first word;
the `tuned` study's 2x2 with `calibration.refine_sim`'s planted lr curves: (a) best losses equal, (a') the
same with relu's optima always between two grid lrs, (b) relu better by more than the margin, (b')
by 0.012 with relu's picks always missing, (c) relu worse by less than the margin) and each setup
(the grid 5e-4 .. 8e-3 at 1 or 2 selection seeds; 3 or 5 estimation seeds at the picks): studies
with a false better/worse call at the picks, after the check (`call`) and after the rule it replaced
(each cell's 95% upper end added to the test, on the same curves); studies with a false equivalent
call; true calls per printed effect; each cell's L^hi (unbounded, covering the true loss left, median).

Part 2, power: for each k of `--power`, `robustness_sim.power_world(k, n)` (every optimum on a grid lr:
near-optimal picks; relu better by k of the main effect's SEs at n estimation seeds) at n = 3 and 5 and
1 or 2 selection seeds: the share of studies whose relu main effect is called better at the picks (an
`equivalent` call, true for effects inside the margin, does not count), certified by the check, and by
the rule it replaced; and studies with a false better/worse call.
Deterministic for a given --seed.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.robustness_sim import SETUPS, WORLDS, Setup, Summary, power_world, run  # noqa: E402


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.3f}"


def _validity_row(world: str, s: Summary) -> str:
    return (f"| {world} | {s.setup.selection_seeds} | {s.setup.estimation_seeds} | "
            f"{_pct(s.false_dir_picks)} -> **{_pct(s.false_dir)}** ({_pct(s.false_dir_sum)}) | "
            f"{_pct(s.false_eq_picks)} -> **{_pct(s.false_eq)}** | "
            f"{_pct(s.true_picks)} -> {_pct(s.true_checked)} ({_pct(s.true_sum)}) | "
            f"{_pct(s.unbounded)} | {_pct(s.high_covers)} | {s.high_median:.4f} | {s.loss_left:.4f} |")


def _power_row(k: float, s: Summary) -> str:
    return (f"| {k:g} | {s.setup.selection_seeds} | {s.setup.estimation_seeds} | {_pct(s.main_called_picks)} | "
            f"**{_pct(s.main_certified)}** | {_pct(s.main_certified_sum)} | {_pct(s.false_dir)} | "
            f"{_pct(s.unbounded)} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sims", type=int, default=100, help="simulated studies per world (every setup on the same ones)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--worlds", nargs="*", default=["a", "a'"], help="first words of the worlds of part 1")
    p.add_argument("--power", nargs="*", type=float, default=[2.0, 3.0, 5.0], help="effects (SEs) of part 2")
    args = p.parse_args()
    if args.sims < 2:
        p.error(f"--sims must be >= 2, got {args.sims}")
    worlds = {name: w for name, w in WORLDS.items() if name.split(":")[0] in args.worlds}  # none: part 2 alone
    if len(worlds) != len(args.worlds):
        p.error(f"--worlds: pick among {[n.split(':')[0] for n in WORLDS]}")
    start = time.perf_counter()
    print(f"{args.sims} studies per row; MC SE of a per-study share p: sqrt(p(1-p)/{args.sims}) "
          f"(<= {math.sqrt(0.25 / args.sims):.3f}; {math.sqrt(0.05 * 0.95 / args.sims):.3f} at 0.05)\n")
    print("| world | selection seeds | estimation seeds | false better/worse (studies): at picks -> checked (rule "
          "replaced) | false equivalent: at picks -> checked | true calls (per effect): at picks -> checked (rule "
          "replaced) | L^hi unbounded (cells) | L^hi >= true L | median finite L^hi | true L (mean) |")
    print("|" + "---|" * 10)
    worst = 0.0
    for name, world in worlds.items():  # a world's draws depend on its place in WORLDS, not on the others run
        for s in run(world, args.sims, SETUPS, rng_seed=args.seed + 1000 * list(WORLDS).index(name)):
            print(_validity_row(name.split(":")[0], s), flush=True)
            worst = max(worst, s.false_dir, s.false_eq)
    print("\n| effect (SEs) | selection seeds | estimation seeds | relu better at the picks | certified by the check | "
          "by the rule replaced | false better/worse (studies) | L^hi unbounded (cells) |")
    print("|" + "---|" * 8)
    powers = []
    for j, k in enumerate(args.power):
        for n in (3, 5):
            for s in run(power_world(k, n), args.sims, tuple(Setup(sel, n) for sel in (1, 2)),
                         rng_seed=args.seed + 7919 * (j + 1) + n):
                print(_power_row(k, s), flush=True)
                worst = max(worst, s.false_dir)
                powers.append((k, s.main_certified))
    se = math.sqrt(0.05 * 0.95 / args.sims)
    print(f"\nfalse calls after the check (studies, worst row): {worst:.3f} "
          f"(target: at most 0.05: {'met' if worst <= 0.05 + 2 * se else 'NOT met'})")
    for k in sorted({k for k, _ in powers}):
        mine = [x for kk, x in powers if kk == k]
        print(f"power at {k:g} SE: {min(mine):.3f} .. {max(mine):.3f}")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
