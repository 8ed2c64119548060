"""The report's content: which sections, tables, figures and sentences, in what order.

Owns the wording of the report (header, summary, captions, method notes). Every number in it
comes from the rounded tables of `stats` (or from sums of summary.csv columns in the header), so
report.md agrees with tables/*.csv.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import pandas as pd
import yaml

from gptlab.report.fmt import fmt_loss
from gptlab.report.load import Results
from gptlab.report.render import Block, Bullets, Code, Heading, Image, Markdown, Para, Table
from gptlab.report import quotes, verdicts
from gptlab.report.calls import ALPHA
from gptlab.report.models import FORMULAS
from gptlab.report.rounds import AdaptiveView, rule_sentence
from gptlab.report.stats import Statistics
from gptlab.report.tuning import TuningView, tuning_section

CELL_MD_COLS = ["rank", "cell", "baseline", "best_val_loss", "best_val_loss_ci95", "best_val_bpc",
                "best_val_bpc_ci95", "best_step", "final_val_loss", "gap", "params", "tokens_per_sec",
                "wall_s", "n_seeds", "n_diverged", "n_failed"]
TEST_MD_COLS = ["best_test_loss", "best_test_loss_ci95", "best_test_bpc", "best_test_bpc_ci95"]  # with a test split
EFFECT_COLS = ["estimate", "ci_low", "ci_high", "p_value", "p_adjusted", "call"]
MAIN_MD_COLS = ["factor", "level", "baseline"] + EFFECT_COLS + ["mde80", "seeds_needed", "n_ok", "n_ok_baseline",
                                                                "n_diverged", "n_failed"]
INT_MD_COLS = ["factor_a", "level_a", "factor_b", "level_b"] + EFFECT_COLS
MAX_MD_ROWS = 40  # longer tables are summarised in the text and kept whole in tables/*.csv
# Said next to every effect along training (the summary's bullets, the section, its figure): readers take a
# step-s effect for the effect of training s steps, which the schedule makes it not.
SNAPSHOT = ("Effects at a step are snapshots of the runs taken mid-schedule, not the results of shorter runs: until "
            "its decay ends (`train.lr_decay_iters`, by default the last step) a run's learning rate is higher than "
            "that of a run stopped at that step, so an effect at step s is not the effect of training for s steps.")

METHOD = (
    "Which runs count: runs with status `ok` enter cell means, effects and curves; diverged runs are reported "
    "as a divergence rate per cell (Clopper-Pearson 95% CI) and, in a sensitivity analysis, counted at the "
    "unigram loss of the validation split; failed runs (crashes) are only listed. "
    "Model: {formula}. Every effect is a linear contrast of the fitted cell means, so its standard error comes "
    "from the model's error: pure replication error when there are seeds to replicate, never from "
    "interactions pooled by an additive model (unless the design has no replicates, which the report then says). "
    "Main effects (full factorials) are averaged over every combination of the other factors with equal "
    "weights (effect-coded marginal contrasts: level minus baseline); two-way interactions are "
    "loss(a, b) - loss(a, base) - loss(base, b) + loss(base, base) averaged the same way, and higher-order "
    "contrasts are the k-th differences. Designs that are not full factorials get only what they can estimate "
    "(cells against the baseline cell; aliased terms named). CIs are 95% t intervals; p-values are two-sided "
    "t tests, Holm-adjusted across every distinct test of the report (`p_adjusted`). Calls: `better`/`worse` "
    "when the adjusted p < {alpha}; `equivalent` when the 90% CI lies inside +/- the margin (two one-sided "
    "tests); otherwise `inconclusive`; no call when there is no error estimate. `mde80`: minimum detectable "
    "effect at 80% power, (t_0.975 + t_0.8) x SE; `seeds_needed`: seeds per cell for a 95% CI half-width of "
    "the margin, from the same error. Effects over training use the same model on the val loss at each "
    "evaluated step, each step its own Holm family. Cell tables: mean over ok seeds with 95% t interval "
    "half-width (`*_ci95`); bpc = bits per character (summed validation NLL / characters / ln 2); gap = final_val_loss - final_train_loss; params = unique parameters."
)


def _error_line(text: str, limit: int = 160) -> str:
    """The last line of an error (a traceback's last line names the exception), shortened."""
    line = str(text).strip().splitlines()[-1] if str(text).strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def header(res: Results) -> list[Block]:
    spec, runs = res.spec, res.runs
    counts = runs["status"].value_counts()
    status = ", ".join(f"{n} {s}" for s, n in counts.items())
    total = float(runs["wall_s"].sum())
    rel = f"{res.results_dir.resolve().parent.name}/{res.results_dir.resolve().name}"
    items = [f"**Reproduce the sweep**: `{spec.get('command') or f'python -m gptlab.sweep ablations/{res.name}.yaml'}`",
             f"**Regenerate this report**: `python -m gptlab.report {rel}`"]
    for f in res.factors:
        lv = ", ".join(f"**{lvl}** (baseline)" if lvl == res.baseline[f] else lvl for lvl in res.levels[f])
        items.append(f"**Factor** `{f}`: {lv}")
    seeds = spec.get("seeds") if isinstance(spec.get("seeds"), list) else res.seeds
    adaptive = f" (adaptive: {yaml.safe_dump(spec['seeds'], default_flow_style=True).strip()})" \
        if isinstance(spec.get("seeds"), dict) else ""
    items.append(f"**Seeds**: {', '.join(map(str, seeds))}{adaptive}")
    for e in spec.get("exclude") or []:
        items.append("**Excluded cell**: " + ", ".join(f"{k}={v}" for k, v in e.items()))
    if spec.get("plugins"):
        items.append(f"**Plugins**: {', '.join(map(str, spec['plugins']))}")
    items.append(f"**Loss unit**: {res.unit}" + (" (the sweep mixes tokenizers: every loss is converted to bits per "
                                                 "character, the validation split's summed NLL / characters / ln 2)"
                                                 if res.unit == "bits/char" else ""))
    if res.has_test_split:
        items.append("**Outcome**: the test loss at the best validation step (`best_test_loss`; in bits/char "
                     "`best_test_bpc`): validation chose each checkpoint, the test split chose nothing. Every "
                     "effect and call is on it; `best_val_loss` columns, the levels table and the curves are "
                     "validation losses")
    items += [f"**Runs**: {len(runs)} ({status}) in {len(res.cells)} cells",
              f"**Total compute**: {total:.1f} s ({total / 3600:.2f} h, sum of wall_s over all runs)"]
    if res.environment:
        items.append("**Environment**: " + "; ".join(f"{k} {', '.join(v)}" for k, v in res.environment.items()))
    blocks: list[Block] = [Heading(f"Ablation report: {res.name}", 1)]
    if spec.get("description"):
        blocks.append(Para(str(spec["description"]).strip()))
    blocks += [Bullets(items), Para("Fixed settings (`base`):"),
               Code(yaml.safe_dump(spec.get("base") or {}, sort_keys=False, default_flow_style=False))]
    return blocks


def _calls_table(st: Statistics, res: Results) -> pd.DataFrame:
    """The summary's compact table: every main effect, and every other effect with a better/worse call."""
    rows = []
    for r in st.main.to_dict("records"):
        rows.append({"effect": f"{res.label(r['factor'], r['level'])} vs {r['baseline']}", **_pick(r)})
    for r in st.interactions.to_dict("records"):
        if r["call"] in ("better", "worse"):
            rows.append({"effect": f"{res.label(r['factor_a'], r['level_a'])} x "
                                   f"{res.label(r['factor_b'], r['level_b'])}", **_pick(r)})
    for table, name in ((st.higher, "term"), (st.aliases, "aliased"), (st.cells_vs_baseline, "cell")):
        for r in table.to_dict("records"):
            if r["call"] in ("better", "worse") and not (name == "cell" and r["changes"] == 1):
                rows.append({"effect": r[name] + (" vs baseline cell" if name == "cell" else ""), **_pick(r)})
    return pd.DataFrame(rows, columns=["effect", "estimate", "ci_low", "ci_high", "p_adjusted", "call"])


def _pick(r: dict) -> dict:
    return {k: r[k] for k in ("estimate", "ci_low", "ci_high", "p_adjusted", "call")}


def _count_calls(table: pd.DataFrame, what: str) -> str:
    if not len(table):
        return ""
    kinds = np.where(table["estimate"].isna(), "not estimable", table["call"].fillna("").replace("", "no call"))
    counts = pd.Series(kinds).value_counts()
    return f"{what}: " + ", ".join(f"{n} {c}" for c, n in counts.items())


def summary(res: Results, cells: pd.DataFrame, st: Statistics) -> list[Block]:
    blocks: list[Block] = [Heading("Summary")]
    items = []
    ranked = cells.dropna(subset=["best_val_loss"])
    if len(ranked):
        best = ranked.iloc[0]
        items.append(f"Best cell: **{best['cell']}**, best val loss {fmt_loss(best['best_val_loss'])} {res.unit} "
                     f"({fmt_loss(best['best_val_bpc'])} bits/char) over {best['n_seeds']} seed(s).")
    base = cells[cells["baseline"]]
    if len(base) and not math.isnan(base.iloc[0]["best_val_loss"]):
        b = base.iloc[0]
        items.append(f"Baseline: {b['cell']}, {fmt_loss(b['best_val_loss'])} {res.unit} (rank {b['rank']}).")
    if items:
        blocks.append(Bullets(items))
    table = _calls_table(st, res)
    if len(table):
        blocks += [Para(f"Calls (equivalence margin +/-{st.margin:g} {res.unit}; `better`/`worse`: Holm-adjusted "
                        f"p < {ALPHA}; `equivalent`: 90% CI inside the margin). Every main effect, and every other "
                        "effect called better or worse:"), Table(table)]
    counts = [c for c in (_count_calls(st.interactions, "Two-way interactions"),
                          _count_calls(st.higher, "Higher-order contrasts"),
                          _count_calls(st.simple, "Simple effects")) if c]
    sentences = verdicts.called(st, res)
    bullets = sentences + [f"Along training: {t}" for t in st.trajectory] + ([SNAPSHOT] if st.trajectory else [])
    bullets += counts
    bullets += [f"Warning: {w}" for w in st.warnings]
    if bullets:
        blocks.append(Bullets(bullets))
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
                                                          f"{res.results_dir / 'discussion.md'}"))]


