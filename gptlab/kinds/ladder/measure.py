"""What a finished rung measured, as the sweep reads it, and what the rungs below predict for the next: predictions.csv.

`measure_rung` estimates each arm's effect against the baseline at one rung from its runs on disk that the report's
outcome rule counts (`gptlab.stats.outcome`), with the report's own estimator (`gptlab.stats.effects.analyse` on
an arms design: each arm's own variance, the text's blocks counted where every run has them); `measure_quantities`
reads what the rung's other kinds measure of each arm beside it (`worth:`'s multiplier), from the rung's report
tables, as the report reads them (`gptlab.report.kinds.arm_quantities`); `predict_rung` fits
the rungs below (`gptlab.stats.ladder`) and `record_predictions` adds a rung's rows to results/NAME/predictions.csv
before the rung trains: a rung's rows, once written, are never changed (a rerun finds them and keeps them), so the
report can hold each prediction to what the rung then measured.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import Sequence

import numpy as np
from scipy.stats import t as t_dist

from gptlab.errors import GptlabError
from gptlab.report.kinds import ArmQuantity
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunSummary
from gptlab.runio import read_csv_rows, write_csv
from gptlab.stats.arms import ARM
from gptlab.stats.calls import ALPHA, DEFAULT_MARGIN
from gptlab.stats.design import Design, effect_label
from gptlab.stats.ladder import compute_doublings, pooled_dispersion, predict
from gptlab.stats.outcome import BITS_PER_CHAR, TEST_OUTCOME, VAL_OUTCOME, counts, in_unit, outcome_of
from gptlab.stats.text_share import Blocks
from gptlab.sweep.runs import ESTIMATION, Run, SweepSpec

log = logging.getLogger(__name__)

PREDICTION_COLUMNS = ["rung", "arm", "quantity", "predicted", "pred_low", "pred_high", "written_at"]
EFFECT = "effect"  # predictions.csv's quantity of an arm's effect against the baseline


@dataclass(frozen=True)
class Measured:
    """One arm's effect (or another quantity a kind measures of it: `ArmQuantity`) at one rung: its estimate,
    standard error and df (seeds and, where kept, the text). A ratio's `effect` and `se` are of its log."""

    arm: str
    effect: float
    se: float
    df: float
    quantity: str = EFFECT
    ratio: bool = False  # a ratio, measured and predicted on its log (predictions.csv holds the ratio itself)

    @property
    def key(self) -> tuple[str, str]:
        return self.arm, self.quantity


def quantity_measured(q: ArmQuantity) -> Measured | None:
    """A kind's quantity of an arm (`ArmQuantity`) as the trend reads it: a ratio on its log, its SE from its 95% CI
    (half its width over the t quantile on its df); None where the CI gives no SE."""
    low, high, estimate = q.ci_low, q.ci_high, q.estimate
    if q.ratio:
        if not min(low, high, estimate) > 0:
            return None
        low, high, estimate = math.log(low), math.log(high), math.log(estimate)
    se = (high - low) / (2 * float(t_dist.ppf(1 - ALPHA / 2, q.df))) if q.df > 0 else math.nan
    if not (math.isfinite(se) and se > 0 and math.isfinite(estimate)):
        return None
    return Measured(arm=q.arm, effect=estimate, se=se, df=q.df, quantity=q.quantity, ratio=q.ratio)


def measure_quantities(results_dir: ResultsDir, spec: SweepSpec) -> list[Measured]:
    """What the kinds of a rung's sweep (`spec`, on its folder `results_dir`) measure of each arm beside its effect
    (`gptlab.report.kinds.arm_quantities`: `worth:`'s multiplier), read as the report reads them: the rung's report
    tables, made from its runs on disk. None measured (a sweep whose kinds give none, or results the report cannot
    read, logged) is []: the rung above is then predicted its effects alone."""
    from gptlab.report.kinds import arm_quantities, measures_quantities

    if not measures_quantities(spec):
        return []
    from gptlab.report.load import load_results
    from gptlab.report.tables import compute_tables

    try:
        res = load_results(results_dir, spec=spec)
        quantities = arm_quantities(res, compute_tables(res))
    except GptlabError as err:
        log.warning("rung %s: its arms' quantities beside their effects could not be read (%s): none is predicted",
                    results_dir.rung, err)
        return []
    return [m for q in quantities if (m := quantity_measured(q)) is not None]


