"""`AdaptiveReport`: the report's hooks of adaptive seeds (`gptlab.report.kinds.ReportKind`), each a step's part.

The load step reads rounds.csv (`load`); the tables step makes the rounds' view (`tables.adaptive_view`: rounds.csv
and precision.csv); the sentences step words the rule and the outcome (`sentences`); the figures step draws
precision.png (`figure`); the document places the section after the scorecard (`section`). The report's own
sentences ask it what of its numbers counts the seeds alone (`seeds_only`) and how the header says its seeds
(`header_seeds`); the effects' error model reads round 1 through the sweep's `seed_plan`. Each step's module is
imported when the report runs that step.
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
import yaml

from gptlab.kinds.seeds.stages import KEY
from gptlab.report.kinds import REPORT_KINDS, KindSection, ReportKind


@REPORT_KINDS.register(KEY)
class AdaptiveReport(ReportKind):
    """Adaptive seeds' side (`seeds:`'s rule): its rounds, their tables, words, figure and section."""

    def load(self, res: Any) -> pd.DataFrame:
        from gptlab.kinds.seeds.load import read_rounds

        return read_rounds(res)

    def tables(self, res: Any, tables: Any) -> Any:
        from gptlab.kinds.seeds.tables import adaptive_view

        return adaptive_view(res)

    def files(self, tables: Any) -> Mapping[str, pd.DataFrame]:
        view = tables.kinds.get(KEY)
        return {"rounds": view.rounds, "precision": view.outcomes} if view is not None else {}

    def sentences(self, res: Any, tables: Any) -> Any:
        from gptlab.kinds.seeds.sentences import words

        view = tables.kinds.get(KEY)
        return words(view) if view is not None else None

    def seeds_only(self, res: Any) -> list[str]:
        return ["the adaptive rule's half-widths"]

    def header_seeds(self, res: Any) -> str | None:
        rule = res.spec.kinds[KEY]
        return f"{', '.join(map(str, res.seeds))} (adaptive: {yaml.safe_dump(rule.to_dict(), default_flow_style=True).strip()})"

    def figures(self, res: Any, tables: Any) -> Mapping[str, bytes | None]:
        from gptlab.kinds.seeds.figure import precision_curves

        view = tables.kinds.get(KEY)
        return {"precision": precision_curves(view.curve)} if view is not None else {}

    def section(self, res: Any, tables: Any, words: Any, figures: Any) -> KindSection:
        from gptlab.kinds.seeds.section import adaptive_section

        return KindSection(blocks=tuple(adaptive_section(tables, words, figures)), after="scorecard")
