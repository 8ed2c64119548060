"""The `ladder:` kind's sweep side (`gptlab.kinds.ladder`): every arm tuned and estimated at every rung, each upper
rung's lrs from the picks below, and each rung's predictions written before it trains and never changed."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from fakes import FakeBackend, csv_rows, train_spec
from helpers import REPO, skip_figures, tiny_config

from gptlab.errors import GptlabError
from gptlab.kinds.ladder.kind import LadderKind
from gptlab.kinds.ladder.measure import measure_rung, predict_rung, record_predictions
from gptlab.kinds.ladder.spec import rung_of
from gptlab.kinds.ladder.stages import LadderStages, shifted_space
from gptlab.run.config import RunConfig
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunSummary
from gptlab.sweep.kinds import planned_range
from gptlab.sweep.runs import Run
from gptlab.sweep.spec import validate_spec

LRS = [1e-3, 2e-3, 4e-3, 8e-3]
RUNGS = {"a": {"model.n_embd": 16, "train.max_iters": 20}, "b": {"model.n_embd": 32, "train.max_iters": 20},
         "c": {"model.n_embd": 64, "train.max_iters": 20}}


def _raw(corpus: Path, **extra) -> dict:
    config = tiny_config(corpus)
    config["train"].pop("lr")
    config["train"].pop("max_iters")
    config["model"].pop("n_embd")
    config["train"]["min_lr"] = 1e-5
    return {"name": "ladder", "base": {k: config[k] for k in ("model", "train", "data")},
            "arms": {"base": {}, "relu": {"model.activation": "relu"}, "nope": {"model.position": "none"}},
            "seeds": 2, "tune": {"method": "refine", "space": {"train.lr": list(LRS)}, "max_runs_per_cell": 5},
            "ladder": {"rungs": RUNGS}, **extra}


def _spec(corpus: Path, **extra):
    return validate_spec(_raw(corpus, **extra), corpus.parent / "sweep.yaml", {}, {})


def planted(config: RunConfig) -> float:
    """Each arm's best lr halves with each doubling of width; relu's effect grows with width, nope's holds."""
    width = config.model.n_embd
    best = 8e-3 * 16 / width
    arm = 0.02 * math.log2(width / 8) * (config.model.activation == "relu") + 0.05 * (config.model.position == "none")
    return 2.0 - 0.1 * math.log2(width) + arm + 0.03 * math.log2(config.train.lr / best) ** 2 + 1e-3 * (config.seed % 5)






def test_every_arm_is_tuned_and_estimated_at_every_rung_from_the_picks_below(tmp_path, corpus):
    spec, results = _spec(corpus), tmp_path / "results"
    planned, out, planner = train_spec(spec, results, FakeBackend(planted))
    assert isinstance(planner, LadderStages)
    summary = csv_rows(results / "summary.csv")
    assert len(summary) == len(planned) and {r["rung"] for r in summary} == {"a", "b", "c"}
    assert list(summary[0])[:6] == ["run_id", "seed", "arm", "train.lr", "rung", "started_at"]
    for rung in "abc":
        estimation = [r for r in summary if r["rung"] == rung and r["role"] == "estimation"]
        assert {r["arm"] for r in estimation} == {"base", "relu", "nope"}
        assert (results / "rungs" / rung / "tuning.csv").is_file() and (results / "rungs" / rung / "refine.csv").is_file()
    assert not (results / "tuning.csv").exists()  # every rung's own files in its own folder
    picks = {rung: {float(r["train.lr"]) for r in summary if r["rung"] == rung and r["role"] == "estimation"}
             for rung in "abc"}
    assert max(picks["c"]) < max(picks["a"])  # the optimum moved down with width, and the tuner followed it
    (started,) = shifted_space(spec.kinds["tune"].space, sorted(picks["b"])).values()  # rung c starts from b's picks
    assert started != tuple(LRS) and len(started) >= 3
    assert "rung c (" in out and "train.lr " + str(list(started)) in out
    b_pick = {r["arm"]: float(r["train.lr"]) for r in summary if (r["rung"], r["role"]) == ("b", "estimation")}
    windows = 0
    for arm in ("base", "relu", "nope"):  # each arm's round 1 is the part of it around its own pick below
        (window,) = shifted_space(spec.kinds["tune"].space, [b_pick[arm]]).values()
        first = {float(r["train.lr"]) for r in summary if (r["rung"], r["role"], r["arm"], r["seed"]) ==
                 ("c", "selection", arm, "1000000")}
        assert set(window) <= first and f"arm={arm} {list(window)}" in out
        windows += len(window)
    assert f"rung c: selection round 1: {windows} runs" in out
    assert "rung c: predicted from the 2 rungs below" in out


