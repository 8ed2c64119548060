"""What would decide an inconclusive effect (`stats.to_decide`, `tables/to_decide.csv` and its sentences)."""
from __future__ import annotations

import csv
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats as st

from gptlab.report import sentences, write_report
from gptlab.report.load import load_results
from gptlab.report.sentences import to_decide as to_decide_words
from gptlab.report.tables import compute_tables
from gptlab.run.resultsdir import ResultsDir
from gptlab.stats.arms import baseline_seed_count
from gptlab.stats.design import Design
from gptlab.stats.effects import analyse
from gptlab.stats.text_share import Blocks
from gptlab.stats.to_decide import (
    MAX_TEST_FRACTION,
    ErrorParts,
    SeedPart,
    decide,
    error_parts,
    half_width,
    seeds_needed,
    text_half_width,
)
from tests.stats.test_text_share import planted


def _t(df: float) -> float:
    return float(st.t.ppf(0.975, df))


def _arms_half_width(n: int, s2: float, k: int, text: float, text_df: float, df0: float, n0: int) -> float:
    """The planted arms design by hand: arm n seeds, baseline round(sqrt(k) n), one pooled variance s2 whose df
    grow by the runs added, the text's variance on its own df; Satterthwaite."""
    nb = baseline_seed_count(n, k)
    seed = s2 / n + s2 / nb
    df = df0 + k * (n - n0) + (nb - baseline_seed_count(n0, k))
    var = seed + text
    return _t(var ** 2 / (seed ** 2 / df + (text ** 2 / text_df if text else 0))) * math.sqrt(var)


def test_seeds_needed_on_a_planted_arms_design_is_the_first_n_within_the_margin():
    k, n0, s2, text, text_df = 10, 5, 0.012 ** 2, 0.003 ** 2, 19.0
    nb0 = baseline_seed_count(n0, k)
    df0 = k * (n0 - 1) + (nb0 - 1)
    p = ErrorParts((SeedPart(s2 / n0, n0), SeedPart(s2 / nb0, nb0, math.sqrt(k))), n0, df0, 0.0, text, text_df,
                   (math.sqrt(k),) + (1.0,) * k)
    assert half_width(p, n0) == pytest.approx(_arms_half_width(n0, s2, k, text, text_df, df0, n0), rel=1e-9)
    n = seeds_needed(p, 0.01)
    assert n is not None and n > n0
    # df per seed as the design adds them: k arm runs and the baseline's rounded sqrt(k) (by hand, exactly)
    hand = [_arms_half_width(m, s2, k, text, text_df, df0, n0) for m in (n - 1, n)]
    assert hand[1] <= 0.01 < hand[0]
    assert half_width(p, n) <= 0.01 < half_width(p, n - 1)


def test_welch_parts_keep_their_own_degrees_of_freedom():
    """Each arm's own variance (Welch): a noisy arm with few df needs more seeds than the pooled view says."""
    own = ErrorParts((SeedPart(0.03 ** 2 / 5, 5, 1.0, 4.0), SeedPart(0.01 ** 2 / 16, 16, math.sqrt(10), 15.0)), 5)
    n = seeds_needed(own, 0.01)
    v = lambda m: (0.03 ** 2 / m, 0.01 ** 2 / baseline_seed_count(m, 10))  # noqa: E731

    def hand(m: int) -> float:
        a, b = v(m)
        df = (a + b) ** 2 / (a ** 2 / (m - 1) + b ** 2 / (baseline_seed_count(m, 10) - 1))
        return _t(df) * math.sqrt(a + b)
    assert hand(n) <= 0.01 < hand(n - 1)


def test_the_text_alone_at_the_margin_is_impossible_and_names_the_split_that_reaches_it():
    text = (0.013 / _t(19)) ** 2  # the text alone gives +/-0.013
    p = ErrorParts((SeedPart(0.01 ** 2 / 5, 5),), 5, 40.0, 10.0, text, 19.0)
    assert text_half_width(p) == pytest.approx(0.013)
    assert seeds_needed(p, 0.01) is None
    assert seeds_needed(p, 0.0131) is not None  # just wider than the text: reachable
    d = decide(p, 0.01, 0.05)
    assert d.seeds_needed is None and d.text_half_width == pytest.approx(0.013)
    assert d.test_fraction_min == pytest.approx(0.05 * 1.3 ** 2)  # text variance ~ 1 / test characters
    assert text_half_width(p, d.test_fraction_min / 0.05) == pytest.approx(0.01)
    assert d.test_fraction_needed == pytest.approx(0.17)  # twice the least (0.0845), rounded up to a percent
    assert text_half_width(p, d.test_fraction_needed / 0.05) <= 0.01 / math.sqrt(2)
    n = d.seeds_at_fraction
    assert n is not None and half_width(p, n, 0.17 / 0.05) <= 0.01 < half_width(p, n - 1, 0.17 / 0.05)
    assert math.isnan(decide(p, 0.01).test_fraction_needed)  # no split known: none named
    far = decide(ErrorParts(p.parts, 5, 40.0, 10.0, text * 100, 19.0), 0.01, 0.05)  # would need 8.45 times the text
    assert far.test_fraction_min > MAX_TEST_FRACTION and math.isnan(far.test_fraction_needed)


