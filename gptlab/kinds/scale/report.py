"""`ScaleReport`: the report's hooks of `scale:` (`gptlab.report.kinds.ReportKind`), each a step's part of the kind.

The tables step makes effects_by_scale.csv and effect_changes.csv (`tables.scale_view`), gives an arms sweep's table
its rows per level (`per_level`) and its scorecard each claim's `transfer` (`tables.with_transfer`); the sentences
step words them (`sentences`); the figures step draws effects_by_scale.png (`figure`); the document places the
section after the cells (`section`). The scale keys themselves reach the report through the sweep's kind
(`gptlab.sweep.kinds.scale_keys`: `Results.scale`). Each step's module is imported when the report runs that step.
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from gptlab.kinds.scale.spec import KEY
from gptlab.report.kinds import REPORT_KINDS, KindSection, ReportKind


@REPORT_KINDS.register(KEY)
class ScaleReport(ReportKind):
    """`scale:`'s side: the effects by scale and their changes, their words, figure and section."""

    def tables(self, res: Any, tables: Any) -> Any:
        from gptlab.kinds.scale.tables import scale_view

        return scale_view(res, tables.loss_left)

    def per_level(self, res: Any, tables: Any) -> pd.DataFrame:
        return tables.kinds[KEY].by_scale

    def files(self, tables: Any) -> Mapping[str, pd.DataFrame]:
        view = tables.kinds[KEY]
        return {"effects_by_scale": view.by_scale, "effect_changes": view.changes} if view.has_scale else {}

    def scorecard(self, res: Any, tables: Any, card: pd.DataFrame) -> pd.DataFrame:
        from gptlab.kinds.scale.tables import with_transfer

        return with_transfer(res, card, tables.kinds[KEY].changes) if len(card) else card

    def sentences(self, res: Any, tables: Any) -> Any:
        from gptlab.kinds.scale.sentences import ScaleWords, change_verdicts, scale_verdicts

        view = tables.kinds[KEY]
        return ScaleWords(scale=scale_verdicts(view.by_scale, res), changes=change_verdicts(view.changes, res))

    def seeds_only(self, res: Any) -> list[str]:
        from gptlab.report.tables.scale import unpaired_scale

        paired = res.scale and not all(unpaired_scale(res, s) for s in res.scale)
        return ["the paired changes of effect_changes.csv"] if paired else []

    def figures(self, res: Any, tables: Any) -> Mapping[str, bytes | None]:
        from gptlab.kinds.scale.figure import effects_by_scale

        view = tables.kinds[KEY]
        return {"effects_by_scale": effects_by_scale(view.by_scale, res) if len(view.by_scale) else None}

    def section(self, res: Any, tables: Any, words: Any, figures: Any) -> KindSection:
        from gptlab.kinds.scale.section import scale_section

        return KindSection(blocks=tuple(scale_section(res, tables, words, figures)), after="cells")
