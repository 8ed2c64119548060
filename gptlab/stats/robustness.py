"""Whether a tuned effect's call survives the tuning: the effect at the cells' optima, tested with its picks' uncertainty.

A tuned sweep estimates each effect at the cells' picks. A pick is an estimate: at its own best lr a
cell would have been lower by the loss its pick leaves on the table, L_c >= 0, estimated by L_c-hat
with a 95% CI up to L_c^hi (`gptlab.stats.lr_curves`). An effect is a contrast sum_c w_c mu_c, so at
the cells' optima it is E* = E - sum_c w_c L_c. The check tests E* itself, one statistic for the
effect and the loss the picks may leave together (not each cell's 95% upper end added on top of a 95%
test, which made the old check certify almost nothing):

- `better` (E < 0): only the cells it beats (w_c < 0) can move E* toward zero; the others' L_c >= 0
  only help the call and are left at 0 (so the test is of U = E + sum_{w_c<0} |w_c| L_c >= E*). The
  estimate U-hat = E-hat + sum |w_c| L_c-hat, its SE sqrt(se^2 + sum w_c^2 sd_c^2), with each cell's
  sd_c = (L_c^hi - L_c-hat) / t_0.975(df_c): the upper half of its profile CI (the side that works
  against the call) read as an SE on the df of the cell's noise (z_0.975 when unknown). The call holds
  when U-hat < 0 and its p (t on the Welch-Satterthwaite df of se^2 and the w_c^2 sd_c^2), times the
  effect's own Holm multiplier p_adjusted / p, is below ALPHA. This is one combined statistic, the
  uncertainty of the shift added to the effect's in quadrature, not Berger & Boos's (1994) split (a
  1 - gamma confidence set for the L_c and the test at alpha - gamma at its worst point), which would
  again add a worst case on top of a test. Reading each L_c's profile CI as a normal SE is an
  approximation (that CI is skewed and bounded at 0), so the false certification is calibrated by
  simulation (`calibration.robustness_sim`, docs/STATISTICS.md).
- `worse`: the same with the cells that beat it (w_c > 0).
- `equivalent`: the 90% CI of each side, moved by that side's cells and widened by their sd_c, stays
  inside +/- margin (its half-width in SEs as given, on the combined SE).

A cell whose L_c^hi is inf (an open optimum) makes any call it works against DEPENDS. A cell with no
fit at all (NaN: no curve, e.g. every run past its pick failed) leaves a call it works against
unchecked (`robust` None: the table's `tuning` says NOT_CHECKED); a cell that can only help the call
moves nothing, known or not. Given no
estimates (only the upper ends), L_c-hat = L_c^hi and sd_c = 0: each upper end added to the test, the
old check. Otherwise the call is DEPENDS, and the cell that moves it most is named. `inconclusive`
has nothing to lose. The loss left is measured on the validation split the picks were chosen on and
the effects are on the test split: both in the same units, the check treats them as one curve.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from gptlab.stats.calls import ALPHA, BETTER, DECISIVE, EQUIVALENT

# The tuning check's words, spelled here once: the effect tables' `tuning` column and the call DEPENDS.
DEPENDS = "depends on the picks"  # the call of an effect that does not survive its cells' loss left on the table
NOT_CHECKED = "not checked"  # `tuning` of a call a cell without a bound on its loss left could overturn
ROBUST = "robust"  # `tuning` of a call that survives the check
Z_CI = float(stats.norm.ppf(0.975))  # the loss left's CI is 95%: its upper half is this many SEs
Z_SHIFT = float(stats.norm.ppf(0.95))  # the shift reported is its one-sided 95% upper bound


@dataclass(frozen=True)
class TuningCheck:
    """One effect's call against its cells' loss left on the table."""

    call: str  # the call, or DEPENDS when it does not survive
    robust: bool | None  # None: nothing to check (inconclusive, or no loss-left bound for a cell it uses)
    shift: float  # how far the loss left may move the estimate against the call: one-sided 95% upper bound (nats)
    cell: int | None  # index of the cell that moves it most (None: no move)
    p: float = math.nan  # the test at the optima: Holm-adjusted p (NaN: equivalent, or nothing tested)


def tuning_word(check: TuningCheck, call_at_picks: str) -> str:
    """The effect table's `tuning`: robust, DEPENDS, NOT_CHECKED (a call no check could confirm), or "" (no call)."""
    if check.robust is None:
        return NOT_CHECKED if call_at_picks in DECISIVE else ""
    return ROBUST if check.robust else DEPENDS