def _table(df: pd.DataFrame, cols: list[str], csv: str, what: str) -> list[Block]:
    """A table in the report, or a pointer to its CSV when it is long."""
    if len(df) <= MAX_MD_ROWS:
        return [Table(df[[c for c in cols if c in df.columns]])]
    called = int(df["call"].isin(["better", "worse"]).sum()) if "call" in df else 0
    return [Para(f"{len(df)} {what} ({called} called better or worse): too many to list here; "
                 f"see `tables/{csv}`.")]


def effects_sections(res: Results, st: Statistics, fig) -> list[Block]:
    """Main effects, interactions, higher-order terms, simple effects / cells against the baseline."""
    blocks: list[Block] = [Heading("Design and model"), Bullets(st.notes + verdicts.schedule_note(res)
                                                                + [f"Warning: {w}" for w in st.warnings])]
    blocks += fig("forest.png", "Every effect with its 95% CI; equivalence band shaded")
    blocks += [Heading("Main effects")]
    if len(st.main):
        what = ("averaged over every combination of the other factors (equal weights)" if st.factorial else
                "against the baseline cell, from the cell that differs from it in that factor alone")
        blocks += [Para(f"Difference in {res.outcome_label} ({res.unit}) between each level and the baseline level of "
                        f"its factor, {what}; positive = worse. Table: `tables/main_effects.csv`.")]
        blocks += _table(st.main, MAIN_MD_COLS, "main_effects.csv", "main effects")
        blocks += [Bullets(list(st.main["verdict"]))]
    else:
        blocks.append(Para("No main effects to estimate."))
    blocks += fig("level_effects.png", "Best val loss per level of each factor")
    blocks += [Heading("Interactions")]
    if len(st.interactions):
        blocks += [Para(f"Two-way interaction contrast ({res.unit}): how much worse (positive) or better (negative) "
                        "the combination is than the sum of the two separate effects"
                        + (", averaged over the other factors. " if st.factorial else
                           ", at the baseline of the other factors; aliased where the cells cannot separate it. ")
                        + "Table: `tables/interactions.csv`.")]
        blocks += _table(st.interactions, INT_MD_COLS + ["alias"], "interactions.csv", "interaction contrasts")
        blocks += [Bullets(list(st.interactions["verdict"]))] if len(st.interactions) <= MAX_MD_ROWS else []
    else:
        blocks.append(Para("No pair of factors with two or more levels: no interactions."))
    blocks += fig("interactions.png", "Interaction plots: marginal means with 95% CIs")
    if len(st.higher):
        blocks += [Heading("Higher-order interactions"),
                   Para("k-th order differences of k factors' changes (averaged over the other factors). "
                        "Table: `tables/higher_order.csv`.")]
        blocks += _table(st.higher, ["term", "order"] + EFFECT_COLS, "higher_order.csv", "higher-order contrasts")
    if len(st.cells_vs_baseline):
        blocks += [Heading("Cells against the baseline cell"),
                   Para(f"Each cell minus the baseline cell ({res.unit}). Table: `tables/cells_vs_baseline.csv`.")]
        blocks += _table(st.cells_vs_baseline, ["cell"] + EFFECT_COLS, "cells_vs_baseline.csv", "cells")
    if len(st.aliases):
        blocks += [Heading("Aliased terms"),
                   Para("These terms cannot be separated by the cells of this design: only their sum is "
                        "estimable (the cell with all the changes against the baseline, minus its estimable "
                        "terms). Table: `tables/aliases.csv`."),
                   Table(st.aliases[["aliased"] + EFFECT_COLS])]
    if len(st.simple):
        blocks += [Heading("Simple effects"),
                   Para("Each level against its baseline at every combination of the other factors. "
                        "Table: `tables/simple_effects.csv`.")]
        blocks += _table(st.simple, ["factor", "level", "baseline", "at"] + EFFECT_COLS, "simple_effects.csv",
                         "simple effects")
        blocks += fig("simple_effects.png", "Simple effects with 95% CIs")
    return blocks


