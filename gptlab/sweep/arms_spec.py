"""The one-at-a-time design of a sweep YAML (`arms:`, `baseline:`, `scale:`, `claims:`), validated into an `ArmsDesign`.

An arms sweep names variants over `base`, each a mapping of dotted keys to values; the first arm is
the baseline unless `baseline:` names another. Inside the sweep it is a grid whose one scientific
factor is `arm` (summary.csv's column `arm`, levels the arm names), crossed with the `scale:` keys'
levels (`scale: {train.max_iters: [500, 2000]}`): the runner, the planners and the report see a
grid, and `runs.expand` applies an arm's settings where a grid would set one key. `claims:` (inline,
or a YAML file it names) records per arm what the paper that introduced it claimed; the report
scores each against the arm's tuned effect (`gptlab.stats.scorecard`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from gptlab.errors import GptlabError, closest, key_error, shown, unknown_key
from gptlab.run.config import RunConfig, get_dotted
from gptlab.stats.arms import ARM
from gptlab.stats.scorecard import ABOUT, DIRECTIONS
from gptlab.sweep.levels import check_levels
from gptlab.sweep.loader import read_spec_file

CLAIM_KEYS = ("source", "setting", "claim", "direction", "size", "about")
REQUIRED_CLAIM_KEYS = ("source", "claim", "direction")
MAX_ARMS = 200

# Settings that say where and how a run is carried out or logged, not what it trains: two runs that differ only in
# these train the same model on the same batches (an arm that changes nothing else is no arm).
NOT_TRAINED = frozenset({"train.device", "train.log_interval", "train.compile", "train.cuda_graphs"})


@dataclass(frozen=True)
class Claim:
    """What the paper that introduced an arm claimed, in its own words."""

    source: str  # who and where: "Shazeer 2020, GLU Variants Improve Transformer, Table 1"
    claim: str  # the paper's words, quoted
    direction: str  # the arm against the baseline as claimed: better (lower loss), worse or same
    setting: str = ""  # the task, model and data the claim was made on
    size: str = ""  # the paper's own number for the gain, as printed there ("" where it gives a direction only)
    about: str = "quality"  # quality (loss at the training length), or speed, memory, length: not scored on loss

    def to_dict(self) -> dict[str, Any]:
        out = {"source": self.source, "setting": self.setting, "claim": self.claim, "direction": self.direction}
        return {**out, **({"size": self.size} if self.size else {}), **({"about": self.about} if self.about != "quality"
                                                                        else {})}


@dataclass(frozen=True)
class ArmsDesign:
    """A validated `arms:` design: the arms' settings, the baseline, the scale grid crossed with it, the claims."""

    arms: Mapping[str, Mapping[str, Any]]  # arm name -> {dotted key: value}, YAML order
    baseline: str  # the arm every other is compared with
    scale: Mapping[str, list[Any]] = field(default_factory=dict)  # scale key -> levels, crossed with the arms
    claims: Mapping[str, tuple[Claim, ...]] = field(default_factory=dict)  # arm -> its paper's claims

    @property
    def grid(self) -> dict[str, list[Any]]:
        """The grid the sweep runs: `arm` (the baseline first), then the scale keys."""
        names = [self.baseline] + [a for a in self.arms if a != self.baseline]
        return {ARM: names, **{k: list(v) for k, v in self.scale.items()}}

    @property
    def n_compared(self) -> int:
        """k: the arms compared with the baseline."""
        return len(self.arms) - 1



