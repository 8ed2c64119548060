"""The shipped reference studies: their committed reports regenerate from their committed results."""
from __future__ import annotations

import filecmp

import pytest

from gptlab.report import write_report

from conftest import REPO

STUDIES = sorted(p.name for p in (REPO / "results").iterdir() if (p / "summary.csv").exists()
                 and (REPO / "reports" / p.name / "tables").is_dir())


def test_the_reference_studies_are_shipped():
    assert {"four_axes", "postln_warmup", "beyond"} <= set(STUDIES)


@pytest.mark.parametrize("name", STUDIES)
def test_report_regenerates_identical_tables(name, tmp_path):
    out = write_report(REPO / "results" / name, tmp_path / name)
    committed = REPO / "reports" / name / "tables"
    names = sorted(p.name for p in committed.glob("*.csv"))
    assert names == sorted(p.name for p in (out / "tables").glob("*.csv"))
    match, mismatch, errors = filecmp.cmpfiles(committed, out / "tables", names, shallow=False)
    assert mismatch == [] and errors == [], mismatch + errors
