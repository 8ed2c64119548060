"""The report's content: which sections, tables, figures and sentences, in what order.

Owns the wording of the report (header, summary, captions, method notes). Every number in it
comes from the rounded tables of `stats` (or from sums of summary.csv columns in the header), so
report.md agrees with tables/*.csv.
"""
from __future__ import annotations

import math

import pandas as pd
import yaml

from gptlab.report.fmt import fmt_loss
from gptlab.report.load import Results
from gptlab.report.render import Block, Bullets, Code, Heading, Image, Para, Table
from gptlab.report.stats import ALPHA, Effects

CELL_MD_COLS = ["rank", "cell", "baseline", "best_val_loss", "best_val_loss_ci95", "best_val_bpc",
                "best_val_bpc_ci95", "best_step", "final_val_loss", "gap", "params", "tokens_per_sec",
                "wall_s", "n_seeds", "n_diverged", "n_failed"]
MAIN_MD_COLS = ["factor", "level", "baseline", "estimate", "ci_low", "ci_high", "p_value", "mde80",
                "seeds_needed", "n_ok", "n_ok_baseline", "n_diverged", "n_failed"]
INT_MD_COLS = ["factor_a", "level_a", "factor_b", "level_b", "estimate", "ci_low", "ci_high", "p_value", "mde80",
               "seeds_needed"]

METHOD = (
    "Only runs with status `ok` enter the statistics (cell means, effects, curves, throughput); diverged "
    "and failed runs are counted per cell, listed under 'Failed and diverged runs' and named in the verdict "
    "of every level they belong to. Excluding them flatters configurations that diverge: read a level with "
    "divergences as no better than its estimate. Main effects: OLS of best val loss on treatment-coded "
    "factors (reference = baseline level) plus seed as a blocking factor, so every run counts for every "
    "factor and runs with the same seed (same batches) are paired; real interactions inflate this model's "
    "residual, which makes its main-effect CIs conservative. Interactions: the same model plus all "
    "two-way interaction terms; the contrast is loss(a, b) - loss(a, base) - loss(base, b) + loss(base, base). "
    "CIs are 95% t intervals; p-values are two-sided t tests of the coefficients, not corrected for "
    "multiple comparisons; 'detectable' means p < {alpha}. mde80 is the minimum detectable effect at 80% "
    "power: (t_0.975 + t_0.8) x the contrast's standard error. Cell tables: mean over ok seeds with 95% t "
    "interval half-width (`*_ci95`); bpc = nats / ln 2; gap = final_val_loss - final_train_loss "
    "(positive: validation loss above training loss); params = unique parameters; wall_s = mean per run."
).format(alpha=ALPHA)


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
    items.append(f"**Seeds**: {', '.join(map(str, seeds))}")
    for e in spec.get("exclude") or []:
        items.append("**Excluded cell**: " + ", ".join(f"{k}={v}" for k, v in e.items()))
    if spec.get("plugins"):
        items.append(f"**Plugins**: {', '.join(map(str, spec['plugins']))}")
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


def summary(res: Results, cells: pd.DataFrame, eff: Effects) -> list[Block]:
    items = []
    ranked = cells.dropna(subset=["best_val_loss"])
    if len(ranked):
        best = ranked.iloc[0]
        items.append(f"Best cell: **{best['cell']}**, best val loss {fmt_loss(best['best_val_loss'])} nats/char "
                     f"({fmt_loss(best['best_val_bpc'])} bits/char) over {best['n_seeds']} seed(s).")
    base = cells[cells["baseline"]]
    if len(base) and not math.isnan(base.iloc[0]["best_val_loss"]):
        b = base.iloc[0]
        items.append(f"Baseline: {b['cell']}, {fmt_loss(b['best_val_loss'])} nats/char (rank {b['rank']}).")
    items += list(eff.main["verdict"])
    items += [v for v, p in zip(eff.interactions["verdict"], eff.interactions["p_value"]) if p < ALPHA]
    items += [f"Warning: {w}" for w in eff.warnings]
    return [Heading("Summary"), Bullets(items)] if items else []


