"""Simulated tuned comparisons with planted loss-against-lr curves: the check of the tuned protocol.

Owns the simulation behind `benchmarks/tuning_calibration.py` and `tests/simulations/test_tuning_sim.py`
(issue 21, point 5). Two arms (one factor, baseline first) each have a planted curve, a parabola in
log2 of the tuned setting (`Curve`). Every simulated study has runs at every arm x setting x seed:
    y[arm, setting, seed] = curve_arm(setting) + b[seed] + e,   b ~ N(0, seed_sd^2), e ~ N(0, noise_sd^2)
(`calibration.simulate_runs`: a seed shifts every run alike, as the lab's shared batch order does).
Seeds 0..tune_seeds-1 are the selection seeds, the next `seeds` the estimation seeds. Protocols:

- `tuned` (the lab's): each arm's pick is the setting with the lowest mean selection loss; the
  estimation seeds at the picks are analysed. The picks depend on the selection runs only, so
  given the picks the analysed runs are a fixed design on fresh seeds, and the CI is exact for the
  difference at the picked settings (`Scenario.truth_at`). It covers the at-optimum difference only as
  far as the picks are the optima (a missed pick can only make an arm look worse).
- `naive`: the full grid on the estimation seeds; each arm's pick is its best setting on those
  runs, and the same runs are analysed (the selection's winner's curse stays in the estimate).
- `fixed`: the estimation seeds at one setting of the space, as a fixed-setting study would run.

Every CI and call comes from the report's own path (`effects.analyse`: `models.fit_cells`, Holm,
TOST at `calls.DEFAULT_MARGIN`). The truths come from the planted curves alone (`Scenario`), never
from the `Design` contrasts that produce the estimates, so a wrong contrast breaks the coverage.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from calibration.effects_sim import simulate_runs
from gptlab.stats.calls import BETTER, DEFAULT_MARGIN, EQUIVALENT, WORSE
from gptlab.stats.design import Design
from gptlab.stats.effects import analyse

TUNED, NAIVE, FIXED = "tuned", "naive", "fixed"
PROTOCOLS = (TUNED, NAIVE, FIXED)
FACTOR = "arm"
SPACE = (5e-4, 1e-3, 2e-3, 4e-3, 8e-3)  # a factor-2 lr grid of five values, as the `tuned` study's


@dataclass(frozen=True)
class Curve:
    """One arm's planted loss against the tuned setting: a parabola in log2(setting)."""

    best_loss: float  # loss at the optimum (nats/char)
    best_setting: float  # where the optimum lies (e.g. an lr)
    curvature: float  # loss added per squared octave away from the optimum (nats/char)

    def loss(self, setting: float) -> float:
        return self.best_loss + self.curvature * math.log2(setting / self.best_setting) ** 2


@dataclass(frozen=True)
class Scenario:
    """Two arms' planted curves, the space searched, and the noise of one run."""

    curves: tuple[Curve, Curve]  # baseline arm first; effects are arm 2 minus arm 1
    space: tuple[float, ...] = SPACE  # the tuned settings, ascending
    seeds: int = 3  # estimation seeds (and seeds of the naive and fixed protocols)
    tune_seeds: int = 1  # selection seeds per arm and setting
    noise_sd: float = 0.0065  # per-run noise (nats/char): four_axes' residual SD
    seed_sd: float = 0.005  # seed offset shared by every run of a seed

    def loss(self, arm: int, setting: int) -> float:
        """True loss of `arm` at space[setting]."""
        return self.curves[arm].loss(self.space[setting])

    def best(self, arm: int) -> float:
        """True loss of `arm` at its best setting of the space (what tuning on this space can reach)."""
        return min(self.loss(arm, s) for s in range(len(self.space)))

    @property
    def truth(self) -> float:
        """The true at-optimum difference: arm 2's best loss minus arm 1's, over the space."""
        return self.best(1) - self.best(0)

    def truth_at(self, picks: tuple[int, int]) -> float:
        """The true difference at the given settings (indices into the space) of arm 1 and arm 2."""
        return self.loss(1, picks[1]) - self.loss(0, picks[0])

    def at_optima(self, picks: tuple[int, int]) -> bool:
        """Whether both settings reach their arm's best loss over the space (a flat curve has several)."""
        return all(self.loss(arm, p) <= self.best(arm) + 1e-12 for arm, p in enumerate(picks))


