"""`LadderReport`: the report's hooks of `ladder:` (`gptlab.report.kinds.ReportKind`), each a step's part of the kind.

The report of a ladder's folder is its top rung's (`scope`: the highest rung with runs, read as a tuned arms sweep at
that rung's settings and lrs), and the kind's section, before the summary (the answer first), is the ladder's: the
load step reads every rung on its own (`load`: each rung's `Results` at its own settings, predictions.csv and when
each run started), the tables step makes every rung's tables and from them the trends, the ranking's agreement, the picks and each
prediction beside its measurement (`tables`), then their words (`sentences`), ladder.png (`figure`) and the section
(`section`). Each step's module is imported when the report runs that step.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import pandas as pd

from gptlab.kinds.ladder.spec import KEY, LadderSpec, at_rung
from gptlab.kinds.ladder.stages import shifted_space
from gptlab.report.kinds import REPORT_KINDS, KindSection, ReportKind
from gptlab.roles import ESTIMATION
from gptlab.run.resultsdir import RUNG, ResultsDir
from gptlab.runio import read_csv_rows
from gptlab.sweep.kinds import setting_space
from gptlab.sweep.runs import SweepSpec


@dataclass(frozen=True)
class LadderLoad:
    """What the load step reads of a ladder beyond its top rung: every rung's results, and the predictions."""

    rungs: tuple[Any, ...]  # each rung's `Results` read on its own, smallest first (rungs without runs left out)
    predictions: pd.DataFrame  # results/NAME/predictions.csv as written (text)
    started: Mapping[str, list[str]]  # each rung's runs' started_at (every role)


def next_space(spec: SweepSpec, estimation: pd.DataFrame) -> Mapping[str, tuple[Any, ...]]:
    """The tuned space of the rung above the one whose estimation runs are `estimation` (summary.csv's rows), as the
    sweep chose it (`stages.shifted_space` of their lrs; the sweep file's space where it cannot move)."""
    space = spec.kinds[KEY].space
    picks = sorted({float(v) for key in space if key in estimation for v in estimation[key] if str(v).strip()})
    return shifted_space(space, picks) or dict(space)


def rung_spaces(spec: SweepSpec, runs: pd.DataFrame) -> dict[str, Mapping[str, tuple[Any, ...]]]:
    """The tuned space each rung started from: the sweep file's at the first rung, each other rung's from the picks
    of the rung below (`next_space`), from summary.csv's rows (`runs`)."""
    role = runs["role"].replace("", ESTIMATION) if "role" in runs else pd.Series(ESTIMATION, index=runs.index)
    out, space = {}, dict(spec.kinds[KEY].space)
    for rung in spec.kinds[KEY].rungs:
        out[rung.name] = space
        space = next_space(spec, runs[(runs.get(RUNG, "") == rung.name) & (role == ESTIMATION)])
    return out


def measured_rungs(ladder: LadderSpec, runs: pd.DataFrame) -> list[str]:
    """The rungs with runs in summary.csv, smallest first."""
    present = set(runs[RUNG]) if RUNG in runs else set()
    return [r.name for r in ladder.rungs if r.name in present]


@REPORT_KINDS.register(KEY)
class LadderReport(ReportKind):
    """`ladder:`'s side: the top rung as the report's, every rung on its own, the trends and the predictions."""

    def scope(self, spec: Any, results_dir: Any, runs: Any) -> tuple[Any, Any] | None:
        rungs = measured_rungs(spec.kinds[KEY], runs)
        if not rungs:
            return None
        top = rungs[-1]
        return at_rung(spec, spec.kinds[KEY].rung(top), rung_spaces(spec, runs)[top], keep=True), \
            ResultsDir(results_dir).at_rung(top)

    def load(self, res: Any) -> LadderLoad:
        from gptlab.report.load import load_results

        ladder, rungs, space = res.spec.kinds[KEY], [], dict(res.spec.kinds[KEY].space)
        for rung in ladder.rungs:  # each on its own, at the space the rung below left it; up to the report's top
            spec = at_rung(res.spec, rung, space)
            rungs.append(load_results(res.results_dir.at_rung(rung.name), spec=spec))
            if rung.name == res.results_dir.rung:
                break
            space = next_space(res.spec, rungs[-1].runs)
        started = {r.results_dir.rung: [str(t) for t in r.every_run.get("started_at", [])] for r in rungs}
        predictions = pd.DataFrame(read_csv_rows(res.results_dir.predictions_csv))
        for column in ("predicted", "pred_low", "pred_high"):
            if column in predictions:
                predictions[column] = pd.to_numeric(predictions[column], errors="coerce")
        return LadderLoad(rungs=tuple(rungs), predictions=predictions, started=started)

    def tables(self, res: Any, tables: Any) -> Any:
        from gptlab.kinds.ladder.tables import (
            LadderView,
            RungReport,
            pick_table,
            prediction_table,
            rank_table,
            rung_effects,
            trends,
        )
        from gptlab.report.tables import compute_tables

        ladder, loaded = res.spec.kinds[KEY], res.kinds[KEY]
        reports = [RungReport(name=r.results_dir.rung, res=r, tables=compute_tables(r))
                   for r in loaded.rungs]
        effects = rung_effects(ladder, reports)
        return LadderView(rungs=effects, trends=trends(effects, ladder),
                          predictions=prediction_table(loaded.predictions, effects, dict(loaded.started)),
                          ranks=rank_table(effects, [r.name for r in ladder.rungs]),
                          picks=pick_table(reports, list(setting_space(res.spec))),
                          top=res.results_dir.rung, margin=ladder.margin,
                          ratio_margin=ladder.ratio_margin, unit=res.unit)

    def files(self, tables: Any) -> Mapping[str, pd.DataFrame]:
        return tables.kinds[KEY].files()

    def warnings(self, res: Any, tables: Any) -> list[str]:
        """The summary says whose it is: the top rung measured's alone, and which rungs have not trained yet."""
        ladder, top = res.spec.kinds[KEY], res.results_dir.rung
        names = [r.name for r in ladder.rungs]
        left = names[names.index(top) + 1:]
        return [f"this summary, and every effect and call after it, is rung {top}'s alone (the top rung measured of "
                f"the ladder's {len(names)}); every rung, each arm's trend in compute and the predictions: \"Does it "
                "hold at scale?\" above"
                + (f"; not yet trained: rung {', '.join(left)}" if left else "")]

    def sentences(self, res: Any, tables: Any) -> Any:
        from gptlab.kinds.ladder.sentences import ladder_words

        return ladder_words(res, tables.kinds[KEY])

    def figures(self, res: Any, tables: Any) -> Mapping[str, bytes | None]:
        from gptlab.kinds.ladder.figure import ladder_figure

        return {"ladder": ladder_figure(tables.kinds[KEY], res)}

    def section(self, res: Any, tables: Any, words: Any, figures: Any) -> KindSection:
        from gptlab.kinds.ladder.section import ladder_section

        return KindSection(blocks=tuple(ladder_section(res, tables, words, figures)), after="header")
