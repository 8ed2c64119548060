"""Tuned sweeps (`tune: {space: {train.lr: [...]}, seeds: 1}`): the spec's `tune` key and the `TuneThenEstimate` planner.

Nuisance settings (the learning rate first) are tuned for every cell of the grid, in two stages:

- selection: every cell x every setting of `tune.space` (the product of its keys) x `tune.seeds`
  seeds, the selection seeds SELECTION_SEED_OFFSET + i. Each cell's pick is the setting with the
  lowest mean `best_val_loss` (the rule, diverged runs and edges: `gptlab.stats.picks`);
  `results/NAME/tuning.csv` records it.
- estimation: the sweep's `seeds:` (a list, or adaptive rounds) at each cell's pick. Estimation
  seeds must be below the offset, so the runs that give the verdict never took part in choosing
  their setting, and changing `seeds:` later never changes the selection runs.

The picks are recomputed from the selection runs' summaries every time the planner is asked
(a killed sweep, rerun, decides the same). A tuned sweep holds out a test split: `data.test_fraction`
defaults to half of `data.val_fraction` (0.05: for Tiny Shakespeare, the two halves of nanoGPT's
validation text), so the report can judge the effects on data that chose nothing.
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, TextIO

from gptlab.errors import GptlabError, closest, shown
from gptlab.runio import write_csv
from gptlab.run.config import SECTIONS, coerce, get_dotted, resolve_run_config, set_dotted, valid_keys
from gptlab.sweep.adaptive import AdaptiveSeeds
from gptlab.sweep.given import check_given
from gptlab.sweep.planners import Case, FinishedRuns, Preview, Stage
from gptlab.sweep.runs import MAX_RUNS, Run, SweepSpec, cell_label, expand

SELECTION_SEED_OFFSET = 1_000_000  # selection seed i is 1,000,000 + i; estimation seeds must stay below it
MAX_TUNE_SEEDS = 100  # selection seeds per cell and setting
TUNE_KEYS = ["space", "seeds", "picks", "picked_by"]  # picks, picked_by: settings given (gptlab.sweep.given)
SELECTION, ESTIMATION = "selection", "estimation"  # summary.csv's `stage` column
Pairs = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class TuneSpec:
    """A validated `tune:` section."""

    space: Mapping[str, tuple[Any, ...]]  # tuned dotted key -> its levels (as resolved: 1e-3 is 0.001), YAML order
    seeds: int = 1  # selection seeds per cell and setting (0 with given picks)
    given: tuple[tuple[Pairs, Pairs], ...] = ()  # (cell, setting) of `tune.picks`: settings chosen elsewhere, no selection
    picked_by: str = ""  # who chose the given picks, on which runs (`tune.picked_by`)

    @property
    def selection_seeds(self) -> list[int]:
        return [SELECTION_SEED_OFFSET + i for i in range(self.seeds)]

    def settings(self) -> list[Pairs]:
        """Every tuned setting: the product of the keys' levels, first key slowest."""
        return [tuple(zip(self.space, combo)) for combo in itertools.product(*self.space.values())]

    def to_dict(self) -> dict[str, Any]:
        if self.given:
            picks = [{**dict(cell), **dict(setting)} for cell, setting in self.given]
            return {"picks": picks, **({"picked_by": self.picked_by} if self.picked_by else {})}
        return {"space": {k: list(v) for k, v in self.space.items()}, "seeds": self.seeds}


@dataclass(frozen=True)
class TunedRun(Run):
    """A run of a tuned sweep: its grid cell (`cell`), the tuned setting it trains at, and its stage."""

    setting: Pairs = ()  # (tuned key, value) pairs in tune.space order
    stage: str = SELECTION  # selection | estimation

    @property
    def columns(self) -> dict[str, Any]:
        """What summary.csv adds to the run's row: one column per tuned key, and the stage."""
        return {**dict(self.setting), "stage": self.stage}