def training_sections(res: Results, st: Statistics, fig) -> list[Block]:
    """Effects along training, divergence and its sensitivity analysis."""
    blocks: list[Block] = [Heading("Effects over training")]
    if len(st.by_step):
        what = "main effects" if st.factorial else "each cell against the baseline cell"
        blocks += [Para(f"The same model on the val loss at every evaluated step: {what}, with 95% CIs "
                        f"(each step its own Holm family). {SNAPSHOT} Table: `tables/effects_by_step.csv`.")]
        blocks += fig("effects_by_step.png", "Effects along training with 95% CIs (snapshots mid-schedule)")
        blocks += [Bullets(st.trajectory or ["No effect changes sign or loses its call along training."])]
    else:
        blocks.append(Para("No validation curves with an error estimate: nothing to show along training."))
    clean = st.divergence[st.divergence["n_diverged"] == 0]
    caveat = (f" A cell where none of {int(clean['n_ok'].min())} runs diverged can still have a divergence rate up "
              f"to {clean['rate_ci_high'].max():.3f}." if len(clean) else "")
    blocks += [Heading("Divergence"),
               Para("Divergence rate per cell among runs that did not crash, with its Clopper-Pearson 95% CI."
                    + caveat + " Table: `tables/divergence.csv`.")]
    blocks += _table(st.divergence, list(st.divergence.columns), "divergence.csv", "cells")
    if st.sensitivity_notes:
        blocks += [Bullets(st.sensitivity_notes)]
    if len(st.sensitivity):
        blocks += [Para("Table: `tables/sensitivity.csv`."), Table(st.sensitivity)] \
            if len(st.sensitivity) <= MAX_MD_ROWS else [Para("Table: `tables/sensitivity.csv`.")]
    return blocks


