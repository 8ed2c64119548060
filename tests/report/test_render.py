"""The written report: numbers equal the results, failures are listed, no display needed, CLI errors."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from calibration.synthetic import make_results
from gptlab.report import default_reports_dir, write_report
from gptlab.report.__main__ import main as report_main

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

REPO = Path(__file__).resolve().parents[1]
GRID = {"model.norm": ["pre", "post"], "train.warmup_iters": [0, 100], "model.bias": [False, True]}
STATUS = {(("post", 100, True), 1): "diverged", (("post", 0, False), 2): "diverged",
          (("pre", 0, True), 0): "failed"}


def md_table(md: str, heading: str) -> pd.DataFrame:
    """The first table after `## heading` in report.md, as strings."""
    section = md.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = []
    for ln in section.splitlines():  # the first table only: a section may hold several
        if ln.startswith("| "):
            lines.append(ln)
        elif lines:
            break
    rows = [[c.strip().replace("\\|", "|") for c in ln.strip("|").split(" | ")] for ln in lines]
    return pd.DataFrame(rows[2:], columns=rows[0])


def num(text: str) -> float:
    return math.nan if text == "n/a" else float(text)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    results = make_results(root, GRID, 3, name="mixed", status=STATUS, rng_seed=1,
                           effects={(("model.norm", "post"),): 0.05, (("train.warmup_iters", 0),): 0.01})
    with pytest.MonkeyPatch.context() as mp:  # sampling: pretend no checkpoint exists
        mp.setattr("gptlab.run.sampling.sample_from_run",
                   lambda run_dir, **kw: (_ for _ in ()).throw(FileNotFoundError(run_dir)))
        out = write_report(results)
    summary = pd.read_csv(results / "summary.csv")
    return results, out, (out / "report.md").read_text(), summary


def test_report_files_default_location_and_atomic_writes(report):
    results, out, md, _ = report
    assert out == default_reports_dir(results) == results.parent.parent / "reports" / "mixed"
    tables = ["cells", "levels", "main_effects", "interactions", "higher_order", "simple_effects", "effects_by_step",
              "divergence", "sensitivity", "failures", "stability"]
    figures = ["val_curves", "level_effects", "forest", "interactions", "simple_effects", "effects_by_step",
               "throughput"]
    assert sorted(p.name for p in (out / "tables").iterdir()) == sorted(f"{t}.csv" for t in tables)
    assert sorted(p.name for p in (out / "figures").iterdir()) == sorted(f"{f}.png" for f in figures)
    for name in ["report.md", "report.html"]:
        assert (out / name).is_file(), name
    for png in (out / "figures").glob("*.png"):
        assert f"](figures/{png.name})" in md
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (out / "report.html").read_text()
    assert html.count("src='data:image/png;base64,") == len(figures) and "figures/" not in html
    assert "(no checkpoint available)" in md and "(no checkpoint available)" in html
    assert "- Equivalence margin: +/-0.01 nats/char" in md
    assert not list(out.rglob("*.tmp"))


def test_cell_numbers_equal_recomputation_from_summary(report):
    results, out, md, summary = report
    table = md_table(md, "Cells").set_index("cell")
    csv = pd.read_csv(out / "tables" / "cells.csv").set_index("cell")
    ok = summary[summary["status"] == "ok"].copy()
    ok["gap"] = ok["final_val_loss"] - ok["final_train_loss"]
    norm = {False: "False", True: "True"}
    ok["cell"] = [f"norm={a}, warmup_iters={b}, bias={norm[c]}"
                  for a, b, c in zip(ok["model.norm"], ok["train.warmup_iters"], ok["model.bias"])]
    g = ok.groupby("cell")
    expected = {"best_val_loss": (g["best_val_loss"].mean(), 4), "best_step": (g["best_step"].mean(), 0),
                "final_val_loss": (g["final_val_loss"].mean(), 4), "gap": (g["gap"].mean(), 4),
                "best_val_bpc": (g["best_val_loss"].mean() / np.log(2), 4),
                "tokens_per_sec": (g["tokens_per_sec"].mean(), 0), "wall_s": (g["wall_s"].mean(), 1),
                "params": (g["params"].first(), 0), "n_seeds": (g.size(), 0)}
    half = g["best_val_loss"].agg(lambda v: stats.t.ppf(0.975, len(v) - 1) * stats.sem(v))
    expected["best_val_loss_ci95"] = (half, 4)
    assert len(table) == 8 and set(table.index) == set(expected["best_val_loss"][0].index)
    for col, (values, decimals) in expected.items():
        for cell, value in values.items():
            shown = num(table.loc[cell, col])
            assert shown == csv.loc[cell, col], (col, cell)
            assert abs(shown - value) <= 0.5 * 10 ** -decimals + 1e-9, (col, cell, shown, value)
    bad = summary[summary["status"] != "ok"]
    assert table["n_not_trained"].astype(int).sum() == (bad["status"] == "diverged").sum() == 2  # the CSV's n_diverged
    assert "n_diverged" not in table  # on the page a count of runs that failed to train says so (issue 55)
    assert table["n_failed"].astype(int).sum() == 1
    ranks = table.sort_values("rank", key=lambda s: s.astype(int))
    assert list(ranks["best_val_loss"].astype(float)) == sorted(table["best_val_loss"].astype(float))
    assert list(table.index[table["baseline"] == "yes"]) == ["norm=pre, warmup_iters=0, bias=False"]
    assert f"**Total compute**: {summary['wall_s'].sum():.1f} s" in md
    assert f"**Runs**: {len(summary)} (" in md


def test_effect_tables_in_markdown_equal_csv(report):
    _, out, md, _ = report
    for heading, name in (("Main effects", "main_effects"), ("Interactions", "interactions"),
                          ("Failed, diverged and collapsed runs", "failures")):
        table = md_table(md, heading)
        csv = pd.read_csv(out / "tables" / f"{name}.csv", keep_default_na=False, dtype=str)
        assert len(table) == len(csv) > 0, name
        for col in table.columns:
            stored_as = {"n_not_trained": "n_diverged"}.get(col, col)  # the page's name of the CSV's count
            for shown, stored in zip(table[col], csv[stored_as]):
                if col == "error":
                    assert stored.startswith(shown.removesuffix("..."))
                elif stored and stored[0] in "-0123456789" and col not in ("level", "baseline", "level_a", "level_b"):
                    assert num(shown) == float(stored), (name, col)
                else:
                    assert shown in (stored, "n/a" if stored == "" else stored), (name, col)
    main = pd.read_csv(out / "tables" / "main_effects.csv")
    for verdict in main["verdict"]:
        assert f"- {verdict}" in md


def test_failed_and_diverged_runs_are_listed(report):
    results, out, md, summary = report
    bad = summary[summary["status"] != "ok"]
    table = md_table(md, "Failed, diverged and collapsed runs").set_index("run_id")
    csv = pd.read_csv(out / "tables" / "failures.csv").set_index("run_id")
    assert set(table.index) == set(csv.index) == set(bad["run_id"])
    failed = bad[bad["status"] == "failed"].iloc[0]
    assert math.isnan(failed["best_val_loss"]) and isinstance(failed["error"], str) and failed["error"]
    assert table.loc[failed["run_id"], "status"] == "failed"
    assert table.loc[failed["run_id"], "error"] == failed["error"] == csv.loc[failed["run_id"], "error"]
    assert table.loc[failed["run_id"], "best_val_loss"] == "n/a"
    diverged = bad[bad["status"] == "diverged"]
    assert set(table.loc[diverged["run_id"], "status"]) == {"diverged"}
    assert (table.loc[diverged["run_id"], "diverged_step"] == "500").all()
    main = pd.read_csv(out / "tables" / "main_effects.csv").set_index("factor")
    assert "; 2 of 12 norm=post runs diverged" in main.loc["model.norm", "verdict"]
    assert "; 1 of 12 norm=pre runs failed" in main.loc["model.norm", "verdict"]
    assert main.loc["model.norm", "n_ok"] == 10 and main.loc["model.norm", "n_diverged"] == 2
    assert "3 of 24 runs did not finish ok" in md


def test_sixteen_cell_report_without_display(tmp_path):
    results = make_results(tmp_path, {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"],
                                      "model.position": ["learned", "sinusoidal"], "model.tying": ["tied", "untied"]},
                           3, name="big", effects={(("model.norm", "post"),): 0.05})
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    code = ("import sys, matplotlib; from gptlab.report import write_report; "
            "write_report(sys.argv[1]); print(matplotlib.get_backend())")
    proc = subprocess.run([sys.executable, "-c", code, str(results)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().lower() == "agg"
    out = tmp_path / "reports" / "big"
    assert len(pd.read_csv(out / "tables" / "cells.csv")) == 16
    assert len(pd.read_csv(out / "tables" / "interactions.csv")) == 6
    assert {p.name for p in (out / "figures").glob("*.png")} == {
        "val_curves.png", "level_effects.png", "interactions.png", "throughput.png", "forest.png",
        "simple_effects.png", "effects_by_step.png"}
    assert len(pd.read_csv(out / "tables" / "simple_effects.csv")) == 4 * 8
    assert len(pd.read_csv(out / "tables" / "higher_order.csv")) == 5  # four three-way terms, one four-way
    assert (out / "report.html").stat().st_size > 50_000


@pytest.mark.parametrize("case", ["missing", "no_summary"])
def test_cli_invalid_results_dir_is_one_line_error(tmp_path, case, capsys):
    target = tmp_path / "results" / "nope"
    if case == "no_summary":
        target.mkdir(parents=True)
    code = report_main([str(target)])  # in this process (the CLI as a process: test_margin.py)
    stderr = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1 and stderr.startswith("error: ")
    assert str(target) in stderr and not (tmp_path / "reports").exists()


def test_cli_out_option(report, tmp_path, capsys, no_figures):
    """In this process (the CLI as a process: test_margin.py); the figures are the `report` fixture's subject."""
    results = report[0]
    code = report_main([str(results), "--out", str(tmp_path / "r")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.strip() == str(tmp_path / "r" / "report.md")
    assert (tmp_path / "r" / "tables" / "cells.csv").read_text() == \
        (report[1] / "tables" / "cells.csv").read_text()


def test_discussion_next_to_the_results_is_included(tmp_path, no_figures):
    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, 2, name="disc")
    text = ("Post-LN **disagrees** with *the literature* here ([Xiong et al.](https://arxiv.org/abs/2002.04745)).\n\n"
            "- reason one\n- reason two <script>alert(1)</script>\n")
    (results / "discussion.md").write_text(text)
    out = write_report(results)
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert "## Discussion\n\n" + text.strip() in md
    assert "<strong>disagrees</strong>" in page and "<em>the literature</em>" in page
    assert '<a href="https://arxiv.org/abs/2002.04745">Xiong et al.</a>' in page
    assert "<li>reason one</li>" in page and "<script>" not in page and "&lt;script&gt;" in page
    assert "class='table-wrap'" in page and "position:sticky" in page


def test_unreplicated_90_cell_grid_scales(tmp_path, no_figures):
    """3 x 5 x 3 x 2 cells, one seed: pooled error stated, per-level curves, a compact summary.

    The report's figures are stubbed (most of this test's time); the per-level curves are drawn below."""
    grid = {"model.n_layer": [1, 2, 3], "train.lr": [1e-4, 3e-4, 1e-3, 2e-3, 3e-3],
            "model.n_embd": [32, 64, 128], "model.bias": [False, True]}
    results = make_results(tmp_path, grid, 1, name="wide", noise_sd=0.01,
                           effects={(("train.lr", 1e-3),): -0.05, (("model.bias", True),): 0.02})
    out = write_report(results)
    md = (out / "report.md").read_text()
    assert "ASSUME that every interaction of three or more factors is zero" in md
    summary = md.split("\n## Summary\n", 1)[1].split("\n## ", 1)[0]
    calls = md_table(md, "Summary")
    assert len(calls) < 30 and set(calls["effect"][:9]) >= {"lr=0.001 vs 0.0001", "bias=True vs False"}
    sentences = [ln for ln in summary.splitlines() if ln.startswith("- ") and " (estimate " in ln]
    assert 2 <= len(sentences) <= 16
    assert sentences[0].startswith("- lr=0.001 is better than lr=0.0001")  # largest first
    # simple effects: 2 x 30 + 4 x 18 + 2 x 30 + 1 x 45 rows, too many for the page
    assert "see `tables/simple_effects.csv`" in md and len(pd.read_csv(out / "tables" / "simple_effects.csv")) == 237
    from gptlab.report import load_results
    from gptlab.report.figures import run_figures
    from gptlab.report.tables import compute_tables
    res = load_results(results)
    fig = run_figures._draw_level_curves(res, compute_tables(res).level_curves)
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_legend() is not None]
    assert len(axes) == 4 and max(len(ax.get_legend().get_texts()) for ax in axes) == 5