def tuned_columns(spec: SweepSpec) -> list[str]:
    """summary.csv's columns after the grid factors: the tuned keys and `stage` (none without `tune`)."""
    return [*spec.tune.space, "stage"] if spec.tune is not None else []


def _fail(key: str, message: str) -> GptlabError:
    return GptlabError(f"{key}: {message}")


def apply_tune(spec: SweepSpec, raw: Any) -> list[TunedRun]:
    """Validate `tune:` against the spec, set `spec.tune` (and the test split's default); the selection runs."""
    tune = _check_tune(raw, spec)
    if not any(k == "data.test_fraction" for k in spec.grid):
        try:
            get_dotted(spec.base, "data.test_fraction")
        except (KeyError, TypeError):  # half the held-out tail: 0.05 of Tiny Shakespeare, nanoGPT's val text halved
            set_dotted(spec.base, "data.test_fraction", resolve_run_config(spec.base).data.val_fraction / 2)
    spec.tune = tune
    if tune.given:  # no selection: the runs are each cell at its given setting, as estimation runs
        return [r for cell, setting in tune.given for r in runs_at(spec, [setting], spec.seeds, ESTIMATION, [cell])]
    return runs_at(spec, tune.settings(), tune.selection_seeds, SELECTION)


def _check_tune(raw: Any, spec: SweepSpec) -> TuneSpec:
    if not isinstance(raw, dict):
        raise _fail("tune", f"must be a mapping {{space: {{train.lr: [...]}}, seeds: 1}}, got {shown(raw)}")
    for key in raw:
        if key not in TUNE_KEYS:
            raise GptlabError(f"unknown key {shown(f'tune.{key}')}{closest(f'tune.{key}', [f'tune.{k}' for k in TUNE_KEYS])}"
                              f"; valid keys under tune: {', '.join(TUNE_KEYS)}")
    if "picks" in raw:  # settings chosen elsewhere: no selection runs (gptlab.sweep.given)
        given = check_given(raw, spec, expand_cells(spec), lambda key, levels: _resolve_levels(spec, key, levels,
                                                                                                "tune.picks"))
        space = {k: tuple(dict.fromkeys(s[i][1] for _, s in given)) for i, (k, _) in enumerate(given[0][1])}
        return TuneSpec(space, 0, given, raw.get("picked_by", ""))
    space = raw.get("space")
    if not isinstance(space, dict) or not space:
        raise _fail("tune.space", "needs at least one key to tune, e.g. {train.lr: [5.0e-4, 1.0e-3, 2.0e-3]}, got "
                    f"{shown(space)}")
    levels_by_key: dict[str, tuple[Any, ...]] = {}
    for dotted, levels in space.items():
        where = f"tune.space.{dotted}"
        if not isinstance(levels, list) or not levels:
            raise _fail(where, f"must be a non-empty list of levels, got {shown(levels)}")
        resolved = _resolve_levels(spec, dotted, levels, "tune.space")
        if len(set(map(repr, resolved))) != len(resolved):
            raise _fail(where, f"lists a level twice: {shown(levels)}")
        if len(resolved) < 2:
            raise _fail(where, f"lists one level ({shown(levels[0])}); a fixed setting belongs in base")
        levels_by_key[dotted] = resolved
    seeds = raw.get("seeds", 1)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= MAX_TUNE_SEEDS:
        raise _fail("tune.seeds", f"must be a count of selection seeds between 1 and {MAX_TUNE_SEEDS}, got {shown(seeds)}")
    late = [s for s in spec.seeds if s >= SELECTION_SEED_OFFSET]
    if late:
        raise _fail("seeds", f"in a tuned sweep every seed must be below {SELECTION_SEED_OFFSET:,} (the selection "
                    f"seeds are {SELECTION_SEED_OFFSET:,} and up), got {late[0]:,}")
    tune = TuneSpec(levels_by_key, seeds)
    cells = len(expand_cells(spec))
    total = cells * len(tune.settings()) * (seeds + len(spec.seeds))
    if total > MAX_RUNS:
        raise _fail("tune", f"{cells:,} cells x {len(tune.settings()):,} settings x ({seeds} selection + "
                    f"{len(spec.seeds):,} estimation seeds) is {total:,} runs to plan; at most {MAX_RUNS:,}")
    return tune


