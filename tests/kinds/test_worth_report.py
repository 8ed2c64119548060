"""The report of a `worth:` study: tables/worth.csv, the scorecard's worth column and speed verdicts, the figure,
the section and `gptlab.load`'s view, on a synthetic results folder with planted multipliers."""
from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from calibration.synthetic import make_results
from gptlab import load
from gptlab.kinds.worth import sentences as worth_words
from gptlab.kinds.worth.figure import worth_plot
from gptlab.kinds.worth.tables import worth_view
from gptlab.report import sentences, write_report
from gptlab.report.document import build
from gptlab.report.figures import Figures
from gptlab.report.fmt import multiplier_text
from gptlab.report.kinds import kind_sections
from gptlab.report.load import load_results
from gptlab.report.tables import compute_tables
from gptlab.run.resultsdir import ResultsDir
from gptlab.runio import write_csv
from gptlab.stats.scorecard import NOT_TESTED, speed_verdict
from tests.helpers import skip_figures

S = 1000  # the study's steps
PER_DOUBLING = 0.1  # the baseline's loss falls this much per doubling of steps (planted, linear in log2 steps)
ARMS = {"nanogpt": {}, "rotary": {"model.position": "rotary"}, "relu": {"model.activation": "relu"},
        "post_ln": {"model.norm": "post"}, "rmsnorm": {"model.norm_type": "rmsnorm"}}
# rotary: 2x; relu: beyond 4x (a gain of 3 doublings' worth); post_ln: worse than the baseline at 0.5x; rmsnorm: 1x
EFFECTS = {"rotary": -PER_DOUBLING, "relu": -0.3, "post_ln": 0.15, "rmsnorm": 0.0}
SECONDS = {"rmsnorm": 0.9}  # per step, relative to the baseline (the others cost the same)
N_BLOCKS = 8


def _blocks(run_dir, loss: float, rng) -> float:
    """Write the run's test_blocks.csv around `loss` and return the loss they add up to."""
    tokens = np.full(N_BLOCKS, 1000) + np.arange(N_BLOCKS) % 3
    values = loss + np.linspace(-0.05, 0.05, N_BLOCKS) + rng.normal(0, 0.003, N_BLOCKS)
    ResultsDir(run_dir.parent.parent).run(run_dir.name).write_test_blocks(
        [{"block": b, "chars": int(t), "tokens": int(t), "loss": float(v)} for b, (t, v) in enumerate(zip(tokens, values))])
    return float((values * tokens).sum() / tokens.sum())


