"""The report's notes on its design and model: the margin, the model and its error, gaps, precision, warnings.

Owns the sentences that are about the whole analysis rather than one effect: `design_notes`
(notes and warnings on the model, its error, the design's gaps and the precision reached, from the
effects' fit), runs trained by mixed code, the schedule confounded with `train.max_iters`, the
ceiling sensitivity analysis, how high a divergence rate a cell without a diverged run can still have, and
where runs did not train (`stability`, from `tables/stability.csv`).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gptlab.report.fmt import fmt_loss, fmt_p
from gptlab.report.kinds import report_kinds
from gptlab.report.load import Results
from gptlab.report.sentences.verdicts import absent
from gptlab.report.tables.stability import COUNTS, LOST
from gptlab.run.config import LENGTH_KEY
from gptlab.run.schedules import WSD
from gptlab.stats.effects import Analysis
from gptlab.stats.models import FORMULAS, HETERO_P, OWN
from gptlab.stats.to_decide import MAX_SEEDS
from gptlab.statuses import COLLAPSED, DIVERGED, FAILED, FAILED_TO_TRAIN, UNSTABLE


def design_notes(res: Results, a: Analysis | None) -> tuple[list[str], list[str]]:
    """(notes, warnings) about the model, its error, the design's gaps and the precision reached."""
    notes: list[str] = [f"Equivalence margin: +/-{res.margin:g} {res.unit} (`report.equivalence_margin` or `--margin`)."]
    if math.isfinite(res.ceiling):
        split = "test" if res.has_test_split else "validation"
        notes.append(f"Unigram loss of the {split} split (the ceiling at which runs that diverged or did not learn "
                     f"are counted in the sensitivity analysis): {fmt_loss(res.ceiling)} {res.unit}.")
    warns: list[str] = summary_notes(res) + mixed_code(res)
    if a is None:
        return notes, warns + [no_effects(res)]
    ok = res.counted
    model_notes, model_warns = _model_notes(res, a)
    gap_notes, gap_warns = _gap_notes(res, a, ok)
    notes += model_notes + gap_notes + _precision_notes(res, a, ok)
    warns += model_warns + _error_warnings(res, a, ok) + gap_warns
    if ok["seed"].nunique() < 2:
        warns.append("Only one seed: seed-to-seed noise cannot be separated from the effects.")
    return notes, warns


def _model_notes(res: Results, a: Analysis) -> tuple[list[str], list[str]]:
    """(notes, warnings) on the statistical model the effects were fitted with and the variances it assumes."""
    fit, notes, warns = a.fit, [], []
    notes.append(f"Model: `{FORMULAS[fit.kind]}`" + (f", {fit.df:g} residual degrees of freedom, residual SD "
                                                      f"{fmt_loss(fit.resid_sd)} {res.unit}" if fit.has_error else "")
                 + (f"; seed blocking {'on' if fit.seed_block else 'off'}" if fit.kind in ("pure", "welch", "own")
                    else "")
                 + f"; {a.n_tests} distinct tests in the Holm family.")
    if fit.kind == "pure" and fit.bartlett_p < HETERO_P:
        warns.append(f"Cell variances differ (Bartlett p {fmt_p(fit.bartlett_p)}), but a cell has a single ok run, so "
                     "per-cell variances cannot be used: CIs assume equal variances and may be too narrow.")
    elif fit.kind == "pure" and not absent(fit.bartlett_p):
        notes.append(f"Equal cell variances kept (Bartlett p {fmt_p(fit.bartlett_p)}; per-cell variances are used "
                     f"below p = {HETERO_P:g}).")
    if fit.kind == "welch":
        warns.append(f"Cell variances differ (Bartlett p {fmt_p(fit.bartlett_p)}): every CI uses per-cell variances "
                     "with Welch-Satterthwaite degrees of freedom.")
    if fit.kind in OWN:
        notes.append("Each arm's CI and test use its own variance and the baseline's (Welch-Satterthwaite df, "
                     "column `df`), never one pooled over arms that differ in noise.")
    if fit.kind == "pooled":
        warns.append(f"No pure error (one ok run per cell): CIs, p-values and calls ASSUME that every interaction "
                     f"of three or more factors is zero; their {fit.df:g} degrees of freedom are pooled as error "
                     "and no higher-order term is tested.")
    return notes, warns


