"""The scorecard speaks plainly: agreement the tuning check does not certify has its own verdict, the direction of a
call survives that check on the page, every word of the table is defined under it, the header counts every run, and
the mixed-code warning says what it means for the numbers."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from gptlab.report.sentences import sweeps
from gptlab.report.sentences.notes import mixed_code
from gptlab.report.sentences.overview import runs_item
from gptlab.report.sentences.verdicts import call_phrase, with_call_phrases
from gptlab.report.tables.arms import scorecard_table
from gptlab.stats.robustness import DEPENDS
from gptlab.stats.scorecard import VERDICTS, verdict
from gptlab.sweep.arms_spec import Claim


def test_a_call_the_tuning_check_does_not_certify_reads_at_the_picks_only():
    assert verdict("worse", "quality", DEPENDS, "worse") == "agrees at the picks only"
    assert verdict("same", "quality", DEPENDS, "equivalent") == "agrees at the picks only"
    assert verdict("better", "quality", DEPENDS, "worse") == "opposite at the picks only"
    assert verdict("worse", "quality", DEPENDS, "equivalent") == "no difference at the picks only"
    assert verdict("worse", "quality", DEPENDS, "inconclusive") == "not shown"
    assert verdict("worse", "quality", "inconclusive") == "not shown"  # inconclusive data keep their word
    assert verdict("better", "length", DEPENDS, "better") == "not tested here"
    assert len(set(VERDICTS)) == len(VERDICTS)


def _card() -> pd.DataFrame:
    claims = {a: (Claim("paper", "words", d),) for a, d in (("untied", "worse"), ("relu", "worse"), ("post_ln", "worse"),
                                                            ("rotary", "better"))}
    res = SimpleNamespace(arms=["arm"], scale=[], selection=pd.DataFrame(), spec=SimpleNamespace(
        arms=SimpleNamespace(claims=claims)))
    rows = [("untied", 0.0219, DEPENDS, "worse", DEPENDS), ("relu", 0.0046, "inconclusive", "inconclusive", ""),
            ("post_ln", 0.30, "worse", "worse", ""),  # a pick's loss left had no bound: not certified either
            ("rotary", -0.0316, "better", "better", "robust")]
    arms = pd.DataFrame([{"arm": a, "estimate": e, "ci_low": e - 0.01, "ci_high": e + 0.01, "call": c,
                          "call_at_picks": at, "tuning": t} for a, e, c, at, t in rows])
    return scorecard_table(res, arms).set_index("arm", drop=False)


def test_the_scorecard_tells_agreement_at_the_picks_from_inconclusive_data():
    card = _card()
    assert card.loc["untied", "verdict"] == "agrees at the picks only"
    assert card.loc["post_ln", "verdict"] == "agrees at the picks only"
    assert card.loc["relu", "verdict"] == "not shown" and card.loc["rotary", "verdict"] == "holds"
    assert card.loc["untied", "call_at_picks"] == "worse"  # the direction, in tables/scorecard.csv too


def test_the_page_keeps_the_direction_and_its_legend_defines_every_word_the_table_uses():
    card = _card()
    shown = with_call_phrases(card).set_index("arm")["call"]
    assert shown["untied"] == "worse at the picks, depends on the picks"
    assert shown["post_ln"] == "worse at the picks, not checked"
    assert shown["rotary"] == "better, robust" and shown["relu"] == "inconclusive"
    assert list(card["call"]) == [DEPENDS, "inconclusive", "worse", "better"]  # the csv keeps the calls
    line = sweeps.legend(card, SimpleNamespace(margin=0.01))  # the margin: the report's `Results.margin`
    assert line.startswith("Legend: ") and "\n" not in line
    for word in ("agrees at the picks only", "not shown", "holds", "at the picks", DEPENDS, "not checked", "robust",
                 "worse", "better", "inconclusive"):
        assert f"`{word}`:" in line, word
    assert "`no claim recorded`" not in line and "`opposite`" not in line  # only the words the table uses
    assert "optimum's CI" not in line
    checks = sweeps.tuning_checks({"arms": card.assign(tuning_cell="arm=untied")}, lambda r: r["arm"])
    assert "post_ln: worse at the picks, not checked: a cell it uses has no bound" in " ".join(checks)
    assert call_phrase({"call": DEPENDS, "call_at_picks": "better", "tuning": DEPENDS}).startswith("better at")


def test_the_header_counts_the_selection_runs_and_names_each_role():
    def runs(n: int, status: str = "ok") -> pd.DataFrame:
        return pd.DataFrame({"status": [status] * n, "wall_s": [1.0] * n})

    tuned = SimpleNamespace(runs=runs(66), selection=pd.concat([runs(86), runs(1, "collapsed")]),
                            other_roles=pd.DataFrame(), cells=pd.DataFrame({"cell": range(11)}))
    line = runs_item(tuned)
    assert line.startswith("**Runs**: 153 (87 selection, 66 estimation)"), line
    assert "86 ok, 1 collapsed" in line and "66 ok" in line
    plain = SimpleNamespace(runs=runs(8), selection=pd.DataFrame(), other_roles=pd.DataFrame(),
                            cells=pd.DataFrame({"cell": range(4)}))
    assert runs_item(plain) == "**Runs**: 8 (8 ok) in 4 cells"


def test_the_mixed_code_warning_says_what_it_means_for_the_numbers():
    res = SimpleNamespace(environment={"gptlab": ["0.1.0"], "git_commit": ["0a2f271d3275+dirty", "06fd1e11985e"]})
    (text,) = mixed_code(res)
    assert "What this means for the numbers" in text and "+dirty" in text
    assert "an effect between them measures the change of code along with the design" in text
    assert mixed_code(SimpleNamespace(environment={"git_commit": ["a"]})) == []
    commits = [f"{i:012x}" for i in range(11)]  # a sweep resumed across many commits: the first 8, then a count
    (text,) = mixed_code(SimpleNamespace(environment={"git_commit": commits}))
    assert f"(commits {', '.join(commits[:8])} and 3 more)" in text and commits[8] not in text
