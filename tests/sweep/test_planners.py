"""Planners (`gptlab.sweep.planners`): the stages they plan from finished runs, and the one loop that trains them.

Nothing here trains a model: planners are fed fake finished rows or synthetic results, and the
loop (`execute.train_stages`) runs on a backend that writes each run's summary.json at once.
"""
from __future__ import annotations

import csv
import functools
import io
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from fakes import FakeBackend, fake_spec

from gptlab.executors import Resources
from gptlab.kinds.seeds.stages import AdaptiveSeeds, widest_in_summary
from gptlab.run.config import resolve_run_config
from gptlab.run.resultsdir import ROUNDS_CSV, SUMMARY_CSV, SWEEP_YAML, ResultsDir
from gptlab.stats.adaptive_seeds import SeedRule, Widest
from gptlab.sweep.execute import SweepOptions, planner_for, train_stages
from gptlab.sweep.planners import FinishedRuns, FixedSeeds, Stage
from gptlab.sweep.runs import Run, SweepSpec

GRID = {"model.activation": ["gelu", "relu"]}


def _runs(seeds: int, cells=("gelu", "relu"), tag: str = "") -> list[Run]:
    return [Run(f"{c}{tag}_s{s}", (("model.activation", c),), s, resolve_run_config({"seed": s}))
            for c in cells for s in range(seeds)]


def _spec(runs: list[Run], rule: SeedRule | None = None) -> SweepSpec:
    return fake_spec(GRID, runs, {"model.activation": "gelu"}, kinds={"seeds": rule} if rule else {})


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class FakeWidest:
    """The rule's input by seed count, recording what it was asked."""

    def __init__(self, by_seeds: dict[int, float]) -> None:
        self.by_seeds, self.asked = by_seeds, []

    def __call__(self, results_dir: Path, n_seeds: int) -> Widest:
        self.asked.append(n_seeds)
        return Widest(self.by_seeds[n_seeds], "model.activation=relu")


# -- the planners, from fake finished runs --------------------------------------------------------

def test_fixed_seeds_is_one_stage_of_the_specs_runs(tmp_path):
    runs = _runs(3)
    planner = planner_for(_spec(runs), io.StringIO())
    assert isinstance(planner, FixedSeeds) and planner.preview() is None
    stage = planner.next_stage(FinishedRuns(tmp_path))
    assert stage == Stage("sweep fake", tuple(runs), tuple(runs))  # no progress tag: one stage
    assert planner.next_stage(FinishedRuns(tmp_path, ({"run_id": "x", "status": "ok"},))) is None


def test_adaptive_seeds_decides_round_2_from_round_1_alone_and_records_both(tmp_path):
    rule, out = SeedRule(2, 5, 0.01), io.StringIO()
    widest = FakeWidest({2: 0.012, 3: 0.0095})  # 2 * (0.012 / 0.01)^2 = 2.88 -> 3 seeds
    runs = _runs(5)
    planner = AdaptiveSeeds(runs, rule, out, widest)
    first = planner.next_stage(FinishedRuns(tmp_path))
    assert [r.run_id for r in first.runs] == ["gelu_s0", "gelu_s1", "relu_s0", "relu_s1"]
    assert first.planned == first.runs and first.title == first.tag == "round 1 (2 seeds)"
    assert "round 1 is incomplete" in first.unfinished and widest.asked == []  # nothing decided before round 1
    second = planner.next_stage(FinishedRuns(tmp_path, ({"status": "ok"},) * 4))
    assert widest.asked == [2] and second.title == "round 2 (3 seeds)"
    assert [r.run_id for r in second.runs] == ["gelu_s0", "gelu_s1", "gelu_s2", "relu_s0", "relu_s1", "relu_s2"]
    assert _rows(tmp_path / ROUNDS_CSV) == [{"round": "1", "seeds": "2", "runs_trained": "4",
                                             "widest_half_width": "0.012", "effect": "model.activation=relu"}]
    assert planner.next_stage(FinishedRuns(tmp_path, ({"status": "ok"},) * 6)) is None
    assert widest.asked == [2, 3]
    assert [(r["round"], r["seeds"], r["runs_trained"], r["widest_half_width"]) for r in _rows(tmp_path / ROUNDS_CSV)] \
        == [("1", "2", "4", "0.012"), ("2", "3", "2", "0.0095")]
    assert "target 0.01 -> 3 seeds per cell\n" in out.getvalue()


