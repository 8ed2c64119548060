"""`worth:` on the sweep side (`gptlab/kinds/worth/`: `spec`, `stages`): its validation, the baseline's
lengths planned after the estimation seeds with shared trunks, summary.csv's lengths column and roles, the dry
run's count, and a sweep that resumes after losing some of its length runs."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import skip_figures, tiny_config

from gptlab.errors import GptlabError
from gptlab.kinds.worth.spec import DEFAULT_LENGTHS, WorthSpec
from gptlab.kinds.worth.stages import describe, learned, shortfall, worth_runs
from gptlab.kinds.worth.step_times import ROUNDS
from gptlab.run.rundir import RunSummary
from gptlab.sweep.kinds import known_runs, planned_count
from gptlab.sweep.spec import validate_spec


def _raw(corpus: Path, worth=None, **extra) -> dict:
    config = tiny_config(corpus, eval_interval=20)
    config["train"].pop("lr")
    config["data"]["test_fraction"] = 0.05
    raw = {"name": "w", "base": {k: config[k] for k in ("model", "train", "data")},
           "arms": {"nanogpt": {}, "relu": {"model.activation": "relu"}},
           "tune": {"space": {"train.lr": [1e-3, 1e-2]}}, "seeds": 2,
           "worth": {"lengths": [0.5, 1, 2], "seeds": 2, "retune": [2]} if worth is None else worth,
           "executor": {"backend": "loky", "n_jobs": 2, "threads": 1}, **extra}
    return raw


def _spec(corpus: Path, raw: dict):
    return validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})


@pytest.mark.parametrize("worth, message", [
    ({"length": [1, 2, 4]}, r"worth: unknown key 'length' \(did you mean 'lengths'\?\)"),
    ({"lengths": [0.5, 2, 4]}, r"worth.lengths: needs 3 or more lengths, 1 \(the study's own\) among them"),
    ({"lengths": [1, 2]}, "needs 3 or more lengths"),
    ({"lengths": [1, 2, 2, 4]}, "lists a value twice"),
    ({"lengths": [1, 2, "4x"]}, "must be a list of numbers"),
    ({"lengths": [1, 2, float("nan")]}, "positive finite numbers"),
    ({"lengths": [1, 2, 1000]}, "at most 64 times the study's steps"),
    ({"lengths": [0.05, 1, 2]}, r"worth.lengths: 0.05 x 40 steps: .*cooldown"),
    ({"lengths": [0.01, 1, 2]}, r"^worth.lengths: 0.01 x 40 steps rounds to 0 steps; a length trains 1 step or more"),
    ({"lengths": [1, 1.001, 1.002]}, r"^worth.lengths: 1, 1.001 and 1.002 x 40 steps round to the same 40 steps; "
                                     r"lengths must differ by 1 step at least \(1/40 = 0.025 of the study's\)$"),
    ({"lengths": [0.5, 0.51, 1, 2, 2.01]}, r"^worth.lengths: 0.5 and 0.51 x 40 steps round to the same 20 steps, 2 and "
                                           r"2.01 to the same 80; lengths must differ"),
    ({"seeds": 1}, "worth.seeds: must be a whole number >= 2"),
    ({"seeds": True}, "worth.seeds: must be a whole number"),
    ({"retune": [1, 2]}, "worth.retune: lists 1: the pick itself is always tried"),
    ("yes", "worth: must be a mapping"),
])
def test_a_bad_worth_section_is_one_line_naming_the_key(corpus, worth, message):
    with pytest.raises(GptlabError, match=message):
        _spec(corpus, _raw(corpus, worth))


def test_more_worth_seeds_than_the_baseline_trains_are_refused_not_cut(corpus):
    """The lengths train on the baseline's estimation seeds: asking for more than it can train is refused in one line."""
    with pytest.raises(GptlabError, match=r"^worth.seeds: 6 is more than the 2 estimation seeds the baseline nanogpt "
                                          r"trains \(the lengths train on them\); give 2 or fewer, or train more \(`seeds:`\)$"):
        _spec(corpus, _raw(corpus, {"seeds": 6}))
    three = {"nanogpt": {}, "relu": {"model.activation": "relu"}, "silu": {"model.activation": "silu"}}
    assert _spec(corpus, _raw(corpus, {"seeds": 3}, arms=three)).kinds["worth"].seeds == 3  # Dunnett: the baseline trains 3
    adaptive = {"min": 2, "max": 4, "precision": 0.01}
    with pytest.raises(GptlabError, match=r"^worth.seeds: 5 is more than the 4 estimation seeds the baseline nanogpt "
                                          r"trains at most \(the lengths"):
        _spec(corpus, _raw(corpus, {"seeds": 5}, seeds=adaptive))
    assert _spec(corpus, _raw(corpus, {"seeds": 4}, seeds=adaptive)).kinds["worth"].seeds == 4
    with pytest.raises(GptlabError, match=r"the 1 estimation seed the baseline nanogpt trains \(the lengths train on "
                                          r"them\); a curve needs 2: train more \(`seeds:`\)$"):
        _spec(corpus, _raw(corpus, {"seeds": 2}, seeds=1))


