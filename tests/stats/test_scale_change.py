"""Does an effect change with scale? The paired-by-seed change of `gptlab.stats.scale_change`.

A hand-made table whose answer is worked out below (t quantiles of 2 df in closed form, no scipy),
edge cases (one seed, a seed missing a cell, a third scale level, a design with an excluded cell,
bad input), agreement of the DataFrame path with the array path, a synthetic results folder read
as the report reads it, and the simulation check: over 1000 simulated studies per setting (seed
effects correlated across scale levels), the 95% CI covers the planted change 93-97% of the time,
a change planted at zero is called `changes` at most 5% (+ binomial tolerance) of the time, a
change planted at the margin is called `no change within margin` at most that often, the estimate
is unbiased, and pairing by seed narrows the interval when seeds correlate across levels.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from calibration.scale_change_sim import SIM_DESIGN, ChangeSim, calibrate_changes, simulate_changes
from gptlab.errors import GptlabError
from gptlab.stats.scale_change import CHANGE_COLS, change_table, effect_changes

FACTORS = ["model.activation", "model.tying"]
SCALE = "train.max_iters"
LEVELS = {"model.activation": ["gelu", "relu"], "model.tying": ["tied", "untied"], SCALE: ["1000", "8000"]}
BASELINE = {"model.activation": "gelu", "model.tying": "tied"}
# Per seed s and scale level: loss = base + E*[relu] + T*[untied] + 0.02*[relu][untied], so the averaged
# main effects are E + 0.01 (relu) and T + 0.01 (untied).
BASE = {"1000": 1.5, "8000": 1.3}
E = {"1000": [-0.03, -0.04, -0.02], "8000": [-0.02, -0.02, 0.01]}  # relu's change per seed: 0.01, 0.02, 0.03
T = {"1000": [-0.02, -0.02, -0.02], "8000": [-0.019, -0.021, -0.02]}  # untied's: 0.001, -0.001, 0


def t2(u: float) -> float:
    """The u-quantile of Student's t with 2 degrees of freedom, in closed form."""
    return (2 * u - 1) / math.sqrt(2 * u * (1 - u))


def hand_runs(levels: dict[str, dict[str, list[float]]] | None = None) -> pd.DataFrame:
    rows = []
    for level in BASE:
        for seed in range(3):
            for act in LEVELS["model.activation"]:
                for tie in LEVELS["model.tying"]:
                    relu, untied = act == "relu", tie == "untied"
                    y = BASE[level] + E[level][seed] * relu + T[level][seed] * untied + 0.02 * (relu and untied)
                    rows.append({"model.activation": act, "model.tying": tie, SCALE: level, "seed": seed,
                                 "ok": True, "best_val_loss": y})
    return pd.DataFrame(rows)


def changes(runs: pd.DataFrame, margin: float = 0.01, **kw) -> dict[tuple, dict]:
    table = effect_changes(runs, FACTORS, SCALE, "best_val_loss", kw.pop("levels", LEVELS), BASELINE, margin, **kw)
    assert list(table.columns) == CHANGE_COLS
    return {(r["level"], r["scale_level"]): r for r in table.to_dict("records")}


def test_a_hand_made_table():
    got = changes(hand_runs())
    assert set(got) == {("relu", "8000"), ("untied", "8000")}
    relu, untied = got["relu", "8000"], got["untied", "8000"]
    assert relu["reference_level"] == "1000" and relu["baseline"] == "gelu" and relu["scale_factor"] == SCALE
    # relu's effect per seed: -0.02, -0.03, -0.01 at 1000; -0.01, -0.01, 0.02 at 8000; changes 0.01, 0.02, 0.03
    assert relu["effect_at_reference"] == pytest.approx(-0.02)
    assert relu["effect_at_level"] == pytest.approx(0.0, abs=1e-12)
    assert relu["change"] == pytest.approx(0.02)
    half = t2(0.975) * 0.01 / math.sqrt(3)  # sd of the changes 0.01, n = 3
    assert (relu["ci_low"], relu["ci_high"]) == (pytest.approx(0.02 - half), pytest.approx(0.02 + half))
    p = 1 - math.sqrt(12 / 14)  # t = 0.02 / (0.01 / sqrt 3) = sqrt 12; P(|T_2| > t) = 1 - t / sqrt(t^2 + 2)
    assert relu["p_value"] == pytest.approx(p)
    assert relu["p_adjusted"] == pytest.approx(2 * p)  # Holm over the two rows: relu has the smaller p
    assert relu["n_seeds"] == 3 and relu["call"] == "inconclusive"  # 90% CI [0.003, 0.037]: not inside 0.01
    # untied's changes 0.001, -0.001, 0: mean 0, sd 0.001
    assert untied["effect_at_reference"] == pytest.approx(-0.01) and untied["change"] == pytest.approx(0, abs=1e-12)
    assert untied["ci_high"] == pytest.approx(t2(0.975) * 0.001 / math.sqrt(3))
    assert untied["p_value"] == pytest.approx(1.0) and untied["p_adjusted"] == pytest.approx(1.0)
    assert untied["call"] == "no change within margin"  # 90% CI +/- 0.0017, inside +/- 0.01
    assert t2(0.95) * 0.001 / math.sqrt(3) == pytest.approx(0.0016858, abs=1e-7)  # the 90% CI's half-width (TOST at 5%)
    assert changes(hand_runs(), margin=0.002)["untied", "8000"]["call"] == "no change within margin"
    assert changes(hand_runs(), margin=0.0016)["untied", "8000"]["call"] == "inconclusive"


