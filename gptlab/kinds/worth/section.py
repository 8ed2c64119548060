"""The report's worth section: each arm in the baseline's training steps and wall time (a `worth:` study only).

Owns the section's layout and captions: the table of `tables/worth.csv`'s compact columns, the figure of
the baseline's loss against length with each arm placed on it, the lines of `sentences` (one per arm,
then how the curve was trained, the schedule it shares or not with the arms, the machine of the times),
and the re-tune; and the caption of the kind's columns of the scorecard (`SCORECARD_CAPTION`). The document
puts it after the summary; a sweep without `worth:` gets nothing here.
"""
from __future__ import annotations

from gptlab.kinds.worth.sentences import WorthWords
from gptlab.kinds.worth.spec import KEY
from gptlab.report.document.blocks import Block, Bullets, Heading, Para, image
from gptlab.report.document.sections import table_blocks
from gptlab.report.figures import Figures
from gptlab.report.load import Results
from gptlab.report.sentences import Sentences
from gptlab.report.tables import ReportTables

WORTH_MD_COLS = ["arm", "scale_level", "worth", "step_cost", "step_cost_low", "step_cost_high", "wall_worth",
                 "retuned_worth"]
RETUNE_MD_COLS = ["scale_level", "length", "steps", "pick_lr", "factors", "best_factor", "gap", "threshold", "verdict"]
FIGURE_ALT = ("The baseline's loss against its training steps (log2; faint: each seed's runs; dots: the means; line: "
              "the curve), each arm placed at the steps that match its loss with its 95% CI as a horizontal bar "
              "(open markers with an arrow: beyond the lengths trained)")
SCORECARD_CAPTION = ("`worth`: the baseline's training steps that match the arm, as a multiple of the study's (95% CI; "
                     "the worth section above). A claim about speed is judged on the arm's time per step over the "
                     "baseline's: `holds` when its 95% CI lies on the claimed side of 1.")


def worth_section(res: Results, tables: ReportTables, words: Sentences, figures: Figures) -> list[Block]:
    """The section; where the sweep has `worth:` but none of its runs, the heading and the sentence why (a section
    dropped without a word read as a study that never asked); nothing for a sweep without `worth:`."""
    view, said = tables.kinds.get(KEY), words.kinds.get(KEY) or WorthWords()
    if view is None:
        return [Heading("What each arm is worth"), *(Para(note) for note in said.notes)] if said.notes else []
    blocks: list[Block] = [Heading("What each arm is worth"), Para(
        "Each arm in the baseline's training steps: `worth` is how many times the study's steps the baseline needs "
        "to match the arm's loss (95% CI; `beyond`/`below`: outside the lengths trained, not extrapolated); "
        "`step_cost` the arm's time per step over the baseline's (95% CI); `wall_worth` the multiplier in wall "
        "time (the step multiplier over the step cost); `retuned_worth` the multiplier again with the curve's ends "
        "at the baseline's re-tuned loss. Tables: `tables/worth.csv` (every number, with the CIs' ends and "
        "their df), `tables/worth_retune.csv`.")]
    blocks += table_blocks(view.table, WORTH_MD_COLS, "worth.csv", "arms")
    blocks += image(figures.kinds.get(KEY, {}).get("worth"), FIGURE_ALT)
    blocks += [Bullets(list(said.lines))] if said.lines else []
    blocks += [Para(note) for note in said.notes]
    if len(view.retune):
        blocks += [Para("The re-tune (`tables/worth_retune.csv`): the baseline at lr factors around its pick, at the "
                        "shortest and the longest length, on its tuning seed."),
                   *table_blocks(view.retune, RETUNE_MD_COLS, "worth_retune.csv", "lengths"),
                   Bullets(list(said.retune))]
    return blocks
