"""Adaptive seeds (`seeds: {min, max, precision}`): the rule's guarantee by simulation, the sweep's rounds."""
from __future__ import annotations

import csv
import itertools
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import REPO, python_m, skip_figures, tiny_config
from scipy import stats as st

from calibration.adaptive_seeds_sim import main_effect_contrasts, precision_for_seeds, simulate_null
from gptlab.errors import GptlabError
from gptlab.report.load import load_results
from gptlab.stats.adaptive_seeds import SeedRule, Widest, called_rows
from gptlab.stats.design import Design
from gptlab.stats.effects import analyse
from gptlab.sweep.spec import load_spec
from gptlab.sweep_cli import main as sweep_main

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

# -- the rule's guarantee, by simulation ----------------------------------------------------------

DESIGNS = [(1, 2), (2, 2), (3, 3), (4, 2)]  # (factors of a 2^k factorial: 2 to 16 cells, round-1 seeds)


def _null_runs(which: str, sweeps_each: int, seed: int):
    rng = np.random.default_rng(seed)
    return [simulate_null(k, SeedRule(m, 12, precision_for_seeds(k, m, 6)), sweeps_each, rng, which)
            for k, m in DESIGNS]


def test_stein_rule_keeps_false_calls_at_5_percent_over_20000_null_sweeps():
    results = _null_runs("stein", 5_000, seed=1)
    sweeps = sum(r.sweeps for r in results)
    rate = sum(r.false_first for r in results) / sweeps
    se = math.sqrt(0.05 * 0.95 / sweeps)
    assert sweeps >= 20_000
    assert abs(rate - 0.05) < 3 * se, f"false-call rate {rate:.4f} (MC SE {se:.4f})"
    for r in results:
        assert abs(r.rate - 0.05) < 4 * r.mc_se, f"{r.cells} cells: {r.rate:.4f}"
        assert r.min_seeds < r.mean_seeds < 12 and r.at_max < 0.5  # the rule adapted, rarely at max


def test_the_naive_rule_inflates_false_calls_so_the_simulation_can_see_it():
    results = _null_runs("naive", 5_000, seed=2)
    sweeps = sum(r.sweeps for r in results)
    rate = sum(r.false_first for r in results) / sweeps
    assert rate > 0.05 + 3 * math.sqrt(0.05 * 0.95 / sweeps), f"naive rule: {rate:.4f}"


def test_the_simulation_closed_form_is_the_report_model():
    """Same data through `effects.analyse` (stein error): same estimates and half-widths as the closed form."""
    rng = np.random.default_rng(3)
    k_factors, rule = 2, SeedRule(2, 6, 0.3)
    C = main_effect_contrasts(k_factors)
    K = C.shape[1]
    y = rng.normal(0, 1, (K, rule.max)) + rng.normal(0, 0.5, (1, rule.max))
    z = y[:, :rule.min]
    resid = z - z.mean(1, keepdims=True) - z.mean(0, keepdims=True) + z.mean()
    df0 = (K - 1) * (rule.min - 1)
    s2 = (resid ** 2).sum() / df0
    t0 = st.t.ppf(0.975, df0)
    n = rule.seeds_needed(t0 * math.sqrt(s2 * 4 / K / rule.min))
    assert rule.min < n <= rule.max
    levels = [tuple(c) for c in np.array(np.meshgrid(*[["a", "b"]] * k_factors, indexing="ij")).reshape(k_factors, -1).T]
    design = Design(("f0", "f1"), {"f0": ("a", "b"), "f1": ("a", "b")}, {"f0": "a", "f1": "a"}, tuple(levels))
    cells = [levels[i] for i in range(K) for _ in range(n)]
    seeds = np.array([s for _ in range(K) for s in range(n)])
    values = np.array([y[i, s] for i in range(K) for s in range(n)])
    a = analyse(values, cells, seeds, design, lambda f, lv: f"{f}={lv}", 0.01, endpoint=False,
                error_mask=seeds < rule.min)
    assert a.fit.kind == "stein" and a.fit.df == df0
    means = y[:, :n].mean(1)
    for row, c in zip(a.main.to_dict("records"), C):
        assert row["estimate"] == pytest.approx(float(c @ means), abs=1e-10)
        assert row["ci95"] == pytest.approx(t0 * math.sqrt(s2 * float(c @ c) / n), rel=1e-9)


