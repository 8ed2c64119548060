"""The `worth:` section of an arms sweep, validated into a `WorthSpec` (what `stages` plans from), and its runs' roles.

`worth: {lengths: [0.5, 1, 2, 4], seeds: 8, retune: [0.5, 2]}`: the lengths as multiples of the study's
`train.max_iters` (3 or more, 1 among them), how many of the baseline's estimation seeds train them (no more
than it trains: refused, never cut to what there is),
and the lr factors tried beside the pick at the shortest and longest length. `{}` or `true` take the
defaults. Each length must be a valid warmup-stable-decay run of steps of its own (1 at least, none rounding to
another's); no arm or scale key may set a length's own settings (`FIXED`). The kind's runs have roles of its own
(summary.csv's `role`): `WORTH`, the baseline at its pick at each length, and `WORTH_TUNING`, its lr re-tuned at
the shortest and longest; like every role but estimation's, they enter no effect.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping, Sequence

from gptlab.errors import GptlabError, key_error, shown, unknown_key
from gptlab.run.config import LENGTH_KEY, RunConfig
from gptlab.run.schedules import WSD

KEY = "worth"  # the sweep file's key, and the kind's name in both registries and in the report's bundles
WORTH = "worth"  # the role of the baseline at its pick, under wsd, at one of the `worth:` lengths
WORTH_TUNING = "worth_tuning"  # the role of the baseline at an lr around its pick, at the shortest or longest length
_fail = partial(key_error, section=KEY)  # this section's bad values: `worth.KEY: MESSAGE`

KEYS = ("lengths", "seeds", "retune")
DEFAULT_LENGTHS = (0.5, 1.0, 2.0, 4.0)
DEFAULT_RETUNE = (0.5, 2.0)
MAX_LENGTH = 64.0  # a length of 64x the study's steps is already a study of its own
FIXED = (LENGTH_KEY, "train.schedule", "train.lr_decay_iters")  # the lengths' own settings: no arm or scale key sets them


@dataclass(frozen=True)
class WorthSpec:
    """A validated `worth:` section."""

    lengths: tuple[float, ...] = DEFAULT_LENGTHS  # multiples of the study's train.max_iters, increasing, 1 among them
    seeds: int | None = None  # how many of the baseline's estimation seeds train the lengths (None: all that trained)
    retune: tuple[float, ...] = DEFAULT_RETUNE  # lr factors tried with the pick at the shortest and longest length

    def to_dict(self) -> dict[str, Any]:
        return {"lengths": list(self.lengths), **({"seeds": self.seeds} if self.seeds is not None else {}),
                "retune": list(self.retune)}



@dataclass(frozen=True)
class BaselineSeeds:
    """The estimation seeds an arms sweep's baseline trains, as the spec knows them before any run: the lengths train on
    them, so `worth.seeds` may not ask for more (it would be cut, silently, to what there is)."""

    name: str  # the baseline arm
    most: int  # its estimation seeds (adaptive seeds: at their max), Dunnett's extra ones included
    adaptive: bool  # whether adaptive seeds may stop it below `most`


def _numbers(raw: Any, key: str, example: str) -> tuple[float, ...]:
    if not isinstance(raw, list) or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in raw):
        raise _fail(key, f"must be a list of numbers, e.g. {example}, got {shown(raw)}")
    values = tuple(float(v) for v in raw)
    if any(not math.isfinite(v) or v <= 0 for v in values):
        raise _fail(key, f"must hold positive finite numbers, got {shown(raw)}")
    if len(set(values)) != len(values):
        raise _fail(key, f"lists a value twice: {shown(raw)}")
    return tuple(sorted(values))


def check_worth(raw: Any, spec_has_arms: bool, base: RunConfig, arms: Mapping[str, Mapping[str, Any]],
                scale: Sequence[str], baseline_seeds: BaselineSeeds | None = None) -> WorthSpec | None:
    """Validate `worth:` (a mapping, `{}` or `true` for the defaults; absent, null or false: None). `baseline_seeds`:
    the most estimation seeds the baseline trains, which `worth.seeds` may not exceed (None: not checked)."""
    if raw is None or raw is False:
        return None
    if not spec_has_arms:
        raise GptlabError("worth: prices each arm in the baseline's steps; it needs an arms sweep (arms:), not a grid")
    if raw is True:
        raw = {}
    if not isinstance(raw, dict):
        raise GptlabError(f"worth: must be a mapping (lengths, seeds, retune) or true, got {shown(raw)}")
    for key in raw:
        if key not in KEYS:
            raise unknown_key(key, KEYS, "worth")
    lengths = _numbers(raw.get("lengths", list(DEFAULT_LENGTHS)), "lengths", "[0.5, 1, 2, 4]")
    if len(lengths) < 3 or 1.0 not in lengths:
        raise _fail("lengths", f"needs 3 or more lengths, 1 (the study's own) among them, got {list(lengths)}")
    if lengths[-1] > MAX_LENGTH:
        raise _fail("lengths", f"at most {MAX_LENGTH:g} times the study's steps, got {lengths[-1]:g}")
    seeds = raw.get("seeds")
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 2):
        raise _fail("seeds", f"must be a whole number >= 2 (a curve needs two seeds for its CI), got {shown(seeds)}")
    if seeds is not None and baseline_seeds is not None and seeds > baseline_seeds.most:
        most, at_most = baseline_seeds.most, " at most" if baseline_seeds.adaptive else ""
        fix = f"give {most} or fewer, or train more" if most >= 2 else "a curve needs 2: train more"
        raise _fail("seeds", f"{seeds} is more than the {most} estimation seed{'s' if most != 1 else ''} the baseline "
                             f"{baseline_seeds.name} trains{at_most} (the lengths train on them); {fix} (`seeds:`)")
    retune = _numbers(raw.get("retune", list(DEFAULT_RETUNE)), "retune", "[0.5, 2]")
    if 1.0 in retune:
        raise _fail("retune", "lists 1: the pick itself is always tried; give the other factors, e.g. [0.5, 2]")
    for key in FIXED:
        where = next((f"arms.{n}" for n, s in arms.items() if key in s), "scale" if key in scale else None)
        if where is not None:
            raise GptlabError(f"worth: {where} sets {key}, which the baseline's lengths set themselves; keep one")
    steps = base.train.max_iters
    _check_distinct_steps(lengths, steps)
    for factor in lengths:  # each length must itself be a valid wsd run (a cooldown step at least)
        try:
            length_config(base, steps_at(factor, steps))
        except GptlabError as err:
            raise _fail("lengths", f"{factor:g} x {steps} steps: {err}") from None
    return WorthSpec(lengths, seeds, retune)


def _check_distinct_steps(lengths: Sequence[float], steps: int) -> None:
    """Refuse lengths that train no step, or the same steps as another: the sweep would train them all, and a curve
    with two points at one length gives no multiplier (and no line saying why)."""
    for factor in lengths:
        if round(factor * steps) < 1:
            raise _fail("lengths", f"{factor:g} x {steps} steps rounds to {round(factor * steps)} steps; a length trains "
                                   f"1 step or more (1/{steps} = {1 / steps:.3g} of the study's)")
    groups: dict[int, list[float]] = {}
    for factor in lengths:
        groups.setdefault(steps_at(factor, steps), []).append(factor)
    same = [(n, fs) for n, fs in groups.items() if len(fs) > 1]
    if same:
        def listed(factors: list[float]) -> str:
            names = [f"{f:g}" for f in factors]
            return f"{', '.join(names[:-1])} and {names[-1]}"
        parts = [f"{listed(fs)} x {steps} steps round to the same {n} steps" if i == 0 else f"{listed(fs)} to the same {n}"
                 for i, (n, fs) in enumerate(same)]
        raise _fail("lengths", f"{', '.join(parts)}; lengths must differ by 1 step at least (1/{steps} = {1 / steps:.3g} "
                               "of the study's)")


def steps_at(factor: float, study_steps: int) -> int:
    """The steps of a length `factor` x the study's."""
    return max(1, round(factor * study_steps))


def length_config(config: RunConfig, steps: int) -> RunConfig:
    """`config` at `steps` under wsd (validated: wsd needs a cooldown step, and no `lr_decay_iters`)."""
    return config.with_settings({LENGTH_KEY: steps, "train.schedule": WSD, "train.lr_decay_iters": None})
