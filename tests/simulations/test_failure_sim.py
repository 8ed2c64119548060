"""The status rule's calibration (`calibration.failure_sim`), in small: the worlds are what the docstring says, and
the rule reads each kind right at the rates docs/STATISTICS.md publishes; a cut on the final loss does not."""
from __future__ import annotations

import math

import numpy as np
import pytest

import calibration.failure_sim as sim
from gptlab.statuses import COLLAPSED, OK, UNSTABLE, Verdict


def test_the_worlds_start_untrained_and_end_where_their_kind_says():
    rng = np.random.default_rng(0)
    kinds = {k.name: k for k in sim.KINDS}
    for _ in range(50):
        stuck = sim.curve(kinds["stuck"], rng, rows=40, sd=1e-9)
        assert abs(stuck[-1] / sim.UNIGRAM - 1) <= sim.PLATEAU + 1e-6
        learning = sim.curve(kinds["still learning"], rng, rows=40, sd=1e-9)
        assert 0.94 * sim.UNIGRAM <= learning[-1] <= 0.99 * sim.UNIGRAM and learning[-1] < learning[-5]
        blown = sim.curve(kinds["blow-up"], rng, rows=40, sd=1e-9)
        assert blown[-1] - blown.min() >= 0.08 * (1 - 1e-6)
        assert sim.curve(kinds["healthy"], rng, rows=40, sd=1e-9)[0] < math.log(65)


@pytest.mark.slow
def test_the_rule_reads_each_kind_at_the_published_rates():
    table = sim.confusion(300, seed=1, rows=40)
    share = {name: counts[kind.truth] / 300 for kind in sim.KINDS for name, counts in table.items()
             if name == kind.name}
    assert share["healthy"] >= 0.99 and share["slow start"] >= 0.99 and share["lagging"] >= 0.99
    assert share["spike"] >= 0.99 and share["still learning"] >= 0.88
    assert share["stuck"] >= 0.95 and share["collapse late"] >= 0.95 and share["blow-up"] >= 0.97


def test_a_cut_on_the_final_loss_misreads_runs_still_learning(monkeypatch):
    """The 5% margin of the earlier rule, put in the rule's place: the kind it misfired on reads `collapsed`."""
    def margin(train, unigram):
        return Verdict(COLLAPSED if (unigram - float(train[-1])) / unigram < 0.05 else OK)

    monkeypatch.setattr(sim, "judge", margin)
    table = sim.confusion(200, seed=2, rows=20)
    assert table["still learning"][COLLAPSED] / 200 > 0.5
    assert table["blow-up"][UNSTABLE] == 0
