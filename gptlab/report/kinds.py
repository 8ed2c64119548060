"""The report's side of a kind of sweep (`gptlab.sweep.kinds`): its section, tables and figures; `REPORT_KINDS`.

A kind registered here under the name of its YAML key writes, from the report's bundles, one
`document.blocks.KindSection`: blocks placed after the part of the report it names (the summary, the
scorecard, the cells, the effects), and tables and figures written beside the report's own. The shipped
`seeds` (the adaptive rule), `scale`, `tune` and `worth` are registered here, in the registry's own module; a
plugin's kind registers its report side with `@REPORT_KINDS.register("key")` in the same file that registers
its sweep side, which the report's load step imports from sweep.yaml. A kind without a report side adds
nothing to the report.
"""
from __future__ import annotations

from typing import Mapping, Protocol

from gptlab.errors import GptlabError
from gptlab.registry import Registry
from gptlab.report.document.blocks import PLACES, KindSection
from gptlab.report.document.sections import adaptive_section, scale_section, tuning_section
from gptlab.report.document.worth import WorthReport
from gptlab.report.figures import Figures
from gptlab.report.load import Results
from gptlab.report.sentences import Sentences
from gptlab.report.tables import ReportTables


class ReportKind(Protocol):
    """The report's hook of a kind of sweep."""

    def section(self, res: Results, tables: ReportTables, words: Sentences, figures: Figures) -> KindSection:
        """The kind's section of the report of `res` (which holds its checked section: `res.spec.kinds[key]`)."""
        ...


class AdaptiveReport:
    """Adaptive seeds' side (`seeds:`'s rule): its rounds, after the scorecard; its tables and figure are the report's
    own (`ReportTables.adaptive`), since the effects' error model reads round 1 too."""

    def section(self, res: Results, tables: ReportTables, words: Sentences, figures: Figures) -> KindSection:
        return KindSection(blocks=tuple(adaptive_section(tables.adaptive, words, figures)), after="scorecard")


class ScaleReport:
    """`scale:`'s side: the effects by scale, after the cells; its tables and figure are the report's own
    (`ReportTables.by_scale`), since the scorecard and the effects read them."""

    def section(self, res: Results, tables: ReportTables, words: Sentences, figures: Figures) -> KindSection:
        return KindSection(blocks=tuple(scale_section(res, tables, words, figures)), after="cells")


class TuneReport:
    """`tune:`'s side: the tuned comparison (or the settings given per cell), after the effects; its tables and figure
    are the report's own (`ReportTables.tuned`), since every effect's check reads them."""

    def section(self, res: Results, tables: ReportTables, words: Sentences, figures: Figures) -> KindSection:
        return KindSection(blocks=tuple(tuning_section(tables.tuned, res, words, figures, tables.given)), after="effects")


REPORT_KINDS: Registry[type[ReportKind]] = Registry("report kind", "The report sections of the sweep kinds' keys")
# The shipped kinds' report sides, under their keys' names; a plugin's registers itself.
REPORT_KINDS.register("seeds")(AdaptiveReport)
REPORT_KINDS.register("scale")(ScaleReport)
REPORT_KINDS.register("tune")(TuneReport)
REPORT_KINDS.register("worth")(WorthReport)


def kind_sections(res: Results, tables: ReportTables, words: Sentences, figures: Figures,
                  taken: Mapping[str, object] = {}) -> list[KindSection]:
    """The sections of the kinds `res`'s sweep used, in its order; a table or figure whose file is in `taken` (the
    report's own files) or another kind's is refused."""
    sections, names = [], set(taken)
    for key in res.spec.kinds:
        if key not in REPORT_KINDS:
            continue
        section = REPORT_KINDS.get(key)().section(res, tables, words, figures)
        if section.after not in PLACES:
            raise GptlabError(f"report kind {key!r}: its section's place {section.after!r} is not one of {', '.join(PLACES)}")
        clash = sorted(names & {*section.tables, *section.figures})
        if clash:
            raise GptlabError(f"report kind {key!r}: its file(s) {', '.join(clash)} are already the report's; name "
                              "them otherwise")
        names |= {*section.tables, *section.figures}
        sections.append(section)
    return sections