def test_a_change_beyond_noise_is_called_changes():
    runs = hand_runs()
    relu_at_8000 = (runs["model.activation"] == "relu") & (runs[SCALE] == "8000")
    runs.loc[relu_at_8000, "best_val_loss"] += 0.05  # changes 0.06, 0.07, 0.08: t = 12.1, p = 0.0068
    relu = changes(runs)["relu", "8000"]
    assert relu["change"] == pytest.approx(0.07) and relu["p_value"] == pytest.approx(1 - math.sqrt(147 / 149))
    assert relu["call"] == "changes"


def test_one_seed_gives_no_interval_and_an_inconclusive_call():
    got = changes(hand_runs().query("seed == 0"))
    for row in got.values():
        assert row["n_seeds"] == 1 and row["call"] == "inconclusive"
        assert all(math.isnan(row[k]) for k in ("ci_low", "ci_high", "p_value", "p_adjusted"))
    assert got["relu", "8000"]["change"] == pytest.approx(0.01)


@pytest.mark.parametrize("how", ["failed", "absent", "nan"])
def test_a_seed_missing_a_cell_at_either_level_is_dropped(how):
    runs = hand_runs()
    hole = (runs["seed"] == 2) & (runs["model.activation"] == "relu") & (runs["model.tying"] == "tied") \
        & (runs[SCALE] == "1000")
    if how == "failed":
        runs.loc[hole, "ok"] = False
    elif how == "nan":
        runs.loc[hole, "best_val_loss"] = math.nan
    else:
        runs = runs[~hole]
    got, two = changes(runs), changes(hand_runs().query("seed < 2"))
    for key in got:
        assert got[key]["n_seeds"] == 2
        for col in ("effect_at_reference", "effect_at_level", "change", "ci_low", "ci_high", "p_value"):
            assert got[key][col] == pytest.approx(two[key][col])


def test_a_third_scale_level_pairs_its_own_seeds_and_joins_the_holm_family():
    runs = hand_runs()
    extra = runs[runs[SCALE] == "8000"].assign(**{SCALE: "4000"})
    extra = extra[~((extra["seed"] == 0) & (extra["model.activation"] == "relu"))]  # seed 0 lacks cells at 4000
    levels = {**LEVELS, SCALE: ["1000", "4000", "8000"]}
    got = changes(pd.concat([runs, extra]), levels=levels)
    assert [k for k in got] == [("relu", "4000"), ("relu", "8000"), ("untied", "4000"), ("untied", "8000")]
    assert got["relu", "4000"]["n_seeds"] == 2 and got["relu", "8000"]["n_seeds"] == 3
    assert got["relu", "4000"]["change"] == pytest.approx(0.025)  # seeds 1 and 2: 0.02, 0.03
    p = sorted(r["p_value"] for r in got.values())
    assert min(r["p_adjusted"] for r in got.values()) == pytest.approx(4 * p[0])  # four tests


def test_an_excluded_cell_gives_the_effect_at_the_other_factors_baseline():
    cells = [("gelu", "tied"), ("gelu", "untied"), ("relu", "tied")]
    runs = hand_runs()
    runs = runs[~((runs["model.activation"] == "relu") & (runs["model.tying"] == "untied"))]
    relu = changes(runs, cells=cells)["relu", "8000"]
    assert relu["effect_at_reference"] == pytest.approx(-0.03)  # E alone: no interaction at tying=tied
    assert relu["change"] == pytest.approx(0.02) and relu["n_seeds"] == 3


@pytest.mark.parametrize("change, match", [
    (lambda r: r.drop(columns=["seed"]), "no column 'seed'"),
    (lambda r: pd.concat([r, r.iloc[:1]]), "two ok runs"),
])
def test_bad_runs_are_refused_in_one_line(change, match):
    with pytest.raises(GptlabError, match=match):
        changes(change(hand_runs()))


def test_bad_arguments_are_refused_in_one_line():
    runs = hand_runs()
    with pytest.raises(GptlabError, match="margin"):
        changes(runs, margin=-1)
    with pytest.raises(GptlabError, match="alpha"):
        changes(runs, alpha=0.7)
    with pytest.raises(GptlabError, match="also a scientific factor"):
        effect_changes(runs, FACTORS + [SCALE], SCALE, "best_val_loss", LEVELS, BASELINE, 0.01)
    with pytest.raises(GptlabError, match="baseline"):
        effect_changes(runs, FACTORS, SCALE, "best_val_loss", LEVELS, {**BASELINE, "model.tying": "x"}, 0.01)