def test_error_parts_of_an_analysis_give_its_half_width():
    """The adapter from a fitted arms analysis (no seed block, the text's blocks) reproduces each row's CI."""
    rng = np.random.default_rng(5)
    arms = ["base", "a", "b", "c"]
    d = Design(("arm",), {"arm": tuple(arms)}, {"arm": "base"}, tuple((a,) for a in arms))
    counts = {"base": baseline_seed_count(4, 3), "a": 4, "b": 4, "c": 4}
    cells, seeds, block_rows = [], [], []
    for a in arms:
        dev = rng.normal(0, 0.01, 20)
        for s in range(counts[a]):
            cells.append((a,))
            seeds.append(s)
            block_rows.append(1.5 + dev + rng.normal(0, 0.01) + rng.normal(0, 0.02, 20))
    blocks = Blocks(np.array(block_rows), np.ones((len(cells), 20)))
    a = analyse(blocks.run_losses, cells, np.array(seeds), d, lambda f, lv: f"{f}={lv}", 0.01, blocks=blocks,
                block_seeds=False)
    for i, row in enumerate(a.main.to_dict("records")):
        p = a.parts["main"][i]
        assert p.seeds == 4 and max(x.ratio for x in p.parts) == pytest.approx(math.sqrt(3))
        assert half_width(p, 4) == pytest.approx(row["ci95"], rel=1e-9)
        c = a.contrasts["main"][i]
        assert sum(x.variance for x in p.parts) == pytest.approx(a.fit.test(c).se ** 2, rel=1e-9)
        assert error_parts(a.fit, c, a.text, np.array([counts[x] for x in arms])) is not None
        need = row["seeds_needed"]
        assert (math.isnan(need) and text_half_width(p) >= 0.01) or half_width(p, int(need)) <= 0.01


def _with_split(out, fraction: float = 0.05):
    """The planted folder's sweep.yaml given a test split (the runs already have their blocks)."""
    path = ResultsDir(out).sweep_yaml
    spec = yaml.safe_load(path.read_text())
    spec["base"]["data"] = {"val_fraction": 0.1, "test_fraction": fraction}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


def test_the_report_says_what_would_decide_each_inconclusive_effect(tmp_path, no_figures):
    out = _with_split(planted(tmp_path, inter_sd=0.04))  # the text's arm x block spread: wider than the margin
    folder = write_report(out, tmp_path / "reports")
    main = {r["level"]: r["call"] for r in csv.DictReader(open(folder / "tables" / "main_effects.csv"))}
    assert main == {"relu": "better", "untied": "inconclusive"}
    rows = list(csv.DictReader(open(folder / "tables" / "to_decide.csv")))
    labels = {r["effect"] for r in rows}
    assert labels == {"tying=untied vs tying=tied", "activation=relu x tying=untied"}
    untied = next(r for r in rows if r["effect"].startswith("tying"))
    assert untied["seeds_needed"] == "" and float(untied["text_ci95"]) >= 0.01
    assert 0.05 < float(untied["test_fraction_min"]) < float(untied["test_fraction_needed"]) <= MAX_TEST_FRACTION
    report = (folder / "report.md").read_text()
    summary = report.split("## Summary")[1].split("\n## ")[0]
    assert untied["verdict"] in summary
    assert "tying=untied vs tying=tied is inconclusive (" in untied["verdict"]
    assert "no number of seeds reaches +/-0.01 with this 5% test split (the text alone gives +/-" in untied["verdict"]
    assert f"a {float(untied['test_fraction_needed']) * 100:.3g}% test split" in untied["verdict"]
    assert "activation=relu vs" not in summary.split("What would decide")[1]  # a called effect gets no sentence


