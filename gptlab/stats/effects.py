"""Every effect of one outcome (a loss per run): estimates, CIs, p-values, Holm adjustment and calls.

Owns what a design may print. A full factorial gets averaged main effects, all two-way
interaction contrasts, every higher-order contrast with a joint test, and simple effects. Any
other set of cells (an `exclude`, or a cell with no successful run) gets only what it can
estimate: each cell against the baseline cell, a level's effect from the cell that differs from
the baseline in that factor alone, and every non-estimable term named with its alias string.
Contrasts come from `design`, their errors from `models` (plus the text's, from `text_share`, given
the runs' test blocks); every p-value of one analysis is one Holm family (identical contrasts
counted once) and every effect gets a call (`calls`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from gptlab.stats import calls
from gptlab.stats.arms import baseline_ratio
from gptlab.stats.design import Design, Term, estimability
from gptlab.stats.models import OWN, CellFit, Test, fit_cells, mde80
from gptlab.stats.robustness import check as tuning_check
from gptlab.stats.robustness import tuning_word
from gptlab.stats.text_share import Blocks, TextError, text_error
from gptlab.stats.to_decide import ErrorParts, error_parts, seeds_needed

Label = Callable[[str, str], str]  # (factor, level) -> "norm=post"
STATS = ["estimate", "ci_low", "ci_high", "ci95", "ci90_low", "ci90_high", "p_value", "p_adjusted", "call"]
MAIN_COLS = ["factor", "level", "baseline", "kind"] + STATS + ["mde80", "seeds_needed", "alias"]
INT_COLS = ["factor_a", "level_a", "factor_b", "level_b", "kind"] + STATS + ["mde80", "seeds_needed", "alias"]
HIGHER_COLS = ["term", "order"] + STATS
SIMPLE_COLS = ["factor", "level", "baseline", "at"] + STATS
CELL_COLS = ["cell", "changes"] + STATS
ALIAS_COLS = ["aliased", "estimable_as"] + STATS
# A tuned sweep's check of each call: robust | depends on the picks | "" (nothing to check); the call before the check;
# how far the loss left may move the estimate against the call (nats, one-sided 95% upper bound); the design cell
# (index) whose pick moves it most, where the call does not hold; the Holm-adjusted p of the test at the optima.
TUNING_COLS = ["tuning", "call_at_picks", "tuning_shift", "tuning_cell", "tuning_p"]
# An arms design's (each cell its own variance, `models` kind own): each row's Welch-Satterthwaite df (text included)
# and whose variance it used ("own", or "pooled for a single-run cell")
OWN_COLS = ["df", "variance"]
AVERAGED = "averaged over the other factors"
AT_BASELINE = "simple effect at the baseline of the other factors"


def term_label(term: Term, label: Label) -> str:
    return " x ".join(label(f, lv) for f, lv in term)


def alias_label(group: tuple[Term, ...], label: Label) -> str:
    return " + ".join(term_label(t, label) for t in group) + ", aliased"


@dataclass
class Analysis:
    """The effect tables of one outcome (unrounded), the fit behind them and what could not be estimated."""
    design: Design
    fit: CellFit
    main: pd.DataFrame
    interactions: pd.DataFrame
    higher: pd.DataFrame
    simple: pd.DataFrame
    cells_vs_baseline: pd.DataFrame
    aliases: pd.DataFrame
    higher_joint: tuple[float, int, float, float] | None = None  # F, df1, df2, p
    not_estimable: list[str] = field(default_factory=list)
    n_tests: int = 0
    text: TextError | None = None  # the text's share of the error (seed x block model), None: seeds only
    tuned: bool = False  # the calls were checked against each cell's loss left on the table (`tuning`, `tuning_cell`)
    tests: dict[str, list[Test]] = field(default_factory=dict)  # each table's rows' tests (se, df), row for row
    contrasts: dict[str, list[np.ndarray | None]] = field(default_factory=dict)  # each row's weights over the cells
    loss_left: np.ndarray | None = None  # the per-cell losses left the calls were checked against (design.cells order)
    parts: dict[str, list[ErrorParts | None]] = field(default_factory=dict)  # main and int rows: their error's
    # parts (seeds, text), for what would decide them (`to_decide`)


class _Rows:
    """Collects rows of several tables with their contrast vectors, for one Holm family."""

    def __init__(self, fit: CellFit, margin: float, counts: np.ndarray, ratios: np.ndarray | None = None,
                 text: TextError | None = None, loss_left: np.ndarray | None = None) -> None:
        self.fit, self.margin, self.text, self.loss_left = fit, margin, text, loss_left
        self.counts, self.ratios = counts, ratios  # each cell's runs, and its runs per arm seed as seeds are added
        self.parts: dict[str, list[ErrorParts | None]] = {}
        self.rows: dict[str, list[dict]] = {}
        self.tests: dict[str, list[Test]] = {}
        self.vectors: dict[str, list[np.ndarray | None]] = {}  # None: untested (no error), out of the Holm family
        self.contrasts: dict[str, list[np.ndarray | None]] = {}

    def add(self, table: str, row: dict, c: np.ndarray | None, precision: bool = False) -> None:
        seed = self.fit.test(c)
        t = self.text.test(seed, c) if self.text is not None else seed
        row = {**row, **_stats(t)}
        self.tests.setdefault(table, []).append(t)
        if self.text is not None:
            row["text_share"] = t.text_share
        if self.fit.kind in OWN:
            row["df"], row["variance"] = t.df, self.fit.variance_note(c)
        if precision:
            row["mde80"] = mde80(t)
            parts = error_parts(self.fit, c, self.text, self.counts, self.ratios)  # seeds leave the text's part
            need = seeds_needed(parts, self.margin) if parts is not None else None
            row["seeds_needed"] = math.nan if need is None else float(need)
            self.parts.setdefault(table, []).append(parts)
        self.rows.setdefault(table, []).append(row)
        self.vectors.setdefault(table, []).append(c if not math.isnan(t.p_value) else None)
        self.contrasts.setdefault(table, []).append(c)

    def frame(self, table: str, cols: list[str]) -> pd.DataFrame:
        extra = (["text_share"] if self.text is not None else []) + (OWN_COLS if self.fit.kind in OWN else []) \
            + (TUNING_COLS if self.loss_left is not None else [])
        if extra:  # the text's share of each CI's variance, its df and variance, and the tuning check, after the call
            cols = cols[:cols.index("call") + 1] + extra + cols[cols.index("call") + 1:]
        return pd.DataFrame(self.rows.get(table, []), columns=cols)

    def joint(self, C: np.ndarray) -> tuple[float, int, float, float]:
        return self.text.joint(self.fit, C) if self.text is not None else self.fit.joint(C)

    def adjust(self) -> int:
        """Holm across every distinct tested contrast of every table; then the calls. Returns #tests."""
        keys, p_of_key = [], {}
        for table, vecs in self.vectors.items():
            for row, c in zip(self.rows[table], vecs):
                key = None if c is None else tuple(np.round(c, 10))
                keys.append(key)
                if key is not None:
                    p_of_key.setdefault(key, row["p_value"])
        order = list(p_of_key)
        adjusted = dict(zip(order, calls.holm([p_of_key[k] for k in order])))
        it = iter(keys)
        for table in self.vectors:
            for row in self.rows[table]:
                key = next(it)
                row["p_adjusted"] = adjusted[key] if key is not None else math.nan
                row["call"] = "" if math.isnan(row["p_value"]) else calls.call(  # no error, no call
                    row["estimate"], row["p_adjusted"], row["ci90_low"], row["ci90_high"], self.margin)
        if self.loss_left is not None:
            self._check_tuning()
        return len(order)

    def _check_tuning(self) -> None:
        """Each call against its cells' loss left on the table (`stats.robustness`): DEPENDS where it does not hold."""
        for table, vecs in self.vectors.items():
            for row, c, t in zip(self.rows[table], vecs, self.tests[table]):
                check = tuning_check(t.estimate, t.se, t.df, row["p_value"], row["p_adjusted"],
                                     (row["ci90_low"], row["ci90_high"]), row["call"], c, self.loss_left, self.margin)
                row["call_at_picks"], row["call"], row["tuning_shift"] = row["call"], check.call, check.shift
                row["tuning"] = tuning_word(check, row["call_at_picks"])
                row["tuning_cell"] = check.cell if check.cell is not None and check.robust is False else math.nan
                row["tuning_p"] = check.p