def _resolve_levels(spec: SweepSpec, dotted: Any, levels: list[Any], owner: str) -> tuple[Any, ...]:
    """A tuned key's levels as the run config resolves them; the key must be tunable (a config key, not data.*,
    in neither base nor grid). `owner`: tune.space or tune.picks, for the messages."""
    keys = [k for k in valid_keys() if k != "seed"]
    where = f"{owner}.{dotted}"
    if dotted not in keys:
        raise GptlabError(f"{owner}: unknown key {shown(dotted)}{closest(str(dotted), keys)}")
    if str(dotted).startswith("data."):
        raise _fail(where, "data settings cannot be tuned: the selection compares validation losses, which "
                    "only mean the same on the same split and tokenizer; put it in base or grid")
    if dotted in spec.grid:
        raise GptlabError(f"{dotted} is in both grid and {owner}; keep it in one place")
    try:
        get_dotted(spec.base, dotted)
    except (KeyError, TypeError):
        pass
    else:
        raise GptlabError(f"{dotted} is set in both base and {owner}; keep it in one place (remove it from "
                          "base: each cell trains at the tuned levels)")
    if any(isinstance(v, (dict, list)) for v in levels):
        raise _fail(where, "levels must be plain values (strings, numbers, booleans)")
    section, name = dotted.split(".", 1)
    try:
        return tuple(coerce(dotted, v, typing.get_type_hints(SECTIONS[section])[name]) for v in levels)
    except GptlabError as err:
        raise _fail(where, str(err)) from None


def expand_cells(spec: SweepSpec) -> list[Pairs]:
    """The grid's cells (minus exclude), in grid order."""
    from gptlab.stats.design import design_cells

    return [tuple(zip(spec.grid, levels)) for levels in design_cells(spec.grid, spec.exclude)]


def runs_at(spec: SweepSpec, settings: Sequence[Pairs], seeds: Sequence[int], stage: str,
            cells: Sequence[Pairs] | None = None) -> list[TunedRun]:
    """Every cell (or `cells`) x setting x seed as runs, cell-major; each config resolved (so validated).

    A selection run and an estimation run of one cell and setting differ in their seed, and so in
    their id; the id's label names the cell and the setting (`gelu-tied-0.002_s1000000_<hash>`).
    """
    wanted = None if cells is None else set(cells)
    found: dict[tuple[Pairs, Pairs], list[TunedRun]] = {}
    seen: dict[tuple[Pairs, str], Pairs] = {}  # (cell, config hash at the first seed) -> setting
    for setting in settings:
        base = copy.deepcopy(spec.base)
        for key, value in setting:
            set_dotted(base, key, value)
        try:
            runs = expand(dataclasses.replace(spec, base=base, seeds=list(seeds), runs=[]))
        except GptlabError as err:
            raise GptlabError(f"tune.space setting ({', '.join(f'{k}={v}' for k, v in setting)}): {err}") from None
        for run in runs:
            if wanted is not None and run.cell not in wanted:
                continue
            digest = run.run_id.rsplit("_", 1)[1]
            if run.seed == seeds[0]:
                other = seen.setdefault((run.cell, digest), setting)
                if other != setting:
                    raise _fail("tune.space", f"settings {dict(other)} and {dict(setting)} give the same run config")
            run_id = f"{cell_label(run.cell + setting)}_s{run.seed}_{digest}"
            found.setdefault((run.cell, setting), []).append(
                TunedRun(run_id, run.cell, run.seed, run.config, setting, stage))
    order = {c: i for i, c in enumerate(dict.fromkeys(cell for cell, _ in found))}
    keyed = sorted(found.items(), key=lambda kv: (order[kv[0][0]], list(settings).index(kv[0][1])))
    return [run for _, runs in keyed for run in runs]


