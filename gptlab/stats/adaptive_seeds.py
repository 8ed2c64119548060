"""Seeds until the answer is known: the adaptive-seed rule (Stein's two-stage procedure), stated once.

A sweep with `seeds: {min, max, precision}` trains in at most two rounds:

1. Round 1 trains seeds 0..min-1 of every cell. The report's model, y ~ 0 + C(cell) + C(seed),
   fitted to those runs alone, gives the pure-error variance s0^2 on df0 = (cells - 1)(min - 1)
   degrees of freedom, and with it the 95% CI half-width w1 of every called effect (main effects
   of a full factorial, each cell against the baseline otherwise; interactions too with
   `precision_for: interactions`).
2. The seed count is N = min(max, max(min, ceil(min * (w1_widest / precision)^2))): with s0 and
   df0 fixed, a contrast's half-width at n seeds is w1 * sqrt(min / n). Round 2 trains seeds up
   to N. Every estimate uses all N seeds; every CI, p-value and call uses s0 and df0 (`stein` in
   `models`), so each called effect's half-width is <= precision unless N hit max.

Why this rule and not "add a seed until the half-width is small": given s0, the round-2 seeds
are new data and the round-1 cell means are independent of s0 (normal errors), so
(estimate - effect) / (s0 * sqrt(k / N)) is exactly Student t with df0, whatever N the rule chose
(Stein 1945). A rule that re-estimates the variance after each seed stops when the variance
happens to be small, and its CIs undercover: `benchmarks/adaptive_null.py` measures both.
Stopping never looks at an estimate or a p-value, only at the noise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from gptlab.errors import GptlabError, unknown_key
from gptlab.stats.calls import DEFAULT_MARGIN

PRECISION_FOR = ("effects", "interactions")
RULE_KEYS = ("min", "max", "precision", "precision_for")
# rounds.csv, the record of the rule's decisions (the sweep writes it, the report shows it): one row per round
ROUND_COLS = ["round", "seeds", "runs_trained", "widest_half_width", "effect"]


@dataclass(frozen=True)
class SeedRule:
    """`seeds: {min, max, precision, precision_for}` of an adaptive sweep (seeds 0..max-1)."""

    min: int  # seeds of round 1 (>= 2: the first-round variance needs replication)
    max: int  # most seeds per cell
    precision: float  # target 95% CI half-width of every called effect (nats/token)
    precision_for: str = "effects"  # effects: main or per-cell effects; interactions: two-way terms too

    @classmethod
    def from_mapping(cls, raw: dict[str, Any], max_seeds: int, key: str = "seeds") -> "SeedRule":
        """Validate the YAML mapping; every problem is one GptlabError naming the key."""
        for name in raw:
            if name not in RULE_KEYS:
                raise unknown_key(name, RULE_KEYS, key, listed="an adaptive seeds mapping has")
        missing = [k for k in ("min", "max", "precision") if k not in raw]
        if missing:
            raise GptlabError(f"{key}: an adaptive seeds mapping needs {', '.join(missing)} "
                              "(e.g. {min: 3, max: 12, precision: 0.005})")
        for name in ("min", "max"):
            value = raw[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise GptlabError(f"{key}.{name}: must be an integer, got {value!r}")
        lo, hi = raw["min"], raw["max"]
        if not 2 <= lo <= hi <= max_seeds:
            raise GptlabError(f"{key}: need 2 <= min <= max <= {max_seeds:,} (round 1 needs two seeds to measure "
                              f"the noise), got min={lo}, max={hi}")
        precision = raw["precision"]
        if isinstance(precision, str):
            try:
                precision = float(precision)
            except ValueError:
                pass
        if isinstance(precision, int) and abs(precision) >= 2**1023:
            precision = math.inf  # math.isfinite would overflow on it
        if isinstance(precision, bool) or not isinstance(precision, (int, float)) or not math.isfinite(precision) \
                or precision <= 0:
            raise GptlabError(f"{key}.precision: must be a positive number of nats (a 95% CI half-width, "
                              f"e.g. 0.005), got {raw['precision']!r}")
        target = raw.get("precision_for", "effects")
        if target not in PRECISION_FOR:
            raise GptlabError(f"{key}.precision_for: must be one of {', '.join(PRECISION_FOR)}, got {target!r}")
        return cls(lo, hi, float(precision), target)

    def to_dict(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max, "precision": self.precision, "precision_for": self.precision_for}

    def seeds_needed(self, widest_half_width: float | np.ndarray) -> int | np.ndarray:
        """N from round 1's widest half-width: the fewest seeds in [min, max] that reach `precision`.

        Works elementwise on arrays (the simulations call it on thousands of sweeps at once). A
        NaN half-width (no error estimate) asks for max.
        """
        w = np.asarray(widest_half_width, dtype=float)
        with np.errstate(invalid="ignore"):
            need = np.ceil(self.min * (w / self.precision) ** 2 - 1e-9)  # 1e-9: exact hits stay exact
        need = np.where(np.isfinite(need), need, self.max)
        out = np.clip(need, self.min, self.max).astype(int)
        return int(out) if out.ndim == 0 else out


def called_rows(analysis: Any, rule: SeedRule, label: Callable[[str, str], str],
                scale: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """The effects the rule is about, with their 95% half-widths: columns effect, half_width.

    A scale factor's own main effect is never called (the report's effects by scale), so the rule ignores it.
    """
    rows = []
    if analysis.design.full_factorial:
        rows += [(label(r["factor"], r["level"]), r["ci95"]) for r in analysis.main.to_dict("records")
                 if r["factor"] not in scale]
    else:
        rows += [(r["cell"], r["ci95"]) for r in analysis.cells_vs_baseline.to_dict("records")]
    if rule.precision_for == "interactions":
        rows += [(f"{label(r['factor_a'], r['level_a'])} x {label(r['factor_b'], r['level_b'])}", r["ci95"])
                 for r in analysis.interactions.to_dict("records")]
    return pd.DataFrame(rows, columns=["effect", "half_width"])


@dataclass(frozen=True)
class Widest:
    """The widest called half-width of one analysis and the effect it belongs to."""

    half_width: float
    effect: str

    @classmethod
    def of(cls, rows: pd.DataFrame) -> "Widest":
        if rows.empty or not rows["half_width"].notna().any():
            return cls(math.nan, "")
        i = rows["half_width"].astype(float).fillna(math.inf).idxmax()
        return cls(float(rows.loc[i, "half_width"]), str(rows.loc[i, "effect"]))


def widest_called(y: np.ndarray, cells: list[tuple[str, ...]], seeds: np.ndarray, design: Any,
                  label: Callable[[str, str], str], rule: SeedRule, scale: tuple[str, ...] | list[str] = (),
                  first_round: np.ndarray | None = None, block_seeds: bool = True,
                  own_variance: bool = False) -> Widest:
    """The rule's input: the widest called 95% half-width of outcome `y` (one value per run) and its effect.

    The error is the first round's alone (`first_round`, a mask of the runs), as the report's CIs are (an arms
    design, `own_variance`: each arm's own first-round variance, `stein own`); the
    margin changes no half-width. The sweep calls it on summary.csv's rows (`gptlab.kinds.seeds.stages`); the
    report's rounds (`gptlab.kinds.seeds.tables`) take the same `analyse` and `called_rows` from results/NAME/.
    """
    from gptlab.stats.effects import analyse  # effects is the heavier module; this one is read by the spec too

    analysis = analyse(np.asarray(y, float), cells, np.asarray(seeds), design, label, DEFAULT_MARGIN,
                       endpoint=rule.precision_for == "interactions", error_mask=first_round, block_seeds=block_seeds,
                       own_variance=own_variance)
    return Widest.of(called_rows(analysis, rule, label, scale))