@pytest.mark.parametrize("half_width, seeds, stages, note", [
    (0.005, 2, 1, "-> 2 seeds per cell\n"),  # round 1 already reaches the target: no round 2
    (0.05, 5, 2, "-> 5 seeds per cell (max)\n"),  # 2 * 25 = 50 seeds wanted, capped at max
    (math.nan, 5, 2, "-> 5 seeds per cell\n"),  # no error estimate: as many as allowed
])
def test_adaptive_seeds_stops_or_caps_as_the_rule_says(tmp_path, half_width, seeds, stages, note):
    out = io.StringIO()
    planner = AdaptiveSeeds(_runs(5), SeedRule(2, 5, 0.01), out, FakeWidest({2: half_width, 5: 0.02}))
    planned = []
    stage = planner.next_stage(FinishedRuns(tmp_path))
    while stage is not None:
        planned.append(stage)
        stage = planner.next_stage(FinishedRuns(tmp_path, ({"status": "ok"},) * len(stage.planned)))
    assert len(planned) == stages and {r.seed for r in planned[-1].planned} == set(range(seeds))
    assert out.getvalue().endswith(note)
    assert [int(r["round"]) for r in _rows(tmp_path / ROUNDS_CSV)] == list(range(1, stages + 1))


def test_the_adaptive_preview_counts_the_minimum_and_the_worst_case():
    preview = AdaptiveSeeds(_runs(5), SeedRule(2, 5, 0.01), io.StringIO(), FakeWidest({})).preview()
    assert preview.intro.startswith("adaptive seeds: round 1 trains 2 seeds per cell")
    assert [(c.label, len(c.runs)) for c in preview.cases] == [("minimum: 2 seeds per cell", 4),
                                                               ("worst case: 5 seeds per cell", 10)]


def test_the_round_1_decision_is_steins_from_the_round_1_runs_on_disk(tmp_path):
    """From summary.csv's rows, checked by hand: the half-width from round 1's residuals, whatever else is on disk."""
    from scipy import stats

    from calibration.synthetic import make_results

    grid = {"model.activation": ["gelu", "relu"], "model.tying": ["tied", "untied"]}
    results = make_results(tmp_path, grid, seeds=4, effects={(("model.activation", "relu"),): -0.05}, noise_sd=0.01)
    spec = yaml.safe_load((results / SWEEP_YAML).read_text())
    spec["seeds"] = {"min": 2, "max": 4, "precision": 0.001, "precision_for": "effects"}
    (results / SWEEP_YAML).write_text(yaml.safe_dump(spec))
    rule = SeedRule(2, 4, 0.001)
    spec_of_grid = fake_spec(grid, _runs(4), {"model.activation": "gelu", "model.tying": "tied"}, kinds={"seeds": rule})
    summary = _rows(results / SUMMARY_CSV)

    def decide(rows: list[dict]) -> tuple[int, list[dict]]:
        with open(results / SUMMARY_CSV, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(summary[0]))
            writer.writeheader()
            writer.writerows(rows)
        planner = AdaptiveSeeds(_runs(4), rule, io.StringIO(), functools.partial(widest_in_summary, spec_of_grid))
        planner.next_stage(FinishedRuns(results))
        second = planner.next_stage(FinishedRuns(results, ({"status": "ok"},) * 4))
        return max(r.seed for r in second.planned) + 1, _rows(results / ROUNDS_CSV)

    # By hand: y ~ cell + seed on the 4 cells x 2 seeds of round 1; a main effect of the 2x2 has variance s2 / min.
    y = np.array([[float(r["best_val_loss"]) for r in summary if int(r["seed"]) == s] for s in (0, 1)]).T
    resid = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    df0 = (4 - 1) * (2 - 1)
    half_width = stats.t.ppf(0.975, df0) * math.sqrt((resid ** 2).sum() / df0 / 2)

    seeds, rounds = decide([r for r in summary if int(r["seed"]) < 2])  # what summary.csv holds after round 1
    assert float(rounds[0]["widest_half_width"]) == pytest.approx(half_width, rel=1e-9)
    assert seeds == min(4, math.ceil(2 * (half_width / 0.001) ** 2)) == 4
    shift = {("gelu", "tied"): 0.0, ("gelu", "untied"): 0.9, ("relu", "tied"): -0.4, ("relu", "untied"): 0.2}
    wild = [{**r, "best_val_loss": str(float(r["best_val_loss"])
                                       + (int(r["seed"]) >= 2) * shift[r["model.activation"], r["model.tying"]])}
            for r in summary]  # later seeds far off, differently per cell
    assert decide(wild) == (seeds, rounds)  # later seeds on disk, however odd, change nothing


