"""The report's side of a kind of sweep (`gptlab.sweep.kinds`): `ReportKind`, its hooks, and `REPORT_KINDS`.

A kind registered here under the name of its YAML key takes part in every step of the report through hooks whose
defaults add nothing, so it overrides only what it adds: `scope` (the part of results/NAME/ the report is about: a
ladder's top rung) and `load` (what it reads beyond the report's own, in the load step: `Results.kinds[key]`),
`before_effects` and `tables` (its numbers: `ReportTables.kinds[key]`)
and `files` (its `tables/NAME.csv`), `sentences` (`Sentences.kinds[key]`), `figures` (its `figures/NAME.png`:
`Figures.kinds[key]`), and `section`: one `KindSection`, blocks placed after the part of the report it names (the
summary, the scorecard, the cells, the effects). Where the report's own numbers or sentences take a kind's (the
tuning check of every call, an arms sweep's table and scorecard, what would decide an effect, the stability table,
the summary's warnings, the error model, the header's seeds), they ask every kind through a hook (`loss_left`,
`per_level`, `picks`, `scorecard`, `to_decide`, `setting_keys`, `tunes`, `warnings`, `scorecard_lines`,
`seeds_only`, `header_seeds`, and `arm_quantities`: a ladder's numbers of an arm beside its effect), never a kind
by name: a kind reads its own entry of each bundle by its key, and another kind's only through such a hook.

The shipped kinds (`gptlab.kinds`) and a plugin's (`@REPORT_KINDS.register("key")`, in the file that registers
its sweep side) are built the same way; the load step imports them with the sweep's spec. A kind without a
report side adds nothing to the report.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from gptlab.errors import GptlabError
from gptlab.registry import Registry

# where a kind's section may stand: after the answer, after an arms sweep's scorecard, after the cells (and their
# curves), or after the effects' sections
PLACES = ("header", "summary", "scorecard", "cells", "effects")  # "header": before the summary, the answer first


@dataclass(frozen=True)
class KindSection:
    """What a kind of sweep adds to the report's document (its `section` hook's)."""

    blocks: tuple[Any, ...]  # its section: blocks of `document.blocks` (`Heading`, `Para`, `Table`, ...)
    after: str = "summary"  # the part of the report it follows: one of PLACES
    tables: Mapping[str, Any] = field(default_factory=dict)  # tables/NAME.csv (DataFrames), beside the report's own
    figures: Mapping[str, bytes] = field(default_factory=dict)  # figures/NAME (PNG bytes), beside the report's own
    scorecard_caption: tuple[str, ...] = ()  # paragraphs above an arms sweep's scorecard: the kind's columns of it
    scorecard_columns: tuple[str, ...] = ()  # its columns of the scorecard the page shows, after `call`


@dataclass(frozen=True)
class ArmQuantity:
    """One number a kind measures of an arm beside its effect (`ReportKind.arm_quantities`): a ladder takes each
    up its rungs, with its trend and its prediction, as it takes the effect."""

    arm: str
    quantity: str  # its name (e.g. "worth"): predictions.csv's and trends.csv's `quantity`
    estimate: float
    ci_low: float  # its 95% CI (finite: a censored or open-ended estimate is not given)
    ci_high: float
    df: float  # the CI's degrees of freedom
    ratio: bool  # a ratio (its trend is fitted on its log, at `ladder.ratio_margin`), else a difference


class ReportKind:
    """The report's hooks of a kind of sweep; each has a default that adds nothing. The bundles are passed whole
    (`Results`, `tables.ReportTables`, `sentences.Sentences`, `figures.Figures`); the kind reads its own entry of
    each (`.kinds[key]`) under the key it is registered by."""

    def scope(self, spec: Any, results_dir: Any, runs: Any) -> tuple[Any, Any] | None:
        """Where the report of the whole folder is about one part of it (a ladder's top rung: the other rungs are the
        kind's own section's): the spec and the folder (`ResultsDir.at_rung`) the load step reads instead, from the
        sweep's `spec` and summary.csv's rows (`runs`, text); None for the whole folder."""
        return None

    def load(self, res: Any) -> Any:
        """The load step: what the kind reads of results/NAME/ beyond `res` (`Results.kinds[key]`); None for nothing.
        The one hook that reads files."""
        return None

    def before_effects(self, res: Any) -> Any:
        """The kind's numbers the effects need before they are computed (`tune:`'s picks and lr curves), which
        `ReportTables.kinds[key]` holds until its `tables` hook replaces them; None for none."""
        return None

    def loss_left(self, res: Any, numbers: Any) -> Mapping[tuple[str, ...], tuple[float, ...]] | None:
        """From its `before_effects` numbers: each cell's loss its tuned setting may leave on the table (estimate,
        upper end of its 95% CI, df; keys the cells' levels in `res.factors` order), which every call is checked
        against (`stats.robustness`); None where the kind tunes nothing."""
        return None

    def tables(self, res: Any, tables: Any) -> Any:
        """The kind's numbers (`ReportTables.kinds[key]`), from `res` and the report's effects (`tables`: its arms,
        scorecard and `to_decide` not yet made; in `tables.kinds` the kinds before this one, and this one's and the
        later ones' `before_effects` numbers)."""
        return None

    def per_level(self, res: Any, tables: Any) -> Any:
        """The effects at each level of the scale factors (a DataFrame: `factor`, `level`, `baseline`, `scale_factor`,
        `scale_level`, then effects.csv's columns), which an arms sweep's table takes per level; None where the kind
        has none."""
        return None

    def picks(self, res: Any, tables: Any) -> Mapping[tuple[str, ...], str] | None:
        """Each estimation cell's setting as text ("lr=0.004"), keyed by its levels (arm, scale levels), which an arms
        sweep's table shows as `pick`; None where the kind chose none."""
        return None

    def to_decide(self, res: Any, tables: Any, cell: str) -> Mapping[str, Any]:
        """What would decide an effect whose call depends on the picks, from its tuning `cell` (to_decide.csv's
        `open_side`, `try_lr`, `loss_left_high`); nothing where the kind has none."""
        return {}

    def setting_keys(self, res: Any) -> list[str]:
        """The keys of the settings the kind tried its runs at (a tuned sweep's `tune.space`), which summary.csv holds
        and the stability table splits runs by."""
        return []

    def tunes(self, res: Any) -> bool:
        """Whether the kind chose each cell's nuisance settings (tuned or given): then no note says they are fixed."""
        return False

    def files(self, tables: Any) -> Mapping[str, Any]:
        """The kind's tables the report writes (`tables/NAME.csv`, by NAME), from its numbers in `tables.kinds`."""
        return {}

    def scorecard(self, res: Any, tables: Any, card: Any) -> Any:
        """An arms sweep's scorecard (`tables/scorecard.csv`, a DataFrame) with the kind's columns added."""
        return card

    def arm_quantities(self, res: Any, tables: Any) -> list[ArmQuantity]:
        """Each arm's numbers of the kind beside its effect that a ladder follows up its rungs (`worth:`'s
        multiplier), from the kind's tables; none by default."""
        return []

    def sentences(self, res: Any, tables: Any) -> Any:
        """The kind's sentences (`Sentences.kinds[key]`), from its numbers."""
        return None

    def seeds_only(self, res: Any) -> list[str]:
        """What of the kind's numbers counts the seeds alone, not the text (the error model's sentence lists them)."""
        return []

    def header_seeds(self, res: Any) -> str | None:
        """The report header's seeds, where the kind decided them (adaptive seeds: those trained, and the rule); None:
        the sweep's `seeds:`."""
        return None

    def warnings(self, res: Any, tables: Any) -> list[str]:
        """Warnings the kind adds to the summary's, after the design's (the picks on the edge of the tuned space)."""
        return []

    def scorecard_lines(self, res: Any, tables: Any, lines: list[str]) -> list[str]:
        """The scorecard's lines (one per row of `tables.scorecard`) as the kind words them."""
        return lines

    def figures(self, res: Any, tables: Any) -> Mapping[str, bytes | None]:
        """The kind's figures by name (`figures/NAME.png`; a None PNG: none), from its numbers."""
        return {}

    def section(self, res: Any, tables: Any, words: Any, figures: Any) -> KindSection:
        """The kind's section of the report of `res` (which holds its checked section: `res.spec.kinds[key]`)."""
        return KindSection(blocks=())


REPORT_KINDS: Registry[type[ReportKind]] = Registry("report kind", "The report sides of the sweep kinds' keys")


def report_kinds(spec: Any) -> Iterator[tuple[str, ReportKind]]:
    """The report sides of the kinds `spec` uses (`SweepSpec.kinds`), in its order, each as (key, hooks); none for
    results read without a spec."""
    for key in getattr(spec, "kinds", {}):
        if key not in REPORT_KINDS:
            continue
        kind = REPORT_KINDS.get(key)
        if not (isinstance(kind, type) and issubclass(kind, ReportKind)):
            raise GptlabError(f"report kind {key!r}: register a subclass of gptlab.report.kinds.ReportKind, got {kind!r}")
        yield key, kind()


def arm_quantities(res: Any, tables: Any) -> list[ArmQuantity]:
    """Every kind's `arm_quantities` of the report of `res`, in the kinds' order."""
    return [q for _, kind in report_kinds(res.spec) for q in kind.arm_quantities(res, tables)]


def measures_quantities(spec: Any) -> bool:
    """Whether a kind of `spec` gives arm quantities (overrides `ReportKind.arm_quantities`): only then is a report's
    table worth computing for them."""
    return any(type(kind).arm_quantities is not ReportKind.arm_quantities for _, kind in report_kinds(spec))


def kind_sections(res: Any, tables: Any, words: Any, figures: Any, taken: Mapping[str, object] = {}) -> list[KindSection]:
    """The sections of the kinds `res`'s sweep used, in its order; a table or figure whose file is in `taken` (the
    report's own files, the kinds' included) or another kind's section's is refused."""
    sections, names = [], set(taken)
    for key, kind in report_kinds(res.spec):
        section = kind.section(res, tables, words, figures)
        if section.after not in PLACES:
            raise GptlabError(f"report kind {key!r}: its section's place {section.after!r} is not one of {', '.join(PLACES)}")
        clash = sorted(names & {*section.tables, *section.figures})
        if clash:
            raise GptlabError(f"report kind {key!r}: its file(s) {', '.join(clash)} are already the report's; name "
                              "them otherwise")
        names |= {*section.tables, *section.figures}
        sections.append(section)
    return sections