def check_arms(raw: Mapping[str, Any], base: dict[str, Any], keys: list[str], path: Path) -> ArmsDesign:
    """Validate `arms:` (with `baseline:`, `scale:` and `claims:`) of a loaded spec; one GptlabError per problem."""
    if "grid" in raw:
        raise GptlabError("grid and arms are alternatives: a sweep is a factorial grid or a set of arms against a "
                          "baseline; keep one")
    arms = raw["arms"]
    if not isinstance(arms, dict) or not arms:
        raise key_error("arms", f"must be a mapping of arm names to settings, e.g. {{nanogpt: {{}}, relu: "
                    f"{{model.activation: relu}}}}, got {shown(arms)}")
    if len(arms) < 2:
        raise key_error("arms", "needs a baseline and at least one arm to compare with it")
    if len(arms) > MAX_ARMS:
        raise key_error("arms", f"lists {len(arms):,} arms; at most {MAX_ARMS}")
    seen: dict[str, str] = {}
    for name, settings in arms.items():
        where = f"arms.{name}"
        if not isinstance(name, str) or not name or name != name.strip() or "\n" in name:
            raise key_error("arms", f"arm names must be non-empty strings, got {shown(name)}")
        if settings is None:
            settings = arms[name] = {}
        if not isinstance(settings, dict):
            raise key_error(where, f"must be a mapping of dotted keys to values (e.g. {{model.norm: post}}), got "
                        f"{shown(settings)}")
        for dotted, value in settings.items():
            if dotted not in keys:
                raise unknown_key(dotted, keys, where, listed=None)
            if isinstance(value, (dict, list)):
                raise key_error(f"{where}.{dotted}", "must be a plain value (a string, number or boolean)")
            try:
                get_dotted(base, dotted)
            except (KeyError, TypeError):
                pass
            else:
                raise GptlabError(f"{dotted} is set in both base and {where}; keep it in one place (an arm's "
                                  "setting must not be overwritten by, or overwrite, a fixed one)")
        same = seen.setdefault(repr(sorted(settings.items(), key=lambda kv: kv[0])), name)
        if same != name:
            raise key_error("arms", f"{shown(same)} and {shown(name)} have the same settings; an arm must differ")
    baseline = raw.get("baseline", next(iter(arms)))
    if not isinstance(baseline, str) or baseline not in arms:
        raise key_error("baseline", f"must name one of the arms ({', '.join(map(str, arms))}), got {shown(baseline)}"
                    f"{closest(str(baseline), arms)}")
    scale = _check_scale(raw.get("scale") or {}, keys, base, arms)
    claims = check_claims(raw.get("claims"), arms, path, baseline)
    return ArmsDesign({n: dict(s) for n, s in arms.items()}, baseline, scale, claims)


def _check_scale(scale: Any, keys: list[str], base: dict[str, Any], arms: Mapping[str, Any]) -> dict[str, list[Any]]:
    """`scale:` of an arms sweep: dotted keys to levels, a small grid crossed with every arm."""
    if not isinstance(scale, dict):
        raise key_error("scale", "in an arms sweep must map keys to levels, e.g. {train.max_iters: [500, 2000]}, got "
                    f"{shown(scale)}")
    for dotted, levels in scale.items():
        check_levels("scale", dotted, levels, base, keys, fewest=2)
        arm = next((name for name, s in arms.items() if dotted in s), None)
        if arm is not None:
            raise GptlabError(f"{dotted} is set in both arms.{arm} and scale; keep it in one place")
    return {k: list(v) for k, v in scale.items()}


def check_claims(raw: Any, arms: Mapping[str, Any], path: Path, baseline: str | None = None) -> dict[str, tuple[Claim, ...]]:
    """`claims:` inline or a YAML file it names (relative to the spec): arm -> its claims (a mapping, or a list of
    them where a paper claims several things, e.g. quality and speed)."""
    if raw is None:
        return {}
    where = "claims"
    if isinstance(raw, str):
        file = (path.parent / raw) if not Path(raw).is_absolute() else Path(raw)
        where = f"claims ({file})"
        try:
            raw = read_spec_file(file, "a claims file must be a YAML mapping of arm names to their claims")
        except GptlabError as err:  # its words are a sweep file's: say which key named the file
            raise GptlabError(f"claims: {err}".replace("sweep file", "file").replace("a sweep is", "claims are")) \
                from None
        if set(raw) == {"claims"}:  # a file may hold the mapping itself or under one `claims:` key
            raw = raw["claims"]
    if not isinstance(raw, dict):
        raise key_error(where, f"must be a mapping of arm names to claims (or a YAML file of one), got {shown(raw)}")
    out = {}
    for arm, claims in raw.items():
        if arm not in arms:
            raise key_error(where, f"{shown(arm)} is not an arm{closest(str(arm), arms)}; arms: {', '.join(arms)}")
        if arm == baseline:  # every verdict is an arm against the baseline: a claim on the baseline has nothing to test
            raise key_error(f"{where}.{arm}", f"{shown(arm)} is the baseline, which every arm is compared with; record the "
                        "claim under the arm it is about")
        if isinstance(claims, list) and not claims:
            raise key_error(f"{where}.{arm}", "is an empty list; give a claim, or a list of them (one per thing claimed)")
        claims = claims if isinstance(claims, list) else [claims]
        out[arm] = tuple(_check_claim(c, f"{where}.{arm}" + (f"[{i}]" if len(claims) > 1 else ""))
                         for i, c in enumerate(claims))
    return out


