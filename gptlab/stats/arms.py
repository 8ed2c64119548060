"""A one-at-a-time design (`arms:`): how many seeds the baseline gets, and the model its comparisons use.

Every arm is compared with the baseline, so the baseline's mean enters all k comparisons. For k
comparisons with one control and a fixed number of runs, the variance of every arm-minus-baseline
contrast, sigma^2 (1/n + 1/n0), is smallest at n0 / n = sqrt(k) (Dunnett 1955, "A multiple comparison
procedure for comparing several treatments with a control", JASA 50: the "square-root rule"). So
an arms sweep trains the baseline with round(sqrt(k) n) seeds where every other arm has n.

The baseline's extra seeds have no partner run in any arm, so the comparisons use the cell-means
model without the seed block (`models.fit_cells(block_seeds=False)`): each arm's mean from its own
runs. Where runs with one seed are positively correlated across arms (same batch order), ignoring
the pairing only widens the CIs; `calibration.arms_sim` measures coverage and widths by simulation.

Arms differ in noise (an arm that trains erratically), so each comparison uses the arm's own variance
and the baseline's, s_a^2/n_a + s_0^2/n_0 on Welch-Satterthwaite df (`fit_cells(own_variance=True)`,
kind `own`; with adaptive seeds each cell's first-round variance, `stein own`), never one pooled over
all arms: a pooled variance gives a noisy arm a CI far too narrow and false calls (docs/STATISTICS.md).
"""
from __future__ import annotations

import math

ARM = "arm"  # the factor of an arms sweep: summary.csv's column, its levels the arm names


def baseline_ratio(n_arms: int) -> float:
    """The baseline's seeds per arm seed for `n_arms` arms besides the baseline (Dunnett's sqrt(k))."""
    return math.sqrt(max(n_arms, 1))


def baseline_seed_count(n_seeds: int, n_arms: int) -> int:
    """Seeds the baseline trains where every other arm trains `n_seeds` (never fewer than an arm)."""
    return max(n_seeds, round(n_seeds * baseline_ratio(n_arms)))