def test_the_lengths_say_when_fewer_baseline_seeds_finished_ok_than_worth_seeds(corpus):
    """Adaptive seeds that stopped early, or a baseline seed that failed to train, leave fewer seeds than asked: the
    lengths train on those, and one line says so."""
    spec = _spec(corpus, _raw(corpus, {"lengths": [0.5, 1, 2], "seeds": 3}, seeds=3))
    estimation = [r for r in known_runs(spec) if r.role == "estimation" and r.config.train.lr == 1e-2]
    rows = [RunSummary(run_id=r.run_id, status="diverged" if r.seed == 2 else "ok") for r in estimation]
    kept = learned(estimation, rows)
    assert shortfall(spec, estimation, kept) == [
        "warning: worth.seeds is 3, but 2 of the baseline nanogpt's estimation seeds finished ok: its lengths train "
        "on those 2"]
    assert shortfall(spec, estimation, learned(estimation, [dataclasses.replace(r, status="ok") for r in rows])) == []
    said = describe(spec, worth_runs(spec, estimation, kept))
    assert "at 0.5x, 1x, 2x the study's steps on 2 estimation seeds (6 runs), and at lr x 1, 0.5, 2 at 0.5x and 2x" in said


def test_worth_needs_arms_and_leaves_the_lengths_settings_to_itself(corpus):
    raw = _raw(corpus)
    raw["grid"] = {"model.activation": ["gelu", "relu"]}
    del raw["arms"]
    with pytest.raises(GptlabError, match=r"^worth: prices each arm in the baseline's steps; it needs an arms sweep"):
        _spec(corpus, raw)
    raw = _raw(corpus, scale={"train.max_iters": [40, 60]})
    raw["base"]["train"].pop("max_iters")
    with pytest.raises(GptlabError, match=r"^worth: scale sets train.max_iters, which the baseline's lengths set"):
        _spec(corpus, raw)
    raw = _raw(corpus)
    raw["arms"]["relu"]["train.schedule"] = "wsd"
    with pytest.raises(GptlabError, match=r"^worth: arms.relu sets train.schedule"):
        _spec(corpus, raw)


def test_worth_true_takes_the_defaults_and_sweep_yaml_keeps_them(corpus):
    spec = _spec(corpus, _raw(corpus, True))
    assert spec.kinds["worth"] == WorthSpec() and spec.kinds["worth"].lengths == DEFAULT_LENGTHS
    assert spec.to_dict()["worth"] == {"lengths": [0.5, 1.0, 2.0, 4.0], "retune": [0.5, 2.0]}
    again = _spec(corpus, {**_raw(corpus), "worth": spec.to_dict()["worth"]})
    assert again.kinds["worth"] == spec.kinds["worth"]
    assert "worth" not in _spec(corpus, _raw(corpus, False)).to_dict()