def _through_the_report(k_factors: int, rule: SeedRule, y: np.ndarray) -> tuple[int, int, int, int, int]:
    """Null sweeps y (sweeps, cells, max seeds) through the report's own path, as an adaptive sweep runs them.

    Round 1 (seeds < min) is analysed by `effects.analyse`, its widest called half-width (`precision.called_rows`,
    `Widest`) sets N by `SeedRule.seeds_needed`, and seeds < N are analysed with round 1's error (`stein`), as
    `analyses.analyse_runs` does. A call is a 95% CI without zero. Returns (first effect called, any called,
    effects called, sum of N, sweeps at max), the counts `simulate_null` reports.
    """
    names = tuple(f"f{i}" for i in range(k_factors))
    levels = {f: ("0", "1") for f in names}
    grid = list(itertools.product(*levels.values()))  # main_effect_contrasts' cell order
    design = Design(names, levels, {f: "0" for f in names}, tuple(grid))
    def label(f, lv):
        return f"{f}={lv}"

    first = any_ = effects = total_n = at_max = 0
    for sweep in y:
        def analysis(n: int):
            cells = [c for c in grid for _ in range(n)]
            seeds = np.tile(np.arange(n), len(grid))
            return analyse(sweep[:, :n].ravel(), cells, seeds, design, label, 0.01, endpoint=False,
                           error_mask=seeds < rule.min)
        n = int(rule.seeds_needed(Widest.of(called_rows(analysis(rule.min), rule, label)).half_width))
        final = analysis(n)
        assert final.fit.kind == "stein" and final.fit.df == (len(grid) - 1) * (rule.min - 1)
        called = ((final.main["ci_low"] > 0) | (final.main["ci_high"] < 0)).to_numpy()
        first, any_, effects = first + int(called[0]), any_ + int(called.any()), effects + int(called.sum())
        total_n, at_max = total_n + n, at_max + int(n == rule.max)
    return first, any_, effects, total_n, at_max


def test_part_of_the_null_simulation_through_the_reports_stein_path():
    """300 null sweeps: the report's own analysis calls exactly what the closed form calls, about 5% of the time."""
    first_calls = sweeps = 0
    for (k, m), seed in (((2, 2), 21), ((3, 3), 22)):
        rule, n_sweeps = SeedRule(m, 12, precision_for_seeds(k, m, 6)), 150
        closed = simulate_null(k, rule, n_sweeps, np.random.default_rng(seed))
        rng = np.random.default_rng(seed)  # the same draws, in simulate_null's order (sigma 1, seed_sd 0.5)
        y = rng.normal(0.0, 1.0, (n_sweeps, 2 ** k, rule.max)) + rng.normal(0.0, 0.5, (n_sweeps, 1, rule.max))
        first, any_, effects, total_n, at_max = _through_the_report(k, rule, y)
        assert (first, any_, effects) == (closed.false_first, closed.false_any, closed.effects_called), k
        assert total_n / n_sweeps == pytest.approx(closed.mean_seeds, abs=1e-12)
        assert at_max / n_sweeps == pytest.approx(closed.at_max, abs=1e-12)
        assert rule.min < closed.mean_seeds < rule.max  # the rule adapted: round 2 happened in many sweeps
        first_calls, sweeps = first_calls + first, sweeps + n_sweeps
    se = math.sqrt(0.05 * 0.95 / sweeps)
    assert abs(first_calls / sweeps - 0.05) < 3 * se, f"{first_calls} of {sweeps} first effects called"


