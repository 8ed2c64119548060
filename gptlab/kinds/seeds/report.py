"""`AdaptiveReport`: the report's hooks of adaptive seeds (`gptlab.report.kinds.ReportKind`): the rounds' section."""
from __future__ import annotations

from typing import Any

from gptlab.report.kinds import KindSection, ReportKind


class AdaptiveReport(ReportKind):
    """Adaptive seeds' side (`seeds:`'s rule): its rounds, after the scorecard; its tables and figure are the report's
    own (`ReportTables.adaptive`), since the effects' error model reads round 1 too."""

    def section(self, res: Any, tables: Any, words: Any, figures: Any) -> KindSection:
        from gptlab.report.document.sections import adaptive_section

        return KindSection(blocks=tuple(adaptive_section(tables.adaptive, words, figures)), after="scorecard")
