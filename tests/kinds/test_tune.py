"""Tuned sweeps (`tune:`): validation, the two-stage planner from fake finished runs, picks and edges,
disjoint seeds, kill-safety, the report's "Tuned comparison", and one small real tuned sweep end to end."""
from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from fakes import FakeBackend, csv_rows, train_spec
from helpers import tiny_config, write_tuned_results

from gptlab.errors import GptlabError
from gptlab.kinds.seeds.stages import AdaptiveSeeds
from gptlab.kinds.tune.tuning import Grid
from gptlab.run.config import RunConfig
from gptlab.run.resultsdir import SUMMARY_CSV, TUNING_CSV
from gptlab.run.rundir import RunDir
from gptlab.stats.picks import Trial, edge_keys, pick_rows
from gptlab.sweep.kinds import planned_range
from gptlab.sweep.runs import SELECTION_SEED_OFFSET, TunedRun
from gptlab.sweep.spec import validate_spec
from gptlab.sweep_cli import main as sweep_main

LRS = [1e-3, 2e-3, 4e-3]
GRID = {"model.activation": ["gelu", "relu"], "model.tying": ["tied", "untied"]}


def _raw(corpus: Path, **changes) -> dict:
    config = tiny_config(corpus)
    config["train"].pop("lr")  # tuned
    raw = {"name": "tuned", "base": {k: config[k] for k in ("model", "train", "data")}, "grid": dict(GRID),
           "seeds": 2, "tune": {"space": {"train.lr": list(LRS)}, "seeds": 1}}
    for key, value in changes.items():
        if value is None:
            raw.pop(key)
        else:
            raw[key] = value
    return raw


def _spec(corpus: Path, **changes):
    return validate_spec(_raw(corpus, **changes), corpus.parent / "sweep.yaml", {}, {})




# -- validation ----------------------------------------------------------------------------------

BAD_TUNES = [
    ({"base": "train.lr"}, "train.lr is set in both base and tune.space; keep it in one place"),
    ({"grid": {"train.lr": [1e-3, 2e-3]}}, "train.lr is in both grid and tune.space; keep it in one place"),
    ({"tune": {"space": {"train.lrr": LRS}}}, "tune.space: unknown key 'train.lrr' (did you mean 'train.lr'?)"),
    ({"tune": {"spaces": {"train.lr": LRS}}}, "unknown key 'tune.spaces' (did you mean 'tune.space'?); valid keys "
                                              "under tune with method grid: space, seeds"),
    ({"tune": {"space": {"train.lr": [1e-3, "fast"]}}}, "tune.space.train.lr: train.lr must be float, got 'fast'"),
    ({"tune": {"space": {"train.lr": [1e-3, "1e-3"]}}}, "tune.space.train.lr: lists a level twice"),
    ({"tune": {"space": {"train.lr": [1e-3]}}}, "tune.space.train.lr: lists one level (0.001); a fixed setting "
                                                "belongs in base"),
    ({"tune": {"space": {"train.lr": [1e-3, -1e-3]}}}, "tune.space setting (train.lr=-0.001): grid cell"),
    ({"tune": {"space": {"data.val_fraction": [0.1, 0.2]}}}, "tune.space.data.val_fraction: data settings cannot "
                                                             "be tuned"),
    ({"tune": {}}, "tune.space: needs at least one key to tune"),
    ({"tune": {"space": {}}}, "tune.space: needs at least one key to tune"),
    ({"tune": None}, "tune: must be a mapping"),
    ({"tune": {"space": {"train.lr": LRS}, "seeds": 0}}, "tune.seeds: must be a count of selection seeds between 1"),
    ({"tune": {"space": {"train.lr": LRS}, "seeds": True}}, "tune.seeds: must be a count"),
    ({"seeds": [0, SELECTION_SEED_OFFSET]}, "seeds: in a tuned sweep every seed must be below 1,000,000"),
]