def test_cell_without_ok_runs_is_named_and_counted_at_the_ceiling(tmp_path, monkeypatch, no_figures):
    from helpers import SHARED_DATA
    monkeypatch.setenv("GPTLAB_DATA_DIR", str(SHARED_DATA))
    grid = {"model.norm": ["pre", "post"], "model.activation": ["gelu", "relu"]}
    dead = {(("post", "relu"), s): "diverged" for s in range(3)}
    results = make_results(tmp_path, grid, 3, name="dead", status=dead, effects={(("model.norm", "post"),): 0.05})
    out = write_report(results)
    md = (out / "report.md").read_text()
    assert "1 cell(s) with no ok run: norm=post, activation=relu" in md
    main = pd.read_csv(out / "tables" / "main_effects.csv").set_index("level")
    assert main.loc["post", "kind"].startswith("simple effect") and main.loc["post", "call"] == "worse"
    inter = pd.read_csv(out / "tables" / "interactions.csv")
    assert inter["estimate"].isna().all()
    div = pd.read_csv(out / "tables" / "divergence.csv").set_index("cell")
    assert div.loc["norm=post, activation=relu", "divergence_rate"] == 1.0
    assert div.loc["norm=post, activation=relu", "rate_ci_low"] == pytest.approx(0.292, abs=0.001)  # 3 of 3
    sens = pd.read_csv(out / "tables" / "sensitivity.csv").set_index("effect")
    # at the ceiling (unigram loss 3.35) the design is whole again: averaged effects, the dead cell far worse
    assert sens.loc["norm=post", "estimate"] == main.loc["post", "estimate"]
    assert sens.loc["norm=post", "estimate_at_ceiling"] == pytest.approx((0.05 + 3.3473 - 1.5) / 2, abs=0.05)
    assert "Counting the 3 run(s) that diverged or did not learn at the ceiling loss 3.3473" in md


