"""The `ladder:` section of a sweep YAML, checked: its rungs in order of compute, each a set of run settings.

    ladder:
      rungs:                      # smallest first; each a mapping of run settings that change together
        small:  {model.n_layer: 2, model.n_embd: 64, model.n_head: 2}
        medium: {model.n_layer: 4, model.n_embd: 128, model.n_head: 4}
        large:  {model.n_layer: 4, model.n_embd: 192, model.n_head: 6}
      tokens_per_param: 20        # optional: each rung's train.max_iters from tokens = this x parameters
      margin: 0.01                # per doubling of compute: the `holds` test of an effect's trend
      ratio_margin: 0.05          # per doubling: the `holds` test of a ratio's trend (worth: 5% per doubling)

A rung's compute is C = 6 N D (Kaplan et al. 2020): N = 12 n_layer n_embd^2, the non-embedding parameters of the
baseline's blocks, and D = max_iters x batch_size x block_size, the tokens it trains on. An arm's own count
differs (SwiGLU's matched MLP, an untied head); a rung's compute is its baseline's. Rungs must rise in compute,
every rung sets the same keys (they change together), and a rung sets no key an arm sets (an arm is the design; a
rung, its scale).
"""
from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

from gptlab.errors import GptlabError, key_error, shown
from gptlab.run.config import LENGTH_KEY, RunConfig, get_dotted, set_dotted
from gptlab.sweep.kinds import with_setting_space
from gptlab.sweep.runs import SweepSpec

KEY = "ladder"  # the sweep file's key, and the kind's name in both registries and in the report's bundles
MAX_RUNGS = 12
DEFAULT_MARGIN_PER_DOUBLING = 0.01  # nats (or bits) per doubling of compute: the `holds` test's margin
DEFAULT_RATIO_MARGIN = 0.05  # a ratio (an arm's worth in steps) changing by less than 5% per doubling holds


@dataclass(frozen=True)
class Rung:
    """One rung: its name, the settings it sets over `base`, and its compute."""

    name: str
    settings: Mapping[str, Any]  # dotted key -> value, YAML order (max_iters derived where tokens_per_param is set)
    params: int  # N = 12 n_layer n_embd^2 of its baseline
    tokens: int  # D = max_iters x batch_size x block_size
    flops: float  # C = 6 N D

    def to_dict(self) -> dict[str, Any]:
        return dict(self.settings)


@dataclass(frozen=True)
class LadderSpec:
    """A validated `ladder:`: the rungs, smallest first."""

    rungs: tuple[Rung, ...]
    tokens_per_param: float | None = None  # D / N each rung's steps were derived from (None: the rungs' own steps)
    margin: float = DEFAULT_MARGIN_PER_DOUBLING  # per doubling of compute
    ratio_margin: float = DEFAULT_RATIO_MARGIN  # a ratio's relative change per doubling: its `holds` test
    space: Mapping[str, tuple[Any, ...]] = dataclasses.field(default_factory=dict)  # the sweep file's `tune.space`:
    # the first rung's, and the lattice every upper rung's is moved on (`stages.shifted_space`); not written back

    def to_dict(self) -> dict[str, Any]:
        given = {r.name: {k: v for k, v in r.settings.items() if k != "train.max_iters" or self.tokens_per_param is None}
                 for r in self.rungs}
        return {"rungs": given, **({"tokens_per_param": self.tokens_per_param} if self.tokens_per_param else {}),
                "margin": self.margin,
                **({"ratio_margin": self.ratio_margin} if self.ratio_margin != DEFAULT_RATIO_MARGIN else {})}

    def rung(self, name: str) -> Rung:
        return next(r for r in self.rungs if r.name == name)

    def describe(self) -> list[str]:
        """One line a rung: its parameters, tokens, training FLOPs and its compute against the smallest rung's."""
        c0 = self.rungs[0].flops
        return [f"rung {r.name}: {r.params:,} parameters, {r.tokens:,} tokens, {r.flops:.3g} training FLOPs "
                f"({r.flops / c0:.3g}x the smallest)" for r in self.rungs]


def compute_of(config: RunConfig) -> tuple[int, int, float]:
    """(N, D, C) of a run config: N = 12 n_layer n_embd^2, D = max_iters x batch_size x block_size, C = 6 N D."""
    n = 12 * config.model.n_layer * config.model.n_embd ** 2
    d = config.train.max_iters * config.train.batch_size * config.model.block_size
    return n, d, 6.0 * n * d


