"""Calibration of the tuned protocol: tuned against naive and fixed-lr studies on planted lr curves.

    python benchmarks/tuning_calibration.py [--sims 1000] [--fixed-sims 200] [--seed 0]

For each scenario of `calibration.tuning_sim.SCENARIOS` (which states the model: two arms with
planted loss-against-log2(lr) parabolas, a factor-2 space of five lrs, one selection seed, three
estimation seeds, run noise SD 0.0065 and seed SD 0.005 nats/char), for scenario (d) again with
two selection seeds, and with arm 2 at other curvatures, it simulates `--sims` studies, answers
each with the protocols through the report's own analysis (the fixed-lr protocol, five analyses a
study, only the first `--fixed-sims`), and prints one row per scenario and protocol: the true at-optimum
difference, CI coverage of it and of the true difference at the analysed settings, `better` and
`worse` call rates, the bias of the estimate (against the at-optimum truth and against the truth at
the analysed settings) and of the reported arm losses (optimism), with Monte-Carlo SEs.
Deterministic for a given --seed.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: `calibration` is not installed

from calibration.tuning_sim import FIXED, NAIVE, SCENARIOS, TUNED, ProtocolResult, Scenario, simulate  # noqa: E402


def _row(scenario: str, r: ProtocolResult) -> str:
    proto = r.protocol if r.setting is None else f"fixed lr {r.setting:g}"
    cov_se, call_se = r.coverage_se, r.rate_se(r.better + r.worse)
    return (f"| {scenario} | {proto} | {r.truth:+.3f} | {r.coverage:.3f} | {r.coverage_picked:.3f} | {cov_se:.3f} | "
            f"{r.better:.3f} | {r.worse:.3f} | {call_se:.3f} | {r.bias:+.4f} ({r.bias_se:.4f}) | "
            f"{r.bias_picked:+.4f} ({r.bias_picked_se:.4f}) | {r.optimism:+.4f} ({r.optimism_se:.4f}) | "
            f"{r.half_width:.4f} | {r.picked_optima:.3f} | {r.at_edge:.3f} |")


def variants(fixed: bool) -> list[tuple[str, Scenario, tuple[str, ...]]]:
    """(label, scenario, protocols): the four scenarios, then (d) with two selection seeds and with other curvatures."""
    protocols = (TUNED, NAIVE, FIXED) if fixed else (TUNED, NAIVE)
    out = [(name.split(":")[0], sc, protocols) for name, sc in SCENARIOS.items()]
    d = SCENARIOS[next(name for name in SCENARIOS if name.startswith("d"))]
    out.append(("d, 2 selection seeds", dataclasses.replace(d, tune_seeds=2), (TUNED,)))
    for k in (0.016, 0.004, 0.0):  # how flat arm 2 is: 0.008 in (d), 0.025 in (a)
        curve = dataclasses.replace(d.curves[1], curvature=k)
        out.append((f"d, arm 2 at {k:g}/octave^2", dataclasses.replace(d, curves=(d.curves[0], curve)), (TUNED, NAIVE)))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sims", type=int, default=1000, help="simulated studies per scenario")
    p.add_argument("--fixed-sims", type=int, default=200,
                   help="of those, how many the fixed-lr protocol answers (five analyses each; 0: none)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.sims < 1 or not 0 <= args.fixed_sims <= args.sims:
        p.error(f"--sims must be >= 1 and --fixed-sims between 0 and --sims, got {args.sims} and {args.fixed_sims}")
    start = time.perf_counter()
    print("| scenario | protocol | true at-optimum difference | coverage (at optimum) | coverage (at analysed lrs) | "
          "MC SE | better | worse | MC SE (calls) | bias (MC SE) | bias at analysed lrs (MC SE) | "
          "optimism (MC SE) | mean 95% half-width | both picks at the optima | a pick at the edge |")
    print("|" + "---|" * 15)
    for i, (label, scenario, protocols) in enumerate(variants(args.fixed_sims > 0)):
        for r in simulate(scenario, args.sims, rng_seed=args.seed * 100 + i, protocols=protocols,
                          fixed_sims=args.fixed_sims):
            print(_row(label, r), flush=True)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
