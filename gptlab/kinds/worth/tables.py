"""`tables/worth.csv` and `tables/worth_retune.csv`: what each arm is worth in the baseline's training steps and wall time.

Owns, for an arms sweep with `worth:` (the lead's contract: its runs have role `worth`, the baseline at its pick
trained with warmup-stable-decay to several lengths, and `worth_tuning`, the baseline at lr factors around its
pick at the shortest and longest length), per scale level:

- the baseline's curve (`stats.worth.baseline_curve`: its test loss against steps, each seed's lengths paired)
  from the `worth` runs, and, where the study's own schedule is wsd, the baseline's estimation runs as its 1x
  points; otherwise the baseline's estimation runs are the anchor, and each arm's effect is placed on the
  curve's shape (`stats.worth.step_multiplier`'s `anchor`);
- each arm's step multiplier with its CI (censored outside the lengths trained, never extrapolated), its
  relative time per step from the arms' steps timed side by side after the runs (`step_times.csv`, written by
  `step_times`: the runs themselves were trained hours or days apart; `stats.worth.step_cost`) and
  the wall-time multiplier (`stats.worth.wall_multiplier`);
- the re-tune: the baseline's best lr factor at the shortest and longest length, and each arm's multiplier
  again with those ends of the curve moved to the re-tuned loss.

And the kind's columns of an arms sweep's scorecard (`with_worth`: each arm's worth, and a speed claim judged on its
time per step). Numbers only (and the multiplier's compact text, `fmt.multiplier_text`); the words are `sentences`'.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gptlab.kinds.worth.load import loaded
from gptlab.kinds.worth.spec import KEY, WORTH, WORTH_TUNING
from gptlab.report.fmt import multiplier_text, round_frame
from gptlab.report.kinds import ArmQuantity
from gptlab.report.load import Results, run_roles
from gptlab.run.config import LENGTH_KEY, LR_KEY
from gptlab.run.schedules import WSD
from gptlab.stats import worth as stats_worth
from gptlab.stats.arms import ARM
from gptlab.stats.scorecard import MEASURED, speed_verdict
from gptlab.stats.text_share import Blocks
from gptlab.stats.worth_lr import Retune, retune_check, retuned_multiplier
from gptlab.statuses import OK

SCALE_COLS = ["scale_factor", "scale_level"]
WORTH_COLS = ["arm", "baseline", "study_steps", "lengths", "curve_seeds", "n_arm", "anchored", "multiplier",
              "multiplier_low", "multiplier_high", "low_open", "high_open", "censored", "lowest", "highest",
              "multiplier_df", "step_cost", "step_cost_low", "step_cost_high", "wall_multiplier", "wall_low",
              "wall_high", "worth", "wall_worth", "arm_loss", "placed_loss", "retuned_multiplier", "retuned_low",
              "retuned_high", "retuned_low_open", "retuned_high_open", "retuned_censored", "retuned_worth", "note"]
RETUNE_COLS = ["steps", "length", "pick_lr", "factors", "best_factor", "pick_loss", "best_loss", "gap", "noise_sd",
               "threshold", "verdict", "optimum"]
COVERAGE_COLS = ["scale_level", "length", "seeds", "trained", OK]  # `ok`: seeds whose run there is OK
GRID_POINTS = 97  # the curve drawn in the figure: points over the lengths' range (log2 steps)


@dataclass(frozen=True)
class WorthView:
    """The worth of each arm, per scale level: the tables and what the figure draws."""

    table: pd.DataFrame  # worth.csv: one row per arm (per scale level), rounded
    points: pd.DataFrame  # the curve's runs: scale_level, seed, steps, loss
    curves: pd.DataFrame  # the curve drawn: scale_level, steps, loss (PCHIP through the per-length means)
    retune: pd.DataFrame  # worth_retune.csv: per scale level and end length, the baseline's best lr factor
    schedule: str  # the study's own schedule (cosine: the arms are placed on the curve by the anchor)
    scale_factor: str  # the scale factor the levels are of ("" without one)
    text: bool = False  # whether the CIs count the text (every run of the curve and of the arms has test blocks)
    coverage: pd.DataFrame = dataclasses.field(default_factory=lambda: pd.DataFrame(columns=COVERAGE_COLS))  # per
    # level and length: the baseline's seeds the lengths train on, those trained there and those ok (`coverage`)


def has_worth(res: Results) -> bool:
    """Whether the report has worth runs to show (the sweep's `worth:` and runs of role `worth`)."""
    return bool(res.arms) and res.spec.kinds.get(KEY) is not None and len(res.other_roles) > 0 \
        and bool((run_roles(res.other_roles) == WORTH).any())


def study_schedule(res: Results) -> str:
    """The schedule the arms trained with: the sweep's `base.train.schedule`, else the run config's default."""
    return str(res.fixed("train.schedule"))


def _ok(runs: pd.DataFrame, outcome: str) -> pd.DataFrame:
    """The ok runs with a finite outcome, lengths and lrs as numbers."""
    runs = runs[runs["ok"] & np.isfinite(pd.to_numeric(runs[outcome], errors="coerce"))].copy()
    for key in (LENGTH_KEY, LR_KEY):
        if key in runs:
            runs[key] = pd.to_numeric(runs[key], errors="coerce")
    return runs


def _study_steps(res: Results, base: pd.DataFrame) -> float:
    """The study's length S: the baseline's estimation runs' `train.max_iters`, else the sweep's, else the default."""
    if LENGTH_KEY in base and base[LENGTH_KEY].notna().any():
        return float(base[LENGTH_KEY].mode().iloc[0])
    return float(res.fixed(LENGTH_KEY))


def _blocks(res: Results, runs: pd.DataFrame) -> Blocks | None:
    """The blocks of `runs` (estimation runs' from `res.test_blocks`, worth runs' from the kind's own), or None."""
    frames, weights = [], []
    for source in (res.test_blocks, loaded(res).blocks):
        if source.present:
            frames.append(source.losses)
            weights.append(source.weights)
    if not frames:
        return None
    losses, w = pd.concat(frames), pd.concat(weights)
    losses, w = losses[~losses.index.duplicated()], w[~w.index.duplicated()]
    ids = list(runs["run_id"])
    if not set(ids) <= set(losses.index) or losses.reindex(ids).isna().to_numpy().any():
        return None  # a run without blocks, or blocks unlike the others': the seeds alone
    return Blocks(losses.reindex(ids).to_numpy(float), w.reindex(ids).to_numpy(float))


def _arm_loss(res: Results, runs: pd.DataFrame) -> stats_worth.ArmLoss:
    return stats_worth.arm_runs(runs[res.outcome].to_numpy(float), _blocks(res, runs))


def _step_seconds(res: Results, arm: str, level: str) -> pd.Series:
    """Seconds per training step of `arm` (at scale `level`) by round of step_times.csv: the arms' steps timed side
    by side after the runs (`step_times`); empty where the sweep did not time them."""
    times = loaded(res).step_times
    if not len(times) or ARM not in times:
        return pd.Series(dtype=float)
    mine = times[times[ARM].astype(str) == arm]
    if res.scale and res.scale[0] in mine:
        mine = mine[mine[res.scale[0]].astype(str) == level]
    seconds = pd.Series(pd.to_numeric(mine["seconds_per_step"], errors="coerce").to_numpy(float),
                        index=mine["round"].to_numpy())
    return seconds[np.isfinite(seconds) & (seconds > 0)]


def _step_cost(arm: pd.Series, base: pd.Series) -> stats_worth.StepCost:
    """The arm's step time over the baseline's, paired by the rounds both were timed in."""
    both = arm.index.intersection(base.index)
    return stats_worth.step_cost(arm[both].to_numpy(float), base[both].to_numpy(float))


def _curve(res: Results, worth: pd.DataFrame, base: pd.DataFrame, steps: float,
           schedule: str) -> tuple[stats_worth.BaselineCurve, pd.DataFrame]:
    """The baseline's curve and its runs; in a wsd study the baseline's estimation runs give the 1x points."""
    runs = worth
    if schedule == WSD:
        have = set(worth.loc[np.isclose(worth[LENGTH_KEY], steps), "seed"])
        ones = base[base["seed"].isin(set(worth["seed"]) - have)].assign(**{LENGTH_KEY: steps})
        runs = pd.concat([worth, ones], ignore_index=True)
    curve = stats_worth.baseline_curve(runs[LENGTH_KEY].to_numpy(float), runs["seed"].to_numpy(),
                                       runs[res.outcome].to_numpy(float), _blocks(res, runs))
    return curve, runs


def _tuning_at_study_length(res: Results, tuning: pd.DataFrame, selection: pd.DataFrame, pick: float,
                            steps: float) -> pd.DataFrame:
    """The re-tune's runs, with, where the study is wsd and an end length is its own (1x), the baseline's selection
    runs there: the same config and seed, trained once, as selection runs (the sweep does not train them twice)."""
    worth = res.spec.kinds.get(KEY)
    lengths = worth.lengths if worth is not None else ()
    if study_schedule(res) != WSD or not lengths or 1.0 not in (min(lengths), max(lengths)) or not len(selection):
        return tuning
    factors = [1.0, *worth.retune]
    seeds = set(tuning["seed"]) or {int(selection["seed"].min())}
    mine = selection[(selection[ARM] == res.baseline[ARM]) & selection["seed"].isin(seeds)]
    mine = mine[[any(math.isclose(lr, pick * f, rel_tol=1e-6) for f in factors) for lr in mine[LR_KEY]]]
    return pd.concat([tuning, mine.assign(**{LENGTH_KEY: steps})], ignore_index=True)


def _retune(tuning: pd.DataFrame, outcome: str, pick: float, study_steps: float,
            noise_sd: float) -> tuple[pd.DataFrame, tuple[Retune, ...]]:
    """The re-tune at each length it ran (`stats.worth_lr.retune_check`), as rows of worth_retune.csv."""
    if not (math.isfinite(noise_sd) and noise_sd > 0):
        return pd.DataFrame(columns=RETUNE_COLS), ()
    factors = (tuning[LR_KEY] / pick).to_numpy(float)
    checks = retune_check(tuning[LENGTH_KEY].to_numpy(float), factors, tuning[outcome].to_numpy(float), noise_sd)
    rows = [{"steps": r.steps, "length": r.steps / study_steps, "pick_lr": pick,
             "factors": ", ".join(f"{f:g}" for f in r.factors), "best_factor": r.best_factor,
             "pick_loss": next((y for f, y in zip(r.factors, r.losses) if math.isclose(f, 1.0)), math.nan),
             "best_loss": min(r.losses) if r.losses else math.nan, "gap": r.gap, "noise_sd": r.noise_sd,
             "threshold": r.threshold, "verdict": r.verdict,
             "optimum": r.optimum if r.optimum is not None else math.nan} for r in checks]
    return pd.DataFrame(rows, columns=RETUNE_COLS), checks


def _placed(curve: stats_worth.BaselineCurve, steps: float, arm: stats_worth.ArmLoss,
            anchor: stats_worth.ArmLoss | None) -> float:
    """The arm's loss on the curve's scale: its own, or (with an anchor) the curve at S plus its effect."""
    if anchor is None:
        return arm.mean
    return float(curve.at(np.array([math.log2(steps)]))[0]) + arm.mean - anchor.mean


@dataclass(frozen=True)
class _LevelCurve:
    """What one scale level's arms are placed on: the baseline, the study's length S, the baseline's curve (None where
    none was fitted), its anchor (a study not under wsd), the re-tune's checks, the notes every arm's row carries and
    the baseline's step times."""

    baseline: str
    steps: float
    curve: stats_worth.BaselineCurve | None
    anchor: stats_worth.ArmLoss | None
    checks: tuple[Retune, ...]
    notes: list[str]
    base_sec: pd.Series


def _level_rows(res: Results, worth: pd.DataFrame, tuning: pd.DataFrame, estimation: pd.DataFrame,
                selection: pd.DataFrame, schedule: str,
                level: str) -> tuple[list[dict], pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """worth.csv's rows of one scale level, the curve's points, the curve drawn and the re-tune."""
    baseline = res.baseline[ARM]
    base = estimation[estimation[ARM] == baseline]
    steps = _study_steps(res, base)
    curve, runs, anchor, notes = _curve_and_anchor(res, worth, base, steps, schedule)
    retune, checks, failed = _level_retune(res, tuning, selection, base, curve, steps)
    placed = _LevelCurve(baseline=baseline, steps=steps, curve=curve, anchor=anchor, checks=checks,
                         notes=notes + failed, base_sec=_step_seconds(res, baseline, level))
    rows = [_arm_row(res, placed, arm, estimation[estimation[ARM] == arm], level)
            for arm in [a for a in res.levels[ARM] if a != baseline and a in set(estimation[ARM])]]
    points = runs[["seed", LENGTH_KEY, res.outcome]].set_axis(["seed", "steps", "loss"], axis=1) \
        if curve is not None else pd.DataFrame(columns=["seed", "steps", "loss"])
    drawn = pd.DataFrame(columns=["steps", "loss"])
    if curve is not None:
        x = np.linspace(curve.x[0], curve.x[-1], GRID_POINTS)
        drawn = pd.DataFrame({"steps": np.exp2(x), "loss": curve.at(x)})
    return rows, points, drawn, retune


def _curve_and_anchor(res: Results, worth: pd.DataFrame, base: pd.DataFrame, steps: float, schedule: str) -> tuple[
        stats_worth.BaselineCurve | None, pd.DataFrame, stats_worth.ArmLoss | None, list[str]]:
    """The baseline's curve and its runs, the anchor (the baseline's estimation runs, where the study is not wsd),
    and why there is no curve (a curve that could not be fitted, or no anchor, leaves it None)."""
    notes = []
    try:
        curve, runs = _curve(res, worth, base, steps, schedule)
    except ValueError as exc:
        curve, runs, notes = None, worth, [str(exc)]
    anchor = None
    if curve is not None and schedule != WSD:
        try:
            anchor = _arm_loss(res, base)
        except ValueError as exc:
            curve, notes = None, [f"no anchor: {exc}"]
    return curve, runs, anchor, notes


def _level_retune(res: Results, tuning: pd.DataFrame, selection: pd.DataFrame, base: pd.DataFrame,
                  curve: stats_worth.BaselineCurve | None,
                  steps: float) -> tuple[pd.DataFrame, tuple[Retune, ...], list[str]]:
    """The re-tune at the curve's lengths (worth_retune.csv's rows and the checks), and why it failed ([] if not)."""
    retune, checks = pd.DataFrame(columns=RETUNE_COLS), ()
    if curve is None or not len(tuning) or len(base) <= 1 or LR_KEY not in base:
        return retune, checks, []
    # the noise of one run's loss: the SD of the baseline's estimation runs over seeds (a re-tune compares
    # lrs on one seed, whose shared part cancels: conservative)
    noise = float(base[res.outcome].astype(float).std(ddof=1))
    pick = float(base[LR_KEY].mode().iloc[0])
    tuning = _tuning_at_study_length(res, tuning, selection, pick, steps)
    try:
        retune, checks = _retune(tuning[tuning[LENGTH_KEY].isin(curve.steps)], res.outcome, pick, steps, noise)
    except ValueError as exc:
        return retune, checks, [str(exc)]
    return retune, checks, []


def _arm_row(res: Results, placed: _LevelCurve, arm: str, mine: pd.DataFrame, level: str) -> dict:
    """worth.csv's row of one arm (its estimation runs `mine`): its loss, its step cost against the baseline's, and,
    on the baseline's curve, its step multiplier, re-tuned multiplier and wall-time multiplier; why not, in `note`."""
    curve, steps, anchor = placed.curve, placed.steps, placed.anchor
    row = {"arm": arm, "baseline": placed.baseline, "study_steps": steps, "n_arm": len(mine),
           "anchored": anchor is not None, "curve_seeds": curve.losses.shape[0] if curve is not None else 0,
           "lengths": ", ".join(f"{s / steps:g}" for s in curve.steps) if curve is not None else ""}
    note = list(placed.notes)
    try:
        loss = _arm_loss(res, mine)
        row["arm_loss"] = loss.mean
        cost = None  # the time per step needs no curve: a speed claim is judged on it alone
        if len(loaded(res).step_times):
            try:
                cost = _step_cost(_step_seconds(res, arm, level), placed.base_sec)
                row.update(step_cost=cost.ratio, step_cost_low=cost.ci_low, step_cost_high=cost.ci_high)
            except ValueError as exc:
                note.append(str(exc))
        if curve is not None:
            w = stats_worth.step_multiplier(curve, steps, loss, anchor=anchor)
            row.update(_worth_cols(w), placed_loss=_placed(curve, steps, loss, anchor))
            note += [w.note] if w.note else []
            if placed.checks:
                r = retuned_multiplier(curve, steps, loss, placed.checks, anchor=anchor)
                row.update(retuned_multiplier=r.multiplier, retuned_low=r.ci_low, retuned_high=r.ci_high,
                           retuned_low_open=r.ci_low_open, retuned_high_open=r.ci_high_open,
                           retuned_censored=r.censored)
            if cost is not None:
                wall = stats_worth.wall_multiplier(w, cost)
                row.update(wall_multiplier=wall.multiplier, wall_low=wall.ci_low, wall_high=wall.ci_high)
    except ValueError as exc:
        note.append(str(exc))
    return {**row, "note": "; ".join(note)}


def coverage(res: Results, worth: pd.DataFrame, base: pd.DataFrame, steps: float, schedule: str) -> pd.DataFrame:
    """Per length of `worth.lengths`: of the baseline's seeds the lengths train on (as the sweep plans them: its first
    `worth.seeds` estimation seeds that finished ok, and any its `worth` runs have), how many have a run there
    (finished or failed) and how many of those finished ok; a wsd study's 1x points are its estimation runs (`base`,
    any status). What a curve that could not be fitted lacked: a length not trained yet, or too few seeds ok."""
    seeds = set(sorted(set(base.loc[base["ok"], "seed"]))[:res.spec.kinds[KEY].seeds]) | set(worth["seed"])
    lengths = pd.to_numeric(worth[LENGTH_KEY], errors="coerce") if len(worth) else pd.Series(dtype=float)
    rows = []
    for factor in res.spec.kinds[KEY].lengths:
        there = worth[np.isclose(lengths, max(1, round(factor * steps)))]  # the sweep's steps of a length
        if schedule == WSD and factor == 1.0:
            there = pd.concat([there, base[base["seed"].isin(seeds)]])
        rows.append({"length": factor, "seeds": len(seeds), "trained": len(set(there["seed"]) & seeds),
                     OK: len(set(there.loc[there["ok"], "seed"]) & seeds)})
    return pd.DataFrame(rows, columns=COVERAGE_COLS[1:])


def _worth_cols(w: stats_worth.Worth) -> dict:
    return {"multiplier": w.multiplier, "multiplier_low": w.ci_low, "multiplier_high": w.ci_high,
            "low_open": w.ci_low_open, "high_open": w.ci_high_open, "censored": w.censored, "lowest": w.lowest,
            "highest": w.highest, "multiplier_df": w.df}


def _with_texts(table: pd.DataFrame) -> pd.DataFrame:
    """The compact texts of the rounded multipliers ("1.4x (1.2-1.6)", "beyond 4x"): `worth`, `wall_worth` and
    `retuned_worth`, from the rounded numbers, so that every later sentence agrees with the CSV."""
    def text(r: dict, m: str, pre: str, cens: str, opened: str, scale: float) -> str:
        if not isinstance(r.get(cens), str) or (not r[cens] and pd.isna(r.get(m))):
            return ""
        return multiplier_text(r[m], r[f"{pre}_low"], r[f"{pre}_high"], r[cens], bool(r[f"{opened}low_open"]),
                               bool(r[f"{opened}high_open"]), r["lowest"] / scale, r["highest"] / scale)
    rows = table.to_dict("records")
    table["worth"] = [text(r, "multiplier", "multiplier", "censored", "", 1.0) for r in rows]
    table["wall_worth"] = [text(r, "wall_multiplier", "wall", "censored", "", r["step_cost"])
                           if pd.notna(r.get("step_cost")) else "" for r in rows]
    table["retuned_worth"] = [text(r, "retuned_multiplier", "retuned", "retuned_censored", "retuned_", 1.0)
                              for r in rows]
    return table


def worth_view(res: Results) -> WorthView | None:
    """The worth of each arm (per scale level); None where the sweep has no `worth:` runs."""
    if not has_worth(res):
        return None
    schedule = study_schedule(res)
    role = run_roles(res.other_roles)
    every = res.other_roles[role == WORTH]  # any status: what `coverage` counts
    worth = _ok(every, res.outcome)
    tuning = _ok(res.other_roles[role == WORTH_TUNING], res.outcome)
    estimation = _ok(res.runs, res.outcome)
    selection = _ok(res.selection, res.outcome) if len(res.selection) and LR_KEY in res.selection else \
        pd.DataFrame(columns=[ARM, "seed", LR_KEY, *res.scale])
    scale = res.scale[0] if res.scale else ""  # one scale factor (e.g. the corpus); its levels in grid order
    levels = [lv for lv in res.levels[scale] if lv in set(every[scale])] if scale else [""]  # a level's runs all
    # failed: its rows say so
    rows, points, curves, retunes, covered = [], [], [], [], []
    for level in levels:
        def at(frame: pd.DataFrame) -> pd.DataFrame:
            return frame[frame[scale].astype(str) == level] if scale else frame
        mine, pts, drawn, retune = _level_rows(res, at(worth), at(tuning), at(estimation), at(selection), schedule,
                                               level)
        base, base_ok = (frame[frame[ARM] == res.baseline[ARM]] for frame in (at(res.runs), at(estimation)))
        covered.append(coverage(res, at(every), base, _study_steps(res, base_ok), schedule).assign(scale_level=level))
        rows += [{**r, **({"scale_factor": scale, "scale_level": level} if scale else {})} for r in mine]
        points.append(pts.assign(scale_level=level))
        curves.append(drawn.assign(scale_level=level))
        retunes.append(retune.assign(**({"scale_factor": scale, "scale_level": level} if scale else {})))
    cols = WORTH_COLS[:2] + (SCALE_COLS if scale else []) + WORTH_COLS[2:]
    table = _with_texts(round_frame(pd.DataFrame(rows, columns=cols)))
    retune_cols = (SCALE_COLS if scale else []) + RETUNE_COLS
    retune = round_frame(pd.concat(retunes, ignore_index=True).reindex(columns=retune_cols))
    return WorthView(table=table, points=pd.concat(points, ignore_index=True),
                     curves=pd.concat(curves, ignore_index=True), retune=retune, schedule=schedule,
                     scale_factor=scale, text=res.test_blocks.present and loaded(res).blocks.present,
                     coverage=pd.concat(covered, ignore_index=True).reindex(columns=COVERAGE_COLS))


def with_worth(card: pd.DataFrame, worth: pd.DataFrame, scaled: bool) -> pd.DataFrame:
    """An arms sweep's scorecard (`card`) with each arm's `worth` (after `call`; `worth`: worth.csv) and its speed
    claims judged on the time per step (`stats.scorecard.speed_verdict`)."""
    def key(r: dict) -> tuple[str, ...]:
        return (str(r["arm"]), str(r["scale_level"])) if scaled else (str(r["arm"]),)
    of = {key(r): r for r in worth.to_dict("records")}
    card = card.copy()
    at = list(card.columns).index("call") + 1
    for i, col in enumerate(["worth", "step_cost", "step_cost_low", "step_cost_high"]):
        card.insert(at + i, col, [of.get(key(r), {}).get(col, "" if col == "worth" else math.nan)
                                  for r in card.to_dict("records")])
    for i, r in card.iterrows():
        w = of.get(key(r.to_dict()))
        if r["about"] == "speed" and w is not None and r["direction"]:
            low, high = (float(w.get(c, math.nan)) for c in ("step_cost_low", "step_cost_high"))
            card.at[i, "verdict"] = speed_verdict(str(r["direction"]), low, high)
            card.at[i, "reason"] = MEASURED["speed"]
    return card


QUANTITY = "worth"  # a ladder's name of an arm's step multiplier (predictions.csv's and trends.csv's `quantity`)


def worth_quantities(table: pd.DataFrame) -> list[ArmQuantity]:
    """Each arm's step multiplier with its 95% CI (worth.csv's rows, as rounded there), for a ladder to follow up its rungs;
    an arm censored, or whose CI reaches the end of the lengths trained (open), has none: its bounds are not a CI."""
    out = []
    for r in table.to_dict("records"):
        values = [float(r[c]) for c in ("multiplier", "multiplier_low", "multiplier_high", "multiplier_df")]
        if r["censored"] or bool(r["low_open"]) or bool(r["high_open"]) or not all(map(math.isfinite, values)):
            continue
        out.append(ArmQuantity(arm=str(r["arm"]), quantity=QUANTITY, estimate=values[0], ci_low=values[1],
                               ci_high=values[2], df=values[3], ratio=True))
    return out