@dataclass(frozen=True)
class Outcome:
    """One protocol's answer on one simulated study."""

    picks: tuple[int, int]  # the settings analysed (indices into the space), arm 1 and arm 2
    estimate: float  # arm 2 minus arm 1, from the analysis
    ci_low: float  # 95% CI
    ci_high: float
    call: str  # better / worse / equivalent / inconclusive
    levels: tuple[float, float]  # the fitted loss of each arm (its cell mean at the average seed)
    at_edge: bool  # a pick on the edge of the space (tuned and naive)


@dataclass(frozen=True)
class ProtocolResult:
    """How one protocol did on one scenario over `sims` simulated studies (rates are shares of sims)."""

    protocol: str  # tuned / naive / fixed
    setting: float | None  # the fixed setting (None for tuned and naive)
    sims: int  # simulated studies
    truth: float  # the true at-optimum difference
    coverage: float  # 95% CIs containing `truth`
    coverage_picked: float  # 95% CIs containing the true difference at the analysed settings
    better: float  # calls `better`
    worse: float  # calls `worse`
    equivalent: float  # calls `equivalent`
    bias: float  # mean estimate minus `truth`
    bias_se: float  # its Monte-Carlo SE
    bias_picked: float  # mean estimate minus the true difference at the analysed settings
    bias_picked_se: float
    optimism: float  # mean over both arms of the fitted loss minus the arm's true loss at its pick
    optimism_se: float
    half_width: float  # mean 95% CI half-width
    picked_optima: float  # studies whose two picks are both at their arm's best loss over the space
    at_edge: float  # studies with a pick on the edge of the space

    @property
    def false_calls(self) -> float:
        """`better` or `worse` calls: false when the truth is zero."""
        return self.better + self.worse

    def rate_se(self, rate: float) -> float:
        """Monte-Carlo SE of a share of the `sims` studies."""
        return math.sqrt(max(rate * (1 - rate), 0.0) / self.sims)

    @property
    def coverage_se(self) -> float:
        """Monte-Carlo SE of a 95% coverage (at the nominal rate)."""
        return math.sqrt(0.95 * 0.05 / self.sims)


def design(arms: Sequence[str] = ("a", "b")) -> Design:
    """The two arms as a one-factor design, the first arm the baseline."""
    return Design((FACTOR,), {FACTOR: tuple(arms)}, {FACTOR: arms[0]}, tuple((a,) for a in arms))


def _label(factor: str, level: str) -> str:
    return f"{factor}={level}"


def _analyse(y: np.ndarray, seeds: np.ndarray, picks: tuple[int, int], d: Design) -> Outcome:
    """The report's analysis of runs y (arm-major, len(seeds) each) at settings `picks`."""
    arms = [c for c in d.cells for _ in seeds]
    # endpoint=False: main effects only. With one factor of two levels the endpoint's extra rows
    # (the simple effect) repeat the main contrast, which Holm counts once: the same row (a test checks)
    a = analyse(y, arms, np.tile(seeds, len(d.cells)), d, _label, DEFAULT_MARGIN, endpoint=False)
    r = a.main.iloc[0]
    return Outcome(picks, float(r["estimate"]), float(r["ci_low"]), float(r["ci_high"]), str(r["call"]),
                   (float(a.fit.means[0]), float(a.fit.means[1])), False)


def run_protocols(scenario: Scenario, sims: int, rng_seed: int = 0, protocols: Sequence[str] = PROTOCOLS,
                  settings: Sequence[int] | None = None, fixed_sims: int | None = None
                  ) -> dict[tuple[str, float | None], list[Outcome]]:
    """`sims` simulated studies of `scenario`, each answered by every protocol on the same runs.

    Keys: (protocol, fixed setting or None). `settings` (indices into the space) limits the fixed
    protocol, default every setting; `fixed_sims` gives it only the first studies (five analyses each).
    """
    unknown = set(protocols) - set(PROTOCOLS)
    if unknown or sims < 1:
        raise ValueError(f"protocols must be among {PROTOCOLS} and sims >= 1, got {sorted(unknown)}, {sims}")
    d = design()
    S, t, n = len(scenario.space), scenario.tune_seeds, scenario.seeds
    grid = [(arm, s) for arm in range(2) for s in range(S)]
    means = [scenario.loss(arm, s) for arm, s in grid]
    fixed = list(range(S)) if settings is None else list(settings)
    est_seeds = np.arange(t, t + n)
    out: dict[tuple[str, float | None], list[Outcome]] = {}
    rng = np.random.default_rng(rng_seed)
    for study in range(sims):
        y, _, _ = simulate_runs(grid, means, t + n, rng, noise_sd=scenario.noise_sd, seed_sd=scenario.seed_sd)
        y = y.reshape(2, S, t + n)
        sel, est = y[:, :, :t], y[:, :, t:]
        memo: dict[tuple[int, int], Outcome] = {}  # protocols that analyse the same runs get the same answer

        def answer(picks: tuple[int, int], edge: bool) -> Outcome:
            if picks not in memo:
                runs = np.concatenate([est[arm, p] for arm, p in enumerate(picks)])
                memo[picks] = _analyse(runs, est_seeds, picks, d)
            return replace(memo[picks], at_edge=edge)

        for protocol in protocols:
            if protocol == FIXED:
                if fixed_sims is None or study < fixed_sims:
                    for s in fixed:
                        out.setdefault((FIXED, scenario.space[s]), []).append(answer((s, s), False))
                continue
            chooser = sel if protocol == TUNED else est  # naive: chosen on the runs it reports
            a, b = (int(i) for i in chooser.mean(axis=2).argmin(axis=1))
            out.setdefault((protocol, None), []).append(answer((a, b), a in (0, S - 1) or b in (0, S - 1)))
    return out


