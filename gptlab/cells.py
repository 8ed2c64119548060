"""The cells of a sweep: the grid's cartesian product minus its `exclude` rules, in grid order.

One rule for every place that needs it: the sweep expanding runs (`spec`), the report reading them
back (`report.load`) and synthetic results (`report.synthetic`).
"""
from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence


def design_cells(grid: Mapping[str, Sequence[Any]], exclude: Sequence[Mapping[str, Any]] = ()) -> list[tuple]:
    """Level tuples (one level per factor, in the grid's factor order) of every cell not excluded.

    A rule excludes a cell when every factor it names has the level it names (a rule naming a factor
    the grid lacks excludes nothing).
    """
    factors = list(grid)
    missing = object()
    return [combo for combo in itertools.product(*grid.values())
            if not any(all(dict(zip(factors, combo)).get(k, missing) == v for k, v in rule.items())
                       for rule in exclude)]
