"""The report's ladder section, before the summary (the answer first): does each arm's effect hold up the ladder?
Its trends, each prediction beside its measurement, the ranking's agreement, every rung's effects and each arm's
pick per rung; the rest of the report is the top rung's. Its numbers are the kind's (`tables.LadderView`), its
words `sentences`'."""
from __future__ import annotations

from gptlab.kinds.ladder.sentences import LadderWords
from gptlab.kinds.ladder.spec import KEY
from gptlab.kinds.ladder.tables import LadderView
from gptlab.report.document.blocks import Block, Bullets, Heading, Para, image
from gptlab.report.document.sections import table_blocks
from gptlab.report.figures import Figures
from gptlab.report.load import Results
from gptlab.report.sentences import Sentences
from gptlab.report.tables import ReportTables

RUNG_MD_COLS = ["rung", "arm", "estimate", "ci_low", "ci_high", "call", "tuning", "pick"]
TREND_MD_COLS = ["arm", "rungs", "slope", "slope_low", "slope_high", "trend"]
PREDICTION_MD_COLS = ["rung", "arm", "predicted", "pred_low", "pred_high", "measured", "measured_low", "measured_high",
                      "covered"]


def _cols(columns: list[str], table) -> list[str]:
    """The page's columns of a ladder table, with its `quantity` after `arm` where it holds more than the effects."""
    if "quantity" not in table or table["quantity"].nunique() < 2:
        return columns
    at = columns.index("arm") + 1
    return [*columns[:at], "quantity", *columns[at:]]


def ladder_section(res: Results, tables: ReportTables, words: Sentences, figures: Figures) -> list[Block]:
    view: LadderView = tables.kinds[KEY]
    said: LadderWords = words.kinds[KEY]
    ladder, files = res.spec.kinds[KEY], view.files()
    blocks: list[Block] = [Heading("Does it hold at scale?"), Bullets(list(said.arms)), Para(  # the answer, then how
        f"A compute ladder of {len(ladder.rungs)} rungs: " + "; ".join(ladder.describe()) + ". Every arm was tuned "
        "and estimated at every rung, each rung on its own (its own seeds, lr curves and calls); each upper rung's lr "
        "grid started from the picks of the rung below. An arm's trend is its effect against log2 compute (weighted "
        "least squares over the rungs, 95% CI of the slope per doubling, widened by how far the arms together miss "
        "their lines beyond their rungs' SEs): `grows` or `shrinks` where the CI excludes "
        f"0, `holds` where the 90% CI lies inside +/- {view.margin:g} {view.unit} per doubling, else `inconclusive`; "
        "only within the rungs' compute, never extrapolated."
        + (f" A ratio (an arm's worth in the baseline's steps) is trended on its natural log: it `holds` where that "
           f"slope's 90% CI lies inside +/- log(1 + {view.ratio_margin:g}) per doubling, and `grows` or `shrinks` "
           "as its distance from 1 does." if files["trends"]["ratio"].astype(bool).any() else "")
        + " Tables: `tables/trends.csv`, `tables/rung_effects.csv`.")]
    blocks += table_blocks(files["trends"], _cols(TREND_MD_COLS, files["trends"]), "trends.csv", "arms")
    blocks += image(figures.kinds.get(KEY, {}).get("ladder"), "Each arm's effect with its 95% CI at every rung, "
                    "against the rung's training compute (log scale)")
    blocks += [Heading("Predicted before it trained", 3), Para(
        "Before a rung trained, the sweep wrote what the rungs below predict it will measure (`predictions.csv` of "
        "the results folder, never rewritten): each arm's trend at the rung's compute, with a 95% interval for its "
        "measured effect (the line's error and a measurement's, taken as the rung below's SE, both widened by the "
        "arms' scatter about their lines where three rungs or more lie below; calibrated by simulation, "
        "docs/STATISTICS.md: 0.945-0.971 where the trend is a line in log compute, 0.920-0.927 where each rung "
        "also scatters off it by an SD of 0.02-0.04 that no SE counts, 0.850-0.936 where it bends; from two rungs "
        "below no scatter can be counted, and that scatter leaves 0.525-0.774). The sweep measures a rung from its "
        "runs that trained; the report's measurement below also counts a diverged estimation run. Table: "
        "`tables/predictions.csv`."),
        Bullets(list(said.predictions))]
    blocks += table_blocks(files["predictions"], _cols(PREDICTION_MD_COLS, files["predictions"]), "predictions.csv",
                           "predictions")
    blocks += [Heading("The ranking, and each arm's pick", 3), Bullets([*said.ranks, *said.picks])]
    blocks += table_blocks(files["rung_effects"], _cols(RUNG_MD_COLS, files["rung_effects"]), "rung_effects.csv", "rows")
    blocks.append(Para(f"The rest of this report, from its summary on, is rung {view.top}'s alone (the top rung "
                       "measured): its runs, tuning, effects and calls."))
    return blocks
