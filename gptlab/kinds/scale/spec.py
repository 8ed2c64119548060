"""The `scale:` key of a sweep YAML: `ScaleKind`, the kind of sweep whose scale factors are reported per level.

A grid sweep's `scale:` lists grid keys (`scale: [train.max_iters]`) whose levels are scales (training
length, width, a corpus), not scientific factors: the report gives every effect at each of their levels
instead of an effect of their own. An arms sweep's `scale:` maps keys to levels crossed with every arm
(`sweep.arms_spec`, which builds that grid: the design's); its keys are the section here. The kind tells the
rest of the sweep and the report which keys are scales through its `scale_keys` hook.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gptlab.errors import closest, key_error, shown
from gptlab.sweep.kinds import SWEEP_KINDS
from gptlab.sweep.planners import SweepKind
from gptlab.sweep.runs import SweepSpec

KEY = "scale"  # the sweep file's key, and the kind's name in both registries and in the report's bundles
EXAMPLE = "a list of grid keys, e.g. [train.max_iters]"


@dataclass(frozen=True)
class ScaleSpec:
    """A validated `scale:`: the keys reported as scale, in the sweep's order."""

    keys: tuple[str, ...]  # grid keys (an arms sweep's scale keys), at least one scientific factor left

    def to_dict(self) -> list[str]:
        return list(self.keys)


@SWEEP_KINDS.register(KEY)
class ScaleKind(SweepKind):
    """`scale:` (`gptlab.sweep.kinds.SWEEP_KINDS`): its keys, which it gives the sweep as its scale keys."""

    description = "Grid keys whose levels are scales: every effect at each of their levels, none of their own"

    def check(self, raw: Any, spec: SweepSpec) -> ScaleSpec | None:
        keys = list(spec.arms.scale) if spec.arms is not None else check_scale(raw or [], spec.grid)
        return ScaleSpec(tuple(keys)) if keys else None

    def scale_keys(self, spec: SweepSpec) -> tuple[str, ...]:
        return spec.kinds[KEY].keys


def check_scale(scale: Any, grid: dict[str, list[Any]]) -> list[str]:
    """Grid keys whose levels are scales (training length, width, tokenizer), at least one factor left."""
    if not isinstance(scale, list):
        raise key_error("scale", f"must be {EXAMPLE}, got {shown(scale)}")
    for key in scale:
        if not isinstance(key, str):  # a list inside is unhashable
            raise key_error("scale", f"must be {EXAMPLE}, got {shown(key)}")
        if key not in grid:
            raise key_error("scale", f"{shown(key)} is not a grid factor{closest(str(key), grid)}; "
                                     f"factors: {shown(list(grid), 200)}")
    if len(set(scale)) != len(scale):
        raise key_error("scale", f"lists a key twice: {shown(scale)}")
    if len(scale) == len(grid):
        raise key_error("scale", "names every grid factor; at least one must stay a scientific factor whose effect is reported")
    return list(scale)