def adaptive_section(view: AdaptiveView | None, fig) -> list[Block]:
    """Adaptive sweeps: the stopping rule, each round, and whether each called effect reached the target."""
    if view is None:
        return []
    blocks: list[Block] = [Heading("Seeds: adaptive rounds"), Para(rule_sentence(view.rule))]
    if view.rounds.empty:
        return blocks + [Para("No round has finished yet (results/NAME/rounds.csv is missing).")]
    blocks += [Para("Rounds (`rounds.csv`): seeds per cell after the round, runs the round added, and the widest "
                    "95% half-width among the called effects, with round 1's variance.")]
    blocks += _table(view.rounds, list(view.rounds.columns), "rounds.csv", "rounds")
    outcomes = view.outcomes
    if len(outcomes):
        reached = int((outcomes["outcome"] == "reached the target").sum())
        blocks.append(Para(f"{reached} of {len(outcomes)} called effects reached the target half-width of "
                           f"{view.rule.precision:g} at {int(outcomes['seeds'].max())} seeds per cell "
                           f"(max {view.rule.max}). Table: `tables/precision.csv`."))
        blocks += _table(outcomes, list(outcomes.columns), "precision.csv", "effects")
    return blocks + fig("precision.png", "Half-width of each called effect against seeds per cell")


