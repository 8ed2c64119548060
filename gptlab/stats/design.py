"""The experimental design as linear contrasts over cells: what a set of cells can estimate.

Owns `design_cells` (which cells a sweep has: the grid's cartesian product minus its `exclude`
rules, in grid order; one rule for the sweep expanding runs, the report reading them back and
synthetic results), `Design` (factors, levels, baseline and the cells that have data) and every
contrast of an effect, as a weight vector over those cells:

- averaged main effect of level l of factor f: the mean over every combination o of the other
  factors of mu(l, o) - mu(baseline, o) (the effect-coded marginal contrast; needs every cell);
- k-way interaction contrast of levels (l_1 .. l_k): the k-th order difference
  sum over subsets S of (-1)^(k - |S|) mu(S at their levels, the rest of the k at baseline),
  averaged over the other factors (k = 2 is mu(a, b) - mu(a, 0) - mu(0, b) + mu(0, 0));
- simple effect: mu(l, o) - mu(baseline, o) at one combination o of the other factors;
- cell against the baseline cell.

For a set of cells that is not the full grid (an `exclude`, or a cell with no successful run),
`estimability` says which treatment-coded terms (a level against its baseline, or an
interaction of such changes, all other factors at baseline) the cells determine, and names the
sums of terms that are aliased: estimable only together.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from gptlab.stats.levels import same_level

Cell = tuple[str, ...]  # one level label per factor, in factor order
Term = tuple[tuple[str, str], ...]  # (factor, non-baseline level) pairs in factor order


def design_cells(grid: Mapping[str, Sequence[Any]], exclude: Sequence[Mapping[str, Any]] = ()) -> list[tuple]:
    """Level tuples (one level per factor, in the grid's factor order) of every cell not excluded.

    A rule excludes a cell when every factor it names has the level it names (`stats.levels.same_level`;
    a rule naming a factor the grid lacks excludes nothing).
    """
    factors = list(grid)
    missing = object()
    return [combo for combo in itertools.product(*grid.values())
            if not any(all(same_level(dict(zip(factors, combo)).get(k, missing), v) for k, v in rule.items())
                       for rule in exclude)]


def factor_short(factors: Sequence[str], factor: str) -> str:
    """A factor without its section ("model.norm" -> "norm") unless that is ambiguous among `factors`."""
    tail = factor.rsplit(".", 1)[-1]
    return tail if [f.rsplit(".", 1)[-1] for f in factors].count(tail) == 1 else factor


def effect_label(factors: Sequence[str], factor: str, level: Any) -> str:
    """'norm=post': how the report and rounds.csv name a level of a factor (`factor_short`)."""
    return f"{factor_short(factors, factor)}={level}"


@dataclass(frozen=True)
class Design:
    """Factors with their levels and baseline, and the cells (level tuples) that have data."""

    factors: tuple[str, ...]  # dotted factor keys, grid order
    levels: Mapping[str, tuple[str, ...]]  # factor -> level labels, grid order
    baseline: Mapping[str, str]  # factor -> baseline level label
    cells: tuple[Cell, ...]  # cells with data, grid order

    @property
    def grid(self) -> list[Cell]:
        """Every cell of the full cartesian product, grid order."""
        return list(itertools.product(*(self.levels[f] for f in self.factors)))

    @property
    def full_factorial(self) -> bool:
        """True when every cell of the grid has data (so averaged effects are estimable)."""
        return set(self.grid) <= set(self.cells)

    @property
    def baseline_cell(self) -> Cell:
        return tuple(self.baseline[f] for f in self.factors)

    def index(self, cell: Cell) -> int | None:
        return self._positions.get(tuple(cell))

    @cached_property
    def _positions(self) -> dict[Cell, int]:
        return {c: i for i, c in enumerate(self.cells)}

    def vector(self, weights: Mapping[Cell, float]) -> np.ndarray | None:
        """Weights over `cells` (None when a weighted cell has no data)."""
        pos = self._positions
        out = np.zeros(len(self.cells))
        for cell, w in weights.items():
            if w == 0:
                continue
            if cell not in pos:
                return None
            out[pos[cell]] += w
        return out

    def non_baseline(self, factor: str) -> list[str]:
        return [lv for lv in self.levels[factor] if lv != self.baseline[factor]]

    def others(self, factors: Sequence[str]) -> list[str]:
        return [f for f in self.factors if f not in factors]

    def combos(self, factors: Sequence[str]) -> list[tuple[str, ...]]:
        """Every combination of levels of `factors` (grid order)."""
        return list(itertools.product(*(self.levels[f] for f in factors)))

    def cell(self, assignment: Mapping[str, str]) -> Cell:
        """The cell with the given levels, baseline for factors not named."""
        return tuple(assignment.get(f, self.baseline[f]) for f in self.factors)

    # ---- contrasts -------------------------------------------------------------------------
    def interaction(self, term: Term) -> np.ndarray | None:
        """k-th order difference of `term`'s levels against baseline, averaged over the other factors.

        k = 1 is the averaged main effect. None when a cell it needs has no data.
        """
        named = [f for f, _ in term]
        rest = self.others(named)
        combos = self.combos(rest)
        weights: dict[Cell, float] = {}
        for mask in itertools.product((0, 1), repeat=len(term)):
            sign = (-1) ** (len(term) - sum(mask))
            assign = {f: (lv if m else self.baseline[f]) for (f, lv), m in zip(term, mask)}
            for combo in combos:
                cell = self.cell({**assign, **dict(zip(rest, combo))})
                weights[cell] = weights.get(cell, 0.0) + sign / len(combos)
        return self.vector(weights)

    def simple(self, factor: str, level: str, at: Mapping[str, str]) -> np.ndarray | None:
        """mu(level, at) - mu(baseline, at); `at` fixes every other factor."""
        return self.vector({self.cell({**at, factor: level}): 1.0, self.cell({**at, factor: self.baseline[factor]}): -1.0})

    def simple_effects(self) -> Iterator[tuple[str, str, dict[str, str], np.ndarray]]:
        """(factor, level, the other factors' levels, contrast) for every simple effect the cells allow."""
        for f in self.factors:
            rest = self.others([f])
            for combo in self.combos(rest):
                at = dict(zip(rest, combo))
                for lv in self.non_baseline(f):
                    c = self.simple(f, lv, at)
                    if c is not None:
                        yield f, lv, at, c

    def versus_baseline(self, cell: Cell) -> np.ndarray | None:
        return self.vector({tuple(cell): 1.0, self.baseline_cell: -1.0})

    def marginal(self, assignment: Mapping[str, str]) -> np.ndarray | None:
        """Equal-weight mean of the cells with the given levels, over every combination of the others."""
        rest = self.others(list(assignment))
        combos = self.combos(rest)
        return self.vector({self.cell({**assignment, **dict(zip(rest, c))}): 1.0 / len(combos) for c in combos})

    def terms(self, order: int) -> Iterator[Term]:
        """Every interaction term of `order` factors (levels against baselines), grid order."""
        for fs in itertools.combinations(self.factors, order):
            for lvls in itertools.product(*(self.non_baseline(f) for f in fs)):
                yield tuple(zip(fs, lvls))

    def changes(self, cell: Cell) -> Term:
        """The (factor, level) pairs where `cell` differs from the baseline."""
        return tuple((f, lv) for f, lv in zip(self.factors, cell) if lv != self.baseline[f])


@dataclass(frozen=True)
class Estimability:
    """Which treatment-coded terms the cells determine, and the aliased sums of the others."""

    contrasts: Mapping[Term, np.ndarray]  # estimable term -> its contrast over the cells
    aliases: Mapping[Term, tuple[Term, ...]]  # non-estimable term -> the terms it is aliased with (itself included)
    alias_contrasts: Mapping[tuple[Term, ...], np.ndarray]  # aliased sum -> its contrast over the cells
    absent: tuple[Term, ...]  # terms no cell with data contains: nothing is known about them


def estimability(design: Design) -> Estimability:
    """Treatment-coded saturated model over the cells with data: mu(cell) = mu0 + sum of its terms.

    A term is estimable when its indicator lies in the row space of the cells' design; a term
    that is not is aliased with the other non-estimable terms of the smallest cell containing it,
    and only their sum (that cell against the baseline, minus its estimable terms) is estimable.
    """
    cells = list(design.cells)
    base = design.baseline_cell
    closure: list[Term] = []
    for cell in cells:
        ch = design.changes(cell)
        for k in range(1, len(ch) + 1):
            closure += [t for t in itertools.combinations(ch, k) if t not in closure]
    col = {t: i for i, t in enumerate(closure)}
    M = np.zeros((len(cells), 1 + len(closure)))
    M[:, 0] = 1.0
    for r, cell in enumerate(cells):
        ch = design.changes(cell)
        for k in range(1, len(ch) + 1):
            for t in itertools.combinations(ch, k):
                M[r, 1 + col[t]] = 1.0
    absent = tuple(t for k in range(1, len(design.factors) + 1) for t in design.terms(k) if t not in col)
    if base not in cells:  # nothing can be said against a baseline that has no data
        return Estimability({}, {t: (t,) for t in closure}, {}, absent)
    pinv = np.linalg.pinv(M.T)
    contrasts: dict[Term, np.ndarray] = {}
    for t in closure:
        target = np.zeros(M.shape[1])
        target[1 + col[t]] = 1.0
        c = pinv @ target
        if np.allclose(M.T @ c, target, atol=1e-8):
            contrasts[t] = np.round(c, 12) + 0.0  # pinv leaves 1e-15 noise; + 0.0 clears -0.0
    aliases: dict[Term, tuple[Term, ...]] = {}
    alias_contrasts: dict[tuple[Term, ...], np.ndarray] = {}
    for t in closure:
        if t in contrasts:
            continue
        host = min((c for c in cells if set(t) <= set(design.changes(c))), key=lambda c: len(design.changes(c)))
        ch = design.changes(host)
        inside = [s for k in range(1, len(ch) + 1) for s in itertools.combinations(ch, k)]
        group = tuple(s for s in inside if s not in contrasts)
        aliases[t] = group
        if group not in alias_contrasts:
            c = design.versus_baseline(host)
            for s in inside:
                if s in contrasts:
                    c = c - contrasts[s]
            alias_contrasts[group] = c
    return Estimability(contrasts, aliases, alias_contrasts, absent)
