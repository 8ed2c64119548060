"""The report's document step: which sections, tables, figures and sentences, in what order.

Owns the report's blocks from start to end, the answer first: the title and a lead line, the summary
(its calls table, then the forest plot of every effect), the discussion, the cells, the sections of
`sections`, throughput and failed runs; then the tails: how the sweep was run (its command lines and
fixed settings), the method and the samples. Every number in it comes
from the rounded tables of `tables.ReportTables`, so report.md agrees with tables/*.csv; every
sentence about the results (the header's lines and counts too) comes from `sentences`, and every
figure from `figures.Figures`: the document only arranges them, with captions that describe the
method. `build` takes the bundles and returns the blocks that `render` writes.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import yaml

from gptlab.report.document import quotes
from gptlab.report.document.blocks import Block, Bullets, Code, Heading, Markdown, Para, Table, image
from gptlab.report.document.sections import (
    MAX_MD_ROWS,
    SNAPSHOT,
    effects_sections,
    scorecard_section,
    table_blocks,
    training_sections,
)
from gptlab.report.figures import Figures
from gptlab.report.fmt import fmt_value
from gptlab.report.kinds import KindSection
from gptlab.report.load import Results
from gptlab.report.load.samples import Sample
from gptlab.report.sentences import Sentences
from gptlab.report.sentences.verdicts import call_phrase
from gptlab.report.tables import LABEL_COLUMNS, ReportTables
from gptlab.report.tables.stability import LOST
from gptlab.stats.calls import ALPHA
from gptlab.stats.models import FORMULAS
from gptlab.stats.robustness import DEPENDS

CELL_MD_COLS = ["rank", "cell", "baseline", "best_val_loss", "best_val_loss_ci95", "best_val_bpc",
                "best_val_bpc_ci95", "best_step", "final_val_loss", "gap", "params", "tokens_per_sec",
                "wall_s", "n_seeds", "n_diverged", "n_failed"]
TEST_MD_COLS = ["best_test_loss", "best_test_loss_ci95", "best_test_bpc", "best_test_bpc_ci95"]  # with a test split

METHOD = (
    "Which runs count: runs with status `ok` enter cell means, effects and curves; runs that failed to train "
    "(`diverged`: a non-finite loss; `collapsed`: stuck on the unigram plateau to its end; `unstable`: blew up and "
    "did not come back; each judged from the run's own curve, never from its loss against its siblings' or a cut) "
    "enter no mean, pick, fit or effect: they are counted per setting (the stability table), "
    "reported as a rate per cell (`n_not_trained` on this page, `n_diverged` in the CSV files, counts all three; "
    "Clopper-Pearson 95% CI) and, in a sensitivity "
    "analysis, counted at the unigram loss of the validation split; failed runs (crashes) are only listed. "
    "Model: {formula}. Every effect is a linear contrast of the fitted cell means, so its standard error comes "
    "from the model's error: pure replication error when there are seeds to replicate, never from "
    "interactions pooled by an additive model (unless the design has no replicates, which the report then says). "
    "Main effects (full factorials) are averaged over every combination of the other factors with equal "
    "weights (effect-coded marginal contrasts: level minus baseline); two-way interactions are "
    "loss(a, b) - loss(a, base) - loss(base, b) + loss(base, base) averaged the same way, and higher-order "
    "contrasts are the k-th differences. Designs that are not full factorials get only what they can estimate "
    "(cells against the baseline cell; aliased terms named). CIs are 95% t intervals, each effect's own "
    "(unadjusted); p-values are two-sided t tests, Holm-adjusted across every distinct test of the report "
    "(`p_adjusted`), so an inconclusive effect's CI can exclude zero. Calls: `better`/`worse` "
    "when the adjusted p < {alpha}; `equivalent` when the 90% CI lies inside +/- the margin (two one-sided "
    "tests); otherwise `inconclusive`; no call when there is no error estimate. `mde80`: minimum detectable "
    "effect at 80% power, (t_0.975 + t_0.8) x SE; `seeds_needed`: seeds per cell for a 95% CI half-width of "
    "the margin, from the same error. Effects over training use the same model on the val loss at each "
    "evaluated step, each step its own Holm family (tested alone, not adjusted with the summary's tests). Cell "
    "tables: mean over ok seeds with 95% t interval "
    "half-width (`*_ci95`); bpc = bits per character (summed validation NLL / characters / ln 2); gap = "
    "final_val_loss - final_train_loss; params = unique parameters."
)


def _error_line(text: str, limit: int = 160) -> str:
    """The last line of an error (a traceback's last line names the exception), shortened."""
    line = str(text).strip().splitlines()[-1] if str(text).strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def header(res: Results, words: Sentences) -> list[Block]:
    """The title, the sweep's description and the lead line (`words.lead`): what the report is about, in three lines;
    how it was run comes near the end (`provenance`)."""
    blocks: list[Block] = [Heading(f"Ablation report: {res.name}", 1)]
    if res.spec.description:
        blocks.append(Para(res.spec.description.strip()))
    return blocks + ([Para(words.lead)] if words.lead else [])


def provenance(res: Results, words: Sentences) -> list[Block]:
    """How this was run: the sweep's lines (`words.header`: commands, factors, seeds, text, unit, runs, compute,
    environment) and its fixed settings, after the findings: a reader comes for the answer first."""
    return [Heading("How this was run"), Bullets(list(words.header)), Para("Fixed settings (`base`):"),
            Code(yaml.safe_dump(res.spec.base, sort_keys=False, default_flow_style=False))]


def _calls_table(tables: ReportTables, res: Results) -> pd.DataFrame:
    """The summary's compact table: every main effect (an arms sweep: every arm against the baseline), and every
    other effect called better or worse."""
    if len(tables.arms.columns):
        return pd.DataFrame([{"effect": f"{res.label('arm', r['arm'])} vs {r['baseline']}" + (
            f" at {res.label(r['scale_factor'], r['scale_level'])}" if r.get("scale_factor") else ""), **_pick(r)}
            for r in tables.arms.to_dict("records")], columns=CALLS_COLS)
    rows = [{"effect": f"{res.label(r['factor'], r['level'])} vs {r['baseline']}", **_pick(r)}
            for r in tables.main.to_dict("records")]
    for table, _, r in tables.called():
        if table == "interactions":
            rows.append({"effect": f"{res.label(r['factor_a'], r['level_a'])} x "
                                   f"{res.label(r['factor_b'], r['level_b'])}", **_pick(r)})
        elif table != "main_effects":
            rows.append({"effect": r[LABEL_COLUMNS[table]] + (" vs baseline cell" if table == "cells_vs_baseline" else ""),
                         **_pick(r)})
    return pd.DataFrame(rows, columns=CALLS_COLS)


CI_UNADJUSTED = "95% CI, unadjusted"  # the calls table's CI column: the effect's own CI beside its Holm-adjusted call
CALLS_COLS = ["effect", "estimate", CI_UNADJUSTED, "p_adjusted", "call"]


def _pick(r: dict) -> dict:
    ci = f"{fmt_value('ci_low', r['ci_low'])} to {fmt_value('ci_high', r['ci_high'])}"
    return {"estimate": r["estimate"], CI_UNADJUSTED: "n/a" if ci == "n/a to n/a" else ci,
            "p_adjusted": r["p_adjusted"], "call": call_phrase(r)}


FOREST_ALT = ("Every effect with its unadjusted 95% CI, coloured by its Holm-adjusted call (dashed: an effect not "
              "called better or worse whose unadjusted CI excludes zero); equivalence band shaded")


def _family(tables: ReportTables) -> str:
    """' (here the report's 47 distinct tests, 32 of them simple effects)': the Holm family beside the headline calls,
    so that a reader sees what the follow-up tests cost them."""
    a = tables.effects
    if a is None or not a.n_tests:
        return ""
    simple = int(np.isfinite(pd.to_numeric(a.simple["p_value"], errors="coerce")).sum()) if len(a.simple) else 0
    return f" (here the report's {a.n_tests} distinct tests" + (f", {simple} of them simple effects" if simple else "") + ")"


def summary(res: Results, tables: ReportTables, words: Sentences, figures: Figures) -> list[Block]:
    """What the sweep found: the best cell, the calls table, the forest plot, the called effects and what would
    decide the rest."""
    blocks: list[Block] = [Heading("Summary")]
    items = list(words.best)
    items += [words.untuned] if words.untuned else []  # before any effect: what every effect below is about
    if items:
        blocks.append(Bullets(items))
    table = _calls_table(tables, res)
    if len(table):
        blocks += [Para(f"Calls (equivalence margin +/-{res.margin:g} {res.unit}; `better`/`worse`: Holm-adjusted "
                        f"p < {ALPHA} over every test of its family{_family(tables)}; `equivalent`: 90% CI inside the "
                        "margin). Every "
                        "main effect, and every other effect called better or worse. The 95% CI is each effect's own, "
                        "unadjusted: it can exclude zero where the adjusted call is still inconclusive "
                        "(docs/STATISTICS.md, \"Calls\"):"), Table(table)]
        blocks += [Para(words.calls_legend)] if words.calls_legend else []
    blocks += image(figures.forest, FOREST_ALT)
    bullets = list(words.arms) if words.arms else \
        words.called + [f"Along training: {t}" for t in words.trajectory] + ([SNAPSHOT] if words.trajectory else [])
    bullets += words.call_counts
    bullets += [f"Tuning check: {t}" for t in words.tuning_checks]
    bullets += [f"Warning: {w}" for w in words.warnings]
    if bullets:
        blocks.append(Bullets(bullets))
    return blocks + _to_decide(tables, res, words)


DECIDE_MD_COLS = ["effect", "estimate", "ci95", "seeds", "seeds_needed", "text_ci95", "test_fraction_needed",
                  "seeds_at_test_fraction"]
TEXT_COLS = ("text_ci95", "test_fraction_needed", "seeds_at_test_fraction")  # a test split's (its blocks')


def _to_decide(tables: ReportTables, res: Results, words: Sentences) -> list[Block]:
    """After the calls: what would decide each inconclusive effect (its table, and its sentences or their count)."""
    if not words.to_decide:
        return []
    per = "arm" if res.arms else "cell"
    depends = (tables.to_decide["call"] == DEPENDS).to_numpy() if "call" in tables.to_decide else \
        np.zeros(len(tables.to_decide), bool)  # their numbers are a curve's, not seeds: said in words, apart
    blocks: list[Block] = []
    if not depends.all():
        text = res.has_test_split  # without a test split the text's columns would be zeros and n/a: not shown
        cols = DECIDE_MD_COLS if text else [c for c in DECIDE_MD_COLS if c not in TEXT_COLS]
        blocks += [Para(f"What would decide the inconclusive effects: seeds per {per} for a 95% CI of "
                        f"+/-{res.margin:g} {res.unit}" + (" at this test split" if text else "")
                        + " (`seeds_needed`; blank where no number of seeds reaches it)"
                        + (", the half-width the text alone leaves (`text_ci95`), and where it is too wide, the test "
                           "split that would reach it with its seeds" if text else "") + " (docs/STATISTICS.md). "
                        "Table: `tables/to_decide.csv`."),
                   *table_blocks(tables.to_decide[~depends], cols, "to_decide.csv", "inconclusive effects"),
                   Para(words.to_decide_summary) if words.to_decide_summary else
                   Bullets([w for w, d in zip(words.to_decide, depends) if not d])]
    if depends.any():
        blocks += [Para("What would decide the effects that depend on the picks (`tables/to_decide.csv`):"),
                   Bullets([w for w, d in zip(words.to_decide, depends) if d])]
    return blocks


def discussion(res: Results, tables: Mapping[str, pd.DataFrame]) -> list[Block]:
    """The human-written `results/NAME/discussion.md` (conclusions, literature), if any.

    Any Markdown (emphasis, links, lists, tables); it lives in the results folder so that a report
    regenerated from the results keeps it. Its row references (`{{main_effects: model.activation=relu}}`,
    see `quotes`) are rendered from `tables`; one that names no row refuses the whole report.
    """
    if res.discussion is None:
        return []
    return [Heading("Discussion"), Markdown(quotes.render(res.discussion, tables, res,
                                                          f"{res.results_dir.discussion_md}"))]


def stability_section(tables: ReportTables, words: Sentences) -> list[Block]:
    """Where runs trained, collapsed, diverged or failed, per cell, role and tuned setting (after the findings)."""
    if not len(tables.stability):
        return []
    blocks: list[Block] = [
        Heading("Stability"),
        Para(
            "Per cell (or arm), role and tuned setting: runs that trained (`n_ok`), that were stuck (`n_collapsed`: "
            "the last half of training no longer descends and its training loss ends on the unigram plateau), that "
            "blew up (`n_unstable`: its training loss ends above its own best by more than its own noise allows), "
            "that diverged (a non-finite loss) and that failed (crashed); each judged from the run's own curve "
            "(docs/STATISTICS.md, \"Which runs failed\"). A run that did not train is a failure of its "
            "setting: it enters no pick, fit, noise estimate or effect. Table: `tables/stability.csv`."
        ),
        Bullets(list(words.stability)),
    ]
    failing = tables.stability[tables.stability[[*LOST, "n_failed"]].sum(axis=1) > 0]
    if not len(failing):
        return blocks
    return blocks + ([Table(failing)] if len(failing) <= MAX_MD_ROWS else
                     [Para(f"{len(failing)} settings where runs did not train: too many to list here; see "
                           "`tables/stability.csv`.")])


def _kind_blocks(kinds: Sequence[KindSection], after: str) -> list[Block]:
    return [block for kind in kinds if kind.after == after for block in kind.blocks]


def build(res: Results, tables: ReportTables, words: Sentences, figures: Figures,
          samples: Sequence[Sample], kinds: Sequence[KindSection] = ()) -> list[Block]:
    """All blocks of the report, in order: its numbers (`tables`), its sentences (`words`), its figures (one
    field each), the sections of its sweep's kinds (`report.kinds`: each after the part it names) and its text
    samples."""
    blocks = header(res, words) + _kind_blocks(kinds, "header")  # a kind whose answer is not the summary's: a ladder
    blocks += summary(res, tables, words, figures) + _kind_blocks(kinds, "summary")
    blocks += scorecard_section(res, tables, words, kinds) + _kind_blocks(kinds, "scorecard")  # adaptive seeds' rounds
    blocks += discussion(res, tables.files(words.verdicts))
    blocks += stability_section(tables, words)
    cells = tables.cells
    blocks += [Heading("Cells"),
               Para("One row per combination of factor levels, ranked by mean best val loss over ok seeds "
                    f"({res.unit}; `_ci95` = half-width of the 95% CI; bpc = bits/char). "
                    "`baseline` marks the baseline cell. A cell's CI is its own mean's, from its own few seeds (a "
                    "t quantile on few degrees of freedom, and each seed's offset included), so it is wider than an "
                    "effect's: an effect's CI takes the model's error over every cell and, where seeds are paired "
                    "across cells, leaves out the offset each seed shares. Table: `tables/cells.csv`.")]
    blocks += table_blocks(cells, CELL_MD_COLS + [c for c in TEST_MD_COLS if c in cells], "cells.csv", "cells")
    blocks += image(figures.val_curves, "Validation loss curves") + _kind_blocks(kinds, "cells")  # effects by scale
    blocks += effects_sections(res, tables, words, figures)
    blocks += _kind_blocks(kinds, "effects")  # a tuned sweep's comparison
    blocks += training_sections(res, tables, words, figures)
    blocks += [Heading("Throughput")] + (image(figures.throughput, "Tokens per second per cell")
                                          or [Para("No throughput measurements.")])
    blocks += [Heading("Failed, diverged and collapsed runs")]
    failures = tables.failures
    if len(failures):
        shown = failures.assign(error=failures["error"].map(_error_line))
        blocks += [Para(words.failures + " Table: `tables/failures.csv`.")]
        blocks += table_blocks(shown, list(shown.columns), "failures.csv", "runs")
    else:
        blocks.append(Para(words.failures))
    blocks += provenance(res, words)  # after the findings: how it was run, then the method, then the samples
    formula = "; ".join(f"`{k}`: `{v}`" for k, v in FORMULAS.items())
    blocks += [Heading("Method"), Para(METHOD.format(formula=formula, alpha=ALPHA))]
    blocks += [Para(words.error_model)] if words.error_model else []
    return blocks + samples_section(samples)


def samples_section(samples: Sequence[Sample]) -> list[Block]:
    """The text samples, one per cell: the report's longest tail, last."""
    blocks: list[Block] = [Heading("Samples"), Para("200 new characters from the best checkpoint of the best seed of "
                                                    "each cell, prompt a newline, sampling seed 0.")]
    for cell, run_id, text in samples[:MAX_MD_ROWS]:
        blocks += [Heading(f"{cell} (run `{run_id}`)", 3), Code(text)]
    return blocks
