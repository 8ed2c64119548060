"""gptlab.report.fmt: each reported column's precision, the same on every machine."""
import math

import pandas as pd
import pytest

from gptlab.report.fmt import FLOAT_NOISE, fmt_value, precision, round_frame, round_value


@pytest.mark.parametrize("noise", [-1e-17, 1e-17, -0.0, -FLOAT_NOISE / 2])
def test_a_fits_rounding_noise_is_written_as_zero_whatever_its_sign(noise):
    # pinv's noise around an exact zero is -1e-17 on one BLAS kernel and +1e-17 on another: one table for both
    assert str(round_value(noise, 4)) == "0.0"
    assert fmt_value("estimate", round_value(noise, 4)) == "0.0000"


def test_a_small_value_above_the_noise_keeps_its_sign():
    assert str(round_value(-3e-5, 4)) == "-0.0"  # a real estimate below the 4th decimal: its sign is shown
    assert round_value(-0.00006, 4) == -0.0001


def test_p_values_keep_two_significant_digits_at_any_size():
    assert round_value(1.120841350230229e-17, "sig") == 1.1e-17
    assert round_value(0.07274428491617632, "sig") == 0.073
    assert math.isnan(round_value(float("nan"), "sig"))


def test_the_tuning_checks_columns_are_rounded_like_the_losses_and_p_values_they_are():
    assert precision("tuning_shift") == 4 and precision("tuning_p") == "sig"
    frame = round_frame(pd.DataFrame({"tuning_shift": [0.012545245296751611, math.inf],
                                      "tuning_p": [2.4845116185999506e-06, 1.0]}))
    assert frame["tuning_shift"].tolist() == [0.0125, math.inf]
    assert frame["tuning_p"].tolist() == [2.5e-06, 1.0]
    # the last digits of an unrounded column differ between machines: the CSV holds none
    assert frame.to_csv(index=False) == "tuning_shift,tuning_p\n0.0125,2.5e-06\ninf,1.0\n"
