"""The tuning check in small, in the fast tier: it removes the calls the picks make, and certifies true effects.

`benchmarks/robustness_calibration.py` prints the full tables (docs/STATISTICS.md); here a handful of
simulated studies (`calibration.robustness_sim`, 2 selection seeds, 5 estimation seeds) check the two
promises loosely: in world a' (every effect 0 at the optima, relu's picks always missing) the calls at
the picks are often false (curves steeper than the benchmark's) and the check keeps few of them (a check that
certified everything would
fail), and an effect of 5 standard errors at near-optimal picks is certified more often than by the
rule the check replaced (each cell's 95% upper end added to the test).
"""

from __future__ import annotations

from calibration.robustness_sim import ArmOptima, Setup, power_world, run

SETUP = Setup(2, 5)
STUDIES = 8


def test_the_check_keeps_few_of_the_false_calls_the_picks_make():
    steep = ArmOptima(curvature=(0.025, 0.04))  # relu's missed picks leave 0.004 or more: a spurious effect of 2 SEs
    s, = run(steep, STUDIES, (SETUP,), rng_seed=11)
    assert s.false_dir_picks >= 0.25  # certifying every call at the picks would fail the next line
    assert s.false_dir <= 1 / STUDIES and s.false_eq <= 1 / STUDIES


def test_a_five_se_effect_is_certified_more_often_than_by_the_summed_upper_ends():
    s, = run(power_world(5, SETUP.estimation_seeds), STUDIES, (SETUP,), rng_seed=12)
    assert s.main_certified > s.main_certified_sum
    assert s.main_certified >= 0.5 and s.false_dir == 0.0