def worth_results(tmp_path, schedule: str = "wsd", with_worth: bool = True, seeds: int = 4,
                  corpora: tuple[str, ...] = ()):
    """An arms study at S steps (its schedule `schedule`) whose baseline trained to 0.5x, 1x, 2x and 4x S
    (role `worth`) and was re-tuned at 0.5x and 4x (role `worth_tuning`: its best lr at 4x is twice the pick)."""
    grid = {"arm": list(ARMS), **({"data.dataset": list(corpora)} if corpora else {})}
    out = make_results(tmp_path, grid, seeds=seeds, name="worthy", max_iters=S, seed_sd=0.004, noise_sd=0.002,
                       effects={(("arm", a),): e for a, e in EFFECTS.items()})
    rd, rng = ResultsDir(out), np.random.default_rng(5)
    spec = yaml.safe_load(rd.sweep_yaml.read_text())
    spec["arms"] = ARMS
    if corpora:
        spec["scale"] = {"data.dataset": list(corpora)}
    spec["base"]["train"]["schedule"] = schedule
    spec["claims"] = {"rmsnorm": [{"source": "paper", "claim": "faster", "direction": "better", "about": "speed"},
                                  {"source": "paper", "claim": "same loss", "direction": "same"}],
                      "rotary": [{"source": "paper", "claim": "lower loss", "direction": "better"}]}
    if with_worth:
        spec["worth"] = {"lengths": [0.5, 1, 2, 4], "seeds": seeds, "retune": [0.5, 2]}
    rd.sweep_yaml.write_text(yaml.safe_dump(spec, sort_keys=False))
    summary = pd.read_csv(rd.summary_csv)
    # the runs' wall times: post_ln's trained on a slow day (3x); the step costs come from step_times.csv alone
    timing = np.random.default_rng(7)  # its own stream: the losses' draws stay those of rng
    summary["wall_s"] = [S * 0.05 * (3.0 if a == "post_ln" else 1.0) for a in summary["arm"]]
    write_csv(rd.step_times_csv, [{"arm": a, **({"data.dataset": c} if c else {}), "round": r, "machine": "test CPU",
                                   "seconds_per_step": 0.05 * SECONDS.get(a, 1.0) * (1 + timing.normal(0, 0.02))}
                                  for r in range(5) for c in corpora or ("",) for a in ARMS],
              ["arm", *(["data.dataset"] if corpora else []), "round", "seconds_per_step", "machine"])
    summary["best_test_loss"] = [_blocks(rd.run(r).path, v, rng) for r, v in zip(summary["run_id"],
                                                                                   summary["best_val_loss"])]
    summary["best_test_bpc"] = summary["best_test_loss"] / math.log(2)
    summary["best_val_bpc"] = summary["best_val_loss"] / math.log(2)
    summary["role"], summary["train.lr"] = "estimation", 0.002
    if with_worth:
        summary["train.max_iters"] = S
    rows = []
    lengths = [0.5, 2, 4] if schedule == "wsd" else [0.5, 1, 2, 4]  # wsd: the estimation runs are the 1x points
    for corpus in corpora or ("",):
        base = summary[(summary["arm"] == "nanogpt") & (summary["data.dataset"] == corpus if corpus else True)]
        base = base.set_index("seed")
        template = rd.run(base["run_id"].iloc[0]).path

        def add(run_id: str, seed: int, length: float, lr: float, loss: float, role: str) -> None:
            run_id += corpus
            shutil.copytree(template, rd.run(run_id).path)
            test = _blocks(rd.run(run_id).path, loss, rng)
            rows.append({**base.iloc[0].to_dict(), "run_id": run_id, "seed": seed, "train.lr": lr, "role": role,
                         "train.max_iters": int(round(length * S)), "best_val_loss": loss, "best_test_loss": test,
                         "best_test_bpc": test / math.log(2), "wall_s": length * S * 0.05})
        for seed in range(seeds):
            anchor = base.loc[seed, "best_val_loss"] - (0.05 if schedule != "wsd" else 0.0)  # wsd ends lower
            for length in lengths:
                loss = anchor - PER_DOUBLING * math.log2(length) + rng.normal(0, 0.002)
                add(f"worth{length:g}s{seed}", seed, length, 0.002, loss, "worth")
        for length in (0.5, 4):
            for factor in (0.5, 1, 2):
                gain = {(4, 2): -0.03, (4, 0.5): 0.02, (0.5, 2): 0.01, (0.5, 0.5): 0.02}.get((length, factor), 0.0)
                loss = 1.5 - PER_DOUBLING * math.log2(length) + gain
                add(f"tune{length:g}x{factor:g}", 1_000_000, length, 0.002 * factor, loss, "worth_tuning")
    if with_worth:
        summary = pd.concat([summary, pd.DataFrame(rows)], ignore_index=True)
    summary.to_csv(rd.summary_csv, index=False)
    return out


@pytest.fixture(scope="module")
def wsd_study(tmp_path_factory):
    return worth_results(tmp_path_factory.mktemp("wsd"))


@pytest.fixture(scope="module")
def wsd_tables(wsd_study):
    res = load_results(wsd_study)
    tables = compute_tables(res)
    return res, tables, sentences.write(res, tables)