def _per_cell(loss_left: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, upper end, sd, df) per cell from (n,) upper ends or (n, 2 or 3) rows (estimate, upper end, df)."""
    a = np.asarray(loss_left, float)
    est, high = (a, a) if a.ndim == 1 else (a[:, 0], a[:, 1])
    df = a[:, 2] if a.ndim == 2 and a.shape[1] > 2 else np.full(len(a), math.inf)
    df = np.where(df > 0, df, math.inf)  # unknown: a normal SE
    est = np.where(np.isnan(est), high, np.maximum(est, 0.0))  # no estimate: the upper end itself, sd 0
    q = np.where(np.isfinite(df), stats.t.ppf(0.975, np.where(np.isfinite(df), df, 1.0)), Z_CI)
    with np.errstate(invalid="ignore"):
        sd = np.where(np.isfinite(high), np.maximum(high - est, 0.0) / q, math.inf)
    return est, high, sd, df


def _df(se: float, df: float, v: np.ndarray, df_cells: np.ndarray) -> float:
    """Welch-Satterthwaite df of se^2 (on df) plus the cells' variances v (on theirs)."""
    parts = (se ** 4 / df if math.isfinite(df) else 0.0) + float(np.sum(np.where(v > 0, v * v / df_cells, 0.0)))
    return (se * se + float(v.sum())) ** 2 / parts if parts > 0 else math.inf


def check(estimate: float, se: float, df: float, p_value: float, p_adjusted: float, ci90: tuple[float, float],
          call: str, weights: np.ndarray | None, loss_left: np.ndarray, margin: float) -> TuningCheck:
    """`call` of an effect with contrast `weights` over the cells, against each cell's loss left: `loss_left` is (n,)
    upper ends of its 95% CI, or (n, 2 or 3) rows (estimate, upper end, df of its noise); NaN upper end: unknown."""
    if call not in DECISIVE or weights is None:
        return TuningCheck(call, None, 0.0, None)
    w = np.asarray(weights, float)
    est, high, sd, df_cells = _per_cell(loss_left)
    used = w != 0
    up, down = used & (w < 0), used & (w > 0)  # cells that can raise the effect at the optima, and lower it
    against = (up | down) if call == EQUIVALENT else up if call == BETTER else down
    if np.isnan(high[against]).any():  # a cell that could overturn the call has no bound: the call is not checked
        return TuningCheck(call, None, math.nan, None)
    est, high, sd = (np.where(np.isnan(high), 0.0, x) for x in (est, high, sd))  # the others only help the call

    def side(against: np.ndarray) -> tuple[float, float, float, np.ndarray]:
        """(shift estimate, its variance, the df of se^2 plus it, each cell's share of the move) of the cells
        `against` the call."""
        if np.isinf(high[against]).any():
            return math.inf, math.inf, math.nan, np.where(against & np.isinf(high), 1.0, 0.0)
        aw = np.where(against, np.abs(w), 0.0)
        e, v = np.where(against, est, 0.0), np.where(against, sd * sd, 0.0)  # a cell it does not use: no move
        return float(aw @ e), float((aw * aw) @ v), _df(se, df, aw * aw * v, df_cells), aw * (e + Z_SHIFT * np.sqrt(v))

    if call == EQUIVALENT:
        (s_up, v_up, _, m_up), (s_dn, v_dn, _, m_dn) = side(up), side(down)
        q = (estimate - ci90[0]) / se if se > 0 else 0.0  # the 90% CI's half-width in SEs
        holds = (math.isfinite(s_up + s_dn) and estimate - s_dn - q * math.sqrt(se * se + v_dn) > -margin
                 and estimate + s_up + q * math.sqrt(se * se + v_up) < margin)
        moves, p = m_up + m_dn, math.nan
        shift = s_up + s_dn + Z_SHIFT * math.sqrt(v_up + v_dn) if math.isfinite(s_up + s_dn) else math.inf
    else:
        s, v, df_u, moves = side(up if call == BETTER else down)
        shift = s + Z_SHIFT * math.sqrt(v) if math.isfinite(s) else math.inf
        moved = abs(estimate) - s  # the distance from 0 at the optima, at the estimated shift
        p = 1.0
        if math.isfinite(moved) and moved > 0 and se > 0:
            t = moved / math.sqrt(se * se + v)
            p_moved = 2 * stats.t.sf(t, df_u) if math.isfinite(df_u) else 2 * stats.norm.sf(t)
            factor = p_adjusted / p_value if p_value > 0 else 1.0  # the effect's own Holm multiplier
            p = min(1.0, float(p_moved) * factor)
        holds = p < ALPHA
    worst = int(np.argmax(moves)) if np.nanmax(moves) > 0 else None
    return TuningCheck(call if holds else DEPENDS, bool(holds), float(shift), worst, p)
