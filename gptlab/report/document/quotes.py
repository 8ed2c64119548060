"""Row references in a hand-written discussion: `{{TABLE: SELECTOR}}`, rendered from the report's own tables.

Owns the reference syntax, the lookup of the one row a reference names, and the refusal of a
reference that names none or several. The wording of a rendered row is `verdicts.quoted`.

Syntax (one reference per pair of double braces, inside any Markdown):

- `{{main_effects: model.activation=relu}}`: an effect, as `key=level` terms;
- `{{interactions: model.activation=relu x model.tying=untied}}`: terms joined by ` x ` (any order);
- `{{effects_by_scale: activation=relu @ max_iters=6000}}`: `@` then the slice the row is taken at
  (`at` of simple effects, the scale level, `step=N` along training), as `key=level` terms joined by commas;
  naming enough of the slice to pick one row is enough; `effect_changes` rows are named the same way (the
  change from the scale factor's first level to the level after `@`);
- `{{arms: arm=relu}}`: an arm against the baseline (`{{arms: arm=relu @ max_iters=2000}}` with `scale:`);
- `{{rung_effects: arm=rotary @ rung=large}}`: a ladder's arm at one rung (`quantity=worth` in the slice for its
  worth, where the sweep has `worth:`);
- `{{cells: norm=pre, warmup_iters=100, lr=0.006}}`: a cell (also `cells_vs_baseline`, and the cells of
  `effects_by_step` in designs that are not full factorials);
- a trailing `| estimate` renders the estimate alone.

Keys are dotted grid keys or their short names (`activation`), levels compare as numbers when both are
numbers (`lr=6e-3` is `lr=0.006`). The rendered text is `-0.0630 (95% CI -0.0710 to -0.0550, better)`, at
the report's precision, so a regenerated study updates its own discussion.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Mapping

import pandas as pd

from gptlab.report.load import ReportError, Results
from gptlab.report.sentences import verdicts

REFERENCE = re.compile(r"\{\{(.*?)\}\}", re.S)
FORMS = ("full", "estimate")
MAX_LISTED = 12  # valid rows named in an error; the rest are counted
Terms = frozenset  # of (full key, canonical level) pairs


@dataclass(frozen=True)
class Reference:
    """One `{{...}}` of a discussion, parsed."""

    text: str  # as written, braces included (for error messages)
    table: str  # a table name of the report (tables/NAME.csv)
    effect: Terms  # the row's effect terms, matched exactly
    at: Terms  # the slice terms, a subset of the row's slice
    form: str  # "full" (estimate, CI, call) or "estimate"


def _level(value: object) -> str:
    """Canonical text of a level: numbers by value, so 6e-3, 0.006 and 0.0060 agree."""
    text = str(value).strip()
    try:
        return repr(float(text))
    except ValueError:
        return text.lower()


def _key_map(res: Results) -> dict[str, str]:
    """Every accepted spelling of a key (dotted, short, tail) -> the dotted grid key."""
    out: dict[str, str] = {"step": "step"}
    tails = [f.rsplit(".", 1)[-1] for f in res.factors]
    for f, tail in zip(res.factors, tails):
        out[f] = f
        out[res.short(f)] = f
        if tails.count(tail) == 1:
            out[tail] = f
    return out


def _terms(text: str, keys: Mapping[str, str], sep: str, where: str) -> Terms:
    """'a=1 x b=2' (sep ' x ' or ',') -> {(key, level)}; a part without '=' is refused."""
    out = set()
    for part in re.split(sep, text):
        part = part.strip()
        if not part:
            continue
        key, eq, level = part.partition("=")
        if not eq or not key.strip() or not level.strip():
            raise ReportError(f"{where}: '{part}' is not a key=level term (e.g. model.activation=relu)")
        out.add((keys.get(key.strip(), key.strip()), _level(level)))
    return frozenset(out)


def parse(text: str, res: Results, where: str) -> Reference:
    """One reference (`text` with its braces) into a `Reference`; malformed ones are refused."""
    text = " ".join(text.split())  # one line in any message, however it was wrapped
    body = text[2:-2].strip()
    table, colon, selector = body.partition(":")
    if not colon or not table.strip() or not selector.strip():
        raise ReportError(f"{where}: {text} is not a row reference; write {{{{TABLE: key=level}}}}, "
                          "e.g. {{main_effects: model.activation=relu}}")
    selector, bar, form = selector.partition("|")
    form = form.strip() if bar else "full"
    if form not in FORMS:
        raise ReportError(f"{where}: {text}: unknown form '{form}'; valid: {', '.join(FORMS)}")
    effect, _, at = selector.partition("@")
    keys = _key_map(res)
    return Reference(text=text, table=table.strip(), effect=_terms(effect, keys, r"\s+x\s+|,", f"{where}: {text}"),
                     at=_terms(at, keys, r",", f"{where}: {text}"), form=form)


def _cell_terms(label: object, keys: Mapping[str, str]) -> Terms:
    """A cell label or an `at` ('norm=pre, lr=0.006') as terms; empty for a missing one."""
    return _terms(label, keys, r",", "table") if isinstance(label, str) else frozenset()


def _one(factor: str, level: object) -> Terms:
    return frozenset({(factor, _level(level))})


# table -> row -> (effect terms, slice terms); the slice is empty where a row is an effect of its own
_ROW_KEYS: dict[str, Callable[[dict, Mapping[str, str]], tuple[Terms, Terms]]] = {
    "main_effects": lambda r, k: (_one(r["factor"], r["level"]), frozenset()),
    "levels": lambda r, k: (_one(r["factor"], r["level"]), frozenset()),
    "interactions": lambda r, k: (_one(r["factor_a"], r["level_a"]) | _one(r["factor_b"], r["level_b"]),
                                  frozenset()),
    "higher_order": lambda r, k: (_terms(r["term"], k, r"\s+x\s+", "table"), frozenset()),
    "simple_effects": lambda r, k: (_one(r["factor"], r["level"]), _cell_terms(r["at"], k)),
    "cells": lambda r, k: (_cell_terms(r["cell"], k), frozenset()),
    "cells_vs_baseline": lambda r, k: (_cell_terms(r["cell"], k), frozenset()),
    "aliases": lambda r, k: (_terms(r["aliased"].removesuffix(", aliased"), k, r"\s+x\s+|\s+\+\s+", "table"),
                             frozenset()),
    "effects_by_step": lambda r, k: ((_cell_terms(r["level"], k) if r["factor"] == "cell"
                                      else _one(r["factor"], r["level"])), _one("step", r["step"])),
    "effects_by_scale": lambda r, k: (_one(r["factor"], r["level"]), _one(r["scale_factor"], r["scale_level"])),
    "effect_changes": lambda r, k: (_one(r["factor"], r["level"]), _one(r["scale_factor"], r["scale_level"])),
    "arms": lambda r, k: (_one("arm", r["arm"]), _one(r["scale_factor"], r["scale_level"]) if r.get("scale_factor")
                          else frozenset()),
    "rung_effects": lambda r, k: (_one("arm", r["arm"]), _one("rung", r["rung"]) | _one("quantity", r["quantity"])),
}


_CELL_TABLES = ("cells", "cells_vs_baseline", "effects_by_step")  # rows named by a whole cell: a, b, c


def _show(effect: Terms, at: Terms, res: Results, table: str) -> str:
    """A row's selector as a writer would type it (short keys in grid order, the grid's level labels)."""
    order = {f: i for i, f in enumerate(res.factors)}

    def text(terms: Terms, sep: str) -> str:
        labels = {f: {_level(lv): lv for lv in res.levels.get(f, [])} for f, _ in terms}
        return sep.join(f"{res.short(f) if f in order else f}={labels.get(f, {}).get(lv, lv.removesuffix('.0'))}"
                        for f, lv in sorted(terms, key=lambda t: (order.get(t[0], len(order)), t)))
    return text(effect, ", " if table in _CELL_TABLES else " x ") + (f" @ {text(at, ', ')}" if at else "")


def find_row(ref: Reference, tables: Mapping[str, pd.DataFrame], res: Results, where: str) -> dict:
    """The one row of `ref.table` that `ref` names; anything else is one `ReportError` listing the valid rows."""
    usable = [t for t in _ROW_KEYS if t in tables and len(tables[t])]
    if ref.table not in usable:
        raise ReportError(f"{where}: {ref.text}: no table '{ref.table}' in this report; valid: {', '.join(usable)}")
    keys = _key_map(res)
    rows = tables[ref.table].to_dict("records")
    ids = [_ROW_KEYS[ref.table](r, keys) for r in rows]
    hits = [r for r, (effect, at) in zip(rows, ids) if effect == ref.effect and ref.at <= at]
    if len(hits) != 1:  # name the rows to choose from: all of them, or the several that matched
        named = [i for r, i in zip(rows, ids) if not hits or any(r is h for h in hits)]
        valid = list(dict.fromkeys(_show(e, a, res, ref.table) for e, a in named))
        shown = "; ".join(valid[:MAX_LISTED]) + (f"; ... ({len(valid) - MAX_LISTED} more)"
                                                 if len(valid) > MAX_LISTED else "")
        what = f"matches no row of {ref.table}" if not hits else \
            f"matches {len(hits)} rows of {ref.table} (name the slice after @)"
        raise ReportError(f"{where}: {ref.text} {what}; valid rows: {shown}")
    row = hits[0]
    if "change" in row:  # effect_changes: the change is the row's estimate (the effects at both levels are beside it)
        row = {**row, "estimate": row["change"]}
    value = row.get("estimate", row.get("best_val_loss"))
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise ReportError(f"{where}: {ref.text}: that row of {ref.table} is not estimable, so it has no number "
                          "to quote")
    return row


def render(text: str, tables: Mapping[str, pd.DataFrame], res: Results, where: str = "discussion.md") -> str:
    """`text` with every row reference replaced by its row's numbers (see the module docstring).

    Raises `ReportError` (one line naming the reference and the valid rows) for a reference to a table the
    report does not have, or to no row or several rows of it, and for braces left unclosed.
    """
    def one(match: re.Match) -> str:
        ref = parse(match.group(0), res, where)
        return verdicts.quoted(find_row(ref, tables, res, where), ref.form)

    out = REFERENCE.sub(one, text)
    if "{{" in out or "}}" in out:
        raise ReportError(f"{where}: unmatched '{{{{' or '}}}}' (a row reference is {{{{TABLE: key=level}}}})")
    return out