def test_worth_csv_has_each_arm_with_its_multiplier_and_right_censoring(wsd_tables):
    res, tables, _ = wsd_tables
    worth = tables.files({})["worth"].set_index("arm")
    assert list(worth.index) == ["rotary", "relu", "post_ln", "rmsnorm"]
    rotary = worth.loc["rotary"]
    assert 1.6 < rotary["multiplier"] < 2.5 and rotary["multiplier_low"] < 2 < rotary["multiplier_high"]
    assert rotary["censored"] == "" and rotary["worth"].startswith(f"{rotary['multiplier']:.2f}x (")
    assert worth.loc["relu", "censored"] == "above" and worth.loc["relu", "worth"] == "beyond 4x"
    assert math.isnan(worth.loc["relu", "multiplier"])  # never extrapolated
    assert worth.loc["post_ln", "censored"] == "below" and worth.loc["post_ln", "worth"] == "below 0.5x"
    assert worth.loc["rmsnorm", "multiplier_low"] < 1 < worth.loc["rmsnorm", "multiplier_high"]
    cost = worth.loc["rmsnorm"]
    assert cost["step_cost_high"] < 1 and 0.85 < cost["step_cost"] < 0.95
    assert worth.loc["rotary", "step_cost_low"] < 1 < worth.loc["rotary", "step_cost_high"]
    assert worth.loc["post_ln", "step_cost_low"] < 1 < worth.loc["post_ln", "step_cost_high"]  # not its runs' 3x
    assert (worth["lengths"] == "0.5, 1, 2, 4").all() and (worth["curve_seeds"] == 4).all()
    assert not worth["anchored"].any()  # a wsd study: its own estimation runs are the 1x points
    retune = tables.kinds["worth"].retune
    assert list(retune["length"]) == [0.5, 4] and list(retune["best_factor"]) == [1, 2]
    assert list(retune["verdict"]) == ["stays", "moves"]  # 0.03 below the pick, noise of one run about 0.005
    # the re-tuned curve is 0.03 lower at 4x: rotary's multiplier can only shrink
    assert worth.loc["rotary", "retuned_multiplier"] <= rotary["multiplier"]


def test_the_scorecard_gains_worth_and_a_speed_claim_its_verdict(wsd_tables):
    _, tables, words = wsd_tables
    card, worth = tables.scorecard, tables.kinds["worth"].table.set_index("arm")
    speed = card[(card["arm"] == "rmsnorm") & (card["about"] == "speed")].iloc[0]
    assert speed["verdict"] == "holds" and speed["worth"] == worth.loc["rmsnorm", "worth"]
    assert speed["reason"] != NOT_TESTED["speed"] and speed["step_cost_high"] < 1
    assert card.set_index("claim").loc["lower loss", "worth"] == worth.loc["rotary", "worth"]
    assert any("time per step 0.9" in line and "**holds**" in line for line in words.scorecard)


def test_the_section_says_each_multiplier_the_machine_and_the_re_tune(wsd_tables):
    res, tables, words = wsd_tables
    worth = tables.kinds["worth"].table.set_index("arm")
    assert words.kinds["worth"].lines[0].startswith(f"rotary: the baseline needs {worth.loc['rotary', 'worth']} its steps")
    assert "beyond 4x" in words.kinds["worth"].lines[1] and "below 0.5x" in words.kinds["worth"].lines[2]
    assert "the CI holds 1x" in words.kinds["worth"].lines[3]  # rmsnorm: no gain in steps is shown
    curve, machine = words.kinds["worth"].notes
    assert "warmup-stable-decay" in curve and "same schedule" in curve
    assert "alternated with every other arm's over 5 rounds, on test CPU (`step_times.csv`)" in machine
    assert "not compared" in machine  # the runs' own wall times
    retune = words.kinds["worth"].retune
    assert "at 4x the best lr factor tried (of 0.5, 1, 2) is 2" in retune[0] and "optimum moves" in retune[0]
    sections = kind_sections(res, tables, words, Figures())
    text = "\n".join(str(getattr(b, "text", "")) for b in build(res, tables, words, Figures(), [], sections))
    assert text.index("Summary") < text.index("What each arm is worth") < text.index("Scorecard")
    png = worth_plot(res, tables.kinds["worth"])
    assert png is not None and png.startswith(b"\x89PNG")


def test_a_cosine_study_places_each_arm_on_the_curve_with_the_anchor(tmp_path):
    res = load_results(worth_results(tmp_path, schedule="cosine", seeds=3))
    view = worth_view(res)
    worth = view.table.set_index("arm")
    assert worth["anchored"].all() and view.schedule == "cosine"
    # the wsd runs end 0.05 lower than the cosine ones (unanchored, rotary would read 1.4x): the anchor takes it off
    assert 1.7 < worth.loc["rotary", "multiplier"] < 2.4
    assert "anchor" in worth_words.curve_note(view, res) and "cosine" in worth_words.curve_note(view, res)