def test_the_lengths_are_the_baselines_estimation_seeds_at_its_pick_under_wsd_and_known_to_the_folder(corpus):
    spec = _spec(corpus, _raw(corpus))
    estimation = [r for r in known_runs(spec) if r.role == "estimation" and r.config.train.lr == 1e-2]
    runs = worth_runs(spec, estimation)
    worth = [r for r in runs if r.role == "worth"]
    assert sorted((r.seed, r.config.train.max_iters) for r in worth) == [(s, n) for s in (0, 1)
                                                                                for n in (20, 40, 80)]
    assert {r.config.train.schedule for r in runs} == {"wsd"}
    assert {r.factors["arm"] for r in runs} == {"nanogpt"}  # the baseline only
    tuning = [r for r in runs if r.role == "worth_tuning"]
    assert sorted((r.config.train.lr, r.config.train.max_iters) for r in tuning) == [
        (0.01, 20), (0.01, 80), (0.02, 20), (0.02, 80)]
    assert {r.seed for r in tuning} == {1_000_000}
    known = {r.run_id for r in known_runs(spec)}
    assert {r.run_id for r in runs} <= known  # a finished length run is never taken for a stray
    assert planned_count(spec) == len(runs) == 10  # counted in the whole sweep's runs (an interrupted sweep says so)
    # a study trained with wsd: its estimation runs are the 1x points, not trained twice
    raw = _raw(corpus)
    raw["base"]["train"]["schedule"] = "wsd"
    wsd = _spec(corpus, raw)
    estimation = [r for r in known_runs(wsd) if r.role == "estimation" and r.config.train.lr == 1e-2]
    lengths = sorted(r.config.train.max_iters for r in worth_runs(wsd, estimation) if r.role == "worth")
    assert lengths == [20, 20, 80, 80]