def test_the_dataframe_path_agrees_with_the_array_path():
    sim = ChangeSim(4, 0.7, change=0.01, datasets=3, rng_seed=3)
    values = simulate_changes(sim)
    contrasts = np.stack([SIM_DESIGN.interaction(t) for t in SIM_DESIGN.terms(1)])
    tests, p_adj, call = change_table(values, contrasts, sim.margin)
    levels = {"a": ["a0", "a1"], "b": ["b0", "b1"], "s": ["short", "long"]}
    for d in range(sim.datasets):
        runs = pd.DataFrame([{"a": a, "b": b, "s": s, "seed": seed, "loss": values[d, k, seed, c]}
                             for k, s in enumerate(levels["s"]) for seed in range(sim.n_seeds)
                             for c, (a, b) in enumerate(SIM_DESIGN.cells)])
        table = effect_changes(runs, ["a", "b"], "s", "loss", levels, {"a": "a0", "b": "b0"}, sim.margin)
        assert table["change"].to_numpy() == pytest.approx(tests.change[d, 0])
        assert table["ci_low"].to_numpy() == pytest.approx(tests.ci_low[d, 0])
        assert table["p_adjusted"].to_numpy() == pytest.approx(p_adj[d, 0])
        assert list(table["call"]) == list(call[d, 0])


def test_a_results_folder_read_as_the_report_reads_it(tmp_path):
    from calibration.synthetic import make_results
    from gptlab.report.load import load_results
    grid = {"model.activation": ["gelu", "relu"], "model.tying": ["tied", "untied"], SCALE: [2000, 6000]}
    effects = {(("model.activation", "relu"), (SCALE, 2000)): -0.03,  # relu's effect changes by +0.06
               (("model.activation", "relu"), (SCALE, 6000)): 0.03,
               (("model.tying", "untied"),): -0.02, ((SCALE, 6000),): -0.2}  # untied's does not change
    res = load_results(make_results(tmp_path, grid, 5, effects=effects))
    sci = ["model.activation", "model.tying"]
    cells = list(res.cells[sci].drop_duplicates().itertuples(index=False, name=None))
    table = effect_changes(res.runs, sci, SCALE, res.outcome, res.levels, res.baseline, 0.01, cells=cells)
    got = {r["level"]: r for r in table.to_dict("records")}
    assert got["relu"]["change"] == pytest.approx(0.06, abs=0.005) and got["relu"]["call"] == "changes"
    assert got["relu"]["ci_low"] > 0.05 and got["relu"]["n_seeds"] == 5  # (the folder's losses shrink effects 2%)
    assert got["untied"]["change"] == pytest.approx(0.0, abs=0.005) and got["untied"]["call"] != "changes"


SETTINGS = [(3, 0.5), (5, 0.9), (10, 0.7)]
TOLERANCE = 3 * math.sqrt(0.05 * 0.95 / 1000)  # three binomial SDs at 1000 datasets


@pytest.mark.parametrize("n_seeds, rho", SETTINGS)
def test_coverage_and_bias_of_a_planted_change(n_seeds, rho):
    cal = calibrate_changes(ChangeSim(n_seeds, rho, change=0.015, datasets=1000, rng_seed=n_seeds))
    assert 0.95 - TOLERANCE <= cal.coverage <= 0.95 + TOLERANCE, cal
    assert abs(cal.bias) <= 4 * cal.bias_se and cal.bias_se < 0.001, cal
    assert cal.false_changes <= 0.05 + TOLERANCE, cal  # b1's change is planted at zero


@pytest.mark.parametrize("n_seeds, rho", SETTINGS)
def test_no_planted_change_is_rarely_called_a_change(n_seeds, rho):
    cal = calibrate_changes(ChangeSim(n_seeds, rho, change=0.0, datasets=1000, rng_seed=100 + n_seeds))
    assert cal.false_changes <= 0.05 + TOLERANCE, cal  # either row called `changes`: Holm keeps the family
    assert 0.95 - TOLERANCE <= cal.coverage <= 0.95 + TOLERANCE, cal


def test_a_change_at_the_margin_is_rarely_called_no_change():
    sim = ChangeSim(10, 0.9, change=0.01, margin=0.01, run_sd=0.002, datasets=1000, rng_seed=5)
    assert calibrate_changes(sim).no_change_calls <= 0.05 + TOLERANCE
    # ... while with no change, the same precision says `no change within margin` most of the time
    assert calibrate_changes(ChangeSim(10, 0.9, change=0.0, run_sd=0.002, datasets=1000)).no_change_calls > 0.5


def test_pairing_by_seed_narrows_the_interval_when_seeds_correlate_across_levels():
    high = calibrate_changes(ChangeSim(5, 0.9, change=0.01, datasets=1000, rng_seed=9))
    assert high.half_width < 0.8 * high.half_width_unpaired, high
    none = calibrate_changes(ChangeSim(5, 0.0, change=0.01, datasets=1000, rng_seed=9))
    assert none.half_width > high.half_width * 1.5, (none, high)  # the correlation is what pairing removes