def test_more_seeds_decide_it_where_the_text_is_narrow(tmp_path):
    out = _with_split(planted(tmp_path, inter_sd=0.0, seeds=2, rng_seed=3))
    res = load_results(out, margin=0.002)  # a margin narrow enough to leave the tying effect open
    tables = compute_tables(res)
    rows = tables.to_decide.to_dict("records")
    tying = next(r for r in rows if r["effect"] == "tying=untied vs tying=tied")
    assert tying["seeds_needed"] > tying["seeds"] == 2 and math.isnan(tying["test_fraction_needed"])
    words = sentences.write(res, tables)
    said = words.to_decide[rows.index(tying)]
    assert said.startswith("tying=untied vs tying=tied is inconclusive (")
    assert f": {tying['seeds_needed']} seeds per cell would give +/-0.002 with this 5% test split (now 2, +/-" in said
    assert len(words.to_decide) == len(rows) and words.to_decide_summary == ""  # few: each said, no count


def test_many_inconclusive_effects_get_one_counting_sentence():
    res = SimpleNamespace(arms=True, unit="nats/char", fixed={"data.val_fraction": 0.1}.get, margin=0.01)
    base = {"estimate": 0.001, "ci_low": -0.02, "ci_high": 0.022, "ci95": 0.021, "seeds": 5,
            "baseline_seeds_needed": math.nan, "test_fraction": 0.05, "test_fraction_min": math.nan,
            "test_fraction_needed": math.nan, "seeds_at_test_fraction": math.nan,
            "baseline_seeds_at_test_fraction": math.nan}
    rows = [{**base, "effect": f"arm=a{i} vs arm=b", "seeds_needed": 9.0 + i, "text_ci95": 0.002} for i in range(5)]
    rows += [{**base, "effect": f"arm=c{i} vs arm=b", "seeds_needed": math.nan, "text_ci95": 0.012,
              "test_fraction_min": 0.072, "test_fraction_needed": 0.15 + i / 100, "seeds_at_test_fraction": 20.0}
             for i in range(2)]
    table = pd.DataFrame(rows)
    line = to_decide_words.summary(table, res)
    assert line.startswith("7 effects are inconclusive. For 5 of them more seeds would give a 95% CI of +/-0.01 "
                           "with this 5% test split (at most 13 seeds per arm); for 2 no number of seeds does")
    assert "test splits of 15% to 16% would" in line
    said = to_decide_words.sentence(rows[-1], res)
    assert "no number of seeds reaches +/-0.01 with this 5% test split (the text alone gives +/-0.0120); a 16% " \
           "test split (`data.test_fraction`) would, with 20 seeds per arm (" in said
    assert "`data.val_fraction` (now 0.1) must exceed it" in said
    assert to_decide_words.summary(table.head(6), res) == ""


def test_an_effect_that_depends_on_the_picks_names_the_run_that_would_close_its_cell():
    from gptlab.kinds.tune.spec import TuneSpec
    from gptlab.kinds.tune.tables import open_curve
    from gptlab.report.tables.to_decide import to_decide_table
    from gptlab.stats.robustness import DEPENDS

    spec = SimpleNamespace(kinds={"tune": TuneSpec({"train.lr": (1e-3, 2e-3, 4e-3)})})
    res = SimpleNamespace(arms=True, scale={}, levels={"arm": ["base", "nope", "untied"]}, unit="nats/char",
                          has_test_split=False, spec=spec, label=lambda f, v: f"{f}={v}", margin=0.01)
    arms = pd.DataFrame([{"arm": a, "baseline": "base", "estimate": e, "ci_low": e - 0.05, "ci_high": e + 0.05,
                          "call": DEPENDS, "tuning_cell": f"arm={a}"} for a, e in (("nope", 0.25), ("untied", 0.02))])
    curves = pd.DataFrame([{"cell": "arm=nope", "optimum_lr_low": 0.0, "optimum_lr_high": 8e-3, "window_lr_low": 1e-3,
                            "window_lr_high": 4e-3, "loss_left_ci_high": math.inf},
                           {"cell": "arm=untied", "optimum_lr_low": 4e-3, "optimum_lr_high": 7.7e-3,
                            "window_lr_low": 4e-3, "window_lr_high": 1.6e-2, "loss_left_ci_high": 0.0151}])
    table = to_decide_table(res, None, pd.DataFrame(), pd.DataFrame(), arms,
                            lambda cell: open_curve(res, curves, cell))  # the tuning kind's `to_decide` hook
    assert table[["call", "open_side", "try_lr"]].to_dict("list") == {
        "call": [DEPENDS, DEPENDS], "open_side": ["low", ""], "try_lr": [5e-4, pytest.approx(math.nan, nan_ok=True)]}
    nope, untied = to_decide_words.sentences(table, res)
    assert "open on its low-lr side" in nope and "lr 0.0005" in nope and "+0.2500 nats/char at the picks" in nope
    assert "up to 0.0151 nats/char" in untied and "more selection seeds" in untied