def _error_warnings(res: Results, a: Analysis, ok: pd.DataFrame) -> list[str]:
    """Warnings on where the error comes from: no error estimate, ok runs without a loss, cells of a single run."""
    fit, warns = a.fit, []
    if fit.kind == "none" and ok.groupby("cell").size().max() > 1:
        warns.append(f"No error estimate: {_no_variation(ok, res.outcome)}, so no variation is left to "
                     "estimate an error from. Estimates only, no CIs, p-values or calls.")
    elif fit.kind == "none":
        warns.append("No error estimate (one ok run per cell and fewer than three factors): estimates only, "
                     "no CIs, p-values or calls. Run at least 2 seeds.")
    unusable = res.runs[res.runs["ok"] & ~np.isfinite(res.runs[res.outcome].astype(float))]
    if len(unusable):
        warns.append(f"{len(unusable)} ok run(s) without a finite {res.outcome} left out of every analysis: "
                     + ", ".join(map(str, unusable["run_id"][:5])) + (", ..." if len(unusable) > 5 else "") + ".")
    if fit.kind in ("pure", "welch", *OWN):
        single = [c for c, n in ok.groupby("cell").size().items() if n == 1]
        if single:
            warns.append(f"{len(single)} cell(s) with a single ok run ({'; '.join(single[:5])}"
                         f"{'; ...' if len(single) > 5 else ''}): their error is assumed to equal the pooled one.")
    return warns