def summarise(scenario: Scenario, protocol: str, setting: float | None, outcomes: Sequence[Outcome]) -> ProtocolResult:
    """Coverage, calls and biases of `outcomes` against the scenario's planted truths."""
    n = len(outcomes)
    est = np.array([o.estimate for o in outcomes])
    lo, hi = np.array([o.ci_low for o in outcomes]), np.array([o.ci_high for o in outcomes])
    picked = np.array([scenario.truth_at(o.picks) for o in outcomes])
    optimism = np.array([np.mean([o.levels[arm] - scenario.loss(arm, o.picks[arm]) for arm in (0, 1)])
                         for o in outcomes])
    calls = [o.call for o in outcomes]

    def share(x) -> float:
        return float(np.mean(x))

    def se(x: np.ndarray) -> float:
        return float(np.std(x, ddof=1) / math.sqrt(n)) if n > 1 else math.nan

    truth = scenario.truth
    return ProtocolResult(
        protocol, setting, n, truth, share((lo <= truth) & (truth <= hi)), share((lo <= picked) & (picked <= hi)),
        share([c == BETTER for c in calls]), share([c == WORSE for c in calls]),
        share([c == EQUIVALENT for c in calls]), float(est.mean() - truth), se(est),
        float((est - picked).mean()), se(est - picked), float(optimism.mean()), se(optimism),
        float(np.mean((hi - lo) / 2)), share([scenario.at_optima(o.picks) for o in outcomes]),
        share([o.at_edge for o in outcomes]))


def simulate(scenario: Scenario, sims: int, rng_seed: int = 0, protocols: Sequence[str] = PROTOCOLS,
             settings: Sequence[int] | None = None, fixed_sims: int | None = None) -> list[ProtocolResult]:
    """`run_protocols` then `summarise`: one result per protocol (and per fixed setting)."""
    runs = run_protocols(scenario, sims, rng_seed, protocols, settings, fixed_sims)
    return [summarise(scenario, p, s, outs) for (p, s), outs in runs.items()]


# Curves: a 0.03 nats/octave^2 parabola loses 0.12 two octaves from its optimum (postln_warmup: lr
# 6e-3 against 1e-3, 2.6 octaves, moved pre-LN's loss by 0.16 to 0.28). At 0.025 to 0.03 an arm's
# neighbours lie 2.7 to 3.3 selection-noise SDs above its optimum (one selection seed: SD sqrt(2) x
# noise_sd), so one selection seed finds it; at 0.008 (an lr-tolerant arm) they lie within one SD.
SCENARIOS: dict[str, Scenario] = {
    # (a) optima two octaves apart, equal there: at a fixed lr one arm looks better
    "a: optima apart, equal at them": Scenario((Curve(1.80, 1e-3, 0.03), Curve(1.80, 4e-3, 0.025))),
    # (b) the same curve for both arms
    "b: arms equal everywhere": Scenario((Curve(1.80, 2e-3, 0.03), Curve(1.80, 2e-3, 0.03))),
    # (c) arm 2 better by 0.03 at its optimum, one octave higher
    "c: arm 2 better by 0.03": Scenario((Curve(1.80, 1e-3, 0.03), Curve(1.77, 2e-3, 0.025))),
    # (d) as (a), but arm 2 is lr-tolerant: one selection seed often misses its optimum
    "d: as (a), arm 2 lr-tolerant": Scenario((Curve(1.80, 1e-3, 0.03), Curve(1.80, 4e-3, 0.008))),
}
