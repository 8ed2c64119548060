"""The `tune:` section as the sweep holds it (`SweepSpec.kinds["tune"]`): `TuneSpec`, and the kind's key and role.

A tuned sweep tries each cell's settings of `tune.space` on selection seeds (role `selection`, the lab's:
`gptlab.roles`) and trains its estimation seeds at each cell's pick; `EARLIER_PICK` is the kind's own role of the
estimation runs at a pick that the cell's curve, read with them, moved from (points of the curve, in no effect).
Given picks (`tune.picks`) are settings chosen elsewhere, trained without a selection. `tune_of` and `selects`
are how the kind's modules read the section.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Mapping

from gptlab.stats.picks import Pairs
from gptlab.sweep.runs import SELECTION_SEED_OFFSET, SweepSpec

KEY = "tune"  # the sweep file's key, and the kind's name in both registries and in the report's bundles
EARLIER_PICK = "earlier_pick"  # the role of an estimation run of a pick the cell's curve moved from: in no effect


@dataclass(frozen=True)
class TuneSpec:
    """The `tune:` section, validated (`kind`); its method's planner is `kind.TUNERS`'s."""

    space: Mapping[str, tuple[Any, ...]]  # tuned dotted key -> its levels (as resolved: 1e-3 is 0.001), YAML order
    seeds: int = 1  # selection seeds per cell and setting (0 with given picks)
    given: tuple[tuple[Pairs, Pairs], ...] = ()  # (cell, setting) of `tune.picks`: settings chosen elsewhere, no selection
    picked_by: str = ""  # who chose the given picks, on which runs (`tune.picked_by`)
    method: str = "grid"  # the tuning method (`tune.method`, a TUNERS entry)
    options: tuple[tuple[str, Any], ...] = ()  # the method's own keys (its planner's OPTIONS), validated

    @property
    def selection_seeds(self) -> list[int]:
        return [SELECTION_SEED_OFFSET + i for i in range(self.seeds)]

    def option(self, name: str) -> Any:
        """The validated value of one of the method's own keys."""
        return dict(self.options)[name]

    def settings(self) -> list[Pairs]:
        """Every tuned setting: the product of the keys' levels, first key slowest."""
        return [tuple(zip(self.space, combo)) for combo in itertools.product(*self.space.values())]

    def to_dict(self) -> dict[str, Any]:
        if self.given:
            picks = [{**dict(cell), **dict(setting)} for cell, setting in self.given]
            return {"picks": picks, **({"picked_by": self.picked_by} if self.picked_by else {})}
        method = {"method": self.method, **dict(self.options)} if self.method != "grid" else {}
        return {"space": {k: list(v) for k, v in self.space.items()}, "seeds": self.seeds, **method}


def tune_of(spec: SweepSpec) -> TuneSpec | None:
    """A tuned sweep's `tune:` (then `runs` are its selection runs, unless its picks are given), else None."""
    return spec.kinds.get(KEY)


def tuned_space(spec: SweepSpec) -> Mapping[str, tuple[Any, ...]]:
    """The keys the sweep tuned and their levels (`tune.space`); empty for an untuned sweep and for given picks
    (`tune.picks`: no selection here)."""
    tune = tune_of(spec)
    return tune.space if tune is not None and not tune.given else {}


def selects(spec: SweepSpec) -> bool:
    """Whether the sweep selects settings itself (`tune.space`), rather than training given picks or no tune."""
    tune = tune_of(spec)
    return tune is not None and not tune.given
