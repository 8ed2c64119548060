"""The unpaired change of an effect between two texts (`stats.transfer`): its interval, its verdicts, and its
calibration by simulation (`calibration.transfer_sim`)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from calibration.transfer_sim import TransferWorld, calibrate_transfer, se_from_ci
from gptlab.stats.transfer import CHANGES, HOLDS, INCONCLUSIVE, REVERSES, transfer_calls, unpaired_change


def test_the_interval_is_welch_satterthwaite_on_two_independent_estimates():
    ch = unpaired_change(np.array([0.02]), np.array([0.004]), np.array([8.0]),
                         np.array([-0.01]), np.array([0.006]), np.array([20.0]))
    var = 0.004 ** 2 + 0.006 ** 2
    df = var ** 2 / (0.004 ** 4 / 8 + 0.006 ** 4 / 20)
    t = st.t.ppf(0.975, df)
    assert ch.change[0] == pytest.approx(-0.03) and ch.df[0] == pytest.approx(df)
    assert (ch.ci_low[0], ch.ci_high[0]) == pytest.approx((-0.03 - t * math.sqrt(var), -0.03 + t * math.sqrt(var)))
    assert ch.p_value[0] == pytest.approx(2 * st.t.sf(0.03 / math.sqrt(var), df))
    assert se_from_ci(np.array([t * 0.01]), np.array([df]))[0] == pytest.approx(0.01)


def test_no_error_on_either_side_gives_no_interval():
    ch = unpaired_change(np.array([0.02, 0.02]), np.array([math.nan, 0.0]), np.array([5.0, 5.0]),
                         np.array([0.01, 0.01]), np.array([0.003, 0.0]), np.array([5.0, 5.0]))
    assert np.isnan(ch.ci_low).all() and np.isnan(ch.p_value).all()
    p, verdict = transfer_calls(ch, ["worse", "worse"], ["worse", "worse"], 0.01)
    assert list(verdict) == [INCONCLUSIVE, INCONCLUSIVE]


def test_the_four_verdicts():
    ref = np.array([0.05, 0.05, 0.0201, 0.02])
    level = np.array([-0.05, 0.0, 0.02, 0.0])
    se = np.full(4, 0.002)
    ch = unpaired_change(ref, se, np.full(4, 30.0), level, se, np.full(4, 30.0))
    _, verdict = transfer_calls(ch, ["worse", "worse", "worse", "inconclusive"],
                                ["better", "inconclusive", "worse", "inconclusive"], 0.01)
    assert list(verdict[:3]) == [REVERSES, CHANGES, HOLDS]
    wide = unpaired_change(np.array([0.02]), np.array([0.02]), np.array([4.0]), np.array([0.0]), np.array([0.02]),
                           np.array([4.0]))
    assert list(transfer_calls(wide, ["worse"], ["inconclusive"], 0.01)[1]) == [INCONCLUSIVE]  # not "holds"


def test_holm_runs_across_the_rows():
    ch = unpaired_change(np.zeros(3), np.full(3, 0.01), np.full(3, 50.0), np.array([0.025, 0.0, 0.0]),
                         np.full(3, 0.01), np.full(3, 50.0))
    p, _ = transfer_calls(ch, ["", "", ""], ["", "", ""], 0.01)
    assert p[0] == pytest.approx(min(1.0, 3 * ch.p_value[0]))


def test_calibration_covers_and_keeps_false_changes_under_alpha():
    """A small version of benchmarks/transfer_calibration.py: the planted changes and the nulls."""
    cal = calibrate_transfer(TransferWorld(), 150, rng_seed=3)
    assert 0.92 <= cal.coverage <= 0.98
    assert cal.familywise_false_change <= 0.08  # Holm keeps it near or under 0.05 (150 studies: +/- 0.035)
    assert cal.holds_when_changed == 0.0 and cal.power_change > 0.4
    assert cal.welch_df > 10
