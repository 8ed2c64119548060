"""`WorthReport`: the report's hooks of `worth:` (`gptlab.report.kinds.ReportKind`), each a step's part of the kind.

The load step reads the lengths' test blocks and step_times.csv (`load`); the tables step makes worth.csv and
worth_retune.csv (`tables.worth_view`), adds each arm's worth to an arms sweep's scorecard (`tables.with_worth`) and gives it to a
ladder as an arm's quantity (`tables.worth_quantities`);
the sentences step words them (`sentences.lines`, `sentences.scorecard_lines`); the figures step draws
worth.png (`figure`); the document places the section after the summary (`section`). Each step's module is
imported when the report runs that step: validating a sweep's spec imports none of them.
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from gptlab.kinds.worth.spec import KEY
from gptlab.report.kinds import REPORT_KINDS, ArmQuantity, KindSection, ReportKind


@REPORT_KINDS.register(KEY)
class WorthReport(ReportKind):
    """The report's side of `worth:`: its numbers, files, scorecard columns, sentences, figure and section."""

    def load(self, res: Any) -> Any:
        from gptlab.kinds.worth.load import load

        return load(res)

    def tables(self, res: Any, tables: Any) -> Any:
        from gptlab.kinds.worth.tables import worth_view

        return worth_view(res)

    def files(self, tables: Any) -> Mapping[str, pd.DataFrame]:
        view = tables.kinds.get(KEY)
        return {"worth": view.table, "worth_retune": view.retune} if view is not None else {}

    def scorecard(self, res: Any, tables: Any, card: pd.DataFrame) -> pd.DataFrame:
        from gptlab.kinds.worth.tables import with_worth

        view = tables.kinds.get(KEY)
        return with_worth(card, view.table, bool(res.scale)) if view is not None and len(card) else card

    def arm_quantities(self, res: Any, tables: Any) -> list[ArmQuantity]:
        from gptlab.kinds.worth.tables import worth_quantities

        view = tables.kinds.get(KEY)
        return worth_quantities(view.table) if view is not None and not view.scale_factor else []

    def sentences(self, res: Any, tables: Any) -> Any:
        from gptlab.kinds.worth.sentences import lines

        return lines(tables.kinds.get(KEY), res)

    def scorecard_lines(self, res: Any, tables: Any, lines: list[str]) -> list[str]:
        from gptlab.kinds.worth.sentences import scorecard_lines

        return scorecard_lines(tables.scorecard, lines, res.unit)

    def figures(self, res: Any, tables: Any) -> Mapping[str, bytes | None]:
        from gptlab.kinds.worth.figure import worth_plot

        view = tables.kinds.get(KEY)
        return {"worth": worth_plot(res, view)} if view is not None else {}

    def section(self, res: Any, tables: Any, words: Any, figures: Any) -> KindSection:
        from gptlab.kinds.worth.section import SCORECARD_CAPTION, worth_section

        caption = (SCORECARD_CAPTION,) if "worth" in tables.scorecard.columns else ()
        return KindSection(blocks=tuple(worth_section(res, tables, words, figures)), scorecard_caption=caption,
                           scorecard_columns=("worth",))
