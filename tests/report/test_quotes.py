"""Row references in a discussion (`{{TABLE: key=level}}`): rendered from the report's own rows, sign
included, and refused when they name no row or several; the report says effects along training are
snapshots, and that a training-length factor changes the schedule too."""
from __future__ import annotations

import pandas as pd
import pytest
import yaml
from helpers import REPO

from calibration.synthetic import make_results
from gptlab.errors import GptlabError
from gptlab.report import document, figures, load_results, write_report
from gptlab.report.document import quotes
from gptlab.report.kinds import REPORT_KINDS, ReportKind
from gptlab.report.tables import compute_tables

GRID = {"model.activation": ["gelu", "relu"], "model.tying": ["tied", "untied"], "train.max_iters": [2000, 6000]}
# relu: better at 2000 iterations, worse at 6000 (opposite signs); untied: worse everywhere
EFFECTS = {(("model.activation", "relu"), ("train.max_iters", 2000)): -0.05,
           (("model.activation", "relu"), ("train.max_iters", 6000)): 0.04,
           (("model.tying", "untied"),): 0.03}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A scale sweep (max_iters), its Results and the report's tables."""
    results = make_results(tmp_path_factory.mktemp("q"), GRID, 3, effects=EFFECTS, name="quoted")
    spec = yaml.safe_load((results / "sweep.yaml").read_text())
    (results / "sweep.yaml").write_text(yaml.safe_dump({**spec, "scale": ["train.max_iters"]}, sort_keys=False))
    res = load_results(results)
    st = compute_tables(res)
    tables = {"cells": st.cells, "main_effects": st.main, "interactions": st.interactions,
              "simple_effects": st.simple, "effects_by_step": st.by_step, "effects_by_scale": st.kinds["scale"].by_scale}
    return results, res, tables


def _row(df: pd.DataFrame, **match) -> dict:
    hit = df
    for col, value in match.items():
        hit = hit[hit[col].astype(str) == str(value)]
    assert len(hit) == 1
    return hit.iloc[0].to_dict()


def _signed(x: float) -> str:
    return f"{x:+.4f}"


def test_a_reference_renders_its_own_rows_numbers_with_their_sign(study):
    _, res, tables = study
    by_scale = tables["effects_by_scale"]
    for level, planted in ((2000, -0.05), (6000, 0.04)):
        r = _row(by_scale, level="relu", scale_level=level)
        assert (r["estimate"] > 0) == (planted > 0) and r["call"] == ("better" if planted < 0 else "worse")
        text = quotes.render(f"ReLU: {{{{effects_by_scale: model.activation=relu @ train.max_iters={level}}}}}.",
                             tables, res)
        assert text == (f"ReLU: {_signed(r['estimate'])} (95% CI {_signed(r['ci_low'])} to {_signed(r['ci_high'])}, "
                        f"{r['call']}).")
    # short keys, terms in any order, a slice named in part, a number-valued level written another way
    inter = _row(tables["interactions"], level_a="relu", level_b="untied")
    assert quotes.render("{{interactions: tying=untied x activation=relu | estimate}}", tables, res) == \
        _signed(inter["estimate"])
    simple = _row(tables["simple_effects"], level="untied", at="activation=relu, max_iters=6000")
    assert simple["estimate"] > 0
    assert quotes.render("{{simple_effects: tying=untied @ max_iters=6e3, activation=relu | estimate}}",
                         tables, res) == _signed(simple["estimate"])
    cell = _row(tables["cells"], cell="activation=relu, tying=tied, max_iters=6000")
    assert quotes.render("{{cells: activation=relu, tying=tied, max_iters=6000}}", tables, res) == (
        f"{cell['best_val_loss']:.4f} (95% CI {cell['best_val_loss'] - cell['best_val_loss_ci95']:.4f} to "
        f"{cell['best_val_loss'] + cell['best_val_loss_ci95']:.4f}, 3 seeds)")