def measure_rung(runs: Sequence[Run], rows: Sequence[RunSummary], results_dir: ResultsDir,
                 baseline: str) -> dict[tuple[str, str], Measured]:
    """Each arm's effect against `baseline` from the rung's runs (every role: `runs`, their summaries `rows`) that
    count under the outcome rule (`gptlab.stats.outcome`, the report's), by (arm, `EFFECT`); {} where the baseline or
    every arm has none."""
    by_id = {r.run_id: r for r in rows}
    records = [(run, _record(run, by_id[run.run_id])) for run in runs if run.run_id in by_id]
    outcome = outcome_of([r for _, r in records])
    used = [(run, {**r, **in_unit(r, outcome.unit)}) for run, r in records]
    used = [(run, r) for run, r in used if counts(r, outcome.column)]
    cells = [(str(dict(run.cell)[ARM]),) for run, _ in used]
    arms = tuple(dict.fromkeys(c[0] for c in cells))
    if baseline not in arms or len(arms) < 2:
        return {}
    from gptlab.stats.effects import analyse  # the heavier module, read only once a rung has finished

    design = Design((ARM,), {ARM: arms}, {ARM: baseline}, tuple((a,) for a in arms))
    tested = outcome.column == TEST_OUTCOME and outcome.unit != BITS_PER_CHAR  # blocks in the runs' own nats
    blocks = _blocks(results_dir, [run.run_id for run, _ in used]) if tested else None
    analysis = analyse(np.array([r[outcome.column] for _, r in used]), cells, np.array([run.seed for run, _ in used]),
                       design, partial(effect_label, [ARM]), DEFAULT_MARGIN, endpoint=False, blocks=blocks,
                       block_seeds=False, own_variance=True)
    return {(str(level), EFFECT): Measured(arm=str(level), effect=t.estimate, se=t.se, df=t.df)
            for level, t in zip(analysis.main["level"], analysis.tests["main"])}


def _record(run: Run, summary: RunSummary) -> dict[str, object]:
    """A run as the outcome rule reads it: its role, status, losses and bits-per-char factor."""
    return {"role": getattr(run, "role", ESTIMATION), "status": summary.status, "val_bpc_factor": summary.val_bpc_factor,
            VAL_OUTCOME: summary.best_val_loss, TEST_OUTCOME: summary.best_test_loss,
            "best_test_bpc": summary.best_test_bpc}


def _blocks(results_dir: ResultsDir, run_ids: list[str]) -> Blocks | None:
    """The runs' test blocks (loss per block, weighted by its tokens), or None where a run lacks them or they differ."""
    losses, weights = [], []
    for run_id in run_ids:
        rows = results_dir.run(run_id).test_blocks()
        if not rows:
            return None
        losses.append([float(r["loss"]) for r in rows])
        weights.append([float(r["tokens"]) for r in rows])
    if len({len(r) for r in losses}) != 1 or len(losses[0]) < 2:
        return None
    return Blocks(np.array(losses), np.array(weights))


def predict_rung(flops: Sequence[float], below: Sequence[dict[tuple[str, str], Measured]],
                 rung: str) -> list[dict[str, object]]:
    """predictions.csv's rows for rung `rung` (compute `flops[-1]`) from the rungs below (`flops[:-1]`, `below`, each
    by (arm, quantity)): each arm's effect (and each other quantity) measured at every rung below, predicted by its
    trend (a ratio's on its log, written as the ratio; the dispersion the arms' together, per quantity); none with
    fewer than two rungs below."""
    if len(below) < 2:
        return []
    x = compute_doublings(flops)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    series: dict[tuple[str, str], list[Measured]] = {}
    for key in below[-1]:
        ms = [m[key] for m in below if key in m]
        if len(ms) == len(below) and all(math.isfinite(v) for m in ms for v in (m.effect, m.se, m.df)):
            series[key] = ms
    dispersion = {q: pooled_dispersion((x[:-1], [m.effect for m in ms], [m.se for m in ms])
                                       for (_, q2), ms in series.items() if q2 == q)
                  for q in {q for _, q in series}}
    out: list[dict[str, object]] = []
    for key, ms in series.items():
        p = predict(x[:-1], [m.effect for m in ms], [m.se for m in ms], [m.df for m in ms], float(x[-1]),
                    dispersion[key[1]])
        if p is None:
            continue
        back = math.exp if ms[-1].ratio else float
        out.append({"rung": rung, "arm": key[0], "quantity": key[1], "predicted": back(p.predicted),
                    "pred_low": back(p.low), "pred_high": back(p.high), "written_at": now})
    return out


def record_predictions(results_dir: ResultsDir, rows: list[dict[str, object]], rung: str) -> bool:
    """Add rung `rung`'s prediction rows to predictions.csv unless it already has rows of that rung (then nothing is
    written: a prediction, once written, stands); whether it wrote."""
    old = read_csv_rows(results_dir.predictions_csv)
    if not rows or any(r.get("rung") == rung for r in old):
        return False
    write_csv(results_dir.predictions_csv, [*old, *rows], PREDICTION_COLUMNS)
    return True