def test_predictions_are_written_before_their_rung_trains_and_never_changed(tmp_path, corpus):
    spec, results = _spec(corpus), tmp_path / "results"
    seen: list[bool] = []

    class Watching(FakeBackend):  # notes, as each run of rung c is handed over, whether c's predictions exist
        def run(self, tasks, plan, on_result, fail_fast=False):
            for task in tasks:
                if rung_of(spec.kinds["ladder"], task.config) == "c":
                    seen.append(any(r["rung"] == "c" for r in csv_rows(results / "predictions.csv"))
                                if (results / "predictions.csv").is_file() else False)
            super().run(tasks, plan, on_result, fail_fast)

    train_spec(spec, results, Watching(planted))
    assert seen and all(seen)
    predictions = csv_rows(results / "predictions.csv")
    assert {r["rung"] for r in predictions} == {"c"} and {r["arm"] for r in predictions} == {"relu", "nope"}
    assert all(float(r["pred_low"]) < float(r["predicted"]) < float(r["pred_high"]) for r in predictions)
    written = (results / "predictions.csv").read_bytes()
    rerun = FakeBackend(planted)
    train_spec(spec, results, rerun)
    assert rerun.trained == [] and (results / "predictions.csv").read_bytes() == written
    for row in csv_rows(results / "summary.csv"):  # rung a's runs gone, retrained to other losses: c's rows stand
        if row["rung"] == "a":
            shutil.rmtree(results / "runs" / row["run_id"])
    train_spec(spec, results, FakeBackend(lambda config: planted(config) + 0.3 * (config.model.position == "none")))
    assert (results / "predictions.csv").read_bytes() == written


def test_a_ladder_stopped_below_the_top_rung_resumes_and_predicts_before_the_top_trains(tmp_path, corpus):
    spec, results = _spec(corpus), tmp_path / "results"
    whole, _, _ = train_spec(spec, tmp_path / "whole" / "results", FakeBackend(planted))
    b_run = next(r for r in whole if rung_of(spec.kinds["ladder"], r.config) == "b" and r.role == "estimation")
    stopped, _, _ = train_spec(spec, results, FakeBackend(planted, fail=[b_run.run_id]))  # a run of rung b failed
    assert not (results / "predictions.csv").exists()
    assert not any(rung_of(spec.kinds["ladder"], r.config) == "c" for r in stopped)
    again, _, _ = train_spec(spec, results, FakeBackend(planted), rerun_failed=True)
    assert [r.run_id for r in again] == [r.run_id for r in whole]  # the same decisions as a ladder never stopped
    assert csv_rows(results / "predictions.csv") and {r["rung"] for r in csv_rows(results / "predictions.csv")} == {"c"}


def with_steps(config: RunConfig) -> float:
    """`planted`, with each arm's loss falling 0.1 per doubling of its steps (its rung's 20, or a `worth:` length)."""
    return planted(config) - 0.1 * math.log2(config.train.max_iters / 20)