@pytest.mark.parametrize("text, message", [
    ("{{main_effects: model.activation=gelu}}", "matches no row of main_effects; valid rows: activation=relu"),
    ("{{effects_by_scale: activation=relu}}", "matches 2 rows of effects_by_scale (name the slice after @); valid "
                                              "rows: activation=relu @ max_iters=2000; activation=relu @ max_iters=6000"),
    ("{{main_effect: activation=relu}}", "no table 'main_effect' in this report; valid: main_effects"),
    ("{{main_effects: relu}}", "'relu' is not a key=level term"),
    ("{{main_effects relu}}", "is not a row reference"),
    ("{{main_effects: activation=relu | rounded}}", "unknown form 'rounded'"),
    ("see {{main_effects: activation=relu", "unmatched"),
])
def test_a_reference_to_no_row_or_several_is_refused(study, text, message):
    _, res, tables = study
    with pytest.raises(GptlabError) as err:
        quotes.render(text, tables, res, "results/quoted/discussion.md")
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("results/quoted/discussion.md: ")


def test_the_report_renders_references_and_refuses_a_missing_row_before_writing(study, tmp_path, monkeypatch):
    results, _, _ = study
    monkeypatch.setattr(figures, "make_figures", lambda *args, **kw: figures.Figures())  # text only: figures are seconds each
    monkeypatch.setattr(REPORT_KINDS.get("scale"), "figures", ReportKind.figures)
    (results / "discussion.md").write_text("Untied costs {{main_effects: model.tying=untied}}; ReLU at 6000: "
                                           "{{effects_by_scale: activation=relu @ max_iters=6000 | estimate}}.\n")
    out = write_report(results, tmp_path / "ok")
    md = (out / "report.md").read_text()
    main = _row(pd.read_csv(out / "tables" / "main_effects.csv"), level="untied")
    scaled = _row(pd.read_csv(out / "tables" / "effects_by_scale.csv"), level="relu", scale_level=6000)
    assert (f"Untied costs {_signed(main['estimate'])} (95% CI {_signed(main['ci_low'])} to "
            f"{_signed(main['ci_high'])}, {main['call']}); ReLU at 6000: {_signed(scaled['estimate'])}.") in md
    assert "{{" not in md and "{{" not in (out / "report.html").read_text()
    # effects along training are labelled as snapshots next to their figure and in the summary
    training = md.split("\n## Effects over training\n", 1)[1].split("\n## ", 1)[0]
    assert document.SNAPSHOT in training and "tables/effects_by_step.csv" in training
    # the length factor is said to move the schedule, in the scale section
    assert "confounded with the learning-rate schedule" in md.split("\n## Effects by scale\n", 1)[1].split("\n## ")[0]

    (results / "discussion.md").write_text("ReLU: {{effects_by_scale: activation=relu @ max_iters=4000}}\n")
    with pytest.raises(GptlabError) as err:
        write_report(results, tmp_path / "refused")
    assert "max_iters=4000}} matches no row of effects_by_scale; valid rows: " in str(err.value)
    assert "activation=relu @ max_iters=6000" in str(err.value)
    assert not (tmp_path / "refused").exists()
    (results / "discussion.md").unlink()


def test_a_change_across_scale_levels_is_quoted_by_its_effect_and_level():
    from gptlab.report.load import ReportError

    res = load_results(REPO / "results" / "transfer")
    files = compute_tables(res).files({})
    row = files["effect_changes"].set_index(["factor", "scale_level"]).loc[("model.activation", "6000")]
    text = quotes.render("{{effect_changes: activation=relu @ max_iters=6000}}", files, res)
    assert text == f"+{row['change']:.4f} (95% CI +{row['ci_low']:.4f} to +{row['ci_high']:.4f}, {row['call']})"
    with pytest.raises(ReportError, match="matches no row of effect_changes"):
        quotes.render("{{effect_changes: activation=relu @ max_iters=2000}}", files, res)  # the reference level