def scale_section(res: Results, by_scale: tuple[pd.DataFrame, list[str]] | None, fig) -> list[Block]:
    """Sweeps with `scale:`: every scientific effect at each level of each scale factor, and whether its call holds."""
    if not res.scale:
        return []
    table, sentences = by_scale if by_scale is not None else (pd.DataFrame(), [])
    scales = ", ".join(f"`{s}`" for s in res.scale)
    blocks: list[Block] = [Heading("Effects by scale"), Para(
        f"Scale factors: {scales}. They are not reported as effects: each scientific factor's main effect "
        f"({res.unit}, level - baseline, averaged over the other scientific factors) is estimated at every level of "
        "each scale factor, the other scale factors at their baseline, each level its own model and Holm family. "
        "A call holds (the same at every level), changes, or reverses (better at one level, worse at another). "
        "Table: `tables/effects_by_scale.csv`.")]
    blocks += [Para(n) for n in verdicts.schedule_note(res) if "train.max_iters" in res.scale]
    if not len(table):
        return blocks + [Para("No scale level has successful runs of every scientific cell.")]
    blocks.append(Bullets(sentences))
    blocks += _table(table, list(table.columns), "effects_by_scale.csv", "rows")
    return blocks + fig("effects_by_scale.png", "Effects at each level of each scale factor")


def build(res: Results, cells: pd.DataFrame, levels: pd.DataFrame, st: Statistics, failures: pd.DataFrame,
          figures: dict[str, bytes], samples: list[tuple[str, str, str]],
          adaptive: AdaptiveView | None = None,
          by_scale: tuple[pd.DataFrame, list[str]] | None = None,
          tables: Mapping[str, pd.DataFrame] | None = None, tuned: TuningView | None = None) -> list[Block]:
    """All blocks of the report, in order; `tables` (name -> the tables/*.csv frames) feed the discussion's quotes."""
    def fig(name: str, alt: str) -> list[Block]:
        return [Image(name, alt, figures[name])] if name in figures else []

    blocks = header(res) + summary(res, cells, st) + adaptive_section(adaptive, fig) + discussion(res, tables or {})
    blocks += [Heading("Cells"),
               Para("One row per combination of factor levels, ranked by mean best val loss over ok seeds "
                    f"({res.unit}; `_ci95` = half-width of the 95% CI; bpc = bits/char). "
                    "`baseline` marks the baseline cell. Table: `tables/cells.csv`.")]
    blocks += _table(cells, CELL_MD_COLS + [c for c in TEST_MD_COLS if c in cells], "cells.csv", "cells")
    blocks += fig("val_curves.png", "Validation loss curves")
    blocks += scale_section(res, by_scale, fig)
    blocks += effects_sections(res, st, fig) + tuning_section(tuned, res, st, fig) + training_sections(res, st, fig)
    blocks += [Heading("Throughput")] + (fig("throughput.png", "Tokens per second per cell")
                                          or [Para("No throughput measurements.")])
    blocks += [Heading("Failed and diverged runs")]
    if len(failures):
        shown = failures.assign(error=failures["error"].map(_error_line))
        blocks += [Para(f"{len(failures)} of {len(res.runs)} runs did not finish ok; they are left out of the "
                        "effects above (see Divergence for the sensitivity analysis). `best_val_loss` is the best "
                        "value reached before diverging. Table: `tables/failures.csv`.")]
        blocks += _table(shown, list(shown.columns), "failures.csv", "runs")
    else:
        blocks.append(Para(f"None: all {len(res.runs)} runs finished ok."))
    blocks += [Heading("Samples"),
               Para("200 new characters from the best checkpoint of the best seed of each cell, "
                    "prompt a newline, sampling seed 0.")]
    for cell, run_id, text in samples[:MAX_MD_ROWS]:
        blocks += [Heading(f"{cell} (run `{run_id}`)", 3), Code(text)]
    formula = "; ".join(f"`{k}`: `{v}`" for k, v in FORMULAS.items())
    blocks += [Heading("Method"), Para(METHOD.format(formula=formula, alpha=ALPHA))]
    return blocks