def candidate_runs(spec: SweepSpec) -> list[TunedRun]:
    """Every estimation run the sweep may ever plan: each cell at each setting with every estimation seed.

    The naive full grid of `--dry-run`; with the selection runs, every run of the sweep's folder
    that belongs to it (whichever setting the picks name).
    """
    return runs_at(spec, spec.tune.settings(), spec.seeds, ESTIMATION)


def known_runs(spec: SweepSpec) -> list[Run]:
    """The runs a spec may have in its folder: its runs, and a tuned sweep's every possible estimation run."""
    return list(spec.runs) + (candidate_runs(spec) if selects(spec) else [])


def selects(spec: SweepSpec) -> bool:
    """Whether the sweep selects settings itself (`tune.space`), rather than training given picks or no tune."""
    return spec.tune is not None and not spec.tune.given


def planned_range(spec: SweepSpec) -> tuple[int, int]:
    """How many runs the whole sweep trains: (fewest, most); they differ only with adaptive seeds."""
    rule, runs = spec.seed_rule, len(spec.runs)
    if not selects(spec):
        return (runs // rule.max * rule.min if rule else runs), runs
    cells = len({r.cell for r in spec.runs})
    return runs + cells * (rule.min if rule else len(spec.seeds)), runs + cells * len(spec.seeds)


class TuneThenEstimate:
    """Selection (every cell x setting x tune.seeds), each cell's pick from disk, then estimation at the picks."""

    def __init__(self, spec: SweepSpec, out: TextIO, rounds: Callable[..., Any] = AdaptiveSeeds) -> None:
        self.spec, self.out, self.rounds_class = spec, out, rounds
        self.tune: TuneSpec = spec.tune
        self.selection = tuple(spec.runs)
        self.cells = list(dict.fromkeys(r.cell for r in self.selection))
        self.step = 0  # 0: nothing handed out; 1: selection handed out; 2: estimation planned
        self.rounds: Any = None  # adaptive seeds' planner over the estimation runs (seeds: {min, max, precision})
        self.picks: dict[Pairs, Pairs] = {}  # cell -> its picked setting, once decided

    def _estimation_seeds(self) -> str:
        rule = self.spec.seed_rule
        return f"adaptive seeds ({rule.min} to {rule.max})" if rule else f"{len(self.spec.seeds)} seed(s)"

    def describe(self) -> str:
        keys = ", ".join(self.tune.space)
        return (f"tuned sweep: selection trains {len(self.cells)} cells x {len(self.tune.settings())} settings of "
                f"{keys} x {self.tune.seeds} seed(s) (seeds {SELECTION_SEED_OFFSET:,}+); each cell's pick (lowest mean "
                f"best val loss) then trains {self._estimation_seeds()} for the verdict")

    def next_stage(self, finished: FinishedRuns) -> Stage | None:
        if self.step == 0:
            self.step = 1
            print(self.describe(), file=self.out)
            return Stage("selection", self.selection, self.selection, tag="selection",
                         unfinished="selection is incomplete: each cell's setting is picked once every selection run "
                         "has finished")
        selection_ids = {r.run_id for r in self.selection}
        if self.step == 1:
            self.step = 2
            self.decide(finished)
            runs = self.estimation_runs()
            if self.spec.seed_rule is not None:
                self.rounds = self.rounds_class(runs, self.spec.seed_rule, self.out)
                return self._wrap(self.rounds.next_stage(FinishedRuns(finished.results_dir)))
            return Stage("estimation", tuple(runs), self.selection + tuple(runs), tag="estimation")
        if self.rounds is not None:
            rows = tuple(r for r in finished.rows if r["run_id"] not in selection_ids)
            return self._wrap(self.rounds.next_stage(FinishedRuns(finished.results_dir, rows)))
        return None

    def estimation_runs(self) -> list[TunedRun]:
        """Every cell at its pick with the estimation seeds (adaptive: 0..max-1), cell-major."""
        by_setting: dict[Pairs, list[Pairs]] = {}
        for cell in self.cells:
            by_setting.setdefault(self.picks[cell], []).append(cell)
        runs = [r for setting, cells in by_setting.items() for r in runs_at(self.spec, [setting], self.spec.seeds,
                                                                           ESTIMATION, cells)]
        order = {cell: i for i, cell in enumerate(self.cells)}
        return sorted(runs, key=lambda r: order[r.cell])  # stable: seeds stay in order within a cell

    def _wrap(self, stage: Stage | None) -> Stage | None:
        """An adaptive round of the estimation stage, with the selection runs first in `planned`."""
        if stage is None:
            return None
        return Stage(f"estimation {stage.title}", stage.runs, self.selection + stage.planned,
                     tag=f"estimation {stage.tag}", unfinished=stage.unfinished)

    def decide(self, finished: FinishedRuns) -> list[Any]:
        """Each cell's pick from the selection runs' rows (summary.json on disk); writes tuning.csv."""
        from gptlab.stats.picks import Trial, pairs_text, pick_rows, picks, short_names, tuning_columns

        by_id = {r["run_id"]: r for r in finished.rows}
        trials = []
        for run in self.selection:
            row = by_id.get(run.run_id) or {}
            loss = row.get("best_val_loss")
            trials.append(Trial(run.cell, run.setting, str(row.get("status") or "failed"),
                                float(loss) if loss not in (None, "") else math.nan))
        rows = pick_rows(trials, self.cells, self.tune.settings(), self.tune.space)
        names = short_names(list(self.spec.grid))
        write_csv(finished.results_dir.tuning_csv, [r.to_row(names) for r in rows],
                  tuning_columns(list(self.spec.grid), list(self.tune.space)))
        self.picks = {cell: row.setting for cell, row in picks(rows).items()}
        chosen = [f"{pairs_text(c, names)} -> {pairs_text(r.setting)}" for c, r in picks(rows).items()]
        print(f"selection: each cell's pick (lowest mean best val loss): {'; '.join(chosen)}", file=self.out)
        for cell, row in picks(rows).items():
            if row.at_edge:
                print(f"warning: the pick of {pairs_text(cell, names)} ({pairs_text(row.setting)}) lies on the edge "
                      "of tune.space: its best setting may lie beyond it; widen the space", file=self.out)
        return rows

    def preview(self) -> Preview | None:
        spec, n_cells, n_settings = self.spec, len(self.cells), len(self.tune.settings())
        # Which settings the picks name is known only once the selection has run: the estimation case is
        # timed and counted at the first setting as a stand-in (every setting trains the same model here).
        stand_in = runs_at(spec, self.tune.settings()[:1], spec.seeds, ESTIMATION)
        rule = spec.seed_rule
        if rule is None:
            estimation = [Case(f"estimation: {len(spec.seeds)} seed(s) at each cell's pick", tuple(stand_in))]
        else:
            estimation = [Case(f"estimation, {what}: {n} seeds at each cell's pick",
                               tuple(r for r in stand_in if r.seed < n))
                          for what, n in (("minimum", rule.min), ("worst case", rule.max))]
        naive = candidate_runs(spec)
        both = [Case(f"tuned in all (selection + {case.label.split(': ', 1)[0]})", self.selection + case.runs)
                for case in estimation]
        return Preview(self.describe(), (
            Case(f"selection: {n_cells} cells x {n_settings} settings x {self.tune.seeds} seed(s)", self.selection),
            *estimation, *both,
            Case(f"for comparison, the naive full grid (every setting x every seed): {n_cells} cells x {n_settings} "
                 f"settings x {len(spec.seeds)} seeds", tuple(naive))))