def _check_claim(raw: Any, where: str) -> Claim:
    if not isinstance(raw, dict):
        raise key_error(where, f"must be a mapping with {', '.join(REQUIRED_CLAIM_KEYS)} (and optionally setting, size, "
                    f"about), got {shown(raw)}")
    for key in raw:
        if key not in CLAIM_KEYS:
            raise unknown_key(key, CLAIM_KEYS, where)
    missing = [k for k in REQUIRED_CLAIM_KEYS if k not in raw]
    if missing:
        raise key_error(where, f"needs {', '.join(missing)} (the paper, its own words, and the direction it claims)")
    for key in ("source", "claim", "setting"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise key_error(f"{where}.{key}", f"must be non-empty text, got {shown(raw[key])}")
    if raw["direction"] not in DIRECTIONS:
        raise key_error(f"{where}.direction", f"must be one of {', '.join(DIRECTIONS)} (the arm against the baseline, "
                    f"as the paper claims it), got {shown(raw['direction'])}")
    about = raw.get("about", "quality")
    if about not in ABOUT:
        raise key_error(f"{where}.about", f"must be one of {', '.join(ABOUT)}, got {shown(about)}")
    size = raw.get("size", "")
    if isinstance(size, bool) or not isinstance(size, (str, int, float)):
        raise key_error(f"{where}.size", f"must be the paper's number as printed there (text or a number), got "
                    f"{shown(size)}")
    return Claim(raw["source"].strip(), raw["claim"].strip(), raw["direction"], str(raw.get("setting", "")).strip(),
                 str(size).strip(), about)


def check_arm_configs(design: ArmsDesign, base: RunConfig) -> None:
    """Every arm resolves over the resolved `base` (a bad value names its arm), and no two arms to one run config."""
    seen: dict[str, str] = {}
    trained: dict[str, str] = {}
    for name, settings in design.arms.items():
        try:
            resolved = base.with_settings(settings)
        except GptlabError as err:
            raise GptlabError(f"arms.{name}: {err}") from None
        other = seen.setdefault(resolved.run_hash(), name)
        if other != name:
            raise key_error("arms", f"{shown(other)} and {shown(name)} resolve to the same run config (the settings that "
                        "differ are ignored or resolve to one value); drop one of them")
        other = trained.setdefault(_what_is_trained(resolved), name)
        if other != name:
            how = sorted(set(settings) & NOT_TRAINED) or sorted(NOT_TRAINED)
            raise key_error(f"arms.{name}", f"trains what {shown(other)} trains: it differs only in {', '.join(how)}, "
                        "which say how a run is carried out, not what it trains; drop it or change what it trains")


def _what_is_trained(resolved: RunConfig) -> str:
    """A resolved run config without the settings that do not change what is trained (`NOT_TRAINED`), as text."""
    settings = resolved.to_dict()
    for dotted in NOT_TRAINED:
        section, _, name = dotted.partition(".")
        settings.get(section, {}).pop(name, None)
    return json.dumps(settings, sort_keys=True, default=str)