@pytest.mark.slow  # two corpora: every table twice (seconds under load)
def test_each_corpus_gets_its_own_curve_and_multipliers(tmp_path):
    res = load_results(worth_results(tmp_path, seeds=3, corpora=("tinyshakespeare", "austen")))
    tables = compute_tables(res)
    worth = tables.kinds["worth"].table
    assert list(zip(worth["arm"], worth["scale_level"]))[:2] == [("rotary", "tinyshakespeare"), ("relu", "tinyshakespeare")]
    assert len(worth) == 8 and set(worth["scale_level"]) == {"tinyshakespeare", "austen"}
    rotary = worth[worth["arm"] == "rotary"]
    assert rotary["multiplier_low"].lt(2).all() and rotary["multiplier_high"].gt(2).all()  # bits/char: still 2x
    view = tables.kinds["worth"]
    assert len(view.retune) == 4 and set(view.curves["scale_level"]) == set(worth["scale_level"])
    card = tables.scorecard
    speed = card[card["about"] == "speed"]
    assert len(speed) == 2 and speed["verdict"].eq("holds").all()
    assert sentences.write(res, tables).kinds["worth"].lines[0].startswith("rotary (dataset=tinyshakespeare): the baseline")


def test_without_the_key_no_worth_and_speed_claims_are_not_tested(tmp_path):
    res = load_results(worth_results(tmp_path, with_worth=False, seeds=3))
    tables = compute_tables(res)
    words = sentences.write(res, tables)
    assert "worth" not in tables.kinds and "worth" not in tables.files({}) and "worth" not in words.kinds
    assert "worth" not in tables.scorecard.columns
    assert tables.scorecard.loc[tables.scorecard["about"] == "speed", "verdict"].eq("not tested here").all()
    sections = kind_sections(res, tables, words, Figures())
    text = "\n".join(str(getattr(b, "text", "")) for b in build(res, tables, words, Figures(), [], sections))
    assert "What each arm is worth" not in text


def _edited(study, tmp_path, edit):
    """A copy of `study` whose summary.csv `edit` changed (a frame in, a frame out), read as the report reads it: its
    results, tables and sentences, and the worth section's text."""
    copy = tmp_path / "edited"
    shutil.copytree(study, copy)
    rd = ResultsDir(copy)
    edit(pd.read_csv(rd.summary_csv)).to_csv(rd.summary_csv, index=False)
    res = load_results(copy)
    tables = compute_tables(res)
    words = sentences.write(res, tables)
    blocks = kind_sections(res, tables, words, Figures())
    text = "\n".join(str(getattr(b, "text", "")) for b in build(res, tables, words, Figures(), [], blocks))
    return tables, words, text


def _at(summary: pd.DataFrame, role: str, length: float | None = None, seeds=None, arm: str | None = None) -> pd.Series:
    mask = summary["role"] == role
    if length is not None:
        mask &= summary["train.max_iters"] == int(round(length * S))
    if seeds is not None:
        mask &= summary["seed"].isin(seeds)
    return mask & (summary["arm"] == arm) if arm else mask


def test_a_curve_its_shortest_length_left_short_of_seeds_says_why_not_0_seeds(wsd_study, tmp_path):
    def diverged(summary):  # the shortest length ok on one seed only: no 2 seeds have every length
        summary.loc[_at(summary, "worth", 0.5, [1, 2, 3]), "status"] = "diverged"
        return summary

    tables, words, text = _edited(wsd_study, tmp_path, diverged)
    assert (tables.kinds["worth"].table["curve_seeds"] == 0).all()
    curve = words.kinds["worth"].notes[0]
    assert curve == ("The curve: none could be fitted, so no arm has a multiplier: fewer than 2 of the baseline's seeds "
                     "finished ok at every length (0.5x: 1 of 4 seeds ok).")
    assert " 0 seeds" not in text and "What each arm is worth" in text


def test_a_curve_not_every_length_of_which_trained_says_to_rerun(wsd_study, tmp_path):
    def stopped(summary):  # stopped after the trunks (4x): the shorter lengths branch from them later
        return summary[~(_at(summary, "worth", 0.5, [1, 2, 3]) | _at(summary, "worth", 2, [1, 2, 3]))]

    _, words, text = _edited(wsd_study, tmp_path, stopped)
    assert words.kinds["worth"].notes[0] == ("The curve: none could be fitted, so no arm has a multiplier: not every length is "
                                    "trained yet (0.5x on 1 of 4 seeds, 2x on 1 of 4 seeds): rerun the sweep to finish it.")
    assert " 0 seeds" not in text