@pytest.mark.parametrize("seeds", [3, 5])
def test_the_two_stage_error_even_where_every_cell_reached_the_maximum(tmp_path, seeds):
    """Issue 54 asked for every run's variance where adaptive seeds took every cell to the maximum; reaching the
    maximum is itself decided by round 1's noise, so the report keeps round 1's variance (the simulation below)."""
    from calibration.synthetic import make_results
    from gptlab.report.sentences import write as write_sentences
    from gptlab.report.tables import compute_tables

    results = make_results(tmp_path, {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"]},
                           seeds=seeds, noise_sd=0.01, name="ad")
    spec = yaml.safe_load((results / "sweep.yaml").read_text())
    spec["seeds"] = {"min": 3, "max": 5, "precision": 0.001}
    (results / "sweep.yaml").write_text(yaml.safe_dump(spec))
    res = load_results(results)
    tables = compute_tables(res)
    assert tables.effects.fit.kind == "stein" and tables.effects.fit.df == (4 - 1) * (3 - 1)  # 4 cells, a seed block
    assert "the maximum included" in write_sentences(res, tables).kinds["seeds"].rule


@pytest.mark.slow
def test_every_seeds_variance_at_the_maximum_would_inflate_false_calls():
    """The alternative issue 54 proposed (`report` in the simulation: all seeds' variance where a sweep reached the
    maximum) calls more than 5% of null effects where many sweeps reach it; Stein's rule on the same draws does not."""
    rule = SeedRule(2, 12, precision_for_seeds(1, 2, 24))  # round 1 asks for ~24 seeds: half the sweeps at max
    stein = simulate_null(1, rule, 20_000, np.random.default_rng(5), "stein")
    alternative = simulate_null(1, rule, 20_000, np.random.default_rng(5), "report")
    se = math.sqrt(0.05 * 0.95 / 20_000)
    assert abs(stein.rate - 0.05) < 3 * se and alternative.rate > 0.05 + 5 * se


# -- the rule itself ------------------------------------------------------------------------------

def test_seeds_needed_is_the_fewest_seeds_that_reach_the_target():
    rule = SeedRule(3, 12, 0.01)
    assert rule.seeds_needed(0.01) == 3  # already there
    assert rule.seeds_needed(0.02) == 12  # 3 * 4 = 12 exactly
    assert rule.seeds_needed(0.0201) == 12  # would need 13: capped at max
    assert rule.seeds_needed(0.015) == 7  # 3 * 2.25 = 6.75
    assert rule.seeds_needed(0.001) == 3
    assert rule.seeds_needed(math.nan) == 12  # no error estimate: as many as allowed
    assert list(rule.seeds_needed(np.array([0.01, 0.015]))) == [3, 7]


@pytest.mark.parametrize("seeds, message", [
    ({"min": 3, "max": 2, "precision": 0.01}, "need 2 <= min <= max"),
    ({"min": 1, "max": 5, "precision": 0.01}, "need 2 <= min <= max"),
    ({"min": 2, "max": 20000, "precision": 0.01}, "need 2 <= min <= max <= 10,000"),
    ({"min": 2, "max": 5}, "needs precision"),
    ({"min": 2, "max": 5, "precision": -1}, "seeds.precision: must be a positive number"),
    ({"min": 2, "max": 5, "precision": float("nan")}, "seeds.precision: must be a positive number"),
    ({"min": 2.5, "max": 5, "precision": 0.01}, "seeds.min: must be an integer"),
    ({"min": 2, "max": 5, "precision": 0.01, "precision_for": "all"}, "seeds.precision_for: must be one of"),
    ({"min": 2, "max": 5, "precision": 0.01, "step": 1}, "seeds: unknown key 'step'"),
])
def test_bad_adaptive_seeds_are_refused_in_one_line(tmp_path, corpus, seeds, message):
    path = _spec(tmp_path, corpus, seeds)
    with pytest.raises(GptlabError, match=message.replace("(", r"\(")):
        load_spec(path)


def test_an_adaptive_spec_plans_seeds_up_to_max_and_records_the_rule(tmp_path, corpus):
    spec = load_spec(_spec(tmp_path, corpus, {"min": 2, "max": 4, "precision": "1e-2"}))
    assert spec.seeds == [0, 1, 2, 3] and spec.kinds["seeds"] == SeedRule(2, 4, 0.01)
    assert spec.to_dict()["seeds"] == {"min": 2, "max": 4, "precision": 0.01, "precision_for": "effects"}


# -- sweeps -------------------------------------------------------------------------------------

def _spec(folder: Path, corpus: Path, seeds, grid=None, name: str = "ad") -> Path:
    config = tiny_config(corpus, max_iters=20, eval_interval=10, log_interval=10, lr=2e-2, min_lr=1e-3)  # learns
    config["model"].update(n_layer=1, n_embd=16, block_size=16)
    spec = {"name": name, "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": grid or {"model.activation": ["gelu", "relu"], "model.tying": ["tied", "untied"]},
            "seeds": seeds, "executor": {"backend": "loky", "n_jobs": 2}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_an_adaptive_sweep_stops_at_the_seed_count_its_rule_computes(tmp_path, corpus, capsys):
    results, reports = tmp_path / "results", tmp_path / "reports"
    args = ["--results-dir", str(results), "--reports-dir", str(reports)]
    # A loose target: round 1 is enough; one round, min seeds. (This report is not read: no figures.)
    with pytest.MonkeyPatch.context() as mp:
        skip_figures(mp)
        assert sweep_main([str(_spec(tmp_path, corpus, {"min": 2, "max": 5, "precision": 10.0})), *args]) == 0
    rounds = _rows(results / "ad" / "rounds.csv")
    assert [r["round"] for r in rounds] == ["1"] and len(_rows(results / "ad" / "summary.csv")) == 8
    w1 = float(rounds[0]["widest_half_width"])
    assert 0 < w1 <= 10.0

    # A target round 1 reaches at 3.5 seeds: the rule asks for ceil(3.5) = 4, and round 1's 8 runs are reused.
    target = w1 * math.sqrt(2 / 3.5)
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:  # of the figures, only precision.png is read here
        skip_figures(mp, keep=("seeds",))
        assert sweep_main([str(_spec(tmp_path, corpus, {"min": 2, "max": 5, "precision": target})), *args]) == 0
    err = capsys.readouterr().err
    assert "round 1 (2 seeds): 8 runs (4 cells x 2 seeds), 8 already finished, 0 to train" in err
    assert "-> 4 seeds per cell" in err and "round 2 (4 seeds): 16 runs" in err
    assert "round 2 (4 seeds): [ 9/16] " in err  # the progress lines name the round
    rounds = _rows(results / "ad" / "rounds.csv")
    assert [(r["round"], r["seeds"], r["runs_trained"]) for r in rounds] == [("1", "2", "8"), ("2", "4", "8")]
    assert float(rounds[0]["widest_half_width"]) == pytest.approx(w1, rel=1e-12)  # round 1 decides, always
    assert float(rounds[1]["widest_half_width"]) <= target
    assert sorted({int(r["seed"]) for r in _rows(results / "ad" / "summary.csv")}) == [0, 1, 2, 3]
    report = (reports / "ad" / "report.md").read_text()
    assert "Seeds: adaptive rounds" in report and "Stein's two-stage rule" in report
    assert "2 of 2 called effects reached the target" in report
    assert (reports / "ad" / "figures" / "precision.png").stat().st_size > 5_000
    precision = _rows(reports / "ad" / "tables" / "precision.csv")
    assert {r["outcome"] for r in precision} == {"reached the target"}
    main = _rows(reports / "ad" / "tables" / "main_effects.csv")
    assert all(float(r["ci95"]) <= target + 1e-4 for r in main)  # rounded to 4 decimals in the table


def test_a_killed_adaptive_sweep_resumes_to_the_same_rounds(tmp_path, corpus, no_figures):
    """Killed in round 2 and rerun: the same seed count, rounds.csv and losses as an uninterrupted sweep.

    Only the killed sweep is a process of its own (a SIGKILL must hit a real driver); the clean sweep
    and the rerun train in this process, figures stubbed (they are not what is tested)."""
    spec = _spec(tmp_path, corpus, {"min": 2, "max": 4, "precision": 1e-6}, grid={"model.activation": ["gelu", "relu"]})
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def args(where: str) -> list[str]:
        return [str(spec), "--results-dir", str(tmp_path / where), "--reports-dir", str(tmp_path / f"{where}-reports")]

    assert sweep_main(args("clean")) == 0
    proc = subprocess.Popen(python_m("gptlab.sweep", figures=False) + args("killed"), env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300  # a bound, not a budget
    for line in proc.stderr:  # kill as soon as round 2 has begun
        if line.startswith("round 2") or time.time() > deadline:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    killed = tmp_path / "killed" / "ad"
    assert len(list((killed / "runs").glob("*/summary.json"))) < 8, "the sweep finished before it could be killed"
    assert [r["round"] for r in _rows(killed / "rounds.csv")] == ["1"]

    assert sweep_main(args("killed")) == 0
    assert _rows(killed / "rounds.csv") == _rows(tmp_path / "clean" / "ad" / "rounds.csv")
    keep = ("run_id", "status", "best_val_loss", "final_val_loss")
    clean = _rows(tmp_path / "clean" / "ad" / "summary.csv")
    assert [{k: r[k] for k in keep} for r in _rows(killed / "summary.csv")] == [{k: r[k] for k in keep} for r in clean]
    assert len(clean) == 8  # precision unreachable: max seeds


def test_dry_run_prints_the_minimum_and_the_worst_case_plan(tmp_path, corpus, capsys):
    spec = _spec(tmp_path, corpus, {"min": 2, "max": 5, "precision": 0.01})
    assert sweep_main([str(spec), "--dry-run", "--results-dir", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert "adaptive seeds: round 1 trains 2 seeds per cell" in out
    assert "  minimum: 2 seeds per cell, 8 runs, 8 to train, ~0:" in out
    assert "  worst case: 5 seeds per cell, 20 runs, 20 to train, ~0:" in out
    assert not (tmp_path / "results").exists()  # a dry run writes nothing