def test_worth_is_measured_at_every_rung_predicted_before_the_top_and_its_trend_reported(tmp_path, corpus, monkeypatch):
    """With `worth:`, each rung trains its baseline at multiples of that rung's steps; the rungs below predict each
    arm's worth at the top before it trains; the report follows each arm's worth up the rungs, with its trend."""
    from gptlab.kinds.ladder.report import LadderReport
    from gptlab.report.load import load_results
    from gptlab.report.tables import compute_tables
    from gptlab.runio import write_yaml

    skip_figures(monkeypatch)
    spec, results = _spec(corpus, worth={"lengths": [0.5, 1, 2]}), tmp_path / "results"
    planned, out, _ = train_spec(spec, results, FakeBackend(with_steps))
    summary = csv_rows(results / "summary.csv")
    worth = [r for r in summary if r["role"] == "worth"]
    assert {r["rung"] for r in worth} == {"a", "b", "c"}  # each at its rung (a length of a rung is no other rung)
    assert {int(r["train.max_iters"]) for r in worth} == {10, 20, 40}
    predictions = csv_rows(results / "predictions.csv")
    by = {(r["arm"], r["quantity"]): r for r in predictions if r["rung"] == "c"}
    assert set(by) == {(a, q) for a in ("relu", "nope") for q in ("effect", "worth")}
    # planted: relu's effect 0.02 log2(width / 8) nats, each 0.1 nats a doubling of steps: worth 2^(-effect / 0.1)
    truth = 2 ** (-0.2 * math.log2(64 / 8))
    w = by[("relu", "worth")]
    assert float(w["pred_low"]) < truth < float(w["pred_high"]) and float(w["predicted"]) == pytest.approx(truth, rel=0.05)
    write_yaml(ResultsDir(results).sweep_yaml, spec.to_dict())  # as the sweep's command writes it
    res = load_results(results)
    view = compute_tables(res).kinds["ladder"]
    rows = view.rungs[view.rungs["quantity"] == "worth"].set_index(["rung", "arm"])
    for rung, width in zip("abc", (16, 32, 64)):
        assert rows.loc[(rung, "relu"), "estimate"] == pytest.approx(2 ** (-0.2 * math.log2(width / 8)), rel=0.05)
        assert rows.loc[(rung, "nope"), "estimate"] == pytest.approx(2 ** -0.5, rel=0.05)
    trends = view.trends.set_index(["arm", "quantity"])
    assert trends.loc[("relu", "worth"), "trend"] == "grows"  # its worth (below 1) falls further with compute
    # per doubling of compute (N ~ width^2: half a doubling of width), in log: -0.2 ln 2 / 2
    assert trends.loc[("relu", "worth"), "slope"] == pytest.approx(-0.1 * math.log(2), rel=0.1)
    assert trends.loc[("nope", "worth"), "slope"] == pytest.approx(0.0, abs=0.02)
    judged = view.predictions[view.predictions["quantity"] == "worth"]
    assert set(judged["covered"]) == {"yes"} and len(judged) == 2
    words = LadderReport().sentences(res, compute_tables(res))
    (line,) = [line for line in words.arms if line.startswith("arm=relu's worth (a multiple of the baseline's steps): a ")]
    assert "Its worth (slope: of its natural log) moves further from 1 with compute" in line
    assert (results / "rungs" / "a").is_dir() and not (results / "step_times.csv").exists()


def test_a_ladder_s_work_after_the_runs_is_each_rung_s_in_its_own_folder(tmp_path, corpus, monkeypatch):
    import io

    from gptlab.kinds.worth import stages as worth_stages
    from gptlab.sweep.kinds import after_runs

    spec = _spec(corpus, worth={"lengths": [0.5, 1, 2]})
    planned, _, _ = train_spec(spec, tmp_path / "results", FakeBackend(with_steps))
    timed = []  # worth's step timing, as the sweep asks for it once every run has finished
    monkeypatch.setattr(worth_stages, "time_steps", lambda folder, runs, threads, out: timed.append((folder, runs)))
    after_runs(spec, ResultsDir(tmp_path / "results"), planned, 1, io.StringIO())
    assert [folder.own for folder, _ in timed] == [tmp_path / "results" / "rungs" / r for r in "abc"]
    assert [{r.config.model.n_embd for r in runs} for _, runs in timed] == [{16}, {32}, {64}]
    parts = LadderKind().parts(spec, ResultsDir(tmp_path / "results"), planned)
    assert [folder.own for _, folder, _ in parts] == [tmp_path / "results" / "rungs" / r for r in "abc"]
    assert all("ladder" not in sub.kinds and "worth" in sub.kinds for sub, _, _ in parts)
    assert sorted(r.run_id for _, _, runs in parts for r in runs) == sorted(r.run_id for r in planned)
    for (sub, _, runs), width in zip(parts, (16, 32, 64)):
        assert {r.config.model.n_embd for r in runs} == {width} == {sub.base_config.model.n_embd}


def test_record_predictions_keeps_a_rung_s_rows_once_written(tmp_path):
    results = ResultsDir(tmp_path)
    row = {"rung": "c", "arm": "relu", "quantity": "effect", "predicted": 0.1, "pred_low": 0.0, "pred_high": 0.2,
           "written_at": "2026-01-01T00:00:00+00:00"}
    assert record_predictions(results, [row], "c")
    assert not record_predictions(results, [{**row, "predicted": 9.0}], "c")  # a second prediction: refused
    assert record_predictions(results, [{**row, "rung": "d"}], "d")
    assert [(r["rung"], r["predicted"]) for r in csv_rows(results.predictions_csv)] == [("c", "0.1"), ("d", "0.1")]


