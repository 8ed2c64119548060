"""The shipped reference studies: their committed reports regenerate from their committed results, their
verdicts are the ones the design supports, and every number their discussions and the README quote is in
the generated report."""
from __future__ import annotations

import filecmp
import re
from pathlib import Path

import pandas as pd
import pytest

from gptlab.report import write_report

from helpers import REPO

STUDIES = sorted(p.name for p in (REPO / "results").iterdir() if (p / "summary.csv").exists()
                 and (REPO / "reports" / p.name / "tables").is_dir())
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+\.\d{2,}(?![\d%]|M\b)")


def test_the_reference_studies_are_shipped():
    assert {"four_axes", "postln_warmup", "beyond", "transfer"} <= set(STUDIES)


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    root = tmp_path_factory.mktemp("reports")
    return {name: write_report(REPO / "results" / name, root / name) for name in STUDIES}


@pytest.mark.parametrize("name", STUDIES)
def test_report_regenerates_identical_tables(name, regenerated):
    out = regenerated[name]
    committed = REPO / "reports" / name / "tables"
    names = sorted(p.name for p in committed.glob("*.csv"))
    assert names == sorted(p.name for p in (out / "tables").glob("*.csv"))
    match, mismatch, errors = filecmp.cmpfiles(committed, out / "tables", names, shallow=False)
    assert mismatch == [] and errors == [], mismatch + errors


def _known_numbers(report_dir: Path) -> list[float]:
    """Every number of the generated tables and of report.md outside its Discussion section."""
    values: list[float] = []
    for csv in (report_dir / "tables").glob("*.csv"):
        df = pd.read_csv(csv)
        values += [float(v) for col in df.select_dtypes("number") for v in df[col].dropna()]
    md = (report_dir / "report.md").read_text()
    head, _, rest = md.partition("\n## Discussion\n")
    text = head + "\n" + rest.split("\n## ", 1)[-1]
    values += [float(m) for m in NUMBER.findall(text)]
    return values


def _unsupported(text: str, known: list[float]) -> list[str]:
    """Numbers (two or more decimals) in `text` that no known value rounds to, in sign or in size."""
    bad = []
    for token in NUMBER.findall(text):
        x, tol = float(token), 0.5 * 10 ** -len(token.split(".")[1]) + 1e-9
        if not any(abs(x - v) <= tol or abs(abs(x) - abs(v)) <= tol for v in known):
            bad.append(token)
    return bad


@pytest.mark.parametrize("name", STUDIES)
def test_every_number_of_the_discussion_is_in_the_report(name, regenerated):
    text = (REPO / "results" / name / "discussion.md").read_text()
    assert _unsupported(text, _known_numbers(regenerated[name])) == []


def test_every_number_of_the_readme_findings_is_in_its_report(regenerated):
    readme = (REPO / "README.md").read_text()
    findings = readme.split("## What the lab found (reference studies)", 1)[1].split("\n## ", 1)[0]
    sections = re.split(r"\n\*\*\d\. \[", findings)[1:]
    assert len(sections) == 4
    for section in sections:
        name = re.search(r"\(reports/(\w+)/report\.md\)", section).group(1)
        assert _unsupported(section, _known_numbers(regenerated[name])) == [], name


def test_beyond_reports_simple_effects_not_additive_main_effects():
    main = pd.read_csv(REPO / "reports" / "beyond" / "tables" / "main_effects.csv").set_index("level")
    assert main.loc["rotary", "estimate"] == pytest.approx(-0.171, abs=0.001) and main.loc["rotary", "call"] == "better"
    assert abs(main.loc["rmsnorm", "estimate"]) < 0.005 and main.loc["rmsnorm", "p_adjusted"] > 0.05
    assert (main["kind"] == "simple effect at the baseline of the other factors").all()
    inter = pd.read_csv(REPO / "reports" / "beyond" / "tables" / "interactions.csv")
    assert inter["estimate"].isna().all() and inter["alias"].str.endswith(", aliased").all()
    assert "aliased" in (REPO / "reports" / "beyond" / "report.md").read_text()


def test_four_axes_main_effects_use_pure_error():
    main = pd.read_csv(REPO / "reports" / "four_axes" / "tables" / "main_effects.csv")
    assert (main["ci95"] < 0.005).all()  # the additive model gave +/-0.012
    assert set(main["call"]) == {"better", "worse", "equivalent"}
