"""Tuned sweeps: their runs (`runs_at`, each a `sweep.runs.TunedRun`) and `TuneThenEstimate`, the planner every tuning
method extends.

Nuisance settings (the learning rate first) are tuned for every cell of the grid, in two parts:

- selection: runs at tuned settings with the selection seeds SELECTION_SEED_OFFSET + i, chosen by
  the sweep's tuning method (`tune.method`, a `kind.TUNERS` entry). `grid` (here,
  the default) trains every cell x every setting of `tune.space` x `tune.seeds` in one stage and
  picks the lowest mean `best_val_loss` (`gptlab.stats.picks`); `refine` (`refine`)
  adds lrs and seeds in rounds. `results/NAME/tuning.csv` records the picks.
- estimation: the sweep's `seeds:` (a list, or adaptive rounds) at each cell's pick. Estimation
  seeds must be below the offset, so the runs that give the verdict never took part in choosing
  their setting, and changing `seeds:` later never changes the selection runs.

Every run carries its role (summary.csv's `role`): only `estimation` runs enter the effects, whatever
other roles a method gives its runs. The picks are recomputed from the selection runs' summaries
every time the planner is asked (a killed sweep, rerun, decides the same). A tuned sweep holds out a
test split (`kind`), so the report can judge the effects on data that chose nothing.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, ClassVar, Mapping, Sequence, TextIO

from gptlab.errors import GptlabError
from gptlab.kinds.tune.spec import EARLIER_PICK, TuneSpec, tune_of
from gptlab.roles import SELECTION
from gptlab.run.rundir import RunSummary
from gptlab.runio import write_csv
from gptlab.stats.picks import Pairs, SettingRow, Trial
from gptlab.statuses import FAILED
from gptlab.sweep.kinds import estimation_rounds, seed_plan
from gptlab.sweep.planners import Case, FinishedRuns, Planner, Preview, Stage
from gptlab.sweep.runs import ESTIMATION, SELECTION_SEED_OFFSET, Run, SweepSpec, TunedRun, cell_label, expand


def tuned_columns(spec: SweepSpec) -> list[str]:
    """summary.csv's columns after the grid factors: the tuned keys (none without `tune`)."""
    tune = tune_of(spec)
    return list(tune.space) if tune is not None else []


def expand_cells(spec: SweepSpec) -> list[Pairs]:
    """The grid's cells (minus exclude), in grid order."""
    from gptlab.stats.design import design_cells

    return [tuple(zip(spec.grid, levels)) for levels in design_cells(spec.grid, spec.exclude)]


def runs_at(spec: SweepSpec, settings: Sequence[Pairs], seeds: Sequence[int], role: str,
            cells: Sequence[Pairs] | None = None) -> list[TunedRun]:
    """Every cell (or `cells`) x setting x seed as runs, cell-major; each config resolved (so validated).

    A selection run and an estimation run of one cell and setting differ in their seed, and so in
    their id; the id's label names the cell and the setting (`gelu-tied-0.002_s1000000_<hash>`).
    """
    wanted = None if cells is None else set(cells)
    found: dict[tuple[Pairs, Pairs], list[TunedRun]] = {}
    seen: dict[tuple[Pairs, str], Pairs] = {}  # (cell, config hash at the first seed) -> setting
    for setting in settings:
        try:
            runs = expand(dataclasses.replace(spec, seeds=list(seeds), runs=(),  # selection: equal seeds
                                              baseline_extra_seeds=spec.baseline_extra_seeds and role == ESTIMATION),
                          setting)
        except GptlabError as err:
            raise GptlabError(f"tune.space setting ({', '.join(f'{k}={v}' for k, v in setting)}): {err}") from None
        for run in runs:
            if wanted is not None and run.cell not in wanted:
                continue
            digest = run.run_id.rsplit("_", 1)[1]
            if run.seed == seeds[0]:
                other = seen.setdefault((run.cell, digest), setting)
                if other != setting:
                    raise GptlabError(f"tune.space: settings {dict(other)} and {dict(setting)} give the same run config")
            run_id = f"{cell_label(run.cell + setting)}_s{run.seed}_{digest}"
            found.setdefault((run.cell, setting), []).append(
                TunedRun(run_id, run.cell, run.seed, run.config, setting, role))
    order = {c: i for i, c in enumerate(dict.fromkeys(cell for cell, _ in found))}
    keyed = sorted(found.items(), key=lambda kv: (order[kv[0][0]], list(settings).index(kv[0][1])))
    return [run for _, runs in keyed for run in runs]


def candidate_runs(spec: SweepSpec) -> list[TunedRun]:
    """Every estimation run the grid method may ever plan: each cell at each setting with every estimation seed.

    The naive full grid of `--dry-run`; with the selection runs, every run of the sweep's folder
    that belongs to it (whichever setting the picks name).
    """
    return runs_at(spec, tune_of(spec).settings(), spec.seeds, ESTIMATION)