def _gap_notes(res: Results, a: Analysis, ok: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(notes, warnings) on the design's gaps: cells without an ok run, a design that is not a full factorial, and
    the joint test of the interactions it does not separate."""
    notes, warns, d = [], [], a.design
    dead = [c for c in res.cells["cell"] if c not in set(ok["cell"])]
    excluded = len(d.grid) - len(res.cells)
    if dead:
        lost = [f"{res.label(r['factor'], r['level'])}" for r in a.main.to_dict("records") if absent(r["estimate"])]
        warns.append(f"{len(dead)} cell(s) with no ok run: {'; '.join(dead)}. Averaged effects need every cell"
                     + (f"; not estimable: {', '.join(lost)}" if lost else "") + ".")
    if not d.full_factorial:
        notes.append(f"Not a full factorial ({excluded} cell(s) excluded by the sweep, {len(dead)} without an ok "
                     "run): each level's effect is its simple effect against the baseline cell (from the cell that "
                     "differs from the baseline in that factor alone), every cell is compared with the baseline "
                     "cell, and terms the cells cannot separate are reported as aliased.")
    if a.higher_joint is not None:
        F, df1, df2, p = a.higher_joint
        notes.append(f"Interactions of three or more factors, jointly: F({df1}, {df2:g}) = {F:.2f}, p {fmt_p(p)}.")
    return notes, warns


def _precision_notes(res: Results, a: Analysis, ok: pd.DataFrame) -> list[str]:
    """The precision the main effects reached, and the seeds a half-width of the margin needs (none without a CI)."""
    main = a.main.dropna(subset=["ci95"])
    if not len(main):
        return []
    need = main["seeds_needed"].max()
    beyond = int(main["seeds_needed"].isna().sum()) if a.text is not None else 0  # the text's part alone too wide
    per = "arm" if res.arms else "cell"  # an arms design adds the baseline's seeds at sqrt(k) per arm seed
    seeds = f"{int(ok.groupby('cell').size().min())} seeds per arm" if res.arms else f"{ok['seed'].nunique()} seed(s)"
    return [f"Precision: main-effect 95% CIs are +/-{fmt_loss(main['ci95'].max())} {res.unit} at "
            f"{seeds}; a half-width of the margin ({res.margin:g}) needs "
            + (f"no number of seeds (up to {MAX_SEEDS:,}) for {beyond} of {len(main)} main effect(s) on this "
               "much test text: seeds do not shrink the text's part of a CI (`text_share`)." if beyond
               else f"{int(need)} seeds per {per} (`seeds_needed`, from this error)." if not absent(need)
               else f"more than {MAX_SEEDS:,} seeds per {per}.")]


MISSING_BLOCKS = {  # why a report's CIs count the seeds alone (`load.block_losses.BlockLosses.missing`)
    "no test split": "the runs have no test split, so no per-block test losses in `test_blocks.csv`",
    "no blocks": "{without} of {runs} ok runs have no `test_blocks.csv`: results from before the test blocks were kept",
    "unlike blocks": "the runs' `test_blocks.csv` files do not cut the test text into the same blocks",
    "not their loss": "the `test_blocks.csv` of run {culprit} does not add up to its test loss",
}


def _no_variation(ok: pd.DataFrame, outcome: str) -> str:
    """Why a fit with replicates found no error: each cell's runs at one loss, or losses that are exactly cell plus
    seed (runs that move together from seed to seed: two cells matching seed for seed, the same runs twice?)."""
    runs = ok.assign(y=ok[outcome].astype(float))
    tol = 1e-9 * max(1.0, float(runs["y"].abs().mean()))  # the fit's own test of no variation (stats.models)
    if (runs.groupby("cell")["y"].agg(np.ptp) <= tol).all():
        return "the runs of each cell have identical losses"
    by_seed = runs.pivot_table(index="seed", columns="cell", values="y", sort=False)
    cells = list(by_seed.columns)
    twins = [f"{a} and {b}" for i, a in enumerate(cells) for b in cells[i + 1:]
             if by_seed[[a, b]].notna().all(axis=1).sum() > 1 and (by_seed[a] - by_seed[b]).abs().max() <= tol]
    same = f" (cells {'; '.join(twins)} have the same loss at every seed: the same runs under two names?)" if twins else ""
    return f"every run's loss is exactly its cell's plus its seed's{same}"


def error_model(res: Results, a: Analysis | None) -> str:
    """The method's sentence on which error the effects' CIs count: the seeds, or the seeds and the text's blocks."""
    if a is None or not a.fit.has_error:
        return "Error model: none (no effect has an error estimate; see Design and model)."
    if a.text is None:
        tb = res.test_blocks
        why = MISSING_BLOCKS.get(tb.missing, "the seed model leaves no error for the blocks").format(
            without=tb.without, runs=tb.runs, culprit=tb.culprit)
        return ("Error model: seeds only. Every CI, p-value and call counts the variation between seeds and holds "
                f"the scored text fixed ({why}): the same runs scored on other text could differ by more than a CI "
                "says.")
    share = a.main["text_share"].dropna()
    shares = f"{share.min():.2f} to {share.max():.2f} for the main effects" if len(share) else "none"
    seeds_only = ["the effects along training (validation loss)"]
    seeds_only += [words for _, kind in report_kinds(res.spec) for words in kind.seeds_only(res)]
    return ("Error model: seeds x text blocks. Every CI, p-value and call of the effect tables counts both the "
            f"variation between seeds and which text is scored: each run's test loss on the test split's "
            f"{a.text.n_blocks} contiguous blocks (`test_blocks.csv`) is taken as a sample of text, and an effect's "
            "variance is the model's above plus its arm x block part (the variance over blocks of the effect on "
            "each block alone, less what the runs' own block-to-block noise, SD "
            f"{fmt_loss(a.text.sd_err)} {res.unit}, puts there, times the sum of the blocks' squared weights), "
            "with Satterthwaite degrees of freedom (`gptlab/stats/text_share.py`; its calibration is in "
            f"docs/STATISTICS.md). `text_share` is the blocks' share of an effect's variance: {shares}. "
            f"{_listed(seeds_only)} count the seeds only.")


def no_effects(res: Results) -> str:
    """Why there is no effect to estimate: a tuned sweep still in (or stopped in) its selection, or no successful run."""
    if not len(res.runs) and len(res.selection):
        failed = int((res.selection["status"] == FAILED).sum())
        return (f"No estimation runs yet: the effects come from the runs trained at each cell's pick, which the sweep "
                f"trains once every selection run has finished ({len(res.selection)} have"
                + (f", {failed} of them failed: fix the cause and rerun the sweep with --rerun-failed" if failed else "")
                + "). Every pick and table below is from the selection runs alone.")
    return "No successful runs or no factors: no effects to estimate."


def _listed(items: list[str]) -> str:
    """'A, B and C', capitalised."""
    text = ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else items[0]
    return text[0].upper() + text[1:]


LISTED = 8  # the versions a warning names; more are counted (each run's is in its summary.json)


def _some(values: list[str]) -> str:
    """Up to `LISTED` values, then how many more (a sweep resumed over many commits would list a line of hashes)."""
    more = len(values) - LISTED
    return ", ".join(values[:LISTED]) + (f" and {more} more" if more > 0 else "")


def mixed_code(res: Results) -> list[str]:
    """A warning when the runs were trained by different gptlab versions or commits."""
    seen = {key: res.environment.get(key, []) for key in ("gptlab", "git_commit")}
    mixed = {key: values for key, values in seen.items() if len(values) > 1}
    if not mixed:
        return []
    what = "; ".join(f"{'versions' if key == 'gptlab' else 'commits'} {_some(values)}" for key, values in mixed.items())
    dirty = " (`+dirty`: with changes not yet committed)" if any(v.endswith("+dirty") for v in seen["git_commit"]) else ""
    return [f"The runs were trained by different code ({what}){dirty}. What this means for the numbers: each run is "
            "right for the code that trained it, but if the code changed what a run computes (the model, the data, the "
            "training loop) between these versions, then runs trained by one version and by another differ for that "
            "reason too, and an effect between them measures the change of code along with the design; nothing in "
            "this report can tell the two apart. Each run's version is in its summary.json (`environment`). To rule "
            "it out, rerun the sweep into a new results folder with one version."]


def summary_notes(res: Results) -> list[str]:
    """What the report read instead of summary.csv, and the finished run folders it could not count as the sweep's."""
    check, lines = res.summary_check, []
    if check.text is not None:
        lines.append(f"summary.csv disagrees with the run folders ({check.reason}): this report reads the runs from "
                     "their folders instead (the file is left as it is; the sweep's next run rewrites it).")
    if check.unplaced:
        lines.append(f"{len(check.unplaced)} finished run folder(s) in runs/ are neither in summary.csv nor placed in "
                     f"this sweep (no readable place.json) and are left out of this report: {_ids(check.unplaced)} "
                     "(runs of an earlier spec, or damaged place.json files: the sweep's command records its runs' "
                     "places again).")
    if check.others:
        lines.append(f"{len(check.others)} finished run folder(s) were trained under another version of this sweep (its "
                     f"spec, a plugin or a corpus changed since) and are not in this report: {_ids(check.others)}.")
    return lines


def _ids(run_ids: tuple[str, ...]) -> str:
    return ", ".join(run_ids[:3]) + (f" and {len(run_ids) - 3} more" if len(run_ids) > 3 else "")


def schedule_note(res: Results) -> list[str]:
    """A sentence when `train.max_iters` is a factor: under cosine its levels change the learning-rate schedule too;
    under wsd each level is a finished schedule of its own length."""
    if LENGTH_KEY not in res.factors or "train.schedule" in res.factors:
        return []
    if res.fixed("train.schedule") == WSD:
        cooldown = float(res.fixed("train.cooldown_fraction"))
        return [f"Under `train.schedule: wsd` every level of `train.max_iters` is a finished schedule: the same warmup "
                f"and constant peak learning rate, then a cooldown to `min_lr` over the run's last {cooldown:.0%} of "
                "steps. So each level is the result of a run of that length (its cooldown in proportion to it), not a "
                "snapshot of a longer run. Runs of one cell and seed share their initialisation and batch order at "
                "every length (with shared trunks, a shorter run's steps up to its cooldown are the longer run's), "
                "so effects at two lengths are compared paired by seed (`tables/effect_changes.csv`)."]
    if res.fixed("train.lr_decay_iters") is not None:
        return []
    return ["`train.max_iters` is confounded with the learning-rate schedule: it also sets where the decay ends "
            "(`train.lr_decay_iters` defaults to it), so its levels differ in schedule as well as in length, and "
            "an effect that changes with it may follow either."]


def sensitivity(res: Results, table: pd.DataFrame) -> list[str]:
    """What counting every run that failed to train (diverged or collapsed) at the ceiling loss changes
    (`analyses.sensitivity`'s `table`), or why there is no such analysis; nothing when every run trained."""
    n_diverged = int(res.runs["status"].isin(FAILED_TO_TRAIN).sum())
    if not n_diverged:
        return []
    if not math.isfinite(res.ceiling):
        return [f"No sensitivity analysis: the ceiling loss needs the dataset, which was not found ({res.ceiling_note})."]
    ceiling, unit, split = res.ceiling, res.unit, "test" if res.has_test_split else "validation"
    changed = table[table["call"].fillna("") != table["call_at_ceiling"].fillna("")]
    head = (f"Counting the {n_diverged} run(s) that diverged or did not learn at the ceiling loss {fmt_loss(ceiling)} "
            f"{unit} (unigram loss of the {split} split) instead of leaving them out: ")
    if changed.empty:
        return [head + "no call changes."]
    return [head + "; ".join(f"{r['effect']} {r['call'] or 'not estimable'} -> {r['call_at_ceiling']} "
                             f"({fmt_loss(r['estimate_at_ceiling'])})" for r in changed.to_dict("records")) + "."]


def divergence_caveat(table: pd.DataFrame) -> str:
    """How high a divergence rate a cell without a diverged run can still have (`tables.divergence`; "" when every
    cell had one)."""
    clean = table[table["n_diverged"] == 0]
    return (f"A cell where none of {int(clean['n_ok'].min())} runs diverged or collapsed can still have a divergence rate up "
            f"to {clean['rate_ci_high'].max():.3f}." if len(clean) else "")


def no_divergence(table: pd.DataFrame) -> str:
    """The Divergence section's one sentence when every count of `tables.divergence` is zero ("" otherwise): no
    run diverged, collapsed or crashed, and how high a rate a cell can still have."""
    if not len(table) or table[["n_diverged", "n_failed"]].to_numpy().sum() or not table["n_ok"].max():
        return ""
    return (f"No run diverged, collapsed or crashed in any of the {len(table)} cells; a cell where none of its "
            f"{int(table['n_ok'].min())} runs did can still have a divergence rate up to "
            f"{table['rate_ci_high'].max():.3f} (Clopper-Pearson 95% CI).")


def stability(res: Results, table: pd.DataFrame) -> list[str]:
    """What `tables.stability` says in words: where runs did not train (an estimation run that failed at a cell's
    pick is that cell's failure rate there), which were judged again under today's status rule, or that all
    trained."""
    if not len(table):
        return []
    keys = [c for c in table.columns if c not in ("cell", "role", *COUNTS)]
    lines, selection = [], {}
    for r in table.to_dict("records"):
        lost = sum(int(r[c]) for c in LOST)
        if not lost:
            continue
        at = " at " + ", ".join(f"{k.rsplit('.', 1)[-1]} {_value(r[k])}" for k in keys) if keys else ""
        how = ", ".join(f"{int(r[c])} {w}" for c, w in zip(LOST, (COLLAPSED, UNSTABLE, DIVERGED))
                        if int(r[c]))
        if r["role"] == "selection":
            selection.setdefault(r["cell"], []).append(f"{at.removeprefix(' at ') or 'its setting'} ({lost} of "
                                                       f"{int(r['runs'])}: {how})")
        else:
            lines.append(f"{r['cell']}: {lost} of {int(r['runs'])} {r['role']} runs{at} did not train ({how}); "
                         "they are that cell's failure rate there, not averaged into its loss.")
    lines += [f"{cell}: selection runs did not train at {'; '.join(where)}: a failure at that setting, never a "
              "loss in its pick or fit." for cell, where in selection.items()]
    if not lines:
        lines.append(f"Every one of the {int(table['runs'].sum())} runs that finished trained: none diverged or "
                     "collapsed.")
    old = res_reclassified(res)
    if len(old):
        shown = ", ".join(old[:5]) + (f" and {len(old) - 5} more" if len(old) > 5 else "")
        lines.append(f"{len(old)} run(s) recorded under an earlier status rule read otherwise under today's, judged from "
                     f"their own curves (docs/STATISTICS.md, \"Which runs failed\"): {shown}.")
    return lines


def res_reclassified(res: Results) -> list[str]:
    """The run ids whose status today's rule reads otherwise than they recorded, every role."""
    frames = [f for f in (res.selection, res.runs, res.other_roles) if len(f) and "reclassified" in f]
    return [str(r) for f in frames for r in f.loc[f["reclassified"].astype(bool), "run_id"]]


def _value(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