def _number(value: Any, key: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not low < value <= high:
        raise key_error(key, f"must be a number above {low:g} and at most {high:g}, got {shown(value)}")
    return float(value)


def check_ladder(raw: Any, base: RunConfig, arm_keys: set[str]) -> LadderSpec:
    """`ladder:` validated against the sweep's resolved base and the keys its arms (and grid) set; `GptlabError`
    naming the key otherwise."""
    if not isinstance(raw, dict) or "rungs" not in raw:
        raise key_error("ladder", f"must be a mapping with rungs: {{NAME: {{KEY: VALUE, ...}}, ...}}, got {shown(raw)}")
    unknown = set(raw) - {"rungs", "tokens_per_param", "margin", "ratio_margin"}
    if unknown:
        raise key_error("ladder", f"unknown key {shown(sorted(unknown)[0])}; valid: rungs, tokens_per_param, margin, "
                                  "ratio_margin")
    rungs = raw["rungs"]
    if not isinstance(rungs, dict) or not 2 <= len(rungs) <= MAX_RUNGS:
        raise key_error("ladder.rungs", f"must map 2 to {MAX_RUNGS} rung names to settings, got {shown(rungs)}")
    ratio = None if raw.get("tokens_per_param") is None else _number(raw["tokens_per_param"], "ladder.tokens_per_param",
                                                                      0, 1e6)
    margin = _number(raw.get("margin", DEFAULT_MARGIN_PER_DOUBLING), "ladder.margin", 0, 1)
    ratio_margin = _number(raw.get("ratio_margin", DEFAULT_RATIO_MARGIN), "ladder.ratio_margin", 0, 1)
    out: list[Rung] = []
    for name, settings in rungs.items():
        out.append(_rung(name, settings, base, arm_keys, ratio))
    keys = set(out[0].settings)
    for rung in out[1:]:
        if set(rung.settings) != keys:
            odd = sorted(set(rung.settings) ^ keys)[0]
            raise key_error(f"ladder.rungs.{rung.name}", f"sets {'' if odd in rung.settings else 'no '}{odd}, unlike "
                                                        f"rung {out[0].name}: every rung sets the same keys")
    for lower, upper in zip(out, out[1:]):
        if not upper.flops > lower.flops:
            raise key_error(f"ladder.rungs.{upper.name}", f"trains {upper.flops:.3g} FLOPs, not more than the rung "
                                                         f"below it ({lower.name}: {lower.flops:.3g}): list rungs "
                                                         "smallest first, each larger")
    return LadderSpec(rungs=tuple(out), tokens_per_param=ratio, margin=margin, ratio_margin=ratio_margin)


def _rung(name: Any, settings: Any, base: RunConfig, arm_keys: set[str], ratio: float | None) -> Rung:
    where = f"ladder.rungs.{name}"
    if not isinstance(name, str) or not name.replace("_", "").replace("-", "").isalnum():
        raise key_error("ladder.rungs", f"a rung's name must be letters, digits, _ or -, got {shown(name)}")
    if not isinstance(settings, dict) or not settings:
        raise key_error(where, f"must be a mapping of run settings (e.g. {{model.n_embd: 128}}), got {shown(settings)}")
    taken = sorted(set(settings) & arm_keys)
    if taken:
        raise key_error(where, f"sets {taken[0]}, which an arm or the grid sets: a rung is the scale, not the design")
    if ratio is not None and "train.max_iters" in settings:
        raise key_error(where, "sets train.max_iters while ladder.tokens_per_param derives it: give one of the two")
    try:
        config = base.with_settings(settings)
    except GptlabError as err:
        raise GptlabError(f"{where}: {err}") from None
    settings = dict(settings)
    if ratio is not None:
        n, _, _ = compute_of(config)
        per_step = config.train.batch_size * config.model.block_size
        settings["train.max_iters"] = max(1, math.ceil(ratio * n / per_step))
        config = config.with_settings(settings)
    n, d, c = compute_of(config)
    return Rung(name=name, settings=settings, params=n, tokens=d, flops=c)


def ladder_of(spec: SweepSpec) -> LadderSpec:
    """A ladder sweep's checked `ladder:` section."""
    return spec.kinds[KEY]


def with_settings(base: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """`base` (the sweep's nested settings) with a rung's dotted settings set."""
    out = copy.deepcopy(base)
    for key, value in settings.items():
        set_dotted(out, key, value)
    return out


def rung_of(ladder: LadderSpec, config: RunConfig) -> str:
    """The rung whose settings a run's config has ("" for none); a run at another length (`worth:`'s, at a multiple
    of its rung's steps) is its rung's where the rung's other settings are its (the kind's check keeps that one
    rung: rungs that differ only in their steps refuse `worth:`)."""
    values = config.to_dict()
    for keys in (None, LENGTH_KEY):
        for rung in ladder.rungs:
            if all(get_dotted(values, k) == v for k, v in rung.settings.items() if k != keys):
                return rung.name
    return ""


def at_rung(spec: SweepSpec, rung: Rung, space: Mapping[str, tuple[Any, ...]] | None = None,
            keep: bool = False) -> SweepSpec:
    """The sweep as one rung trains it: the rung's settings over `base` and its tuned `space` (None: the sweep
    file's: `with_setting_space`, the tuning kind's hook), without the ladder (`keep`: with it, the report of the
    whole folder); its runs as they were."""
    kinds = {k: v for k, v in spec.kinds.items() if keep or k != KEY}
    spec = dataclasses.replace(spec, base=with_settings(spec.base, dict(rung.settings)), kinds=kinds)
    return with_setting_space(spec, space) if space is not None else spec