MAX_REPICKS = 2  # times the picks may move once their estimation runs are read (a bound: each move trains a cell again)


class TuneThenEstimate:
    """Selection stages (`select`, each method's own), then estimation at each cell's pick (fixed or adaptive seeds).

    A tuning method subclasses this, registers it in `TUNERS` under its `tune.method` name, and
    implements `select`: called first with no rows, then with the rows of every run planned so far
    once they all finished, it returns the next selection stage, or None after setting `self.picks`.
    `OPTIONS` names its own keys under `tune:` with their defaults; `check_options` validates them.
    """

    OPTIONS: ClassVar[Mapping[str, Any]] = {}  # the method's own keys under tune:, with their defaults

    def __init__(self, spec: SweepSpec, out: TextIO,
                 rounds: Callable[[Sequence[Run]], Planner | None] | None = None) -> None:
        self.spec, self.out = spec, out
        # the estimation runs' planner in rounds, where a kind decides the seeds (adaptive seeds), else None
        self.rounds = rounds or functools.partial(estimation_rounds, spec, out=out)
        tune = tune_of(spec)
        if tune is None:  # the sweep asks a tuner only for a spec with `tune:` (kind.tuner_of)
            raise GptlabError(f"sweep {spec.name}: a tuning method needs the spec's tune: section")
        self.tune: TuneSpec = tune
        self.selection: tuple[Run, ...] = tuple(spec.runs)  # every selection-side run planned so far
        self.cells = list(dict.fromkeys(r.cell for r in spec.runs))
        # the estimation runs' planner in rounds (adaptive seeds: seeds: {min, max, precision}); False: one stage
        self.estimation: Planner | bool | None = None
        self.picks: dict[Pairs, Pairs] | None = None  # cell -> its picked setting, once decided
        self.repicks = 0  # times the picks moved once their estimation runs were read (at most MAX_REPICKS)
        self.strays_placed = False  # whether the finished runs of earlier picks on disk have joined the plan
        self.last_planned: tuple[Run, ...] = ()  # the last stage's planned runs (summary.csv's rows)

    # -- what a method implements ---------------------------------------------------------
    @classmethod
    def check_options(cls, raw: Mapping[str, Any], tune: TuneSpec) -> dict[str, Any]:
        """The method's own keys, validated (`GptlabError` naming the key), every key of OPTIONS filled."""
        return {**cls.OPTIONS, **raw}

    @classmethod
    def possible_runs(cls, spec: SweepSpec) -> list[Run]:
        """Every run beyond `spec.runs` this method may plan (a folder's other runs are reported as strays)."""
        return list(candidate_runs(spec))

    @classmethod
    def selection_range(cls, spec: SweepSpec) -> tuple[int, int]:
        """The fewest and most selection runs the method trains."""
        return len(spec.runs), len(spec.runs)

    def select(self, finished: FinishedRuns) -> Stage | None:
        """The next selection stage, or None once `self.picks` is set (from the finished runs on disk)."""
        raise NotImplementedError

    def repick(self, finished: FinishedRuns) -> dict[Pairs, Pairs]:
        """Once every estimation run has finished: the cells whose pick moves, read with them (cell -> new setting);
        a method whose curve does not read its estimation runs moves none."""
        return {}

    def selection_cases(self) -> list[Case]:
        """The selection's cases for `--dry-run` (the first stage, and the worst case of an adaptive method)."""
        return [Case(f"selection: {len(self.cells)} cells x {len(self.tune.settings())} settings x {self.tune.seeds} "
                     "seed(s)", tuple(self.spec.runs))]

    def describe(self) -> str:
        raise NotImplementedError

    # -- the shared second half -----------------------------------------------------------
    def _estimation_seeds(self) -> str:
        plan = seed_plan(self.spec)
        return plan.words if plan else f"{len(self.spec.seeds)} seed(s)"

    def next_stage(self, finished: FinishedRuns) -> Stage | None:
        stage = self._next(finished)
        if stage is not None:
            self.last_planned = tuple(stage.planned)
        return stage

    def _next(self, finished: FinishedRuns) -> Stage | None:
        if self.picks is None:
            if not finished.rows:
                print(self.describe(), file=self.out)
            stage = self.select(finished)
            if stage is not None:
                self.selection = tuple(stage.planned)
                return stage
            if self.picks is None:
                raise GptlabError(f"tune.method {self.tune.method}: its planner ended selection without picks")
            return self._estimate(finished)
        if self.estimation:
            selection_ids = {r.run_id for r in self.selection}
            rows = tuple(r for r in finished.rows if r.run_id not in selection_ids)
            stage = self._wrap(self.estimation.next_stage(FinishedRuns(finished.results_dir, rows)))
            if stage is not None:
                return stage
        return self._moved(finished)

    def _estimate(self, finished: FinishedRuns) -> Stage | None:
        """The estimation stage at the current picks (fixed seeds: one stage; in rounds: its first round); a cell
        without a pick is named once here (`estimation_runs` is asked again after estimation)."""
        lost = [cell for cell in self.cells if cell not in self.picks]
        if lost and not self.repicks:
            from gptlab.stats.picks import pairs_text, short_names

            names = short_names(list(self.spec.grid))
            print(f"warning: no selection run of {', '.join(pairs_text(c, names) for c in lost)} trained (each diverged, "
                  "collapsed or failed): no pick, so no estimation runs; its effects are not estimable", file=self.out)
        runs = self.estimation_runs()
        rounds = self.rounds(runs)
        if rounds is not None:
            self.estimation = rounds
            selection_ids = {r.run_id for r in self.selection}
            rows = tuple(r for r in finished.rows if r.run_id not in selection_ids)
            stage = self._wrap(rounds.next_stage(FinishedRuns(finished.results_dir, rows)))
            return stage if stage is not None else self._moved(finished)
        self.estimation = False  # fixed seeds: one estimation stage, then done
        return Stage("estimation", tuple(runs), self.selection + tuple(runs), tag="estimation")

    def _moved(self, finished: FinishedRuns) -> Stage | None:
        """After estimation: where a cell's curve, read with its estimation runs, moves its pick (`repick`), those
        runs become points of the curve (`EARLIER_PICK`, in no effect) and estimation starts again at the new
        picks (runs already on disk are reused); at most `MAX_REPICKS` times, then None."""
        at_picks, before = self.estimation_runs(), dict(self.picks)
        moved = self.repick(finished) if self.repicks < MAX_REPICKS else {}
        if not moved:
            return self._strays(finished, at_picks)
        self.repicks += 1
        from gptlab.stats.picks import pairs_text, short_names

        names = short_names(list(self.spec.grid))
        print("selection, read with the estimation runs: " + "; ".join(
            f"{pairs_text(c, names)} moves from {pairs_text(before[c])} to {pairs_text(s)}" for c, s in moved.items())
            + " (the runs at the earlier pick stay points of its curve, in no effect)", file=self.out)
        trained = {r.run_id for r in finished.rows}  # adaptive seeds may have stopped short of every seed
        self.selection = self.selection + tuple(dataclasses.replace(r, role=EARLIER_PICK) for r in at_picks
                                                if r.cell in moved and r.run_id in trained)
        self.picks = {**before, **moved}
        return self._estimate(finished)

    def _strays(self, finished: FinishedRuns, at_picks: Sequence[TunedRun]) -> Stage | None:
        """Once the picks are final: finished estimation runs on disk at a cell's other tried settings (an earlier
        spec's picks) join the plan as points of its curve (`EARLIER_PICK`, in no effect; a stage that trains
        nothing), so that no finished run of a cell is left out of it; None when there are none (or once done).
        Only here, at the end: earlier, a resumed sweep would find on disk the runs its own later stages train."""
        extra = [] if self.strays_placed else self._earlier_on_disk(finished, at_picks)
        self.strays_placed = True
        if not extra:
            return None
        self.selection = self.selection + tuple(extra)
        return Stage("curve points: estimation runs of earlier picks on disk", (), self.last_planned + tuple(extra),
                     tag="curve points")

    def _earlier_on_disk(self, finished: FinishedRuns, at_picks: Sequence[TunedRun]) -> list[TunedRun]:
        """Finished estimation runs on disk at a cell's tried settings other than its pick, not yet planned."""
        planned = {r.run_id for r in (*self.selection, *at_picks)}
        tried: dict[Pairs, list[Pairs]] = {}
        for r in self.selection:
            if getattr(r, "role", SELECTION) == SELECTION and r.setting != self.picks.get(r.cell):
                if r.setting not in tried.setdefault(r.cell, []):
                    tried[r.cell].append(r.setting)
        out = []
        for cell, settings in tried.items():
            for run in runs_at(self.spec, settings, self.spec.seeds, ESTIMATION, [cell]):
                if run.run_id not in planned and finished.results_dir.run(run.run_id).summary() is not None:
                    out.append(dataclasses.replace(run, role=EARLIER_PICK))
        return out

    def curve_trials(self, finished: FinishedRuns) -> list[Trial]:
        """Every finished run of each cell's curve as a Trial: the selection runs, the estimation runs at the picks
        and those of earlier picks (`EARLIER_PICK`)."""
        by_id = {r.run_id: r for r in finished.rows}
        runs = [*(r for r in self.selection if getattr(r, "role", SELECTION) in (SELECTION, EARLIER_PICK)),
                *(self.estimation_runs() if self.picks else [])]
        out = []
        for run in runs:
            row = by_id.get(run.run_id)
            if row is not None and row.status:
                loss = row.best_val_loss
                out.append(Trial(run.cell, run.setting, str(row.status),
                                 float(loss) if loss not in (None, "") else math.nan))
        return out

    def estimation_runs(self) -> list[TunedRun]:
        """Every cell at its pick with the estimation seeds (adaptive: 0..max-1), cell-major.

        A cell without a pick (no selection run of it trained) has no estimation runs: the report finds it
        empty and calls it not estimable, as every method does."""
        by_setting: dict[Pairs, list[Pairs]] = {}
        for cell in self.cells:
            if cell in self.picks:
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

    def trials(self, finished: FinishedRuns) -> list[Trial]:
        """The finished selection runs as `stats.picks.Trial`s (a failed or missing run counts as failed)."""
        by_id = {r.run_id: r for r in finished.rows}
        trials = []
        for run in self.selection:
            if getattr(run, "role", SELECTION) != SELECTION:
                continue
            row = by_id.get(run.run_id) or RunSummary()  # not finished: failed
            loss = row.best_val_loss
            trials.append(Trial(run.cell, run.setting, str(row.status or FAILED),
                                float(loss) if loss not in (None, "") else math.nan))
        return trials

    def record_picks(self, finished: FinishedRuns, rows: Sequence[SettingRow], how: str) -> None:
        """Write tuning.csv from `rows` (stats.picks.SettingRow, `picked` marked), set `self.picks`, print them."""
        from gptlab.stats.picks import pairs_text, picks, short_names, tuning_columns

        names = short_names(list(self.spec.grid))
        write_csv(finished.results_dir.tuning_csv, [r.to_row(names) for r in rows],
                  tuning_columns(list(self.spec.grid), list(self.tune.space)))
        chosen = picks(rows)
        self.picks = {cell: row.setting for cell, row in chosen.items()}
        text = [f"{pairs_text(c, names)} -> {pairs_text(r.setting)}" for c, r in chosen.items()]
        print(f"selection: each cell's pick ({how}): {'; '.join(text)}", file=self.out)
        for cell, row in chosen.items():
            if row.at_edge:
                print(f"warning: the pick of {pairs_text(cell, names)} ({pairs_text(row.setting)}) lies on the edge "
                      "of the settings tried: its best setting may lie beyond them; widen the space", file=self.out)

    def preview(self) -> Preview | None:
        spec, n_cells, n_settings = self.spec, len(self.cells), len(self.tune.settings())
        # Which settings the picks name is known only once the selection has run: the estimation case is
        # timed and counted at the first setting as a stand-in (every setting trains the same model here).
        stand_in = runs_at(spec, self.tune.settings()[:1], spec.seeds, ESTIMATION)
        plan = seed_plan(spec)
        if plan is None:
            estimation = [Case(f"estimation: {len(spec.seeds)} seed(s) at each cell's pick", (), tuple(stand_in))]
        else:
            estimation = [Case(f"estimation, {what}: {n} seeds at each cell's pick", (),
                               tuple(r for r in stand_in if r.seed < spec.seed_count(r.cell, n)))
                          for what, n in (("minimum", plan.first), ("worst case", plan.most))]
        selection = self.selection_cases()
        naive = candidate_runs(spec)
        both = [Case(f"tuned in all ({sel.label.split(':', 1)[0]} + {case.label.split(': ', 1)[0]})",
                     sel.runs, sel.stand_ins + case.stand_ins, whole=True) for sel in selection[-1:] for case in estimation]
        return Preview(self.describe(), (
            *selection, *estimation, *both,
            Case(f"for comparison, the naive full grid (every setting x every seed): {n_cells} cells x {n_settings} "
                 f"settings x {len(spec.seeds)} seeds", tuple(naive))))


class Grid(TuneThenEstimate):
    """Every cell at every setting of tune.space x tune.seeds in one stage; the pick: the lowest mean val loss."""

    def describe(self) -> str:
        keys = ", ".join(self.tune.space)
        return (f"tuned sweep: selection trains {len(self.cells)} cells x {len(self.tune.settings())} settings of "
                f"{keys} x {self.tune.seeds} seed(s) (seeds {SELECTION_SEED_OFFSET:,}+); each cell's pick (lowest mean "
                f"best val loss) then trains {self._estimation_seeds()} for the verdict")

    def select(self, finished: FinishedRuns) -> Stage | None:
        if not finished.rows:
            return Stage("selection", self.selection, self.selection, tag="selection",
                         unfinished="selection is incomplete: each cell's setting is picked once every selection run "
                         "has finished")
        from gptlab.stats.picks import pick_rows

        rows = pick_rows(self.trials(finished), self.cells, self.tune.settings(), self.tune.space)
        self.record_picks(finished, rows, "lowest mean best val loss")
        return None