@pytest.mark.parametrize("case, words", [
    ("stopped before the lengths", "No multiplier yet: the baseline's lengths are not trained (the sweep stopped before "
                                   "them): rerun the sweep to finish it."),
    ("baseline diverged", "No multiplier: no estimation run of the baseline finished ok, so the sweep trained none of "
                          "its lengths."),
])
def test_a_study_without_its_lengths_keeps_the_section_with_one_sentence_why(wsd_study, tmp_path, case, words):
    def edit(summary):
        summary = summary[summary["role"] == "estimation"].copy()
        if case == "baseline diverged":
            summary.loc[summary["arm"] == "nanogpt", "status"] = "diverged"
        return summary

    tables, said, text = _edited(wsd_study, tmp_path, edit)
    assert tables.kinds["worth"] is None and said.kinds["worth"].notes == (words,)
    section = text.split("What each arm is worth", 1)[1]
    assert section.lstrip().startswith(words)


@pytest.mark.slow
def test_the_report_writes_worth_csv_its_figure_and_load_gives_it(tmp_path, wsd_study, monkeypatch):
    skip_figures(monkeypatch, keep=("worth",))
    report = write_report(wsd_study, tmp_path / "reports")
    worth = pd.read_csv(report / "tables" / "worth.csv", keep_default_na=False)
    assert (report / "figures" / "worth.png").is_file() and (report / "tables" / "worth_retune.csv").is_file()
    text = (report / "report.md").read_text()
    assert f"the baseline needs {worth['worth'][0]} its steps" in text and "![" in text.split("## What each")[1]
    card = pd.read_csv(report / "tables" / "scorecard.csv", keep_default_na=False)
    assert list(card.columns[card.columns.get_loc("call") + 1:][:2]) == ["worth", "step_cost"]
    study = load(wsd_study)
    assert list(study.worth["arm"]) == list(worth["arm"]) and list(study.worth_retune["best_factor"]) == [1, 2]


def _every_row_twice(text: str) -> str:
    return text + text.split("\n", 1)[1]


def _first_time_absurd(text: str) -> str:
    """The first row's seconds_per_step set to 1e308 (its step cost was inf)."""
    header, first, rest = text.split("\n", 2)
    cells = first.split(",")
    cells[header.split(",").index("seconds_per_step")] = "1e308"
    return "\n".join([header, ",".join(cells), rest])


@pytest.mark.parametrize("damage", [lambda text: "", lambda text: text.replace("seconds_per_step", "seconds"),
                                    _every_row_twice, _first_time_absurd],
                         ids=["empty", "no-seconds-column", "every-row-twice", "1e308"])
def test_a_damaged_step_times_csv_is_not_measured_in_the_report_load_and_export(tmp_path, wsd_study, damage, caplog):
    from gptlab.report.export import main as export_main

    copy = tmp_path / "worthy"
    shutil.copytree(wsd_study, copy)
    path = ResultsDir(copy).step_times_csv
    path.write_text(damage(path.read_text()))
    res = load_results(copy)
    times = res.kinds["worth"].step_times
    assert not len(times) and worth_words.machine_note(times).startswith("Times: not measured.")
    worth = load(copy).worth
    assert len(worth) and ("step_cost" not in worth or worth["step_cost"].isna().all())
    assert export_main([str(copy), "--tensorboard", str(tmp_path / "tb")]) == 0
    assert f"{path}: " in caplog.text and "read as not measured" in caplog.text


@pytest.mark.parametrize("direction, low, high, expected", [
    ("better", 0.85, 0.95, "holds"), ("better", 1.02, 1.2, "opposite"), ("better", 0.9, 1.1, "not shown"),
    ("worse", 1.02, 1.2, "holds"), ("same", 0.9, 1.1, "not shown"), ("same", 0.8, 0.9, "opposite"),
    ("better", math.nan, math.nan, "not shown"),
])
def test_a_speed_claim_reads_the_step_costs_ci_against_1(direction, low, high, expected):
    assert speed_verdict(direction, low, high) == expected


