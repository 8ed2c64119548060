"""The report's section of adaptive seeds: the stopping rule, each round, and whether each called effect reached the
target (after an arms sweep's scorecard, else after the summary's place for it).

Its numbers are the kind's (`tables.AdaptiveView`), its sentences the kind's (`sentences.AdaptiveWords`), its
figure the kind's (`figures/precision.png`).
"""
from __future__ import annotations

from gptlab.kinds.seeds.sentences import AdaptiveWords
from gptlab.kinds.seeds.stages import KEY
from gptlab.kinds.seeds.tables import AdaptiveView
from gptlab.report.document.blocks import Block, Heading, Para, image
from gptlab.report.document.sections import table_blocks
from gptlab.report.figures import Figures
from gptlab.report.sentences import Sentences
from gptlab.report.tables import ReportTables

FIGURE_ALT = "Half-width of each called effect against seeds per cell"


def adaptive_section(tables: ReportTables, words: Sentences, figures: Figures) -> list[Block]:
    """Adaptive sweeps: the stopping rule, each round, and whether each called effect reached the target."""
    view: AdaptiveView | None = tables.kinds.get(KEY)
    if view is None:
        return []
    said: AdaptiveWords = words.kinds[KEY]
    blocks: list[Block] = [Heading("Seeds: adaptive rounds"), Para(said.rule)]
    if view.rounds.empty:
        return blocks + [Para("No round has finished yet (results/NAME/rounds.csv is missing).")]
    blocks += [Para("Rounds (`rounds.csv`): seeds per cell after the round, runs the round added, and the widest "
                    "95% half-width among the called effects, with round 1's variance.")]
    blocks += table_blocks(view.rounds, list(view.rounds.columns), "rounds.csv", "rounds")
    outcomes = view.outcomes
    if len(outcomes):
        blocks.append(Para(f"{said.precision_reached} Table: `tables/precision.csv`."))
        blocks += table_blocks(outcomes, list(outcomes.columns), "precision.csv", "effects")
    return blocks + image(figures.kinds.get(KEY, {}).get("precision"), FIGURE_ALT)
