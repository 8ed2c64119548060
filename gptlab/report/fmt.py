"""Number precision of every reported column, shared by the CSV tables and the rendered report.

Owns the rule that makes report.md agree with tables/*.csv: statistics are rounded once with
`round_frame` (losses to 4 decimals, p-values to 2 significant digits, ...) before they are written
or put into sentences, and `fmt_value` prints a rounded value with exactly that precision.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import pandas as pd

LOSS_DECIMALS = 4
# A |value| below FLOAT_NOISE is a fit's rounding noise (pinv, lstsq): its sign differs between BLAS kernels (AVX2,
# AVX-512), so it is written as 0.0 and a committed table regenerates the same on any machine.
FLOAT_NOISE = 1e-12
# column name -> decimals; "sig" = 2 significant digits, "int" = integer
_EXACT = {"p_value": "sig", "p_adjusted": "sig", "bartlett_p": "sig", "divergence_rate": 3, "rate_ci_low": 3,
          "rate_ci_high": 3, "order": "int", "seeds_needed": "int", "mean": LOSS_DECIMALS,
          "best_step": "int", "tokens_per_sec": "int", "wall_s": 1, "params": "int",
          "params_non_embedding": "int", "rank": "int", "seed": "int", "df_resid": "int",
          "diverged_step": "int", "round": "int", "seeds": "int", "runs_trained": "int", "half_width": LOSS_DECIMALS,
          "widest_half_width": LOSS_DECIMALS, "target": LOSS_DECIMALS, "lr_sensitivity": LOSS_DECIMALS,
          "effect_at_reference": LOSS_DECIMALS, "effect_at_level": LOSS_DECIMALS, "change": LOSS_DECIMALS,
          "text_share": 2, "baseline_seeds_needed": "int", "seeds_at_test_fraction": "int",
          "baseline_seeds_at_test_fraction": "int", "test_fraction": 3, "test_fraction_min": 3,
          "test_fraction_needed": 2, "df": 1, **{c: 3 for c in (
              "multiplier", "multiplier_low", "multiplier_high", "lowest", "highest", "step_cost", "step_cost_low",
              "step_cost_high", "wall_multiplier", "wall_low", "wall_high", "retuned_multiplier", "retuned_low",
              "retuned_high", "length", "best_factor", "optimum")}, "multiplier_df": 1, "study_steps": "int",
          "steps": "int", "arm_loss": LOSS_DECIMALS, "placed_loss": LOSS_DECIMALS, "best_loss": LOSS_DECIMALS,
          "pick_loss": LOSS_DECIMALS, "gap": LOSS_DECIMALS, "threshold": LOSS_DECIMALS,
          "noise_sd": LOSS_DECIMALS, "tuning_shift": LOSS_DECIMALS, "tuning_p": "sig", "tokens": "int",
          "flops": "sig", "doublings": 2, "rungs": "int", "arms": "int", "tau": 2, "tau_low": 2, "tau_high": 2,
          **{c: LOSS_DECIMALS for c in ("se", "slope", "slope_low", "slope_high", "slope90_low", "slope90_high",
                                        "predicted", "pred_low", "pred_high", "measured", "measured_low",
                                        "measured_high")}}
_LOSS_LIKE = ("loss", "bpc", "ci95", "ci90_low", "ci90_high", "ci_low", "ci_high", "estimate", "gap", "mde80",
              "resid_sd")


def precision(column: str) -> int | str | None:
    """Decimals (or "sig"/"int") for a column name, None when it is not a reported number."""
    if column in _EXACT:
        return _EXACT[column]
    if column.startswith("n_"):
        return "int"
    if any(column.endswith(s) or column.startswith(s) for s in _LOSS_LIKE):
        return LOSS_DECIMALS
    return None


def round_value(value: float, prec: int | str | None) -> Any:
    """Round one number to the given precision (NaN stays NaN)."""
    if prec is None or value is None or (isinstance(value, float) and math.isnan(value)):
        return value
    if prec == "int":
        return int(round(value))
    if prec == "sig":  # a p-value: 2 significant digits hold at any size
        return float(f"{value:.2g}")
    return 0.0 if abs(value) < FLOAT_NOISE else round(float(value), prec)


def round_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Round every numeric column of `df` to its reporting precision (a copy)."""
    out = df.copy()
    for col in out.columns:
        prec = precision(str(col))
        if prec is None or not pd.api.types.is_numeric_dtype(out[col]) or pd.api.types.is_bool_dtype(out[col]):
            continue
        vals = [round_value(v, prec) for v in out[col].astype(float)]
        out[col] = pd.array(vals, dtype="Int64") if prec == "int" else pd.Series(vals, index=out.index, dtype=float)
    return out


def fmt_value(column: str, value: Any) -> str:
    """Text for one table cell: the rounded number at its precision, "n/a" when missing, "yes"/"" for flags."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else ""
    prec = precision(column)
    if prec is None or not isinstance(value, numbers.Real):
        return str(value)
    if prec == "sig":
        return f"{value:.2g}"
    if prec == "int":
        return str(int(value))
    return f"{value:.{prec}f}"


def fmt_loss(value: float) -> str:
    """A loss (nats/char) at report precision."""
    return f"{value:.{LOSS_DECIMALS}f}"


def fmt_p(p: float) -> str:
    """'< 0.001' or '= 0.041' for use after the letter p."""
    return "< 0.001" if p < 0.001 else f"= {p:.2g}"


def fmt_times(value: float, decimals: int = 2) -> str:
    """A multiplier: '1.4' (1 decimal), '1.43' (2), '12' at 10 or more."""
    return f"{value:.{decimals if abs(value) < 10 else 0}f}"


def multiplier_text(m: float, low: float, high: float, censored: str, low_open: bool, high_open: bool,
                    lowest: float, highest: float) -> str:
    """A multiplier and its 95% CI in a few characters: '1.4x (1.2-1.6)' (two decimals where the CI is narrower
    than 0.2: '2.01x (1.97-2.05)'); an end the CI reaches is open ('1.4x (1.2 to >4)'); a censored one is only
    its bound ('beyond 4x', 'below 0.5x'): never extrapolated."""
    if censored == "above":
        return f"beyond {highest:.3g}x"
    if censored == "below":
        return f"below {lowest:.3g}x"
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return ""
    d = 2 if (high - low) < 0.2 else 1
    lo = f"<{lowest:.3g}" if low_open else fmt_times(low, d)
    hi = f">{highest:.3g}" if high_open else fmt_times(high, d)
    return f"{fmt_times(m, d)}x ({lo} to {hi})" if low_open or high_open else f"{fmt_times(m, d)}x ({lo}-{hi})"