@pytest.mark.parametrize("args, text", [
    ((1.43, 1.2, 1.6, "", False, False, 0.5, 4), "1.4x (1.2-1.6)"),
    ((2.013, 1.97, 2.05, "", False, False, 0.5, 4), "2.01x (1.97-2.05)"),
    ((3.1, 1.9, 4.0, "", False, True, 0.5, 4), "3.1x (1.9 to >4)"),
    ((0.6, 0.5, 0.9, "", True, False, 0.5, 4), "0.6x (<0.5 to 0.9)"),
    ((math.nan, 4.0, 4.0, "above", False, True, 0.5, 4), "beyond 4x"),
    ((math.nan, 0.5, 0.5, "below", True, False, 0.5, 4), "below 0.5x"),
])
def test_a_multiplier_is_written_with_its_ci_and_never_past_the_lengths(args, text):
    assert multiplier_text(*args) == text


@pytest.mark.parametrize("rounds, words", [(1, "over 1 round, on"), (3, "over 3 rounds, on")])
def test_the_machine_note_counts_its_rounds_in_words(rounds, words):
    times = pd.DataFrame({"arm": ["baseline"] * rounds, "round": range(rounds), "machine": "test CPU",
                          "seconds_per_step": 0.1})
    assert words in worth_words.machine_note(times)


def test_a_level_without_a_curve_says_why_beside_the_levels_that_have_one():
    from types import SimpleNamespace

    from gptlab.kinds.worth.tables import COVERAGE_COLS, WorthView

    table = pd.DataFrame({"arm": ["rotary", "rotary"], "scale_level": ["tinyshakespeare", "austen"],
                          "study_steps": [S, S], "lengths": ["0.5, 1, 2", ""], "curve_seeds": [3, 0], "note": ["", "x"]})
    coverage = pd.DataFrame([("tinyshakespeare", f, 3, 3, 3) for f in (0.5, 1, 2)]
                            + [("austen", 0.5, 3, 3, 1), ("austen", 1, 3, 3, 3), ("austen", 2, 3, 0, 0)],
                            columns=COVERAGE_COLS)
    view = WorthView(table=table, points=pd.DataFrame(), curves=pd.DataFrame(), retune=pd.DataFrame(), schedule="wsd",
                     scale_factor="data.dataset", coverage=coverage)
    res = SimpleNamespace(label=lambda factor, level: f"dataset={level}", outcome_label="test loss", unit="bits/char")
    note = worth_words.curve_note(view, res)
    assert "to 0.5, 1, 2x the study's 1000 steps on 3 seeds" in note
    assert (" At dataset=austen no curve could be fitted: not every length is trained yet (2x on none): rerun the sweep "
            "to finish it.") in note


def test_a_curve_fitted_before_every_length_trained_counts_its_seeds_and_says_to_rerun(wsd_study, tmp_path):
    def stopped(summary):  # seed 3's shorter lengths not trained yet: the curve has the other 3 seeds
        return summary[~(_at(summary, "worth", 0.5, [3]) | _at(summary, "worth", 2, [3]))]

    tables, words, _ = _edited(wsd_study, tmp_path, stopped)
    assert (tables.kinds["worth"].table["curve_seeds"] == 3).all()
    curve = words.kinds["worth"].notes[0]
    assert "the study's 1000 steps on 3 seeds" in curve
    assert " Not every length is trained yet (0.5x on 3 of 4 seeds, 2x on 3 of 4 seeds): rerun the sweep to finish it." in curve


def test_a_curve_on_the_one_baseline_seed_that_trained_ok_says_a_curve_needs_two(wsd_study, tmp_path):
    def one_seed(summary):  # the baseline ok on seed 0 alone: the sweep trains its lengths on that one
        summary.loc[(summary["role"] == "estimation") & (summary["arm"] == "nanogpt") & (summary["seed"] > 0),
                    "status"] = "diverged"
        return summary[~(_at(summary, "worth") & (summary["seed"] > 0))]

    _, words, text = _edited(wsd_study, tmp_path, one_seed)
    assert words.kinds["worth"].notes[0] == ("The curve: none could be fitted, so no arm has a multiplier: 1 of the baseline's "
                                    "estimation seeds finished ok at the study's length, and its lengths train on those: "
                                    "a curve needs 2.")
    assert " 0 seeds" not in text
