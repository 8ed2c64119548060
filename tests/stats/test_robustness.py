"""Calls that survive the tuning (`stats.robustness`): each cell's loss left on the table, taken against the call."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gptlab.stats.calls import ALPHA
from gptlab.stats.design import Design
from gptlab.stats.effects import TUNING_COLS, analyse
from gptlab.stats.robustness import DEPENDS, NOT_CHECKED, check, tuning_word

W = np.array([-0.5, -0.5, 0.5, 0.5])  # a main effect over a 2x2: the last two cells against the first two


def _check(call, estimate=-0.02, se=0.004, left=(0.0, 0.0, 0.0, 0.0), margin=0.01, ci90=(-0.027, -0.013)):
    from scipy import stats

    p = 2 * stats.t.sf(abs(estimate) / se, 8)
    return check(estimate, se, 8, p, min(1.0, 3 * p), ci90, call, W, np.array(left, float), margin)


def test_a_better_call_holds_against_a_small_loss_left_and_not_against_a_large_one():
    small = _check("better", left=(0.001, 0.001, 0.001, 0.001))
    assert (small.call, small.robust) == ("better", True) and small.shift == pytest.approx(0.001)
    # Better means the last two cells beat the first two: only the first two's loss left works against it.
    large = _check("better", left=(0.0, 0.03, 0.0, 0.0))
    assert (large.call, large.robust, large.cell) == (DEPENDS, False, 1) and large.shift == pytest.approx(0.015)
    beaten_cells_only = _check("better", left=(0.0, 0.0, 0.05, 0.05))  # the winners' loss left only helps them
    assert beaten_cells_only.robust is True and beaten_cells_only.shift == 0.0


def test_an_equivalence_must_stay_inside_the_margin_once_widened_both_ways():
    near = (-0.004, 0.004)
    assert _check("equivalent", estimate=0.0, ci90=near, left=(0.002,) * 4).robust is True
    wide = _check("equivalent", estimate=0.0, ci90=near, left=(0.0, 0.0, 0.0, 0.014))
    assert (wide.call, wide.cell) == (DEPENDS, 3)


def test_inconclusive_and_unknown_losses_are_not_checked():
    assert _check("inconclusive", left=(1.0,) * 4) .robust is None
    unknown = _check("better", left=(math.nan, 0.0, 0.0, 0.0))
    assert unknown.robust is None and unknown.call == "better"
    unbounded = _check("better", left=(math.inf, 0.0, 0.0, 0.0))
    assert unbounded.call == DEPENDS
    assert tuning_word(unknown, "better") == NOT_CHECKED and tuning_word(unknown, "inconclusive") == ""


def test_a_cell_without_a_curve_that_can_only_help_the_call_does_not_stop_the_check():
    # better: the last two cells beat the first two; the winners' loss left (unknown here) could only widen the gap
    helped = _check("better", left=(0.001, 0.001, math.nan, math.nan))
    assert (helped.call, helped.robust) == ("better", True) and helped.shift == pytest.approx(0.001)
    assert tuning_word(helped, "better") == "robust"
    against = _check("better", left=(0.001, math.nan, 0.0, 0.0))  # a beaten cell with no bound: not checked
    assert against.robust is None and tuning_word(against, "better") == NOT_CHECKED


def test_analyse_checks_every_call_and_names_the_cell_responsible():
    rng = np.random.default_rng(0)
    levels = {"act": ("gelu", "relu"), "tie": ("tied", "untied")}
    design = Design(("act", "tie"), levels, {"act": "gelu", "tie": "tied"},
                    (("gelu", "tied"), ("gelu", "untied"), ("relu", "tied"), ("relu", "untied")))
    cells = [c for c in design.cells for _ in range(5)]
    seeds = np.tile(np.arange(5), 4)
    truth = {("gelu", "tied"): 1.75, ("gelu", "untied"): 1.75, ("relu", "tied"): 1.72, ("relu", "untied"): 1.72}
    y = np.array([truth[c] + 0.002 * rng.standard_normal() for c in cells])
    label = lambda f, lv: f"{f}={lv}"  # noqa: E731
    plain = analyse(y, cells, seeds, design, label, 0.01)
    assert not set(TUNING_COLS) & set(plain.main.columns)
    relu = plain.main[plain.main["factor"] == "act"].iloc[0]
    assert relu["call"] == "better"
    left = np.zeros(4)
    left[list(design.cells).index(("gelu", "untied"))] = 0.1  # GELU untied might have been far better at its own best lr
    tuned = analyse(y, cells, seeds, design, label, 0.01, loss_left=left)
    row = tuned.main[tuned.main["factor"] == "act"].iloc[0]
    assert (row["call"], row["tuning"]) == (DEPENDS, "depends on the picks")
    assert design.cells[int(row["tuning_cell"])] == ("gelu", "untied") and row["tuning_shift"] == pytest.approx(0.05)
    tie = tuned.main[tuned.main["factor"] == "tie"].iloc[0]
    assert tie["tuning"] in ("", "depends on the picks")  # an inconclusive or equivalent tying call: checked or not
    robust = analyse(y, cells, seeds, design, label, 0.01, loss_left=np.full(4, 0.001))
    assert robust.main[robust.main["factor"] == "act"].iloc[0]["tuning"] == "robust"


def test_the_joint_test_adds_each_cell_s_uncertainty_in_quadrature_not_its_upper_end():
    from scipy import stats

    # the first two cells (beaten by a `better` call) may have left 0.002 +/- (CI up to 0.012) each
    rows = np.array([[0.002, 0.012, math.inf]] * 2 + [[0.0, 0.0, math.inf]] * 2)
    joint = _check("better", estimate=-0.02, se=0.004, left=rows)
    summed = _check("better", estimate=-0.02, se=0.004, left=rows[:, 1])  # the rule it replaced: 0.012 added
    assert (joint.call, summed.call) == ("better", DEPENDS)
    sd = (0.012 - 0.002) / stats.norm.ppf(0.975)
    t = (0.02 - 0.002) / math.sqrt(0.004 ** 2 + 2 * (0.5 * sd) ** 2)  # moved by the estimated shift, SEs combined
    p = 2 * stats.t.sf(0.02 / 0.004, 8)
    df = (0.004 ** 2 + 2 * (0.5 * sd) ** 2) ** 2 / (0.004 ** 4 / 8)  # the cells' df are infinite
    assert joint.p == pytest.approx(min(1.0, 2 * stats.t.sf(t, df) * 3))  # the effect's own Holm factor (3)
    assert joint.shift == pytest.approx(0.002 + stats.norm.ppf(0.95) * math.sqrt(2 * (0.5 * sd) ** 2))
    assert 0 < p < joint.p < ALPHA


def test_few_noise_df_widen_the_test_and_an_open_optimum_still_decides_nothing():
    rows = np.array([[0.002, 0.012, 2.0]] * 2 + [[0.0, 0.0, 2.0]] * 2)
    many = _check("better", estimate=-0.02, left=np.column_stack([rows[:, :2], [50.0] * 4]))
    few = _check("better", estimate=-0.02, left=rows)
    # the same CI on 2 df is a smaller SE (its width, t_0.975(2) = 4.3 SEs, already paid for the df), on fewer df
    assert few.call == many.call == "better" and few.p < many.p and few.shift < many.shift
    open_row = rows.copy()
    open_row[1, 1] = math.inf
    assert _check("better", estimate=-0.5, left=open_row).call == DEPENDS
    assert _check("worse", estimate=0.5, left=open_row).call == "worse"  # the open cell only helps a worse call


def test_an_equivalence_is_checked_on_each_side_with_the_combined_se():
    rows = np.array([[0.001, 0.004, math.inf]] * 4)
    assert _check("equivalent", estimate=0.0, ci90=(-0.004, 0.004), se=0.0024, left=rows).robust is True
    wide = rows.copy()
    wide[3] = [0.006, 0.02, math.inf]  # the last cell pushes the lower side out of the margin
    out = _check("equivalent", estimate=0.0, ci90=(-0.004, 0.004), se=0.0024, left=wide)
    assert (out.call, out.cell) == (DEPENDS, 3)


def test_an_unchecked_call_is_worded_as_holding_at_the_picks_only():
    import pandas as pd

    from gptlab.report.sentences.sweeps import tuning_checks

    table = pd.DataFrame([{"factor": "arm", "level": "post_ln", "call_at_picks": "worse", "call": "worse",
                           "tuning": NOT_CHECKED, "tuning_cell": math.nan}])
    (line,) = tuning_checks({"main": table}, lambda r: r["level"])
    assert "worse at the picks, not checked against the tuning" in line and "holds at the picks only" in line
    assert "nothing the tuning could overturn" not in line