def _stats(t: Test) -> dict:
    return {"estimate": t.estimate, "ci_low": t.ci_low, "ci_high": t.ci_high, "ci95": t.half_width,
            "ci90_low": t.ci90_low, "ci90_high": t.ci90_high, "p_value": t.p_value}


def analyse(y: np.ndarray, cells: list[tuple[str, ...]], seeds: np.ndarray, design: Design, label: Label,
            margin: float, endpoint: bool = True, allow_welch: bool = True,
            error_mask: np.ndarray | None = None, blocks: Blocks | None = None,
            loss_left: np.ndarray | None = None, block_seeds: bool = True, own_variance: bool = False) -> Analysis:
    """All effects of outcome `y` (one value per run, run i in cell `cells[i]`).

    `design.cells` must be the cells that have at least one value. With `endpoint` False only the
    main effects (full factorial) or cells against the baseline (other designs) are computed.
    `error_mask` (an adaptive sweep's first-round runs): the error comes from those alone (`models`).
    `blocks` (each run's losses per block of its test text): every CI counts the text too (`text_share`).
    `loss_left` (a tuned sweep: per design cell, the loss its pick leaves on the table as (estimate, upper end of
    its 95% CI) rows, or the upper ends alone; NaN where unknown): every call is checked against it
    (`stats.robustness`; columns TUNING_COLS).
    `block_seeds` False: no seed block in the model (an arms design, whose baseline has seeds no arm shares).
    `own_variance` (an arms design): every cell's own variance, Welch-Satterthwaite df (`models`, kind `own`).
    """
    index = {c: i for i, c in enumerate(design.cells)}
    cell_idx = np.array([index[tuple(c)] for c in cells])
    fit = fit_cells(np.asarray(y, float), cell_idx, np.asarray(seeds), design, allow_welch, error_mask, block_seeds,
                    own_variance)
    text = text_error(blocks, cell_idx, np.asarray(seeds), design, fit) if blocks is not None else None
    counts = np.bincount(cell_idx, minlength=len(design.cells))
    ratios = None  # an arms design adds seeds to the baseline at Dunnett's sqrt(k) per arm seed (`stats.arms`)
    if not block_seeds and design.baseline_cell in design.cells:
        ratios = np.ones(len(design.cells))
        ratios[design.cells.index(design.baseline_cell)] = baseline_ratio(len(design.cells) - 1)
    rows = _Rows(fit, margin, counts, ratios, text, None if loss_left is None else np.asarray(loss_left, float))
    if design.full_factorial:
        joint, missing = _factorial(design, label, rows, endpoint, fit)
    else:
        joint, missing = _partial(design, label, rows, endpoint)
    n_tests = rows.adjust()
    return Analysis(design, fit, rows.frame("main", MAIN_COLS), rows.frame("int", INT_COLS),
                    rows.frame("higher", HIGHER_COLS), rows.frame("simple", SIMPLE_COLS),
                    rows.frame("cells", CELL_COLS), rows.frame("alias", ALIAS_COLS), joint, missing, n_tests, text,
                    loss_left is not None, rows.tests, rows.contrasts, rows.loss_left, rows.parts)


