"""Calls on effects: Holm adjustment across a report's tests, TOST equivalence, and the call words.

Owns the four calls (`better`, `worse`, `equivalent`, `inconclusive`: the one spelling of each, which
every other module imports), the equivalence margin (default, validation) and the family-wise
adjustment. Losses are "lower is better", so a negative estimate whose Holm-adjusted p is below ALPHA
is `better`. `equivalent` is the two one-sided tests (TOST) at ALPHA: the 90% CI lies inside +/-
margin. Everything else is `inconclusive`.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from gptlab.errors import GptlabError

ALPHA = 0.05
DEFAULT_MARGIN = 0.01  # nats/char
BETTER, WORSE, EQUIVALENT, INCONCLUSIVE = "better", "worse", "equivalent", "inconclusive"
CALLS = (BETTER, WORSE, EQUIVALENT, INCONCLUSIVE)  # every call an effect can get
DIRECTIONAL = (BETTER, WORSE)  # a call that names a direction: the effect is shown to differ from zero
DECISIVE = (BETTER, WORSE, EQUIVALENT)  # a call that shows something: the tuning check has a call to test


def check_margin(value: Any, key: str = "report.equivalence_margin") -> float:
    """The margin as a positive finite float, or a GptlabError naming `key` and what is valid."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(str(value).strip())
        except ValueError:
            raise GptlabError(f"{key}: must be a positive number of nats/char (e.g. 0.01), got {value!r}") from None
    if value != value:  # NaN compares false with everything: say it as it was given
        raise GptlabError(f"{key}: must be a positive finite number of nats/char (e.g. 0.01), got nan")
    value = float(value) if abs(value) < 2**1023 else (math.inf if value > 0 else -math.inf)  # no float() overflow
    if not math.isfinite(value) or value <= 0:
        raise GptlabError(f"{key}: must be a positive finite number of nats/char (e.g. 0.01), got {value!r}")
    return value


def holm(p_values: "np.ndarray | list[float]") -> np.ndarray:
    """Holm-adjusted p-values (Holm 1979); NaN entries stay NaN and do not count as tests.

    The i-th smallest of m p-values is multiplied by m - i + 1, made monotone, capped at 1. It equals
    statsmodels' `multipletests(method="holm")` (a test checks), which also runs a full garbage
    collection on every call: too slow for the calibration simulations.
    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    order = valid[np.argsort(p[valid], kind="stable")]
    m = len(order)
    out[order] = np.minimum(1.0, np.maximum.accumulate(p[order] * np.arange(m, 0, -1)))
    return out


def call(estimate: float, p_adjusted: float, ci90_low: float, ci90_high: float, margin: float) -> str:
    """One effect's call from its Holm-adjusted p and its 90% CI (NaN -> inconclusive)."""
    if not math.isnan(p_adjusted) and p_adjusted < ALPHA:
        return BETTER if estimate < 0 else WORSE
    if not (math.isnan(ci90_low) or math.isnan(ci90_high)) and -margin < ci90_low and ci90_high < margin:
        return EQUIVALENT
    return INCONCLUSIVE