def test_margin_comes_from_the_sweep_yaml_unless_given(tmp_path):
    import yaml

    from gptlab.report import load_results, sentences
    from gptlab.report.tables import compute_tables
    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, 3, name="m", effects={})
    spec = yaml.safe_load((results / "sweep.yaml").read_text())
    (results / "sweep.yaml").write_text(yaml.safe_dump({**spec, "report": {"equivalence_margin": 0.5}}))
    res, given = load_results(results), load_results(results, margin=1e-6)
    assert res.margin == res.spec.report.equivalence_margin == 0.5
    assert given.margin == given.spec.report.equivalence_margin == 1e-6  # the one owner: the spec the report reads
    wide, narrow = compute_tables(res), compute_tables(given)
    assert "Equivalence margin: +/-0.5 nats/char (`report.equivalence_margin` or `--margin`)." in sentences.write(res, wide).notes
    assert wide.main["call"].iloc[0] == "equivalent" and narrow.main["call"].iloc[0] == "inconclusive"
    assert "+/-1e-06 nats/char" in sentences.write(given, narrow).notes[0]


def test_no_successful_run_still_writes_the_effect_tables(tmp_path, no_figures):
    status = {(("pre",), s): "failed" for s in range(2)} | {(("post",), s): "diverged" for s in range(2)}
    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, 2, name="none", status=status)
    out = write_report(results)
    main = pd.read_csv(out / "tables" / "main_effects.csv")
    assert main.empty and {"estimate", "p_adjusted", "call"} <= set(main.columns)
    md = (out / "report.md").read_text()
    assert "No successful runs or no factors: no effects to estimate." in md and "\n- \n" not in md


@pytest.mark.parametrize("name", ["summary.csv", "sweep.yaml", "discussion.md"])
def test_a_binary_results_file_is_one_line_and_writes_nothing(tmp_path, name, capsys):
    results = make_results(tmp_path, {"model.norm": ["pre", "post"]}, 2, name="bin")
    (results / name).write_bytes(b"\xff\xfe\x00\x81" + bytes(range(256)) * 4)
    code = report_main([str(results)])  # in this process: a traceback would fail the test too
    stderr = capsys.readouterr().err
    assert code == 2 and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1 and name in stderr
    assert not (tmp_path / "reports").exists()