def test_predict_rung_needs_two_rungs_below_and_follows_their_trend():
    from gptlab.kinds.ladder.measure import Measured

    def rung(effect: float, worth: float) -> dict:
        ms = [Measured(arm="x", effect=effect, se=0.01, df=10),
              Measured(arm="x", effect=math.log(worth), se=0.01, df=10, quantity="worth", ratio=True)]
        return {m.key: m for m in ms}

    below = [rung(0.0, 1.2), rung(0.1, 1.44)]
    assert predict_rung([1.0, 2.0], below[:1], "b") == []
    effect, worth = predict_rung([1.0, 2.0, 4.0], below, "c")
    assert (effect["quantity"], worth["quantity"]) == ("effect", "worth")
    assert effect["predicted"] == pytest.approx(0.2) and effect["pred_low"] < 0.2 < effect["pred_high"]
    # a ratio's trend is a line in its log: x1.2 per doubling, predicted as the ratio itself
    assert worth["predicted"] == pytest.approx(1.728) and worth["pred_low"] < 1.728 < worth["pred_high"]
    assert worth["pred_low"] > 0 and worth["pred_high"] / 1.728 == pytest.approx(1.728 / worth["pred_low"])


def test_shifted_space_spans_the_picks_below_on_the_sweep_file_s_lattice():
    space = {"train.lr": (5e-4, 1e-3, 2e-3, 4e-3, 8e-3)}
    assert shifted_space(space, [2e-3]) == {"train.lr": (1e-3, 2e-3, 4e-3)}
    assert shifted_space(space, [2e-3, 2e-3 * 2 ** 0.5]) == {"train.lr": (1e-3, 2e-3, 4e-3, 8e-3)}  # a half-step pick
    assert shifted_space(space, [8e-3])["train.lr"] == (4e-3, 8e-3, 0.016)  # beyond the file's levels: its lattice
    assert shifted_space(space, []) is None and shifted_space({"train.lr": (1e-3, 3e-3, 4e-3)}, [1e-3]) is None


def _steps_only(raw: dict, **extra) -> None:
    """A ladder whose rungs differ only in their steps (20, 40, 80 at one width), with `extra` sections."""
    raw["base"]["model"]["n_embd"] = 16
    raw["ladder"]["rungs"] = {name: {"train.max_iters": n} for name, n in zip("abc", (20, 40, 80))}
    raw.update(extra)


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw.pop("tune"), "every arm is tuned at every rung"),
    (lambda raw: raw.update(worth={"lengths": [0.01, 1, 2]}),  # 20 steps at the base's 2000, none at a rung's 20
     "ladder.rungs.a: worth.lengths: 0.01 x 20 steps rounds to 0 steps"),
    (lambda raw: _steps_only(raw, worth={"lengths": [0.5, 1, 2]}), "these rungs differ only in train.max_iters"),
    (lambda raw: raw["ladder"]["rungs"]["b"].update({"model.activation": "relu"}), "which an arm or the grid sets"),
    (lambda raw: raw["ladder"]["rungs"]["b"].pop("train.max_iters"), "every rung sets the same keys"),
])
def test_a_ladder_refuses_what_it_cannot_train_in_one_line(corpus, change, message):
    raw = _raw(corpus)
    raw["ladder"] = {"rungs": {k: dict(v) for k, v in RUNGS.items()}}
    change(raw)
    with pytest.raises(GptlabError, match=message):
        validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})


def test_a_grid_sweep_cannot_be_a_ladder(corpus):
    raw = _raw(corpus)
    del raw["arms"]
    raw["grid"] = {"model.activation": ["gelu", "relu"]}
    with pytest.raises(GptlabError, match="ladder: needs arms"):
        validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})


def test_the_spec_is_rung_one_s_and_the_range_counts_every_rung(corpus):
    spec = _spec(corpus)
    assert spec.base_config.model.n_embd == 16 and {r.config.model.n_embd for r in spec.runs} == {16}
    low, high = planned_range(spec)
    assert low >= 3 * len(spec.runs) and high > low
    assert LadderKind().columns(spec, []) == ["rung", "started_at"]