@pytest.mark.parametrize("change, message", BAD_TUNES, ids=[m[:45] for _, m in BAD_TUNES])
def test_a_bad_tune_section_is_one_line_naming_the_key(change, message, corpus):
    change = dict(change)
    raw = _raw(corpus)
    if change.pop("base", None):
        raw["base"]["train"]["lr"] = 1e-3
    raw.update(change)
    with pytest.raises(GptlabError) as err:
        validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_the_cli_refuses_a_bad_tune_with_exit_2_before_writing(tmp_path, corpus, capsys):
    raw = _raw(corpus, tune={"space": {"train.lr": LRS}, "sedes": 2})
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    code = sweep_main([str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: unknown key 'tune.sedes' (did you mean 'tune.seeds'?)")
    assert "\n" not in err and not (tmp_path / "results").exists()


def test_a_tuned_sweep_holds_out_a_test_split_unless_the_spec_sets_one(corpus):
    assert _spec(corpus).base["data"]["test_fraction"] == 0.05  # half of the default val_fraction 0.1
    assert all(r.config.data.test_fraction == 0.05 for r in _spec(corpus).runs)
    raw = _raw(corpus)
    raw["base"]["data"]["test_fraction"] = 0.02
    assert validate_spec(raw, corpus.parent / "s.yaml", {}, {}).base["data"]["test_fraction"] == 0.02
    untuned = _spec(corpus, tune=None)
    assert "test_fraction" not in untuned.base["data"] and "tune" not in untuned.kinds


def test_levels_are_resolved_and_the_spec_records_them(corpus):
    spec = _spec(corpus, tune={"space": {"train.lr": ["1e-3", 2e-3], "train.beta2": ["0.95", 0.99]}, "seeds": 2})
    assert spec.kinds["tune"].to_dict() == {"space": {"train.lr": [0.001, 0.002], "train.beta2": [0.95, 0.99]}, "seeds": 2}
    assert spec.to_dict()["tune"] == spec.kinds["tune"].to_dict()
    assert len(spec.runs) == 4 * 4 * 2  # cells x settings (a product) x selection seeds


# -- the runs: ids, stages and seeds -------------------------------------------------------------

def test_selection_and_estimation_seeds_are_disjoint_and_seeds_never_change_the_selection(corpus):
    spec = _spec(corpus)
    assert isinstance(spec.runs[0], TunedRun) and {r.role for r in spec.runs} == {"selection"}
    assert {r.seed for r in spec.runs} == {SELECTION_SEED_OFFSET}
    assert [(dict(r.cell)["model.activation"], r.setting) for r in spec.runs[:3]] == \
        [("gelu", (("train.lr", lr),)) for lr in LRS]  # cell-major, then setting
    assert len({r.run_id for r in spec.runs}) == len(spec.runs)
    assert spec.runs[0].run_id.startswith("gelu-tied-0.001_s1000000_")
    assert all(r.config.train.lr == dict(r.setting)["train.lr"] for r in spec.runs)
    more = _spec(corpus, seeds=[0, 1, 7, 999_999])
    assert [r.run_id for r in more.runs] == [r.run_id for r in spec.runs]
    assert planned_range(spec) == (12 + 4 * 2, 12 + 4 * 2)


# -- the planner, from fake finished runs --------------------------------------------------------

def planted(config: RunConfig) -> float:
    """gelu is best at lr 2e-3, relu at 4e-3 (the edge); untied 0.01 better; the seed adds a little."""
    best = {"gelu": 2e-3, "relu": 4e-3}[config.model.activation]
    return (1.5 + 0.05 * math.log2(config.train.lr / best) ** 2 - 0.01 * (config.model.tying == "untied")
            + (config.seed % 1000) * 1e-4)




def test_selection_then_estimation_at_each_cells_pick(tmp_path, corpus):
    spec, results = _spec(corpus), tmp_path / "results"
    backend = FakeBackend(planted)
    planned, out, planner = train_spec(spec, results, backend)
    assert isinstance(planner, Grid)
    selection = [r.run_id for r in spec.runs]
    assert backend.trained[:12] == selection and len(backend.trained) == 12 + 4 * 2
    estimation = planned[12:]
    assert [r.run_id for r in planned[:12]] == selection
    assert {(dict(r.cell)["model.activation"], dict(r.setting)["train.lr"]) for r in estimation} == \
        {("gelu", 2e-3), ("relu", 4e-3)}
    assert sorted({r.seed for r in estimation}) == [0, 1] and {r.role for r in estimation} == {"estimation"}
    rows = csv_rows(results / TUNING_CSV)
    assert len(rows) == 12 and [r["picked"] for r in rows[:3]] == ["False", "True", "False"]
    assert [(r["cell"], r["setting"], r["at_edge"]) for r in rows if r["picked"] == "True"] == [
        ("activation=gelu, tying=tied", "lr=0.002", "False"), ("activation=gelu, tying=untied", "lr=0.002", "False"),
        ("activation=relu, tying=tied", "lr=0.004", "True"), ("activation=relu, tying=untied", "lr=0.004", "True")]
    assert float(rows[1]["mean_loss"]) == pytest.approx(planted(spec.runs[1].config))
    assert "warning: the pick of activation=relu, tying=tied (lr=0.004) lies on the edge of the settings tried" in out
    summary = csv_rows(results / SUMMARY_CSV)
    assert list(summary[0])[:6] == ["run_id", "seed", "model.activation", "model.tying", "train.lr", "status"]
    assert list(summary[0])[-1] == "role"
    assert [r["role"] for r in summary] == ["selection"] * 12 + ["estimation"] * 8
    assert "selection: 12 runs (4 cells x 3 settings x 1 seeds)" in out and "estimation: 8 runs (4 cells x 2 seeds)" in out


def test_a_rerun_decides_the_picks_again_from_disk_and_trains_nothing(tmp_path, corpus):
    spec, results = _spec(corpus), tmp_path / "results"
    first, _, _ = train_spec(spec, results, FakeBackend(planted))
    table = (results / TUNING_CSV).read_text()
    (results / TUNING_CSV).unlink()  # the picks come from the runs' summaries, never from a file written earlier
    again = FakeBackend(lambda config: 99.0)  # would pick differently, were anything trained again
    second, _, _ = train_spec(_spec(corpus), results, again)
    assert again.trained == [] and second == first and (results / TUNING_CSV).read_text() == table


def test_a_sweep_killed_during_selection_picks_nothing_until_it_finishes(tmp_path, corpus):
    spec, results = _spec(corpus), tmp_path / "results"
    broken = spec.runs[4].run_id
    planned, out, _ = train_spec(spec, results, FakeBackend(planted, fail=[broken]))
    assert len(planned) == 12 and not (results / TUNING_CSV).exists()
    assert "selection is incomplete: each cell's setting is picked once every selection run has finished" in out
    RunDir(results / "runs" / broken).path.joinpath(RunDir.SUMMARY).unlink()  # as --rerun-failed would
    backend = FakeBackend(planted)
    planned, _, _ = train_spec(spec, results, backend)
    assert backend.trained[0] == broken and len(backend.trained) == 1 + 8 and len(planned) == 20


def test_a_diverged_selection_run_rules_its_setting_out(tmp_path, corpus):
    spec, results = _spec(corpus), tmp_path / "results"
    gelu_best = next(r for r in spec.runs if dict(r.cell) == {"model.activation": "gelu", "model.tying": "tied"}
                     and dict(r.setting)["train.lr"] == 2e-3)
    planned, _, _ = train_spec(spec, results, FakeBackend(planted, diverge=[gelu_best.run_id]))
    picks = {(r["cell"], r["setting"]) for r in csv_rows(results / TUNING_CSV) if r["picked"] == "True"}
    assert ("activation=gelu, tying=tied", "lr=0.001") in picks  # 1e-3 and 4e-3 tie, one octave off: the first
    row = next(r for r in csv_rows(results / TUNING_CSV) if r["cell"] == "activation=gelu, tying=tied"
               and r["setting"] == "lr=0.002")
    assert (row["n_diverged"], row["n_ok"], row["mean_loss"]) == ("1", "0", "")


def test_adaptive_estimation_rounds_run_at_the_picks(tmp_path, corpus):
    from gptlab.stats.adaptive_seeds import Widest

    spec = _spec(corpus, seeds={"min": 2, "max": 4, "precision": 0.01})
    asked = []

    def widest(results_dir, n_seeds):
        asked.append(n_seeds)
        return Widest(0.012, "model.activation=relu")  # 2 * (0.012 / 0.01)^2 = 2.9 -> 3 seeds

    printed = io.StringIO()  # the planner's lines, the rounds' too
    planner = Grid(spec, printed, rounds=lambda runs: AdaptiveSeeds(runs, spec.kinds["seeds"], printed, widest,
                                                                    seed_count=spec.seed_count))
    backend = FakeBackend(planted)
    planned, out, _ = train_spec(spec, tmp_path / "results", backend, planner)
    assert asked == [2, 3] and len(planned) == 12 + 4 * 3
    assert "estimation round 2 (3 seeds): [" in out and "estimation round 1 (2 seeds): [" in out
    assert {dict(r.setting)["train.lr"] for r in planned[12:] if dict(r.cell)["model.activation"] == "relu"} == {4e-3}
    assert planned_range(spec) == (12 + 4 * 2, 12 + 4 * 4)


# -- the pick rule -------------------------------------------------------------------------------

def test_picks_ties_and_edges_of_a_product_space():
    space = {"train.lr": [1e-3, 2e-3, 4e-3], "model.dropout": [0.0, 0.1], "train.dtype": ["float32", "bfloat16"]}
    assert edge_keys((("train.lr", 2e-3), ("model.dropout", 0.1)), space) == ["model.dropout"]
    assert edge_keys((("train.lr", 2e-3),), space) == []
    assert edge_keys((("train.dtype", "float32"),), space) == []  # no order, no edge
    cell = (("model.norm", "pre"),)
    settings = [(("train.lr", lr),) for lr in space["train.lr"]]
    trials = [Trial(cell, settings[0], "ok", 1.2), Trial(cell, settings[1], "ok", 1.1),
              Trial(cell, settings[1], "ok", 1.3), Trial(cell, settings[2], "ok", 1.2)]
    rows = pick_rows(trials, [cell], settings, space)
    assert [r.picked for r in rows] == [True, False, False]  # 1.2 = 1.2 = 1.2: the first listed wins
    assert rows[0].at_edge and rows[1].sd_loss == pytest.approx(np.std([1.1, 1.3], ddof=1))
    trials = [Trial(cell, s, "diverged", math.nan) for s in settings[:2]] + [Trial(cell, settings[2], "diverged", 0.5),
                                                                            Trial(cell, settings[2], "failed", 0.1)]
    rows = pick_rows(trials, [cell], settings, space)
    assert not any(r.picked for r in rows) and rows[2].runs == 1  # nothing trained: no pick; failed skipped


# -- the report ----------------------------------------------------------------------------------

ESTIMATION_NOISE = {"gelu": [0.0, 0.003, -0.001], "relu": [0.001, 0.0, 0.004]}  # by seed 0, 1, 2


def _tuned_results(tmp_path: Path, corpus: Path, selection_seeds: int, fixed_gap: float) -> Path:
    """A tuned sweep's results written by hand: one factor (act), lr tuned over three values.

    At lr 1e-3 relu is `fixed_gap` better than gelu; at each arm's best lr they are equal; gelu's
    selection run at lr 4e-3 of seed 1,000,000 diverged.
    """
    results = tmp_path / "results" / "tuned"
    curve = {"gelu": {1e-3: 1.50, 2e-3: 1.40, 4e-3: 1.45}, "relu": {1e-3: 1.50 - fixed_gap, 2e-3: 1.42, 4e-3: 1.40}}
    picks = {"gelu": 2e-3, "relu": 4e-3}
    shift = {"gelu": 0.01, "relu": 0.005}  # what selection seed i adds
    rows = []
    for act in ("gelu", "relu"):
        for lr in LRS:
            for i in range(selection_seeds):
                seed = SELECTION_SEED_OFFSET + i
                status = "diverged" if (act, lr, i) == ("gelu", 4e-3, 0) else "ok"
                rows.append({"run_id": f"{act}-{lr}_s{seed}", "seed": seed, "model.activation": act, "train.lr": lr,
                             "role": "selection", "status": status, "best_val_loss": curve[act][lr] + shift[act] * i,
                             "best_test_loss": curve[act][lr] + shift[act] * i + 0.002, "wall_s": 1.0})
        for seed in range(3):
            loss = 1.40 + ESTIMATION_NOISE[act][seed]
            rows.append({"run_id": f"{act}-{picks[act]}_s{seed}", "seed": seed, "model.activation": act,
                         "train.lr": picks[act], "role": "estimation", "status": "ok", "best_val_loss": loss,
                         "best_test_loss": loss + 0.002, "wall_s": 1.0})
    return write_tuned_results(results, rows, {"space": {"train.lr": LRS}, "seeds": selection_seeds}, corpus)


def test_the_report_compares_fixed_settings_with_the_tuned_optima(tmp_path, corpus):
    from gptlab.report import write_report
    from gptlab.run.data import unigram_val_loss

    results = _tuned_results(tmp_path, corpus, selection_seeds=1, fixed_gap=0.08)
    out = write_report(results, tmp_path / "report")
    md = (out / "report.md").read_text()
    tuning = pd.read_csv(out / "tables" / "tuning.csv")
    assert list(tuning.loc[tuning["picked"], "setting"]) == ["lr=0.002", "lr=0.004"]
    assert list(tuning.loc[tuning["picked"], "at_edge"]) == [False, True]
    main = pd.read_csv(out / "tables" / "main_effects.csv")
    tuned = np.mean(ESTIMATION_NOISE["relu"]) - np.mean(ESTIMATION_NOISE["gelu"])
    assert main["n_ok"].tolist() == [3] and main["estimate"].iloc[0] == pytest.approx(tuned, abs=1e-4)  # estimation only
    fixed = pd.read_csv(out / "tables" / "fixed_setting_effects.csv")
    at_1e3 = fixed[fixed["setting"] == "lr=0.001"].iloc[0]
    assert at_1e3["effect"] == "activation=relu vs gelu" and at_1e3["estimate"] == pytest.approx(-0.08)  # test loss
    assert fixed["call"].isna().all() and fixed["ci_low"].isna().all()  # one selection seed: no calls
    assert "activation=relu vs gelu: tuned per cell" in md and "-0.0800 at lr=0.001" in md
    assert "## Tuned comparison" in md and (out / "figures" / "isolation.png").stat().st_size > 1000
    assert "Warning: the pick of activation=relu (lr=0.004) lies on the edge" in md
    cap = unigram_val_loss("tiny", str(corpus), 0.1, test_fraction=0.05, split="val")
    gelu = [1.50 - 1.40, 0.0, cap - 1.40]  # the diverged run counts at the unigram loss
    relu = [1.42 - 1.40, 1.42 - 1.40, 0.0]
    sensitivity = pd.read_csv(out / "tables" / "lr_sensitivity.csv").set_index("cell")
    assert sensitivity.loc["activation=gelu", "lr_sensitivity"] == pytest.approx(np.mean(gelu), abs=1e-4)
    assert sensitivity.loc["activation=relu", "lr_sensitivity"] == pytest.approx(np.mean(relu), abs=1e-4)
    effects = pd.read_csv(out / "tables" / "lr_sensitivity_effects.csv")
    assert effects["estimate"].iloc[0] == pytest.approx(np.mean(relu) - np.mean(gelu), abs=2e-4)
    assert effects["call"].isna().all()


def test_with_two_selection_seeds_the_fixed_settings_get_calls_and_changed_calls_a_sentence(tmp_path, corpus):
    from gptlab.report import write_report

    out = write_report(_tuned_results(tmp_path, corpus, selection_seeds=2, fixed_gap=0.08), tmp_path / "report")
    fixed = pd.read_csv(out / "tables" / "fixed_setting_effects.csv").set_index("setting")
    assert fixed.loc["lr=0.001", "call"] == "better" and fixed["ci_low"].notna().all()
    tuned = pd.read_csv(out / "tables" / "main_effects.csv")["call"].iloc[0]
    assert tuned != "better"
    md = (out / "report.md").read_text()
    assert f"tuned per cell, {tuned}" in md and "a fixed-setting study would call it: better at lr=0.001" in md


def test_a_report_of_an_untuned_sweep_has_no_tuned_section(tmp_path):
    from calibration.synthetic import make_results
    from gptlab.report import write_report

    results = make_results(tmp_path, {"model.activation": ["gelu", "relu"]}, seeds=2, effects={}, noise_sd=0.01)
    out = write_report(results, tmp_path / "report")
    assert "Tuned comparison" not in (out / "report.md").read_text() and not (out / "tables" / "tuning.csv").exists()


# -- one real tuned sweep ------------------------------------------------------------------------

@pytest.mark.slow
def test_a_small_tuned_sweep_end_to_end(tmp_path, corpus, capsys):
    config = tiny_config(corpus, max_iters=30, eval_interval=15)
    config["train"].pop("lr")
    raw = {"name": "tuned", "base": {k: config[k] for k in ("model", "train", "data")},
           "grid": {"model.activation": ["gelu", "relu"]}, "seeds": 2,
           "tune": {"space": {"train.lr": [1e-3, 4e-3, 1.6e-2]}}, "executor": {"backend": "loky", "n_jobs": 2}}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    args = [str(tmp_path / "sweep.yaml"), "--results-dir", str(tmp_path / "results"),
            "--reports-dir", str(tmp_path / "reports")]
    assert sweep_main(args + ["--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert "selection: 2 cells x 3 settings x 1 seed(s), 6 runs, 6 to train, ~" in dry
    assert "estimation: 2 seed(s) at each cell's pick, 4 runs" in dry and "tuned in all (selection + estimation), 10 runs" in dry
    assert "the naive full grid (every setting x every seed): 2 cells x 3 settings x 2 seeds, 12 runs" in dry
    assert not (tmp_path / "results").exists()

    assert sweep_main(args) == 0
    results = tmp_path / "results" / "tuned"
    tuning = csv_rows(results / TUNING_CSV)
    picks = {r["model.activation"]: float(r["train.lr"]) for r in tuning if r["picked"] == "True"}
    assert len(tuning) == 6 and set(picks) == {"gelu", "relu"}
    summary = csv_rows(results / SUMMARY_CSV)
    assert [r["role"] for r in summary] == ["selection"] * 6 + ["estimation"] * 4
    for row in summary:
        run = yaml.safe_load((results / "runs" / row["run_id"] / "config.yaml").read_text())
        assert (run["seed"] >= SELECTION_SEED_OFFSET) == (row["role"] == "selection")
        assert run["data"]["test_fraction"] == 0.05 and row["best_test_loss"]
        if row["role"] == "estimation":
            assert run["train"]["lr"] == picks[row["model.activation"]] and run["seed"] in (0, 1)
    report = tmp_path / "reports" / "tuned"
    md = (report / "report.md").read_text()
    assert "## Tuned comparison" in md and (report / "figures" / "isolation.png").is_file()
    for name in ("tuning", "fixed_setting_effects", "lr_sensitivity"):
        assert (report / "tables" / f"{name}.csv").is_file()
    assert pd.read_csv(report / "tables" / "main_effects.csv")["n_ok"].tolist() == [2]  # estimation runs only
    capsys.readouterr()
    assert sweep_main(args) == 0  # a rerun trains nothing and decides the same
    err = capsys.readouterr().err
    assert "selection: 6 runs (2 cells x 3 settings x 1 seeds), 6 already finished, 0 to train" in err
    assert "estimation: 4 runs (2 cells x 2 seeds), 4 already finished, 0 to train" in err
    assert csv_rows(results / TUNING_CSV) == tuning


def test_a_tuning_method_given_a_spec_without_tune_refuses_it_in_one_line(corpus):
    raw = _raw(corpus, tune=None)
    raw["base"]["train"]["lr"] = 1e-3
    spec = validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})
    assert "tune" not in spec.kinds
    with pytest.raises(GptlabError, match="sweep tuned: a tuning method needs the spec's tune: section"):
        Grid(spec, io.StringIO())
