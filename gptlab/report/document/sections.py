"""The report's sections on effects, training and the kinds of sweep: blocks from the tables and the sentences.

Owns the layout and captions of the sections between the cells table and the throughput: design and
model, main effects, interactions, higher-order terms, cells against the baseline, aliases, simple
effects (an arms sweep: its arms against the baseline, and its scorecard, with each kind's columns of it),
effects over training, divergence, and the tuned sweep's section; every other kind's section is its own.
Every number comes from `tables.ReportTables`, every sentence about the results from `sentences`;
`document` puts these sections in order with the rest.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from gptlab.report.document.blocks import Block, Bullets, Heading, Para, Table, image
from gptlab.report.figures import Figures
from gptlab.report.kinds import KindSection
from gptlab.report.load import Results
from gptlab.report.sentences import Sentences
from gptlab.report.sentences.overview import too_long
from gptlab.report.sentences.verdicts import with_call_phrases
from gptlab.report.tables import ReportTables

EFFECT_COLS = ["estimate", "ci_low", "ci_high", "p_value", "p_adjusted", "call", "text_share"]  # text_share: with blocks
MAIN_MD_COLS = ["factor", "level", "baseline"] + EFFECT_COLS + ["mde80", "seeds_needed", "n_ok", "n_ok_baseline",
                                                                "n_diverged", "n_failed"]
INT_MD_COLS = ["factor_a", "level_a", "factor_b", "level_b"] + EFFECT_COLS
MAX_MD_ROWS = 40  # longer tables are summarised in the text and kept whole in tables/*.csv
# Said next to every effect along training (the summary's bullets, the section, its figure): readers take a
# step-s effect for the effect of training s steps, which the schedule makes it not.
# Said under every table whose 95% CI sits beside a Holm-adjusted call (docs/STATISTICS.md, "Calls").
CI_NOTE = ("`ci_low`/`ci_high`: the effect's own 95% CI, unadjusted; `call`: from the Holm-adjusted p (`p_adjusted`), "
           "so an inconclusive effect's CI can exclude zero.")
SNAPSHOT = ("Effects at a step are snapshots of the runs taken mid-schedule, not the results of shorter runs: until "
            "its schedule ends (cosine: its decay, `train.lr_decay_iters`, by default the last step; wsd: its "
            "cooldown over the last steps) a run's learning rate is higher than that of a run stopped at that step, "
            "so an effect at step s is not the effect of training for s steps.")


# On the page a count of runs that failed to train says so: the CSVs' `n_diverged` (docs/CONTRACTS.md) counts the
# diverged, collapsed and unstable runs together, while the stability table's `n_diverged` counts divergences alone.
SHOWN_AS = {"n_diverged": "n_not_trained"}


def table_blocks(df: pd.DataFrame, cols: list[str], csv: str, what: str) -> list[Block]:
    """A table in the report, or a pointer to its CSV when it is long."""
    if len(df) <= MAX_MD_ROWS:
        return [Table(df[[c for c in cols if c in df.columns]].rename(columns=SHOWN_AS))]
    return [Para(too_long(df, what, csv))]


# The page's `call` column keeps the direction through the tuning check (`call_phrase`), so no `tuning` column
ARMS_MD_COLS = ["arm", "scale_level", "pick"] + EFFECT_COLS + ["n_ok", "n_ok_baseline", "n_diverged", "n_failed"]
SCORECARD_MD_COLS = ["arm", "scale_level", "source", "direction", "size", "untuned_estimate", "estimate", "ci_low",
                     "ci_high", "call", "verdict"]  # and after `call` each kind's (`KindSection.scorecard_columns`)


def scorecard_section(res: Results, tables: ReportTables, words: Sentences,
                      kinds: Sequence[KindSection] = ()) -> list[Block]:
    """An arms sweep's scorecard: each arm's claim beside its untuned and tuned effects, and the verdict; each kind's
    columns of it after `call`, with its paragraphs on them above the table (`kinds`: the kinds' sections)."""
    card = tables.scorecard
    if not len(card.columns):
        return []
    untuned = next((s for s in card["untuned_setting"] if s), "") if len(card) else ""
    blocks: list[Block] = [Heading("Scorecard"), Para(
        f"Each arm's claim, as its paper states it (`direction`: the arm against the baseline as claimed; `size`: "
        f"the paper's own number, where it gives one), beside the lab's effect of the arm ({res.outcome_label}, "
        f"{res.unit}, arm minus baseline)" + (f" at the untuned {untuned} (`untuned_estimate`: the selection runs "
                                               "there, one run per arm: no CI)" if untuned else "")
        + " and at each arm's own tuned setting (`estimate`, 95% CI, call after the tuning check), and the verdict: "
        "the legend under the table defines each word, docs/STATISTICS.md says more. Table: `tables/scorecard.csv` "
        "(with each claim's words and setting).")]
    blocks += [Para(text) for kind in kinds for text in kind.scorecard_caption]
    at = SCORECARD_MD_COLS.index("call") + 1
    cols = [*SCORECARD_MD_COLS[:at], *(c for kind in kinds for c in kind.scorecard_columns), *SCORECARD_MD_COLS[at:]]
    blocks += table_blocks(with_call_phrases(card), cols, "scorecard.csv", "claims")
    blocks += [Para(words.scorecard_legend)] if words.scorecard_legend else []
    blocks += [Bullets(list(words.scorecard))] if words.scorecard else []
    quoted = [f"{r['arm']}: {r['source']}" + (f" ({r['setting']})" if r["setting"] else "") + f": \"{r['claim']}\""
              for r in card.drop_duplicates(subset=["arm", "source", "claim"]).to_dict("records") if r["source"]]
    if quoted:
        blocks += [Para("The claims, in the papers' words:"), Bullets(quoted)]
    return blocks


def arms_section(res: Results, tables: ReportTables, words: Sentences, figs: Figures) -> list[Block]:
    """An arms sweep's comparisons: each arm against the baseline, with the forest plot."""
    arms = tables.arms
    blocks: list[Block] = [Heading("Design and model"), Bullets(words.notes + words.schedule
                                                                + [f"Warning: {w}" for w in words.warnings])]
    blocks += [Heading("Arms against the baseline"), Para(
        f"Each arm minus the baseline arm in {res.outcome_label} ({res.unit}; positive = worse), one Holm family "
        + ("per scale level" if res.scale else "over every arm") + ". A design of arms has no main effects or "
        "interactions: each arm changes its own settings from the baseline's. The baseline enters every comparison, "
        f"so it trains about sqrt(k) times an arm's seeds for k arms (Dunnett's square-root rule){words.allocation}, "
        "and the model has no seed block (the baseline's extra seeds have no partner). `pick`: each arm's tuned "
        f"setting. {CI_NOTE} Table: `tables/arms.csv`.")]
    blocks += table_blocks(with_call_phrases(arms), ARMS_MD_COLS, "arms.csv", "arms")
    blocks += [Para(words.arms_legend)] if words.arms_legend else []
    blocks += [Bullets(list(words.arms))] if words.arms else []
    return blocks  # the forest plot of the arms leads the report, in its summary


def effects_sections(res: Results, tables: ReportTables, words: Sentences, figs: Figures) -> list[Block]:
    """Main effects, interactions, higher-order terms, simple effects / cells against the baseline."""
    if len(tables.arms.columns):
        return arms_section(res, tables, words, figs)
    blocks: list[Block] = [Heading("Design and model"), Bullets(words.notes + words.schedule
                                                                + [f"Warning: {w}" for w in words.warnings])]
    blocks += [Heading("Main effects")]  # the forest plot of every effect leads the report, in its summary
    if len(tables.main):
        what = ("averaged over every combination of the other factors (equal weights)" if tables.factorial else
                "against the baseline cell, from the cell that differs from it in that factor alone")
        blocks += [Para(f"Difference in {res.outcome_label} ({res.unit}) between each level and the baseline level of "
                        f"its factor, {what}; positive = worse. {CI_NOTE} Table: `tables/main_effects.csv`.")]
        blocks += table_blocks(tables.main, MAIN_MD_COLS, "main_effects.csv", "main effects")
        blocks += _not_in_summary(words.main, words)
    else:
        blocks.append(Para("No main effects to estimate."))
    blocks += image(figs.level_effects, "Best val loss per level of each factor")
    blocks += [Heading("Interactions")]
    if len(tables.interactions):
        blocks += [Para(f"Two-way interaction contrast ({res.unit}): how much worse (positive) or better (negative) "
                        "the combination is than the sum of the two separate effects"
                        + (", averaged over the other factors. " if tables.factorial else
                           ", at the baseline of the other factors; aliased where the cells cannot separate it. ")
                        + f"{CI_NOTE} Table: `tables/interactions.csv`.")]
        blocks += table_blocks(tables.interactions, INT_MD_COLS + ["alias"], "interactions.csv", "interaction contrasts")
        blocks += _not_in_summary(words.interactions, words) if len(tables.interactions) <= MAX_MD_ROWS else []
    else:
        blocks.append(Para("No pair of factors with two or more levels: no interactions."))
    blocks += image(figs.interactions, "Interaction plots: marginal means with 95% CIs")
    if len(tables.higher):
        blocks += [Heading("Higher-order interactions"),
                   Para("k-th order differences of k factors' changes (averaged over the other factors). "
                        "Table: `tables/higher_order.csv`.")]
        blocks += table_blocks(tables.higher, ["term", "order"] + EFFECT_COLS, "higher_order.csv", "higher-order contrasts")
    if len(tables.cells_vs_baseline):
        blocks += [Heading("Cells against the baseline cell"),
                   Para(f"Each cell minus the baseline cell ({res.unit}). Table: `tables/cells_vs_baseline.csv`.")]
        blocks += table_blocks(tables.cells_vs_baseline, ["cell"] + EFFECT_COLS, "cells_vs_baseline.csv", "cells")
    if len(tables.aliases):
        blocks += [Heading("Aliased terms"),
                   Para("These terms cannot be separated by the cells of this design: only their sum is "
                        "estimable (the cell with all the changes against the baseline, minus its estimable "
                        "terms). Table: `tables/aliases.csv`."),
                   Table(tables.aliases[[c for c in ["aliased"] + EFFECT_COLS if c in tables.aliases]])]
    if tables.simple_apart:  # one factor: its simple effects are its main effects, shown above
        blocks += [Heading("Simple effects"),
                   Para("Each level against its baseline at every combination of the other factors. "
                        "Table: `tables/simple_effects.csv`.")]
        blocks += table_blocks(tables.simple, ["factor", "level", "baseline", "at"] + EFFECT_COLS, "simple_effects.csv",
                         "simple effects")
        blocks += image(figs.simple_effects, "Simple effects with 95% CIs")
    return blocks


def _not_in_summary(lines: list[str], words: Sentences) -> list[Block]:
    """The verdicts of a section that its Summary does not already give (nothing is printed twice), as bullets;
    with a pointer when the Summary holds some of them."""
    said = set(words.called)
    rest = [line for line in lines if line not in said]
    shown = [Bullets(rest)] if rest else []
    return shown + ([Para("The effects called better or worse are stated in the Summary.")] if len(rest) < len(lines)
                    else [])


def training_sections(res: Results, tables: ReportTables, words: Sentences, figs: Figures) -> list[Block]:
    """Effects along training, divergence and its sensitivity analysis."""
    blocks: list[Block] = [Heading("Effects over training")]
    if len(tables.by_step):
        what = "main effects" if tables.factorial else "each cell against the baseline cell"
        blocks += [Para(f"The same model on the val loss at every evaluated step: {what}, with unadjusted 95% CIs; "
                        "each step is its own Holm family over that step's effects alone, smaller than the summary's, "
                        "so a step's call is not adjusted with the summary's tests and can be bolder than the "
                        f"summary's call of the same effect. {SNAPSHOT} Table: `tables/effects_by_step.csv`.")]
        blocks += image(figs.effects_by_step, "Effects along training with unadjusted 95% CIs (snapshots mid-schedule)")
        blocks += [Bullets(words.trajectory or ["No effect changes sign or loses its call along training."])]
    else:
        blocks.append(Para("No validation curves with an error estimate: nothing to show along training."))
    blocks += [Heading("Divergence")]
    if words.no_divergence:  # every count 0: one sentence instead of a table of zeros
        blocks.append(Para(f"{words.no_divergence} Table: `tables/divergence.csv`."))
    else:
        caveat = f" {words.divergence}" if words.divergence else ""
        blocks.append(Para("Divergence rate per cell among runs that did not crash, with its Clopper-Pearson 95% CI."
                           + caveat + " Table: `tables/divergence.csv`."))
        blocks += table_blocks(tables.divergence, list(tables.divergence.columns), "divergence.csv", "cells")
    if words.sensitivity:
        blocks += [Bullets(words.sensitivity)]
    if len(tables.sensitivity):
        blocks += [Para("Table: `tables/sensitivity.csv`."), Table(tables.sensitivity)] \
            if len(tables.sensitivity) <= MAX_MD_ROWS else [Para("Table: `tables/sensitivity.csv`.")]
    return blocks