def test_measure_rung_is_the_report_s_estimate_of_each_arm():
    """The sweep's measurement of a rung (study 8's runs, as a rung) gives the report's own arms.csv estimates."""
    folder = ResultsDir(REPO / "results" / "scorecard")
    rows = csv_rows(folder.summary_csv)
    runs = [Run(r["run_id"], (("arm", r["arm"]),), int(r["seed"]), None) for r in rows if r["role"] == "estimation"]
    summaries = [folder.run(r.run_id).summary() for r in runs]
    measured = measure_rung(runs, [s for s in summaries if s is not None], folder, "nanogpt")
    report = {r["arm"]: r for r in csv_rows(REPO / "reports" / "scorecard" / "tables" / "arms.csv")}
    assert set(measured) == {(arm, "effect") for arm in report}
    for (arm, _), m in measured.items():
        assert round(m.effect, 4) == pytest.approx(float(report[arm]["estimate"]), abs=1e-4), arm
    assert all(m.se > 0 and m.df > 0 for m in measured.values())
    assert isinstance(summaries[0], RunSummary)


# -- one real ladder, its report -------------------------------------------------------------------

@pytest.mark.slow
def test_a_small_real_ladder_end_to_end_and_its_report(tmp_path, corpus, capsys):
    import pandas as pd
    import yaml

    from gptlab.sweep_cli import main as sweep_main

    raw = _raw(corpus, executor={"backend": "loky", "n_jobs": 2, "threads": 1})
    raw["base"]["train"].update(eval_interval=10, log_interval=5, warmup_iters=2)
    raw["base"]["data"]["test_fraction"] = 0.05
    raw["ladder"]["rungs"] = {k: {**v, "train.max_iters": 10 + 5 * i} for i, (k, v) in enumerate(RUNGS.items())}
    raw["tune"]["max_runs_per_cell"] = 4
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    args = [str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results"),
            "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main(args + ["--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert "ladder, smallest rung first: rung a: " in dry and "the whole ladder (3 rungs" in dry
    assert sweep_main(args) == 0
    results, report = tmp_path / "results" / "ladder", tmp_path / "reports" / "ladder"
    summary = pd.read_csv(results / "summary.csv")
    predictions = pd.read_csv(results / "predictions.csv")
    c_runs = summary[summary["rung"] == "c"]
    assert set(predictions["rung"]) == {"c"} and (c_runs["started_at"] >= predictions["written_at"].max()).all()
    md = (report / "report.md").read_text()
    assert "## Does it hold at scale?" in md and "The rest of this report, from its summary on, is rung c's alone" in md
    assert md.index("## Does it hold at scale?") < md.index("## Summary")  # the ladder's answer leads
    assert "this summary, and every effect and call after it, is rung c's alone" in md
    tables = {n: pd.read_csv(report / "tables" / f"{n}.csv") for n in ("trends", "predictions", "rung_effects", "arms")}
    assert list(tables["trends"].columns)[:3] == ["arm", "quantity", "rungs"] and set(tables["trends"]["arm"]) == {
        "relu", "nope"}
    assert set(tables["trends"]["trend"]) <= {"grows", "shrinks", "holds", "inconclusive"}
    top = tables["rung_effects"][tables["rung_effects"]["rung"] == "c"].set_index("arm")
    assert tables["arms"].set_index("arm")["estimate"].to_dict() == top["estimate"].to_dict()  # the report is c's
    judged = tables["predictions"].set_index("arm")
    assert (judged["measured"] == top.loc[judged.index, "estimate"]).all()
    assert set(judged["covered"]) <= {"yes", "no"} and (report / "figures" / "ladder.png").is_file()
    assert len(pd.read_csv(report / "tables" / "lr_by_rung.csv")) == 9  # 3 arms x 3 rungs
    assert sweep_main(args) == 0 and "0 to train" in capsys.readouterr().err  # resumed: nothing trains again
    # a discussion quotes an arm at a rung by reference; a rung the ladder lacks is refused, naming the valid rows
    from gptlab.report import write_report
    from gptlab.report.load import ReportError

    row = tables["rung_effects"].set_index(["rung", "arm"]).loc[("a", "relu")]
    (results / "discussion.md").write_text("At rung a ReLU is {{rung_effects: arm=relu @ rung=a}}.\n")
    md = (write_report(results, report) / "report.md").read_text()
    assert f"At rung a ReLU is {float(row['estimate']):+.4f} (95% CI {float(row['ci_low']):+.4f}".replace("+-", "-") in md
    (results / "discussion.md").write_text("{{rung_effects: arm=relu @ rung=z}}\n")
    with pytest.raises(ReportError, match="matches no row of rung_effects; valid rows: .*arm=relu @ quantity=effect, rung=c"):
        write_report(results, report)