@pytest.mark.slow
def test_a_sweep_with_worth_trains_the_lengths_from_shared_trunks_and_resumes(tmp_path, corpus, monkeypatch, capsys):
    from gptlab.sweep_cli import main as sweep_main

    skip_figures(monkeypatch)
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(_raw(corpus)))
    args = [str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results"),
            "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main(args + ["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "+ the baseline's lengths (672 steps with shared trunks, 800 without), 18 runs" in out
    assert sweep_main(args) == 0
    err = capsys.readouterr().err
    assert "shared trunks: 4 group(s)" in err and "worth, branches: [6/6]" in err
    summary = pd.read_csv(tmp_path / "results" / "w" / "summary.csv")
    assert list(summary.columns[:5]) == ["run_id", "seed", "arm", "train.lr", "train.max_iters"]
    assert summary.groupby("role").size().to_dict() == {"estimation": 4, "selection": 4, "worth": 6,
                                                         "worth_tuning": 4}
    worth = summary[summary["role"] == "worth"]
    assert sorted(worth["train.max_iters"]) == [20, 20, 40, 40, 80, 80] and (worth["status"] == "ok").all()
    assert worth["best_test_loss"].notna().all()
    assert (summary.loc[summary["role"] == "estimation", "train.max_iters"] == 40).all()
    # each arm's step timed side by side after the runs, alternated over the rounds
    times = pd.read_csv(tmp_path / "results" / "w" / "step_times.csv")
    assert list(times.columns) == ["arm", "round", "seconds_per_step", "machine"]
    assert sorted(times.groupby("arm").size().items()) == [("nanogpt", ROUNDS), ("relu", ROUNDS)]
    assert (times["seconds_per_step"] > 0).all() and times["machine"].str.contains("thread").all()
    assert "step times: each of 2 cells' training step" in err
    # a lost trunk and a lost branch train again, nothing else; the numbers do not change
    lost = worth.sort_values("train.max_iters").iloc[[0, -1]]
    before = dict(zip(lost["run_id"], lost["best_val_loss"]))
    for run_id in lost["run_id"]:
        for file in (tmp_path / "results" / "w" / "runs" / run_id).glob("*.*"):
            file.unlink()
    assert sweep_main(args) == 0
    err = capsys.readouterr().err
    assert "trunks: 4 runs (1 cells), 3 already finished, 1 to train" in err
    assert "5 already finished, 1 to train" in err and "not in this spec" not in err
    assert "step times: kept" in err  # the same cells: not timed again
    again = pd.read_csv(tmp_path / "results" / "w" / "summary.csv").set_index("run_id")
    assert {k: again.loc[k, "best_val_loss"] for k in before} == pytest.approx(before, rel=1e-6)
    # another sweep of the same runs reuses every one, the shared trunks too (whose folders it has already
    # given their branch points when it comes to adopt them)
    (tmp_path / "other.yaml").write_text(yaml.safe_dump({**_raw(corpus), "name": "w2"}))
    other = [str(tmp_path / "other.yaml"), "--results-dir", str(tmp_path / "results"), "--reports-dir",
             str(tmp_path / "reports"), "--reuse", str(tmp_path / "results" / "w")]
    capsys.readouterr()
    assert sweep_main(other + ["--dry-run"]) == 0  # its dry run counts the runs it will copy as trained
    out = capsys.readouterr().out
    assert "with what is on disk: nothing to train" in out.splitlines()[-1], out
    assert sweep_main(other) == 0
    err = capsys.readouterr().err
    assert "trunks: reused 4 finished run(s)" in err and "branches: reused 6 finished run(s)" in err
    assert all(line.endswith(" 0 to train") for line in err.splitlines() if line.endswith(" to train"))


@pytest.mark.parametrize("tuned", [False, True])
def test_a_wsd_study_counts_its_1x_points_once_as_its_estimation_runs(corpus, tuned):
    """The dry run's and an interrupted sweep's count: a wsd study's 1x lengths are its estimation runs, trained once."""
    raw = _raw(corpus, {"lengths": [0.5, 1, 2], "retune": [2]})
    raw["base"]["train"]["schedule"] = "wsd"
    if not tuned:
        del raw["tune"]
        raw["base"]["train"]["lr"] = 1e-2
    spec = _spec(corpus, raw)
    estimation = [r for r in known_runs(spec) if r.role == "estimation" and r.config.train.lr == 1e-2]
    trained = worth_runs(spec, estimation)
    assert sorted(r.config.train.max_iters for r in trained if r.role == "worth") == [20, 20, 80, 80]
    assert planned_count(spec) == len(trained) == 8


def test_the_dry_run_of_an_untuned_wsd_study_counts_the_runs_it_trains_and_names_no_selection(tmp_path, corpus, capsys):
    from gptlab.sweep_cli import main as sweep_main

    raw = _raw(corpus, {"lengths": [0.5, 1, 2], "retune": [2]})
    del raw["tune"]
    raw["base"]["train"].update(schedule="wsd", lr=1e-2)
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    assert sweep_main([str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    # 4 estimation runs (their nanogpt ones are the 1x lengths), 4 lengths (0.5x, 2x on 2 seeds), 4 re-tune runs
    assert "the sweep with the baseline's lengths (432 steps with shared trunks, 560 without), 12 runs, 12 to train" in out
    assert "from scratch: 12 runs" in out and "selection" not in out


def test_the_lengths_take_the_baseline_seeds_that_finished_ok_whatever_their_loss(corpus):
    spec = _spec(corpus, _raw(corpus, seeds=3))
    estimation = [r for r in known_runs(spec) if r.role == "estimation" and r.config.train.lr == 1e-2
                  and r.factors["arm"] == "nanogpt"]
    losses = {0: 1.50, 1: 1.52, 2: 1.90}  # seed 2: 25% above the others, a measurement (its own curve judged it ok)
    rows = [RunSummary(run_id=r.run_id, status="ok", best_test_loss=losses[r.seed]) for r in estimation]
    kept = learned(estimation, rows)
    assert sorted(r.seed for r in estimation if r.run_id in kept) == [0, 1, 2]
    assert sorted({r.seed for r in worth_runs(spec, estimation, kept) if r.role == "worth"}) == [0, 1]  # worth.seeds
    rows[2], rows[1] = (dataclasses.replace(rows[2], status="unstable"),  # failures are never seeds of the curve
                        dataclasses.replace(rows[1], status="diverged"))
    assert sorted(r.seed for r in estimation if r.run_id in learned(estimation, rows)) == [0]