def _factorial(design: Design, label: Label, rows: _Rows, endpoint: bool, fit: CellFit):
    for (f, lv), in design.terms(1):
        rows.add("main", {"factor": f, "level": lv, "baseline": design.baseline[f], "kind": AVERAGED, "alias": ""},
                 design.interaction(((f, lv),)), precision=True)
    if not endpoint:
        return None, []
    for (fa, la), (fb, lb) in design.terms(2):
        rows.add("int", {"factor_a": fa, "level_a": la, "factor_b": fb, "level_b": lb, "kind": AVERAGED,
                         "alias": ""}, design.interaction(((fa, la), (fb, lb))), precision=True)
    joint = None
    if fit.kind != "pooled":  # under `pooled` the higher-order terms are the error
        higher = [t for k in range(3, len(design.factors) + 1) for t in design.terms(k)]
        for t in higher:
            rows.add("higher", {"term": term_label(t, label), "order": len(t)}, design.interaction(t))
        if higher:
            joint = rows.joint(np.stack([design.interaction(t) for t in higher]))
    _simple(design, rows, label)
    return joint, []


def _simple(design: Design, rows: _Rows, label: Label) -> None:
    for f, lv, at, c in design.simple_effects():
        rows.add("simple", {"factor": f, "level": lv, "baseline": design.baseline[f],
                            "at": ", ".join(label(k, v) for k, v in at.items())}, c)


def _partial(design: Design, label: Label, rows: _Rows, endpoint: bool):
    est = estimability(design)
    missing = [", ".join(label(f, v) for f, v in zip(design.factors, c)) for c in design.grid
               if c not in set(design.cells)]

    def why(t: Term) -> str:
        if t in est.aliases:
            return alias_label(est.aliases[t], label)
        if design.baseline_cell not in design.cells:
            return "not estimable: the baseline cell has no successful run"
        return "not estimable: no cell with data contains " + term_label(t, label)

    for t in design.terms(1):
        (f, lv), = t
        rows.add("main", {"factor": f, "level": lv, "baseline": design.baseline[f], "kind": AT_BASELINE,
                          "alias": "" if t in est.contrasts else why(t)}, est.contrasts.get(t), precision=True)
    for cell in design.cells:
        if cell != design.baseline_cell:
            rows.add("cells", {"cell": ", ".join(label(f, v) for f, v in zip(design.factors, cell)),
                               "changes": len(design.changes(cell))},
                     design.versus_baseline(cell))
    if not endpoint:
        return None, missing
    for t in design.terms(2):
        (fa, la), (fb, lb) = t
        rows.add("int", {"factor_a": fa, "level_a": la, "factor_b": fb, "level_b": lb, "kind": AT_BASELINE,
                         "alias": "" if t in est.contrasts else why(t)}, est.contrasts.get(t), precision=True)
    for k in range(3, len(design.factors) + 1):
        for t in design.terms(k):
            if t in est.contrasts:
                rows.add("higher", {"term": term_label(t, label), "order": k}, est.contrasts[t])
    for group, c in est.alias_contrasts.items():
        rows.add("alias", {"aliased": alias_label(group, label),
                           "estimable_as": "the cell with all of these changes against the baseline, "
                                           "minus its estimable terms"}, c)
    _simple(design, rows, label)
    return None, missing