# -- the loop ------------------------------------------------------------------------------------

class PickThenEstimate:
    """A two-stage planner like tuning's: every cell at two settings, then fresh seeds at each cell's best one."""

    def __init__(self) -> None:
        self.selection = [Run(f"{c}-lr{lr}_s0", (("model.activation", c),), 0, resolve_run_config({"train": {"lr": lr}}))
                          for c in ("gelu", "relu") for lr in (1, 2)]
        self.asked: list[tuple[str, ...]] = []  # the run ids of the rows each call got

    def next_stage(self, finished: FinishedRuns) -> Stage | None:
        self.asked.append(tuple(r.run_id for r in finished.rows))
        if len(self.asked) == 1:
            return Stage("selection", tuple(self.selection), tuple(self.selection), tag="selection")
        if len(self.asked) == 2:  # runs that exist only once stage 1's results do
            best: dict[str, tuple[float, str]] = {}
            for row in finished.rows:
                cell, _, setting = row.run_id.partition("-")
                best[cell] = min(best.get(cell, (math.inf, "")), (float(row.best_val_loss), setting.split("_")[0]))
            estimation = tuple(Run(f"{c}-{lr}_s{s}", (("model.activation", c),), s,
                                   resolve_run_config({"seed": s}))
                               for c, (_, lr) in best.items() for s in (10, 11))
            return Stage("estimation", estimation, (*self.selection, *estimation), tag="estimation")
        return None

    def preview(self) -> None:
        return None


LOSSES = {"gelu-lr1_s0": 1.6, "gelu-lr2_s0": 1.5, "relu-lr1_s0": 1.4, "relu-lr2_s0": 1.7,
          **{f"{c}-{lr}_s{s}": 1.0 + s / 100 for c in ("gelu", "relu") for lr in ("lr1", "lr2") for s in (10, 11)}}


def _loop(tmp_path: Path, planner, backend) -> tuple[tuple[Run, ...], str]:
    out = io.StringIO()
    options = SweepOptions(tmp_path, tmp_path / "reports", stream=out, progress_every_s=60)
    plan = Resources(workers=1, threads=1, device="cpu", gpus=0, reason="test")
    return train_stages(_spec(_runs(1)), planner, plan, options, backend), out.getvalue()


def test_a_later_stage_trains_runs_made_from_the_earlier_stages_results(tmp_path):
    planner, backend = PickThenEstimate(), FakeBackend(LOSSES)
    planned, out = _loop(tmp_path, planner, backend)
    estimation = ["gelu-lr2_s10", "gelu-lr2_s11", "relu-lr1_s10", "relu-lr1_s11"]  # each cell's lower loss
    assert backend.trained == [r.run_id for r in planner.selection] + estimation
    assert planner.asked == [(), tuple(r.run_id for r in planner.selection),
                             (*[r.run_id for r in planner.selection], *estimation)]
    assert [r["run_id"] for r in _rows(tmp_path / SUMMARY_CSV)] == [r.run_id for r in planned]
    assert len(planned) == 8 and "estimation: [4/4] relu-lr1 seed 11: ok" in out

    rerun, again = PickThenEstimate(), FakeBackend(LOSSES)  # a rerun decides again from disk and trains nothing
    assert _loop(tmp_path, rerun, again)[0] == planned and again.trained == [] and rerun.asked == planner.asked


