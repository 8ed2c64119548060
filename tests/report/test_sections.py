"""The report leads with its answer: order of the sections, CIs labelled as the calls use them, one sign per sentence.

A reader meets the summary (calls table, then the forest plot) first and the provenance (commands, fixed settings)
after the findings; a CI beside a Holm-adjusted call says it is unadjusted, in the tables, the sentences and the
forest plot; effects along training say that each step was tested alone; the long tails (samples, an all-zero
divergence table) come last or shrink to a sentence. Synthetic results (no training), figures stubbed.
"""
from __future__ import annotations

import pandas as pd
import pytest

from calibration.synthetic import make_results
from gptlab.report import load_results, sentences, write_report
from gptlab.report.sentences import overview, verdicts
from gptlab.report.tables import compute_tables

GRID = {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"]}
# rng_seed 2: post-LN's unadjusted 95% CI excludes zero while its Holm-adjusted call is inconclusive, and each step
# alone calls it worse (the fixture checks both, so a change to the synthetic data cannot hide the case)
EFFECTS = {(("model.norm", "post"),): 0.012, (("model.activation", "relu"),): -0.06}
FAKE_PNG = b"\x89PNG\r\n\x1a\nnot drawn"


@pytest.fixture(scope="module")
def two_by_two(tmp_path_factory):
    from gptlab.report import figures
    from gptlab.report.kinds import REPORT_KINDS, ReportKind

    results = make_results(tmp_path_factory.mktemp("layout"), GRID, 3, name="layout", noise_sd=0.01, rng_seed=2,
                           effects=EFFECTS)
    with pytest.MonkeyPatch.context() as mp:  # the forest plot as a stand-in PNG: where it sits is the subject here
        mp.setattr(figures, "make_figures", lambda *a, **k: figures.Figures.of(forest=FAKE_PNG))
        for key in REPORT_KINDS.names():  # the kinds' figures: none
            mp.setattr(REPORT_KINDS.get(key), "figures", ReportKind.figures)
        out = write_report(results)
    main = pd.read_csv(out / "tables" / "main_effects.csv").set_index("level")
    post = main.loc["post"]
    assert post["ci_low"] > 0 and post["call"] == "inconclusive", "the synthetic case moved"
    steps = pd.read_csv(out / "tables" / "effects_by_step.csv")
    assert set(steps.loc[steps["level"] == "post", "call"]) == {"worse"}, "the synthetic case moved"
    return results, (out / "report.md").read_text(), (out / "report.html").read_text()


@pytest.fixture(scope="module")
def one_factor(tmp_path_factory):
    """A one-factor sweep whose baseline is the best cell and where every run trained."""
    return make_results(tmp_path_factory.mktemp("one"), {"model.norm": ["pre", "post"]}, 3, name="one",
                        effects={(("model.norm", "post"),): 0.05})


def section(md: str, heading: str) -> str:
    return md.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_report_leads_with_the_summary_and_puts_provenance_after_the_findings(two_by_two):
    _, md, page = two_by_two
    h2 = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert h2[0] == "Summary"
    assert h2.index("How this was run") > h2.index("Main effects") and h2.index("How this was run") > h2.index(
        "Failed, diverged and collapsed runs")
    assert h2[-1] == "Samples"  # the longest tail last
    assert md.index("## Summary") < md.index("**Reproduce the sweep**") and md.index("## Summary") < md.index(
        "Fixed settings (`base`)")
    assert "**Reproduce the sweep**" in section(md, "How this was run") and "```text" in section(md, "How this was run")
    # the forest plot right after the calls table, before any section of details
    summary = section(md, "Summary")
    assert "](figures/forest.png)" in summary and summary.index("| effect |") < summary.index("](figures/forest.png)")
    assert md.count("](figures/forest.png)") == 1
    # the HTML page in the same order
    order = [page.index(s) for s in ("<h2>Summary</h2>", "data:image/png;base64,", "<h2>Main effects</h2>",
                                     "<h2>How this was run</h2>", "<h2>Samples</h2>")]
    assert order == sorted(order)


def test_a_ci_beside_a_holm_call_is_labelled_unadjusted(two_by_two):
    _, md, _ = two_by_two
    calls = section(md, "Summary").split("| effect |", 1)[1].splitlines()[0]
    assert "95% CI, unadjusted" in calls and "p_adjusted" in calls
    post = next(line for line in section(md, "Summary").splitlines() if line.startswith("| norm=post vs pre |"))
    assert "inconclusive" in post
    # the sentence says the CI is unadjusted and why it excludes zero on an inconclusive call
    verdict = next(line for line in section(md, "Main effects").splitlines() if line.startswith("- norm=post vs"))
    assert "unadjusted" in verdict and "Holm-adjusted p" in verdict and "only before the Holm adjustment" in verdict
    assert "unadjusted" in section(md, "Main effects").strip().split("\n\n", 1)[0]  # the table's caption


def test_along_training_each_step_is_labelled_as_tested_alone(two_by_two):
    _, md, _ = two_by_two
    along = [line for line in section(md, "Summary").splitlines() if line.startswith("- Along training: norm=post")]
    assert along, "a step-by-step call of post-LN should be said"
    for line in along + [line for line in section(md, "Effects over training").splitlines()
                         if line.startswith("- norm=post")]:
        assert "worse" in line and verdicts.ALONE in line and "Holm-adjusted over all its tests, calls it inconclusive" in line


def test_trajectories_name_the_summary_call_only_where_it_differs(one_factor):
    res = load_results(one_factor)
    rows = [{"factor": "model.norm", "level": "post", "step": s, "estimate": e, "ci_low": e - 0.001,
             "ci_high": e + 0.001, "p_value": 0.001, "p_adjusted": 0.002, "call": "worse"}
            for s, e in ((250, 0.01), (500, 0.02), (1000, 0.04))]
    by_step = pd.DataFrame(rows)
    differs = verdicts.trajectories(by_step, res, {("model.norm", "post"): "inconclusive"})
    agrees = verdicts.trajectories(by_step, res, {("model.norm", "post"): "worse"})
    assert len(differs) == len(agrees) == 1
    assert verdicts.ALONE in differs[0] and "calls it inconclusive" in differs[0]
    assert verdicts.ALONE in agrees[0] and "calls it" not in agrees[0]


def test_one_sign_per_sentence(one_factor):
    res = load_results(one_factor)
    row = {"factor": "model.norm", "level": "post", "baseline": "pre", "kind": "averaged over the other factors",
           "alias": "", "estimate": -0.0707, "ci_low": -0.0840, "ci_high": -0.0574, "p_value": 1e-5,
           "p_adjusted": 1e-4, "call": "better"}
    text = verdicts.main(row, res)
    # the table's sign in the prose too (issue 55): a gain is negative, as in every table
    assert "better than norm=pre (estimate -0.0707 nats/char, 95% CI -0.0840 to -0.0574, unadjusted;" in text
    worse = verdicts.main({**row, "estimate": 0.0707, "ci_low": 0.0574, "ci_high": 0.0840, "call": "worse"}, res)
    assert "worse than norm=pre (estimate 0.0707 nats/char, 95% CI 0.0574 to 0.0840, unadjusted;" in worse
    inter = {"factor_a": "model.norm", "level_a": "post", "factor_b": "model.activation", "level_b": "relu",
             **{k: row[k] for k in ("alias", "estimate", "ci_low", "ci_high", "p_value", "p_adjusted", "call")}}
    assert "(estimate -0.0707 nats/char, 95% CI -0.0840 to -0.0574, unadjusted;" in verdicts.interaction(inter, res)
    # an inconclusive effect keeps its signed estimate and CI, in one sign convention
    inconclusive = verdicts.main({**row, "estimate": -0.004, "ci_low": -0.009, "ci_high": 0.001, "p_adjusted": 0.4,
                                  "call": "inconclusive"}, res)
    assert "estimate -0.0040, 95% CI -0.0090 to 0.0010, unadjusted; Holm-adjusted p = 0.4)" in inconclusive
    assert "only before" not in inconclusive  # its CI covers zero: nothing to explain


def test_one_factor_sweep_has_no_simple_effects_and_says_the_baseline_is_best_once(one_factor, no_figures):
    path = one_factor
    res = load_results(path)
    tables = compute_tables(res)
    assert len(tables.simple) == 1 and not tables.simple_apart  # the one simple effect is the main effect
    words = sentences.write(res, tables)
    assert not any(c.startswith("Simple effects") for c in words.call_counts)
    assert len(words.best) == 1 and "the baseline is also the best cell" in words.best[0]
    md = (write_report(path) / "report.md").read_text()
    assert "## Simple effects" not in md and "Simple effects:" not in md and "- Baseline:" not in md
    # no run diverged: one sentence, not a table of zeros
    divergence = section(md, "Divergence")
    assert "| cell |" not in divergence and "No run diverged, collapsed or crashed in any of the 2 cells" in divergence


def test_two_factors_keep_simple_effects_a_distinct_baseline_line_and_a_divergence_table(tmp_path):
    status = {(("post", "relu"), 0): "diverged"}
    path = make_results(tmp_path, GRID, 3, name="two", status=status, effects={(("model.activation", "relu"),): -0.05})
    res = load_results(path)
    tables = compute_tables(res)
    assert tables.simple_apart
    words = sentences.write(res, tables)
    assert any(c.startswith("Simple effects") for c in words.call_counts)
    assert [b.split(":")[0] for b in words.best] == ["Best cell", "Baseline"]
    assert "also the best" not in words.best[0]
    assert words.no_divergence == "" and words.divergence  # a run diverged: the table stays, with its caveat
    assert overview.best_and_baseline(res, tables.cells) == list(words.best)


def test_the_first_screen_prints_nothing_twice_and_no_empty_column(tmp_path):
    """Issue 55: the Summary's called effects are not repeated under Main effects; the Holm family is named beside
    the calls; without a test split the table of what would decide shows no text columns (zeros and n/a); the
    cells' wide CIs are explained."""
    import pandas as pd

    from calibration.synthetic import make_results
    from gptlab.report import write_report

    grid = {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"]}
    results = make_results(tmp_path, grid, seeds=3, effects={(("model.norm", "post"),): 0.05,
                                                             (("model.activation", "relu"),): 0.004},
                           noise_sd=0.004, name="screen")
    md = (write_report(results, tmp_path / "reports") / "report.md").read_text()

    def section(name: str) -> str:
        return md.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]

    summary, main = section("Summary"), section("Main effects")
    said = {ln for ln in summary.splitlines() if ln.startswith("- ")}
    assert any("norm=post is worse than norm=pre (estimate 0.05" in ln for ln in said)
    assert not said & {ln for ln in main.splitlines() if ln.startswith("- ")}
    assert "stated in the Summary" in main
    assert "distinct tests" in summary
    decide = pd.read_csv(tmp_path / "reports" / "tables" / "to_decide.csv")
    assert len(decide) and "text_ci95" in decide  # the CSV keeps every column; the page shows none that is empty
    assert "What would decide" in summary and "text_ci95" not in summary and "| n/a |" not in summary
    assert "wider than an effect's" in section("Cells")
