"""Whether a tuned effect's call survives the tuning: each cell's loss left on the table, taken against the call.

A tuned sweep estimates each effect at the cells' picks. A pick is an estimate: at its own best lr a
cell would have been lower by the loss its pick leaves on the table, L_c >= 0, known up to the upper
end of its 95% CI, L_c^hi (`gptlab.stats.lr_curves`). An effect is a contrast sum_c w_c mu_c, so
at the cells' optima it is E - sum_c w_c L_c, anywhere in

    [E - sum_{w_c > 0} w_c L_c^hi,  E + sum_{w_c < 0} |w_c| L_c^hi].

A call survives the tuning when it holds at the end of that range that works against it:

- `better` (E < 0): the estimate moved up by sum_{w_c < 0} |w_c| L_c^hi (the cells it beats might
  have been that much better at their own optima) keeps its Holm-adjusted p below ALPHA (the
  original Holm factor p_adjusted / p_value applied to the moved estimate's p);
- `worse`: the same, moved down by sum_{w_c > 0} w_c L_c^hi;
- `equivalent`: the 90% CI widened by both moves stays inside +/- margin.

Otherwise the call is DEPENDS, and the cell whose L_c^hi moves it most is named. `inconclusive`
has nothing to lose. The loss left is measured on the validation split the picks were chosen on
and the effects are on the test split: both in the same units, the bound treats them as one curve.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from gptlab.stats.calls import ALPHA

DEPENDS = "depends on the picks"  # the call of an effect that does not survive its cells' loss left on the table


@dataclass(frozen=True)
class TuningCheck:
    """One effect's call against its cells' loss left on the table."""

    call: str  # the call, or DEPENDS when it does not survive
    robust: bool | None  # None: nothing to check (inconclusive, or no loss-left bound for a cell it uses)
    shift: float  # how far the estimate can move against the call (nats), the sum above
    cell: int | None  # index of the cell whose bound moves it most (None: no move)


def check(estimate: float, se: float, df: float, p_value: float, p_adjusted: float, ci90: tuple[float, float],
          call: str, weights: np.ndarray | None, loss_left_high: Sequence[float], margin: float) -> TuningCheck:
    """`call` of an effect with contrast `weights` over the cells, against each cell's `loss_left_high` (NaN: unknown)."""
    if call not in ("better", "worse", "equivalent") or weights is None:
        return TuningCheck(call, None, 0.0, None)
    w, high = np.asarray(weights, float), np.asarray(loss_left_high, float)
    used = w != 0
    if np.isnan(high[used]).any():
        return TuningCheck(call, None, math.nan, None)
    high = np.where(used, high, 0.0)  # a cell the contrast does not use moves nothing, even unbounded
    up = np.where(w < 0, -w * high, 0.0)  # how much each cell can raise the effect at the optima
    down = np.where(w > 0, w * high, 0.0)  # how much each cell can lower it
    if call == "equivalent":
        shift, moves = float(up.sum() + down.sum()), up + down
        holds = ci90[0] - down.sum() > -margin and ci90[1] + up.sum() < margin
    else:
        moves = up if call == "better" else down
        shift = float(moves.sum())
        moved = abs(estimate) - shift  # the estimate's distance from 0 once moved against the call
        if not math.isfinite(moved) or moved <= 0 or not se > 0:
            holds = False
        else:
            factor = p_adjusted / p_value if p_value > 0 else 1.0  # the effect's own Holm multiplier
            t = moved / se
            p_moved = 2 * stats.t.sf(t, df) if math.isfinite(df) else 2 * stats.norm.sf(t)
            holds = min(1.0, p_moved * factor) < ALPHA
    worst = int(np.argmax(moves)) if np.nanmax(moves) > 0 else None
    return TuningCheck(call if holds else DEPENDS, bool(holds), shift, worst)