def test_a_stage_that_does_not_finish_ends_the_loop_before_the_planner_is_asked_again(tmp_path):
    planner = AdaptiveSeeds(_runs(3), SeedRule(2, 3, 0.01), io.StringIO(), FakeWidest({2: 1.0, 3: 1.0}))
    backend = FakeBackend({r.run_id: 1.5 for r in _runs(3)}, fail=("relu_s1",))
    planned, out = _loop(tmp_path, planner, backend)
    assert [r.run_id for r in planned] == ["gelu_s0", "gelu_s1", "relu_s0", "relu_s1"]  # round 1 only
    assert planner.widest.asked == [] and not (tmp_path / ROUNDS_CSV).exists()
    assert "round 1 is incomplete: the seed count is chosen once every round-1 run has finished" in out
    assert [r["status"] for r in _rows(tmp_path / SUMMARY_CSV)] == ["ok", "ok", "ok", "failed"]


def test_the_seed_rule_and_the_report_take_the_same_runs_a_high_one_in_and_an_unstable_one_out(tmp_path):
    """A seed that ended far above its cell's others is a measurement for both readers (its own curve showed no
    failure); a run recorded `unstable` (it blew up) is a failure for both."""
    import json

    from calibration.synthetic import make_results
    from gptlab.report.load import load_results
    from gptlab.run.rundir import RunDir
    from gptlab.statuses import UNSTABLE

    grid = {"model.activation": ["gelu", "relu"], "model.tying": ["tied", "untied"]}
    results = make_results(tmp_path, grid, seeds=3, noise_sd=0.01)
    spec = yaml.safe_load((results / SWEEP_YAML).read_text())
    spec["seeds"] = {"min": 3, "max": 6, "precision": 0.001, "precision_for": "effects"}
    (results / SWEEP_YAML).write_text(yaml.safe_dump(spec))
    rows = _rows(results / SUMMARY_CSV)
    bad = next(r for r in rows if (r["model.activation"], r["model.tying"], r["seed"]) == ("relu", "tied", "2"))
    bad["best_val_loss"] = str(float(bad["best_val_loss"]) * 1.4)  # learned, then fell off the edge
    summary_json = RunDir(results / "runs" / bad["run_id"]) / RunDir.SUMMARY
    data = json.loads(summary_json.read_text())
    summary_json.write_text(json.dumps({**data, "best_val_loss": float(bad["best_val_loss"])}))

    def widest(rows: list[dict]) -> float:
        with open(results / SUMMARY_CSV, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        spec_of_grid = fake_spec(grid, _runs(3), {"model.activation": "gelu", "model.tying": "tied"},
                                 kinds={"seeds": SeedRule(3, 6, 0.001)})
        return widest_in_summary(spec_of_grid, ResultsDir(results), 3).half_width

    without = widest([r for r in rows if r is not bad])
    assert widest(rows) > 1.5 * without  # a measurement: it widens the interval, no cut leaves it out
    assert load_results(results).runs.set_index("run_id").loc[bad["run_id"], "ok"]
    bad["status"] = UNSTABLE
    summary_json.write_text(json.dumps({**data, "best_val_loss": float(bad["best_val_loss"]), "status": UNSTABLE}))
    assert widest(rows) == pytest.approx(without, rel=1e-12)  # a failure: decided as if the run were not there
    res = load_results(results)
    assert res.runs.loc[res.runs["status"] == UNSTABLE, "run_id"].tolist() == [bad["run_id"]]
    assert not res.runs.loc[res.runs["run_id"] == bad["run_id"], "ok"].item()
