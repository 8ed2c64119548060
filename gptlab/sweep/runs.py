"""The runs of a sweep: `Run` (and `TunedRun`, a run at a setting of a kind's), `SweepSpec` (a validated spec, each kind's
section in `SweepSpec.kinds`) and `expand` (grid x seeds minus exclude).

Below the spec's validation (`sweep.spec`) and every planner: what a sweep trains, named and
identified. A run's id is its cell's label, its seed and a hash of its resolved config with the
sources it depends on (plugin files, a user corpus), so a finished run is found again, never
trained twice, and a changed plugin or corpus makes new runs.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import InitVar, dataclass, field
from typing import Any

from gptlab.errors import GptlabError, key_error
from gptlab.executors.base import ExecutorConfig, plans_members
from gptlab.roles import ESTIMATION, SELECTION
from gptlab.run.config import RunConfig, resolve_run_config
from gptlab.run.identity import run_sources
from gptlab.stats.arms import ARM, baseline_seed_count
from gptlab.stats.calls import check_margin
from gptlab.stats.design import design_cells
from gptlab.stats.picks import Pairs
from gptlab.sweep.arms_spec import ArmsDesign
from gptlab.sweep.levels import same_config_message

# A run takes ~1 ms to validate and expand: a mistyped grid (30 factors, seeds pasted twice) must not hang it.
MAX_RUNS = 10_000  # cells before exclude x seeds (adaptive seeds: x max)
MAX_SEEDS = 10_000  # seeds a sweep lists (adaptive seeds: its max)
SELECTION_SEED_OFFSET = 1_000_000  # selection seed i is 1,000,000 + i; estimation seeds must stay below it


@dataclass(frozen=True)
class Run:
    """One training run of the sweep: a grid cell and a seed."""

    run_id: str  # deterministic: cell label, seed and a hash of the resolved config
    cell: Pairs  # (dotted factor key, level) pairs in grid order
    seed: int  # the run's seed
    config: RunConfig  # its resolved config (the seed included), as workers train it

    @property
    def factors(self) -> dict[str, Any]:
        return dict(self.cell)

    @property
    def role(self) -> str:
        """What the run is for (summary.csv's `role`): a plain sweep's runs all give the verdict."""
        return ESTIMATION


@dataclass(frozen=True)
class TunedRun(Run):
    """A run a kind's stages plan at a setting beyond its cell's levels (a tuned sweep's selection and estimation runs
    at a tuned setting, `worth:`'s lengths at an lr, a plugin's own), with its role."""

    setting: Pairs = ()  # (key, value) pairs beyond the cell's levels (a tuned sweep's: in tune.space order)
    role: str = SELECTION  # selection | estimation | a kind's or a method's own (kept out of the effects)

    @property
    def columns(self) -> dict[str, Any]:
        """What summary.csv adds to the run's row: one column per tuned key."""
        return dict(self.setting)


@dataclass(frozen=True)
class ReportSettings:
    """The `report:` section: how the report calls effects. Built from any value `stats.calls.check_margin` takes,
    checked there (a bad one: a `GptlabError` naming `key`, the YAML's key or `--margin`)."""

    equivalence_margin: float  # nats/char within which a change is 'equivalent' (`--margin` overrides it: `with_margin`)
    key: InitVar[str] = "report.equivalence_margin"  # where the margin was given, for the error

    def __post_init__(self, key: str) -> None:
        object.__setattr__(self, "equivalence_margin", check_margin(self.equivalence_margin, key))  # frozen: the one
        # write, checking

    def to_dict(self) -> dict[str, Any]:
        return {"equivalence_margin": self.equivalence_margin}


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: what to train (grid x seeds over base) and how (executor). Built once by `sweep.spec`
    (parse -> validate -> resolve) and never edited: what differs (a tuner's settings) is a `dataclasses.replace`."""

    name: str  # results/NAME and reports/NAME
    description: str  # one line shown in the report
    plugins: list[str]  # resolved plugin entries (module names or absolute .py paths)
    base: dict[str, Any]  # fixed settings, nested {model, train, data}
    grid: dict[str, list[Any]]  # dotted factor key -> levels, in YAML order
    seeds: list[int]  # seeds every cell is trained with
    exclude: list[dict[str, Any]]  # cells dropped from the product
    baseline: dict[str, Any]  # reference level per factor (default: first level)
    executor: ExecutorConfig  # how and where the runs train
    report: ReportSettings  # report settings, always filled (sweep.yaml records the margin used)
    source: str = ""  # the YAML path it came from
    command: str = ""  # the command line that ran it, as sweep.yaml records it (`sweep.stored`); "" before a sweep ran
    search_path: list[str] = field(default_factory=list)  # folders workers add to sys.path for plugins
    runs: tuple[Run, ...] = ()  # expanded grid x seeds minus exclude (a tuned sweep: its first runs)
    arms: ArmsDesign | None = None  # an arms sweep's design (its grid: `arm` x the scale keys), None for a grid
    baseline_extra_seeds: bool = True  # an arms sweep's baseline gets Dunnett's sqrt(k) x seeds (False: selection runs)
    kinds: dict[str, Any] = field(default_factory=dict)  # each kind's checked section by its key (`sweep.kinds`)

    @functools.cached_property
    def base_config(self) -> RunConfig:
        """`base` resolved (at seed 0): every run's config derives from it (`expand`). `sweep.spec` has checked it."""
        return resolve_run_config(self.base)

    def with_margin(self, margin: Any) -> "SweepSpec":
        """This spec with the command line's `--margin` (checked) in place of its report's equivalence margin; None:
        as it is. The one way an override goes in: the sweep's (which sweep.yaml records) and the report's."""
        if margin is None:
            return self
        return dataclasses.replace(self, report=ReportSettings(margin, key="--margin"))

    def cell_settings(self, cell: Pairs) -> dict[str, Any]:
        """The dotted settings a cell sets over `base`: its levels, an arm's settings in place of its name."""
        return {key: value for dotted, level in cell
                for key, value in (self.arms.arms[level].items() if self.arms and dotted == ARM else [(dotted, level)])}

    def seed_count(self, cell: Pairs, n_seeds: int) -> int:
        """How many seeds `cell` trains where every cell trains `n_seeds`: more for an arms sweep's baseline."""
        if self.arms is None or not self.baseline_extra_seeds or dict(cell).get(ARM) != self.arms.baseline:
            return n_seeds
        return baseline_seed_count(n_seeds, self.arms.n_compared)

    def cell_seeds(self, cell: Pairs) -> list[int]:
        """The seeds `cell` trains: `seeds`, and for an arms sweep's baseline the next free integers after them."""
        extra = self.seed_count(cell, len(self.seeds)) - len(self.seeds)
        taken, seeds, nxt = set(self.seeds), list(self.seeds), max(self.seeds) + 1
        while extra > 0:
            if nxt not in taken:
                seeds.append(nxt)
                extra -= 1
            nxt += 1
        return seeds

    def to_dict(self) -> dict[str, Any]:
        arms = {} if self.arms is None else {
            "arms": {n: dict(s) for n, s in self.arms.arms.items()},
            **({"claims": {a: [c.to_dict() for c in cs] for a, cs in self.arms.claims.items()}} if self.arms.claims else {})}
        return {"name": self.name, "description": self.description, "plugins": self.plugins,
                "base": self.base, "grid": self.grid, **arms,
                "seeds": self.seeds, "exclude": self.exclude,  # an adaptive sweep's rule takes its place below
                "baseline": self.baseline, "executor": self.executor.to_dict(), "report": self.report.to_dict(),
                **{key: section.to_dict() for key, section in self.kinds.items()}}


def cell_label(cell: Pairs) -> str:
    """Folder-safe label of a cell's levels, e.g. 'pre-gelu'."""
    text = "-".join(str(level) for _, level in cell)
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", text)[:80]


def expand(spec: SweepSpec, setting: Pairs = ()) -> list[Run]:
    """grid product minus exclude, times seeds, over `base` (with a tuned `setting`); every config validated."""
    factors = list(spec.grid)
    cells = [tuple(zip(factors, levels)) for levels in design_cells(spec.grid, spec.exclude)]
    if not cells:
        raise key_error("exclude", "removes every cell of the grid; nothing would be trained")
    runs: list[Run] = []
    seen: dict[str, tuple[tuple, RunConfig]] = {}
    for cell in cells:
        try:  # the tuned setting first, then the cell's levels: an error names the first bad one, as in the YAML
            resolved = spec.base_config.with_settings({**dict(setting), **spec.cell_settings(cell)})
        except GptlabError as err:
            where = ", ".join(f"{k}={v}" for k, v in cell)
            raise GptlabError(f"grid cell ({where}): {err}") from None
        resolved = dataclasses.replace(resolved, population=plans_members(spec.executor, resolved))  # in its id
        key = resolved.run_hash()
        if key in seen:
            raise key_error("grid", same_config_message(spec.grid, seen[key], (cell, resolved)) if spec.arms is None else
                        f"cells {dict(seen[key][0])} and {dict(cell)} resolve to the same run config")
        seen[key] = cell, resolved
        sources = run_sources(spec.plugins, resolved.data.path)
        for seed in spec.cell_seeds(cell):
            run_cfg = dataclasses.replace(resolved, seed=seed)
            run_id = f"{cell_label(cell)}_s{seed}_{run_cfg.run_hash(sources)}"
            runs.append(Run(run_id, cell, seed, run_cfg))
    return runs