def discussion(res: Results) -> list[Block]:
    """A human-written `discussion.md` next to the results (conclusions, literature), if any.

    Paragraphs are separated by blank lines; a paragraph whose lines start with '- ' is a list.
    It lives in the results folder so that a report regenerated from the results keeps it.
    """
    path = res.results_dir / "discussion.md"
    if not path.exists():
        return []
    blocks: list[Block] = [Heading("Discussion")]
    for chunk in path.read_text(encoding="utf-8").strip().split("\n\n"):
        lines = [line.strip() for line in chunk.splitlines() if line.strip()]
        if lines and all(line.startswith("- ") for line in lines):
            blocks.append(Bullets([line[2:] for line in lines]))
        elif lines:
            blocks.append(Para(" ".join(lines)))
    return blocks


def build(res: Results, cells: pd.DataFrame, levels: pd.DataFrame, eff: Effects, failures: pd.DataFrame,
          figures: dict[str, bytes], samples: list[tuple[str, str, str]]) -> list[Block]:
    """All blocks of the report, in order."""
    def fig(name: str, alt: str) -> list[Block]:
        return [Image(name, alt, figures[name])] if name in figures else []

    blocks = header(res) + summary(res, cells, eff) + discussion(res)
    blocks += [Heading("Cells"),
               Para("One row per combination of factor levels, ranked by mean best val loss over ok seeds "
                    "(nats/char; `_ci95` = half-width of the 95% CI; bpc = bits/char). "
                    "`baseline` marks the baseline cell. Table: `tables/cells.csv`."),
               Table(cells[CELL_MD_COLS])]
    blocks += fig("val_curves.png", "Validation loss curves per cell")
    blocks += [Heading("Main effects")]
    if len(eff.main):
        blocks += [Para("Difference in best val loss (nats/char) between each level and the baseline level of "
                        "its factor, estimated over the whole design (positive = worse). "
                        "Table: `tables/main_effects.csv`."),
                   Table(eff.main[MAIN_MD_COLS]), Bullets(list(eff.main["verdict"]))]
    else:
        blocks.append(Para("No main effects to estimate."))
    blocks += fig("level_effects.png", "Best val loss per level of each factor")
    blocks += [Heading("Interactions")]
    if len(eff.interactions):
        blocks += [Para("Interaction contrast (nats/char): how much worse (positive) or better (negative) the "
                        "combination is than the sum of the two separate effects. "
                        "Table: `tables/interactions.csv`."),
                   Table(eff.interactions[INT_MD_COLS]), Bullets(list(eff.interactions["verdict"]))]
    else:
        blocks.append(Para("No pair of factors with two or more levels: no interactions."))
    blocks += fig("interactions.png", "Interaction heatmaps")
    blocks += [Heading("Sensitivity")]
    model = (f"Residual degrees of freedom of the main-effects model: {eff.df_resid}; seed blocking: "
             f"{'yes' if eff.seed_block else 'no'}. `mde80`: minimum detectable effect at 80% power; "
             "`seeds_needed`: seeds for 80% power at the observed effect size.")
    items = eff.notes + [f"Warning: {w}" for w in eff.warnings]
    blocks += [Para(model)] + ([Bullets(items)] if items else [])
    blocks += [Heading("Throughput")] + (fig("throughput.png", "Tokens per second per cell")
                                          or [Para("No throughput measurements.")])
    blocks += [Heading("Failed and diverged runs")]
    if len(failures):
        shown = failures.assign(error=failures["error"].map(_error_line))
        blocks += [Para(f"{len(failures)} of {len(res.runs)} runs did not finish ok; they are excluded from the "
                        "statistics above. `best_val_loss` is the best value reached before diverging. "
                        "Table: `tables/failures.csv`."), Table(shown)]
    else:
        blocks.append(Para(f"None: all {len(res.runs)} runs finished ok."))
    blocks += [Heading("Samples"),
               Para("200 new characters from the best checkpoint of the best seed of each cell, "
                    "prompt a newline, sampling seed 0.")]
    for cell, run_id, text in samples:
        blocks += [Heading(f"{cell} (run `{run_id}`)", 3), Code(text)]
    blocks += [Heading("Method"), Para(METHOD)]
    return blocks
