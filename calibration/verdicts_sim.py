"""Simulated tuned arms studies in worlds with cliffs, slow seeds and failures: the verdicts' false certification, power and CIs.

Owns the study behind `benchmarks/verdicts_calibration.py` and `tests/simulations/test_verdicts_sim.py`; the worlds
and their truths are `calibration.cliff_worlds`'. A study goes the way a tuned arms sweep and its report go:

- **the tuner** (`tune`): the coarse grid at one seed for every arm, then `refine.decide_all`'s rounds (every
  cell's additions of a round trained, then decided again) until no arm adds a run, as the sweep's planner
  calls it: a run that did not train is an infinite loss, its status from its own outcome (`cliff_worlds.outcome`);
- **the estimation runs** (`estimation_runs`): `Setup.seeds` seeds at each arm's pick, the baseline's
  `stats.arms.baseline_seed_count` (Dunnett's sqrt(k) n), failures and slow seeds included;
- **the report's chain** (`report`): `lr_curves.fit_curves` on every run of each cell (the selection runs, the
  estimation runs as replicates; step one octave, capped at the unigram loss) gives each arm's loss left, then the
  report's own functions on a `Results` of the estimation runs (`arms_results`): `tables.analyses.analyse_runs`
  on the runs that trained, with the loss left (each arm against the baseline, its own variance, no seed block;
  `call_at_picks` and `call` after the tuning check), and `tables.arms.with_failure_cost` (the failure count at the
  pick with its Clopper-Pearson interval, and the effect counting every run, with its CI).

`score` holds each arm's numbers against its truths (`ArmRecord`), `summarise` their rates (`Summary`): false
certification (a better/worse call that survives the check while the truth at the optima is 0 or of the other
sign, `robustness_sim.false_call`), the power to certify the probe, and the coverage of every arm's three
intervals. Common random numbers: every setup of a study sees the same tuner and runs (its seeds the first ones).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from calibration.cliff_worlds import ARMS, BASELINE, CEILING, LATTICE, PROBE, PRONE, Draws, Truth, World
from calibration.robustness_sim import false_call
from gptlab.executors import ExecutorConfig
from gptlab.report.load.results import VAL_OUTCOME, Results
from gptlab.report.tables.analyses import analyse_runs
from gptlab.report.tables.arms import ARMS_COLS, with_failure_cost
from gptlab.stats import refine
from gptlab.stats.arms import ARM, baseline_seed_count
from gptlab.stats.calls import DEFAULT_MARGIN, DIRECTIONAL
from gptlab.stats.lr_curves import fit_curves
from gptlab.stats.refine import RefineRule
from gptlab.stats.robustness import DEPENDS, NOT_CHECKED, ROBUST
from gptlab.statuses import OK
from gptlab.sweep.arms_spec import ArmsDesign
from gptlab.sweep.runs import ReportSettings, SweepSpec

STEP = 1.0  # tune.space's step in octaves: the report's window for the lr curves
RULE = RefineRule()  # refine as shipped
COMPARED = ARMS[1:]  # the arms the table compares with the baseline


@dataclass(frozen=True)
class Setup:
    """How many estimation seeds each arm trains at its pick (the baseline: Dunnett's sqrt(k) times as many)."""

    seeds: int

    @property
    def baseline_seeds(self) -> int:
        return baseline_seed_count(self.seeds, len(COMPARED))

    @property
    def name(self) -> str:
        return f"{self.seeds} seeds per arm ({self.baseline_seeds} baseline)"


SETUPS = (Setup(3), Setup(5))


@dataclass(frozen=True)
class Tuned:
    """The tuner's outcome: each arm's pick (a half-step; None: no run trained), its selection runs and their count."""

    picks: tuple[int | None, ...]
    selection: pd.DataFrame  # cell, lr, loss (NaN: diverged), status: every selection run
    runs: tuple[int, ...]


def tune(world: World, curves: Sequence, draws: Draws, rule: RefineRule = RULE) -> Tuned:
    """The coarse grid at one seed, then refine's rounds until no arm adds a run (the sweep's planner's loop)."""
    obs: list[dict[int, list[float]]] = [{} for _ in ARMS]
    rows: list[tuple[str, float, float, str]] = []

    def train(c: int, k: int) -> None:
        status, loss = draws.selection_run(world, curves[c], c, k, len(obs[c].get(k, [])))
        obs[c].setdefault(k, []).append(loss if status == OK else math.inf)
        rows.append((ARMS[c], LATTICE.value(k), loss, status))

    for c in range(len(ARMS)):
        for k in LATTICE.coarse():
            train(c, k)
    while True:
        decisions, _, _ = refine.decide_all(obs, LATTICE, rule)
        adds = [(c, k) for c, d in enumerate(decisions) for k in d.add]
        if not adds:
            break
        for c, k in adds:
            train(c, k)
    selection = pd.DataFrame(rows, columns=["cell", "lr", "loss", "status"])
    return Tuned(tuple(d.pick for d in decisions), selection, tuple(d.runs for d in decisions))


def estimation_runs(world: World, curves: Sequence, draws: Draws, tuned: Tuned, setup: Setup) -> pd.DataFrame:
    """The runs at each arm's pick: cell (= arm), seed, lr, loss (NaN: diverged), status."""
    rows = []
    for c, (arm, k) in enumerate(zip(ARMS, tuned.picks)):
        if k is None:
            continue
        for seed in range(setup.baseline_seeds if arm == BASELINE else setup.seeds):
            status, loss = draws.estimation_run(world, curves[c], c, LATTICE.value(k), seed)
            rows.append((arm, seed, LATTICE.value(k), loss, status))
    return pd.DataFrame(rows, columns=["cell", "seed", "lr", "loss", "status"])


def arms_results(estimation: pd.DataFrame, margin: float = DEFAULT_MARGIN) -> Results:
    """The estimation runs as the report's load step would give them for an arms sweep (no files, no test split)."""
    spec = SweepSpec(name="simulated", description="", plugins=[], base={}, grid={ARM: list(ARMS)},
                     seeds=sorted(set(estimation["seed"])), exclude=[], baseline={ARM: BASELINE},
                     executor=ExecutorConfig(), report=ReportSettings(margin),
                     arms=ArmsDesign(arms={a: {} for a in ARMS}, baseline=BASELINE))
    runs = pd.DataFrame({ARM: estimation["cell"].astype(str), "cell": "arm=" + estimation["cell"].astype(str),
                         "seed": estimation["seed"].astype(int), "status": estimation["status"],
                         OK: estimation["status"] == OK, VAL_OUTCOME: estimation["loss"].astype(float),
                         "run_id": [f"{a}-{s}" for a, s in zip(estimation["cell"], estimation["seed"])]})
    cells = pd.DataFrame({ARM: list(ARMS), "cell": [f"arm={a}" for a in ARMS], "is_baseline": [a == BASELINE
                                                                                            for a in ARMS]})
    return Results(results_dir=None, name="simulated", spec=spec, factors=[ARM], levels={ARM: list(ARMS)},
                   baseline={ARM: BASELINE}, runs=runs, cells=cells, curves=pd.DataFrame(), ceiling=CEILING)


def bound(fit: Any) -> str:
    """Where a cell's upper end on its loss left (an `lr_curves.CurveFit`) comes from: "curve" (its profile CI),
    "tried" (against the lrs it tried: its optimum's CI open), or why it has none: "not convex", "beyond the search"
    (no CI), "too few points", "unbounded", "no loss left" (the pick outside the window). Read from its flags' names
    (lr_curves' docstring), so that a renamed flag reads "beyond the search" rather than breaking the harness."""
    if math.isfinite(fit.loss_left_ci_high):
        return "tried" if "against_tried" in fit.flags else "curve"
    if math.isinf(fit.loss_left_ci_high):
        return "unbounded"
    for flag, why in (("too_few_points", "too few points"), ("not_convex", "not convex"),
                      ("pick_outside_window", "no loss left")):
        if flag in fit.flags:
            return why
    return "beyond the search"


def report(tuned: Tuned, estimation: pd.DataFrame, margin: float = DEFAULT_MARGIN) -> tuple[pd.DataFrame, dict, dict]:
    """The report's arms table of one study (ARMS_COLS; one row per compared arm with a trained run at its pick),
    each arm's loss left from its lr curve, arm -> (estimate, upper end of its 95% CI, df), and its `bound`."""
    picks = {arm: LATTICE.value(k) for arm, k in zip(ARMS, tuned.picks) if k is not None}
    fits = fit_curves(tuned.selection, STEP, CEILING, picks, replicates=estimation)
    left = {f.cell: (f.loss_left, f.loss_left_ci_high, float(f.noise_df)) for f in fits.fits}
    res = arms_results(estimation, margin)
    ok = res.runs[res.runs["ok"]]
    a = analyse_runs(res, ok, VAL_OUTCOME, blocks=True, loss_left={(k,): v for k, v in left.items()})  # at res.margin
    main = a.main if a is not None else pd.DataFrame(columns=["factor", "level"])
    arms = main[main["factor"] == ARM].rename(columns={"level": ARM}).reindex(columns=ARMS_COLS)
    return with_failure_cost(res, arms.reset_index(drop=True)), left, {f.cell: bound(f) for f in fits.fits}


@dataclass(frozen=True)
class ArmRecord:
    """One compared arm of one study: its truths and the report's numbers (NaN or "" where the table has no row)."""

    arm: str
    truth_optima: float  # its optimum minus the baseline's (what a call after the tuning check claims)
    truth_lattice: float  # the same between their best stable half-steps (what a tuner on the lattice can reach)
    truth_ok: float  # E[trained run] at its pick minus the baseline's at its pick (the effect among trained runs)
    truth_all: float  # E[every run, counted as the table counts it] at its pick minus the baseline's at its pick
    failure: float  # the true failure probability at its pick
    estimate: float = math.nan
    ci: tuple[float, float] = (math.nan, math.nan)
    call_at_picks: str = ""
    call: str = ""
    tuning: str = ""  # robust | depends on the picks | not checked (a cell it works against has no bound) | ""
    ci_all: tuple[float, float] = (math.nan, math.nan)  # the effect counting every run
    rate_ci: tuple[float, float] = (math.nan, math.nan)  # its failure rate at its pick (Clopper-Pearson)
    n_failed: int = 0
    n_runs: int = 0


@dataclass(frozen=True)
class StudyRecord:
    """One setup on one study: every compared arm's record, and per arm (baseline first) its loss left and runs."""

    arms: tuple[ArmRecord, ...]
    loss_left: tuple[float, ...]  # the true loss left at the pick (its `ok_mean` minus its optimum)
    loss_left_high: tuple[float, ...]  # the lr curve's upper end (inf: unbounded; NaN: no fit)
    runs: tuple[int, ...] = field(default=())  # selection runs
    on_ramp: tuple[bool, ...] = field(default=())  # the pick where the failure probability is above its floor
    bounds: tuple[str, ...] = field(default=())  # where L^hi comes from, or why there is none (`bound`; "" no curve)


def score(world: World, curves: Sequence, tuned: Tuned, table: pd.DataFrame, left: dict, bounds: dict | None = None
          ) -> StudyRecord:
    """The study's records against the truths of `world` (`cliff_worlds.Truth`) at its picks and optima."""
    truth = Truth(world)
    lrs = [LATTICE.value(k) if k is not None else math.nan for k in tuned.picks]
    at = {a: (truth.ok_mean(cv, lr), truth.all_mean(cv, lr)) if k is not None else (math.nan, math.nan)
          for a, cv, lr, k in zip(ARMS, curves, lrs, tuned.picks)}
    best = {a: truth.optimum(cv) for a, cv in zip(ARMS, curves)}
    grid = {a: truth.lattice_optimum(cv) for a, cv in zip(ARMS, curves)}
    rows = {str(r[ARM]): r for r in table.to_dict("records")}
    records = []
    for c, arm in enumerate(ARMS[1:], start=1):
        base = dict(arm=arm, truth_optima=best[arm] - best[BASELINE], truth_lattice=grid[arm] - grid[BASELINE],
                    truth_ok=at[arm][0] - at[BASELINE][0],
                    truth_all=at[arm][1] - at[BASELINE][1],
                    failure=curves[c].failure(lrs[c]) if tuned.picks[c] is not None else math.nan)
        r = rows.get(arm)
        if r is None:
            records.append(ArmRecord(**base))
            continue
        n_failed = int(r["n_diverged"]) if r["n_diverged"] == r["n_diverged"] else 0
        records.append(ArmRecord(**base, estimate=float(r["estimate"]), ci=(float(r["ci_low"]), float(r["ci_high"])),
                                 call_at_picks=str(r["call_at_picks"]), call=str(r["call"]),
                                 tuning=str(r["tuning"]) if r["tuning"] == r["tuning"] else "",
                                 ci_all=(float(r["ci_low_all_runs"]), float(r["ci_high_all_runs"])),
                                 rate_ci=(float(r["failure_rate_low"]), float(r["failure_rate_high"])),
                                 n_failed=n_failed, n_runs=int(r["n_ok"]) + n_failed))
    true_left = tuple(at[a][0] - best[a] for a in ARMS)
    high = tuple(float(left.get(a, (math.nan,) * 3)[1]) for a in ARMS)
    ramp = tuple(k is not None and cv.failure(lr) > cv.floor + 1e-12 for cv, lr, k in zip(curves, lrs, tuned.picks))
    return StudyRecord(tuple(records), true_left, high, tuned.runs, ramp, tuple((bounds or {}).get(a, "") for a in ARMS))


def simulate(world: World, studies: int, setups: Sequence[Setup] = SETUPS, rng_seed: int = 0,
             margin: float = DEFAULT_MARGIN) -> dict[Setup, list[StudyRecord]]:
    """`studies` studies of `world`, each tuned once and estimated by every setup on the same draws."""
    rng = np.random.default_rng(rng_seed)
    seeds = max(max(s.seeds, s.baseline_seeds) for s in setups)
    out: dict[Setup, list[StudyRecord]] = {s: [] for s in setups}
    for _ in range(studies):
        curves = world.draw(rng)
        draws = Draws.draw(rng, RULE.max_runs_per_cell, seeds)
        tuned = tune(world, curves, draws)
        for s in setups:
            estimation = estimation_runs(world, curves, draws, tuned, s)
            out[s].append(score(world, curves, tuned, *report(tuned, estimation, margin)))
    return out


def _covers(ci: tuple[float, float], truth: float) -> bool:
    return bool(ci[0] <= truth + 1e-12 and truth - 1e-12 <= ci[1])


@dataclass(frozen=True)
class Summary:
    """One setup over the studies of one world. Shares of studies, or of arms with a row in the table (`covered`)."""

    setup: Setup
    studies: int
    false_picks: float  # studies with a false better/worse call at the picks (any compared arm)
    false_checked: float  # ... certified by the tuning check (`tuning` robust): false certification
    false_lattice: float  # ... false against the best stable half-steps instead of the optima
    probe_picks: float  # studies whose probe is called better or worse at the picks, in the true direction
    probe_certified: float  # ... and certified by the check (the power)
    not_checked: float  # of the better/worse calls at the picks, the share a cell without a bound left unchecked
    probe_lost: tuple[float, float]  # of the probe's right calls at the picks, the shares the check turned into
    # `depends on the picks` and left `not checked`
    covered: dict[str, tuple[float, float, float]]  # arm -> coverage of (trained effect, every run, failure rate)
    estimable: dict[str, float]  # arm -> the share of studies with a row for it
    prone_failed: float  # studies where the failure-prone arm had a failed run at its pick
    high_covers: float  # cells (baseline included) whose finite L^hi >= the true loss left
    unbounded: float  # cells whose L^hi is inf or NaN (a call against them: depends, or not checked)
    on_ramp: float  # cells picked where the failure probability is above its floor
    runs: float  # selection runs per cell
    bounds: dict[str, float] = field(default_factory=dict)  # cells by `bound`
    tried_covers: float = math.nan  # cells bounded against the lrs tried whose L^hi >= the true loss left
    high_median: float = math.nan  # the median finite L^hi over the cells (nats)
    left_mean: float = math.nan  # the mean true loss left over the cells (nats)

    def rate_se(self, rate: float) -> float:
        """Monte-Carlo SE of a share of the studies."""
        return math.sqrt(max(rate * (1 - rate), 0.0) / self.studies)


def directional(a: ArmRecord, checked: bool) -> str:
    """The arm's better/worse call at the picks, or after the tuning check where it survives it (`tuning` robust:
    a call no bound could check is not certified, as the scorecard reads it); "" otherwise."""
    call = a.call if checked else a.call_at_picks
    return call if call in DIRECTIONAL and (not checked or a.tuning == ROBUST) else ""


def summarise(setup: Setup, records: Sequence[StudyRecord], margin: float = DEFAULT_MARGIN) -> Summary:
    """The rates of `records` against their truths."""
    def any_false(checked: bool, truth: str = "truth_optima") -> float:
        return float(np.mean([any(false_call(directional(a, checked), getattr(a, truth), margin) for a in r.arms)
                              for r in records]))

    def probe(checked: bool) -> float:
        return float(np.mean([bool(directional(a, checked)) and a.truth_optima != 0 and not
                              false_call(directional(a, checked), a.truth_optima, margin)
                              for r in records for a in r.arms if a.arm == PROBE]))

    covered, estimable = {}, {}
    for arm in COMPARED:
        mine = [a for r in records for a in r.arms if a.arm == arm]
        rows = [a for a in mine if math.isfinite(a.estimate)]
        estimable[arm] = len(rows) / len(mine)
        covered[arm] = tuple(float(np.mean([_covers(getattr(a, ci), t(a)) for a in rows])) if rows else math.nan
                             for ci, t in (("ci", lambda a: a.truth_ok), ("ci_all", lambda a: a.truth_all),
                                           ("rate_ci", lambda a: a.failure)))
    called = [a for r in records for a in r.arms if directional(a, False)]
    right = [a for r in records for a in r.arms if a.arm == PROBE and directional(a, False) and a.truth_optima != 0
             and not false_call(a.call_at_picks, a.truth_optima, margin)]
    lost = tuple(float(np.mean([a.tuning == t for a in right])) if right else math.nan for t in (DEPENDS, NOT_CHECKED))
    unchecked = float(np.mean([a.tuning == NOT_CHECKED for a in called])) if called else math.nan
    high = np.array([h for r in records for h in r.loss_left_high])
    left = np.array([x for r in records for x in r.loss_left])
    finite = np.isfinite(high) & np.isfinite(left)
    prone = [a.n_failed > 0 for r in records for a in r.arms if a.arm == PRONE]
    return Summary(setup, len(records), any_false(False), any_false(True),
                   any_false(True, "truth_lattice"), probe(False), probe(True), unchecked, lost,
                   covered, estimable, float(np.mean(prone)),
                   float(np.mean(high[finite] >= left[finite] - 1e-9)) if finite.any() else math.nan,
                   float(np.mean(~np.isfinite(high))), float(np.mean([x for r in records for x in r.on_ramp])),
                   float(np.mean([x for r in records for x in r.runs])), _shares([b for r in records for b in r.bounds]),
                   _covers_where(records, "tried"), float(np.median(high[finite])) if finite.any() else math.nan,
                   float(np.nanmean(left)))


def _shares(values: Sequence[str]) -> dict[str, float]:
    return {v: values.count(v) / len(values) for v in sorted(set(values))} if values else {}


def _covers_where(records: Sequence[StudyRecord], kind: str) -> float:
    """Of the cells whose L^hi is of `kind` (`bound`), the share whose L^hi >= the true loss left."""
    hits = [h >= x - 1e-9 for r in records for h, x, b in zip(r.loss_left_high, r.loss_left, r.bounds) if b == kind]
    return float(np.mean(hits)) if hits else math.nan


def run(world: World, studies: int, setups: Sequence[Setup] = SETUPS, rng_seed: int = 0) -> list[Summary]:
    """`simulate` then `summarise`: one summary per setup."""
    return [summarise(s, recs) for s, recs in simulate(world, studies, setups, rng_seed).items()]
