"""`TuneReport`: the report's hooks of `tune:` (`gptlab.report.kinds.ReportKind`): the tuned comparison."""
from __future__ import annotations

from typing import Any

from gptlab.report.kinds import KindSection, ReportKind


class TuneReport(ReportKind):
    """`tune:`'s side: the tuned comparison (or the settings given per cell), after the effects; its tables and figure
    are the report's own (`ReportTables.tuned`), since every effect's check reads them."""

    def section(self, res: Any, tables: Any, words: Any, figures: Any) -> KindSection:
        from gptlab.report.document.sections import tuning_section

        return KindSection(blocks=tuple(tuning_section(tables.tuned, res, words, figures, tables.given)),
                           after="effects")
