"""`ScaleReport`: the report's hooks of `scale:` (`gptlab.report.kinds.ReportKind`): the effects by scale."""
from __future__ import annotations

from typing import Any

from gptlab.report.kinds import KindSection, ReportKind


class ScaleReport(ReportKind):
    """`scale:`'s side: the effects by scale, after the cells; its tables and figure are the report's own
    (`ReportTables.by_scale`), since the scorecard and the effects read them."""

    def section(self, res: Any, tables: Any, words: Any, figures: Any) -> KindSection:
        from gptlab.report.document.sections import scale_section

        return KindSection(blocks=tuple(scale_section(res, tables, words, figures)), after="cells")
