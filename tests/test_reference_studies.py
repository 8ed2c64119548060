"""The shipped reference studies: their committed reports regenerate from their committed results, their
verdicts are the ones the design supports, and every number their discussions, the findings (docs/FINDINGS.md)
and the README's findings table quote is the table cell it quotes, sign included.

How a typed number is checked (`check_quotes`), on the text with its `{{table: row}}` references blanked
(a reference is rendered from the tables by the report, so it needs no check):

1. an estimate with its CI (`-0.063 (-0.067 to -0.059)`, `+0.003, 90% CI -0.001 to +0.006`): the three
   numbers round to the estimate and bounds of one row of the report's tables, signed; or all three
   negated (`better by 0.063 (0.059 to 0.067)`) when a word of gain (better, beats, advantage, ...) says
   which way. An estimate with its two bounds is all but unique among a report's rows;
2. a CI alone (`runs from -0.017 to +0.020`): the two bounds of one row, the same way;
3. a number at a step (`-0.014 at 500`, `at step 250 (+0.010)`): an `effects_by_step` estimate at that step;
4. a p-value (`p = 0.037`) or a half-width (`+/-0.032`) in the sentence of a row matched by 1 or 2: that
   row's p-value or half-width;
5. any other number: declared in `DECLARED` with the cell it quotes (`table[column=value | ...].column`, or
   a regular expression over the report's own sentences), and checked against that cell.

0. a multiplier as the report writes it (`1.40x (1.20-1.60)`: a `worth` cell, or a step cost and its CI): that
   cell verbatim (`blank_multipliers`).

Anything else is a problem: quote the row by reference, or declare where the number comes from.
`python benchmarks/claim_mutations.py` flips the sign of every checked number and shifts it by one unit
in its last digit, and counts the mutations this check catches; a test here runs the same count.
"""
from __future__ import annotations

import filecmp
import functools
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Iterator, Mapping

import pandas as pd
import pytest
from helpers import REPO, shipped_studies, skip_figures

from gptlab.report import write_report

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

STUDIES = shipped_studies()  # .gitignore's list: a sweep a user runs in the checkout is not a shipped study
# a typed number: two or more decimals, an optional sign or "+/-" (a half-width); not a percentage,
# a count in millions or a version (2.13.0)
NUMBER = re.compile(r"(?<![\w.])(?:\+/-|[-+])?\d+\.(\d{2,})(?![\d%]|M\b|\.\d)")
REFERENCE = re.compile(r"\{\{.*?\}\}", re.S)
TRIPLE_GAP = re.compile(r"(?:\*\*)?\s*(?:(?:nats|bits)/char\s*)?[(,]\s*(?:estimate\s+)?(?:(?:95|90)% CI,?\s*)?")
TO = re.compile(r"\s+to\s+")
GAIN = re.compile(r"\b(better|beats?|beating|gains?|advantages?|edges?|helps?|ahead|lower|improves?|wins?|saves?)\b",
                  re.I)
LOSS = re.compile(r"\b(worse|hurts?|costs?|loses?|behind|higher|penalty)\b", re.I)
AT_STEP_AFTER = re.compile(r"\s+at\s+(?:step\s+)?(\d+)\b(?!\s*(?:iterations|steps|tokens))")
AT_STEP_BEFORE = re.compile(r"\bat\s+step\s+(\d+)\s*\(\s*$")
P_BEFORE = re.compile(r"\bp\s*(?:=|<|of)\s*$")
SENTENCE_END = re.compile(r"[.!?:;]\s|\n\s*\n|\n- ")
# a ladder's (value, low, high) columns besides an estimate's CI (trends.csv, predictions.csv, rank_agreement.csv),
# by whether the interval is the 90% one
LADDER_TRIPLES = {False: (("slope", "slope_low", "slope_high"), ("predicted", "pred_low", "pred_high"),
                          ("measured", "measured_low", "measured_high"), ("tau", "tau_low", "tau_high")),
                  True: (("slope", "slope90_low", "slope90_high"),)}


# -- the committed reports regenerate -------------------------------------------------------------------

def test_the_reference_studies_are_shipped():
    assert {"four_axes", "postln_warmup", "beyond", "transfer", "tuned"} <= set(STUDIES)
    # .gitignore keeps each study's results and its report, and the checkout holds both
    assert shipped_studies("reports") == STUDIES
    for name in STUDIES:
        assert (REPO / "results" / name / "summary.csv").is_file() and (REPO / "reports" / name / "tables").is_dir()


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    """Each study's report regenerated without its figures: the tests compare tables and read report.md's
    sentences, and the figures (tested in tests/report/test_render.py) were two thirds of the time."""
    root = tmp_path_factory.mktemp("reports")
    with pytest.MonkeyPatch.context() as mp:
        skip_figures(mp)
        return {name: write_report(REPO / "results" / name, root / name) for name in STUDIES}


@pytest.mark.parametrize("name", STUDIES)
def test_report_regenerates_identical_tables(name, regenerated):
    out = regenerated[name]
    committed = REPO / "reports" / name / "tables"
    names = sorted(p.name for p in committed.glob("*.csv"))
    assert names == sorted(p.name for p in (out / "tables").glob("*.csv"))
    match, mismatch, errors = filecmp.cmpfiles(committed, out / "tables", names, shallow=False)
    assert mismatch == [] and errors == [], mismatch + errors


@pytest.mark.parametrize("name", STUDIES)
def test_the_shipped_report_has_the_discussion_its_results_hold(name, regenerated):
    """results/NAME/discussion.md edited after reports/NAME was written leaves the shipped report stale: its
    Discussion must be the one the report writes from it now (the rest of report.md is checked by the tables)."""
    def discussion(md: str) -> str:
        return md.partition("\n## Discussion\n")[2].split("\n## ", 1)[0]

    shipped = (REPO / "reports" / name / "report.md").read_text(encoding="utf-8")
    assert discussion(shipped) and discussion(shipped) == discussion((regenerated[name] / "report.md").read_text())


# -- what a typed number is ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Quoted:
    """One number typed in a discussion, the findings or the README."""

    start: int  # offset of the token (sign included) in the document
    end: int  # offset just past it
    text: str  # as typed: "-0.063", "0.040", "+/-0.032"
    decimals: int  # digits after the point: the precision it claims

    @functools.cached_property
    def half_width(self) -> bool:
        """Typed as +/-x: an unsigned half-width."""
        return self.text.startswith("+/-")

    @functools.cached_property
    def value(self) -> float:  # cached: the mutation test compares each number with every row, for each mutant
        return float(self.text[3:] if self.half_width else self.text)

    def quotes(self, cell: float, negated: bool = False) -> bool:
        """True when `cell` (or -cell) rounds to this number at its precision, sign included."""
        target = -cell if negated else cell
        return abs(self.value - target) <= 0.5 * 10 ** -self.decimals + 1e-9


def quoted_numbers(text: str) -> list[Quoted]:
    """Every typed number of `text` (references already blanked)."""
    return [Quoted(m.start(), m.end(), m.group(), len(m.group(1))) for m in NUMBER.finditer(text)]


def blank_references(text: str) -> str:
    """`{{...}}` references replaced by spaces of the same length (offsets stay those of the document)."""
    return REFERENCE.sub(lambda m: " " * len(m.group()), text)


# -- what it can quote -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One row of one table of a report."""

    table: str  # tables/NAME.csv
    text: Mapping[str, str]  # every cell as the CSV writes it
    values: Mapping[str, float]  # the numeric cells

    def __str__(self) -> str:
        keys = [k for k in self.text if k not in self.values and self.text[k]][:4]
        return f"{self.table}[{', '.join(f'{k}={self.text[k]}' for k in keys)}]"


@dataclass(frozen=True)
class Study:
    """What a study's quotes may come from: its report's tables and the report's own sentences."""

    rows: tuple[Row, ...]
    sentences: str  # report.md without its Discussion section (which is the discussion itself)

    @classmethod
    def load(cls, report_dir: Path) -> "Study":
        rows = []
        for csv in sorted((report_dir / "tables").glob("*.csv")):
            frame = pd.read_csv(csv, dtype=str, keep_default_na=False)
            for record in frame.to_dict("records"):
                values = {}
                for k, v in record.items():
                    try:
                        values[k] = float(v)
                    except ValueError:
                        pass
                rows.append(Row(csv.stem, record, {k: v for k, v in values.items() if v == v}))
        md = (report_dir / "report.md").read_text()
        head, _, rest = md.partition("\n## Discussion\n")
        return cls(tuple(rows), head + "\n" + rest.split("\n## ", 1)[-1])

    def estimates(self, ninety: bool = False) -> tuple[tuple[Row, float, float, float], ...]:
        """(row, estimate, low, high) of every row with a CI (levels: the level's mean loss)."""
        return self._estimates[ninety]

    @functools.cached_property
    def _estimates(self) -> dict[bool, tuple[tuple[Row, float, float, float], ...]]:
        """Both lists of `estimates`, found once: the mutation test checks each document hundreds of times."""
        out = {}
        for ninety, (lo, hi) in ((False, ("ci_low", "ci_high")), (True, ("ci90_low", "ci90_high"))):
            found = []
            for row in self.rows:
                # effect_changes.csv's estimate is its `change`; a levels row's is its mean loss
                est = next((c for c in ("estimate", "change") if c in row.values), "best_val_loss")
                if {est, lo, hi} <= set(row.values):
                    found.append((row, row.values[est], row.values[lo], row.values[hi]))
                for triple in LADDER_TRIPLES[ninety]:  # a ladder's slopes, predictions, measurements and taus
                    if set(triple) <= set(row.values):
                        found.append((row, *(row.values[c] for c in triple)))
            out[ninety] = tuple(found)
        return out

    @functools.cached_property
    def multiplier_patterns(self) -> tuple[tuple[str, re.Pattern[str]], ...]:
        """`blank_multipliers`'s (first word, pattern) of each cell, longest cell first, built once per study: the
        first word, which a match must contain, spares the search of a text without it."""
        cells = {r.text[c] for r in self.rows for c in MULTIPLIER_COLUMNS if r.text.get(c)}
        for r in self.rows:
            if {"step_cost", "step_cost_low", "step_cost_high"} <= set(r.values):
                v = [r.values[k] for k in ("step_cost", "step_cost_low", "step_cost_high")]
                cells |= {f"{v[0]:.{d}f}x ({v[1]:.{d}f}-{v[2]:.{d}f})" for d in (1, 2)}
        # a cell may wrap at a line's end
        return tuple((cell.split()[0], re.compile(r"(?<![\d.+-])" + re.escape(cell).replace(r"\ ", r"\s+")))
                     for cell in sorted(cells, key=len, reverse=True))


# -- declared numbers ------------------------------------------------------------------------------------

# (study, "discussion", "findings" or "readme") -> {the text just before the number: the cell it quotes}. A cell is
# "TABLE[column=value | column=value].COLUMN" (the selector must pick one row), with a leading "-" when the
# text quotes the magnitude of a negative cell in words ("a gain of 0.17"); or "report.md: REGEX", a
# number of the report's own sentences (outside the Discussion). Whitespace in a key matches any whitespace
# (references count as whitespace); a key found several times declares every number it precedes.
MARGIN = r"report.md: Equivalence margin: \+/-(\d+(?:\.\d+)?)"
RESIDUAL_SD = r"report.md: residual degrees of freedom, residual SD (\d+(?:\.\d+)?)"
UNIGRAM = r"report.md: Unigram loss of the validation split[^:]*: (\d+(?:\.\d+)?)"
BEYOND_ALL = "norm_type=rmsnorm, activation=swiglu, position=rotary"
BEYOND_ALIAS = ("aliased=norm_type=rmsnorm x activation=swiglu + norm_type=rmsnorm x position=rotary + "
                "activation=swiglu x position=rotary + "
                "norm_type=rmsnorm x activation=swiglu x position=rotary, aliased")
DECLARED: dict[tuple[str, str], dict[str, str]] = {
    ("four_axes", "discussion"): {
        "lies inside the ": MARGIN,
        "(residual SD ": RESIDUAL_SD,
        "jointly detectable (F(5, 30) = ": r"report.md: jointly: F\(\d+, \d+\) = (\d+(?:\.\d+)?)",
        "= 2.98, p = ": r"report.md: jointly: F\(\d+, \d+\) = \d+(?:\.\d+)?, p = (\d+(?:\.\d+)?)",
        "The main-effect CIs are ": "main_effects[factor=model.norm].ci95",
        "well inside the ": MARGIN,
    },
    ("four_axes", "findings"): {
        "(GELU, sinusoidal, tied: ":
            "simple_effects[factor=model.norm | at=activation=gelu, position=sinusoidal, tying=tied].estimate",
        "more under pre-LN (":
            "simple_effects[factor=model.activation | at=norm=pre, position=learned, tying=tied].estimate",
        "more under pre-LN (-0.086 to ":
            "simple_effects[factor=model.activation | at=norm=pre, position=sinusoidal, tying=untied].estimate",
        "than under post-LN (":
            "simple_effects[factor=model.activation | at=norm=post, position=sinusoidal, tying=tied].estimate",
        "than under post-LN (-0.025 to ":
            "simple_effects[factor=model.activation | at=norm=post, position=sinusoidal, tying=untied].estimate",
        "-0.049; interaction ": "interactions[factor_a=model.norm | factor_b=model.activation].estimate",
        "**equivalent** within ": MARGIN,
        "with a tied head (":
            "simple_effects[factor=model.position | at=norm=pre, activation=relu, tying=tied].estimate",
        "with a tied head (+0.031 to ":
            "simple_effects[factor=model.position | at=norm=pre, activation=gelu, tying=tied].estimate",
    },
    ("four_axes", "readme"): {"**equivalent** within ": MARGIN},
    ("postln_warmup", "discussion"): {
        "the unigram loss of the validation split is ": UNIGRAM,
        ", each ": "simple_effects[factor=model.norm | at=warmup_iters=100, lr=0.001].ci95",
        "inconclusive at the ": MARGIN,
    },
    ("postln_warmup", "findings"): {
        "unigram loss of the validation split (": UNIGRAM,
        "at lr 6e-3 **": "simple_effects[factor=train.warmup_iters | at=norm=pre, lr=0.006].estimate",
        "costs pre-LN at lr 6e-3 **+0.46** (": "cells[cell=norm=pre, warmup_iters=100, lr=0.006].best_val_loss",
        "(2.14 -> ": "cells[cell=norm=pre, warmup_iters=0, lr=0.006].best_val_loss",
        "and for post-LN (": "simple_effects[factor=train.warmup_iters | at=norm=pre, lr=0.001].ci95",
    },
    ("postln_warmup", "readme"): {
        "removing warmup costs pre-LN ": "simple_effects[factor=train.warmup_iters | at=norm=pre, lr=0.006].estimate",
    },
    ("beyond", "discussion"): {
        "residual SD ": RESIDUAL_SD,
        "too wide to call it equivalent within ": MARGIN,
        "would be needed for a CI of ": MARGIN,
        "with a Holm-adjusted p of ": f"aliases[{BEYOND_ALIAS}].p_adjusted",
    },
    ("beyond", "findings"): {
        "would be needed for a CI of ": MARGIN,
        "All three together reach **": f"cells[cell={BEYOND_ALL}].best_val_loss",
        "reach **1.796** (": f"cells_vs_baseline[cell={BEYOND_ALL}].estimate",
        "against the baseline), ": f"-aliases[{BEYOND_ALIAS}].estimate",
    },
    ("tuned", "discussion"): {},
    ("tuned", "findings"): {
        "averages simple effects of opposite sign (":
            "simple_effects[factor=model.activation | at=tying=tied].estimate",
        "with a tied head, ": "simple_effects[factor=model.activation | at=tying=untied].estimate",
        "the same selection runs put ReLU ahead by ":
            "-fixed_setting_effects[setting=lr=0.001 | effect=activation=relu vs gelu].estimate",
    },
    ("transfer", "discussion"): {
        "; residual SD ": RESIDUAL_SD,
        "only when a CI lies inside the ": MARGIN,
    },
    ("scorecard_corpora", "discussion"): {
        "90% CI inside the margin of ": MARGIN,
    },
}


@dataclass(frozen=True)
class Problem:
    """A typed number the check could not trace to its cell."""

    start: int  # offset in the document
    text: str  # the number as typed (or the declaration's text)
    why: str
    end: int = -1  # offset past the last number it is about (a triple: its upper bound); -1: `start` alone

    def covers(self, q: Quoted) -> bool:
        return self.start <= q.start <= max(self.end, self.start)

    def describe(self, document: str) -> str:
        left = document[max(0, self.start - 50):self.start].replace("\n", " ")
        return f"'{self.text}' after '...{left}': {self.why}"


def _sentence(text: str, pos: int) -> tuple[int, int]:
    """Bounds of the sentence (or clause, bullet) around `pos`."""
    start = max((m.end() for m in SENTENCE_END.finditer(text, 0, pos)), default=0)
    end = SENTENCE_END.search(text, pos)
    return start, end.start() if end else len(text)


def _says_gain(text: str, first: Quoted, last: Quoted) -> bool:
    """A word of gain says the direction of a negative effect quoted as a magnitude: the nearest word of
    direction before the number in its sentence is one of gain, or one follows right after ("0.047 better")."""
    start, _ = _sentence(text, first.start)
    words = [(m.start(), m.group()) for m in GAIN.finditer(text, start, first.start)]
    words += [(m.start(), "") for m in LOSS.finditer(text, start, first.start)]
    if words and max(words)[1]:
        return True
    return bool(GAIN.match(text[last.end:last.end + 30].lstrip(" )").removeprefix("nats/char ")
                           .removeprefix("bits/char ").removeprefix("nats ")))


def _parse_cell(spec: str) -> tuple[bool, str, list[tuple[str, str]], str]:
    negated = spec.startswith("-")
    m = re.fullmatch(r"-?(\w+)\[(.*)\]\.(\w+)", spec.strip())
    if not m:
        raise ValueError(f"bad declaration {spec!r}: write TABLE[column=value | ...].COLUMN or report.md: REGEX")
    where = [tuple(part.strip().split("=", 1)) for part in m.group(2).split(" | ")]
    return negated, m.group(1), where, m.group(3)  # type: ignore[return-value]


def declared_cell(study: Study, spec: str) -> tuple[float, bool] | str:
    """(the cell's value, negated) of a declaration, or why it names no single cell."""
    if spec.startswith("report.md:"):
        m = re.search(spec.split(":", 1)[1].strip(), study.sentences)
        return (float(m.group(1)), False) if m else f"no sentence of the report matches {spec!r}"
    negated, table, where, column = _parse_cell(spec)
    rows = [r for r in study.rows if r.table == table and all(r.text.get(k) == v for k, v in where)]
    if len(rows) != 1 or column not in rows[0].values:
        return f"{spec!r} picks {len(rows)} rows" + ("" if len(rows) != 1 else f" without a number in {column}")
    return rows[0].values[column], negated


MULTIPLIER_COLUMNS = ("worth", "wall_worth", "retuned_worth")  # worth.csv's and scorecard.csv's texts: "1.40x (1.20-1.60)"


def blank_multipliers(text: str, study: Study) -> str:
    """Rule 0: a multiplier typed as a table writes it ("1.40x (1.20-1.60)", `MULTIPLIER_COLUMNS`, or a step cost
    with its CI in the same form) is blanked, being that cell verbatim; one typed otherwise keeps its numbers,
    which then need a row like any other (a shifted digit is caught: the text is no cell any more)."""
    for word, pattern in study.multiplier_patterns:
        text = text if word not in text else pattern.sub(lambda m: re.sub(r"\S", " ", m.group()), text)
    return text


def check_quotes(document: str, study: Study, declared: Mapping[str, str] | None = None) -> list[Problem]:
    """Every typed number of `document` traced to the cell it quotes; what could not be, as problems."""
    text = blank_multipliers(blank_references(document), study)
    nums = quoted_numbers(text)
    done: set[int] = set()  # indexes of nums traced to a cell
    problems: list[Problem] = []
    row_of_sentence: dict[int, list[Row]] = {}  # sentence start -> rows matched there (for rule 4)

    def matched(first: Quoted, rows: list[Row]) -> None:
        row_of_sentence.setdefault(_sentence(text, first.start)[0], []).extend(rows)

    # 1. estimate (CI): one row, signed or negated as a whole
    i = 0
    while i + 2 < len(nums):
        a, b, c = nums[i:i + 3]
        if TRIPLE_GAP.fullmatch(text[a.end:b.start]) and TO.fullmatch(text[b.end:c.start]) \
                and not any(n.half_width for n in (a, b, c)):
            ninety = "90% CI" in text[a.end:b.start]
            signed = [r for r, e, lo, hi in study.estimates(ninety) if a.quotes(e) and b.quotes(lo) and c.quotes(hi)]
            flipped = [r for r, e, lo, hi in study.estimates(ninety)
                       if a.quotes(e, True) and b.quotes(hi, True) and c.quotes(lo, True)]
            if flipped and not signed and not _says_gain(text, a, c):
                problems.append(Problem(a.start, f"{a.text} ({b.text} to {c.text})",
                                        f"quotes {flipped[0]} as a magnitude, but no word of gain says it is negative",
                                        c.start))
            elif not signed and not flipped:
                problems.append(Problem(a.start, f"{a.text} ({b.text} to {c.text})",
                                        f"no row has this estimate and {'90' if ninety else '95'}% CI, signed",
                                        c.start))
            matched(a, signed or flipped)
            done |= {i, i + 1, i + 2}
            i += 3
            continue
        i += 1

    # 2. a CI alone: the bounds of one row
    for i in range(len(nums) - 1):
        b, c = nums[i], nums[i + 1]
        if i in done or i + 1 in done or not TO.fullmatch(text[b.end:c.start]) or b.half_width or c.half_width:
            continue
        ninety = "90% CI" in text[max(0, b.start - 20):b.start]
        signed = [r for r, _, lo, hi in study.estimates(ninety) if b.quotes(lo) and c.quotes(hi)]
        flipped = [r for r, _, lo, hi in study.estimates(ninety) if b.quotes(hi, True) and c.quotes(lo, True)]
        if signed or (flipped and _says_gain(text, b, c)):
            matched(b, signed or flipped)
            done |= {i, i + 1}

    # 3. at a step: an effects_by_step estimate at that step
    for i, n in enumerate(nums):
        if i in done:
            continue
        after, before = AT_STEP_AFTER.match(text, n.end), AT_STEP_BEFORE.search(text, 0, n.start)
        step = after.group(1) if after else (before.group(1) if before else None)
        if step and any(r.table == "effects_by_step" and r.text.get("step") == step and n.quotes(r.values["estimate"])
                        for r in study.rows if "estimate" in r.values):
            done.add(i)

    # 4. the p-value or half-width of a row matched in the same sentence
    for i, n in enumerate(nums):
        if i in done:
            continue
        rows = row_of_sentence.get(_sentence(text, n.start)[0], [])
        columns = ("ci95",) if n.half_width else ("p_adjusted", "p_value") if P_BEFORE.search(text, 0, n.start) else ()
        if any(n.quotes(r.values[k]) for r in rows for k in columns if k in r.values):
            done.add(i)

    # 5. declared
    starts = {n.start: i for i, n in enumerate(nums)}
    for anchor, spec in (declared or {}).items():
        pattern = r"\s+".join(map(re.escape, anchor.split()))
        pattern = (r"(?<!\w)" if anchor[:1].isalnum() else "") + pattern + (r"\s*" if anchor[-1:].isspace() else "")
        hits = [starts[m.end()] for m in re.finditer(pattern, text) if m.end() in starts]
        if not hits:
            problems.append(Problem(0, anchor, "declared, but no number follows this text (a stale declaration)"))
        cell = declared_cell(study, spec)
        for i in hits:
            n = nums[i]
            if isinstance(cell, str):
                problems.append(Problem(n.start, n.text, cell))
            elif not n.quotes(*cell):
                problems.append(Problem(n.start, n.text, f"declared as {spec}, which is {cell[0]:g}"))
            elif cell[1] and not _says_gain(text, n, n):
                problems.append(Problem(n.start, n.text, f"quotes {spec} as a magnitude, but no word of gain says so"))
            done.add(i)

    problems += [Problem(n.start, n.text, "not traced to a table cell: quote its row by reference "
                                          "({{table: row}}) or declare its cell in DECLARED")
                 for i, n in enumerate(nums) if i not in done]
    return sorted(problems, key=lambda p: p.start)


# -- the documents ---------------------------------------------------------------------------------------

def findings_sections(findings: str) -> dict[str, str]:
    """Study name -> its paragraph of docs/FINDINGS.md."""
    findings = findings.split("## What the lab found (reference studies)", 1)[1].split("\n## ", 1)[0]
    out = {}
    for section in re.split(r"\n(?=\*\*\d+\. \[)", findings)[1:]:
        out[re.search(r"\(\.\./reports/(\w+)/report\.md\)", section).group(1)] = section
    return out


def readme_sections(readme: str) -> dict[str, str]:
    """Study name -> its rows of the README's findings tables, joined (a row without a report link, a study still
    running, has no numbers to check): the scorecard's one row per arm, and each study's row."""
    table = readme.split("## What the lab found", 1)[1].split("\n## ", 1)[0]
    out: dict[str, str] = {}
    for m in re.finditer(r"^\| \[[^]]+\]\(reports/(\w+)/report\.md\) \|.*$", table, re.M):
        out[m.group(1)] = out.get(m.group(1), "") + m.group(0) + "\n"
    return out


def documents(repo: Path = REPO) -> dict[tuple[str, str], str]:
    """(study, "discussion", "findings" or "readme") -> the text whose numbers are checked."""
    out = {(name, "discussion"): (repo / "results" / name / "discussion.md").read_text() for name in STUDIES}
    out.update({(name, "findings"): text
                for name, text in findings_sections((repo / "docs" / "FINDINGS.md").read_text()).items()})
    out.update({(name, "readme"): text for name, text in readme_sections((repo / "README.md").read_text()).items()})
    return out


def quoted_study(key: tuple[str, str], text: str, studies: Mapping[str, Study]) -> Study:
    """What a document may quote: its study's tables, and for a README row also those of every other study it
    links (the scorecard's row gives the arm's worth on Austen from study 9, linked in the cell)."""
    names = [key[0]] + ([n for n in dict.fromkeys(re.findall(r"\(reports/(\w+)/report\.md\)", text)) if n != key[0]]
                        if key[1] == "readme" else [])
    return Study(tuple(r for n in names for r in studies[n].rows), "\n".join(studies[n].sentences for n in names))


@pytest.fixture(scope="module")
def studies(regenerated):
    return {name: Study.load(path) for name, path in regenerated.items()}


def test_the_readme_has_findings_for_every_study():
    assert sorted(readme_sections((REPO / "README.md").read_text())) == STUDIES
    assert sorted(findings_sections((REPO / "docs" / "FINDINGS.md").read_text())) == STUDIES


@pytest.mark.parametrize("key", sorted(documents()), ids="-".join)
def test_every_typed_number_is_the_cell_it_quotes(key, studies):
    text = documents()[key]
    problems = check_quotes(text, quoted_study(key, text, studies), DECLARED.get(key, {}))
    assert problems == [], "\n".join(p.describe(text) for p in problems)


# -- the check itself can fail ---------------------------------------------------------------------------

def mutations(q: Quoted) -> Iterator[tuple[str, str]]:
    """(kind, text) of the mutants of one number: its sign flipped (not for a half-width or a zero), and
    shifted by one unit in its last digit, up and down."""
    if not q.half_width and q.value != 0:
        yield "sign", ("+" if q.text.startswith("-") else "-") + q.text.lstrip("+-")
    sign = "+/-" if q.half_width else ("+" if q.text.startswith("+") else "")
    unit = Decimal(1).scaleb(-q.decimals)
    for step in (unit, -unit):
        v = Decimal(q.text[3:] if q.half_width else q.text) + step
        if q.half_width and v < 0:
            continue
        body = f"{abs(v):.{q.decimals}f}"
        yield ("up" if step > 0 else "down"), (sign if q.half_width or v >= 0 else "-") + body


def mutants(document: str, study: Study, declared: Mapping[str, str]) -> Iterator[tuple[Quoted, str, str, bool]]:
    """(number, kind, mutant, caught) for every mutant of every typed number that the check traces (a number
    it cannot trace already fails). Caught: the check of the mutated document reports a problem that the
    unmutated one does not."""
    found = check_quotes(document, study, declared)
    base = {(p.start, p.text, p.why) for p in found}
    for q in quoted_numbers(blank_references(document)):
        if any(p.covers(q) for p in found):
            continue
        for kind, mutant in mutations(q):
            shift = len(mutant) - len(q.text)  # offsets after the number move by this much
            after = {(p.start - shift if p.start > q.start else p.start, p.text, p.why)
                     for p in check_quotes(document[:q.start] + mutant + document[q.end:], study, declared)}
            yield q, kind, mutant, bool(after - base)


def test_sign_flips_and_last_digit_shifts_are_caught(studies):
    totals: dict[str, list[int]] = {"sign": [0, 0], "up": [0, 0], "down": [0, 0]}
    for key, text in documents().items():
        for _, kind, _, caught in mutants(text, quoted_study(key, text, studies), DECLARED.get(key, {})):
            totals[kind][0] += caught
            totals[kind][1] += 1
    assert totals["sign"][1] >= 20, totals  # enough typed numbers left to mean something
    assert totals["sign"][0] == totals["sign"][1], totals
    for kind in ("up", "down"):
        assert totals[kind][0] >= 0.9 * totals[kind][1], totals


def test_the_check_refuses_a_wrong_sign_a_wrong_digit_and_an_untraced_number():
    study = Study((Row("main_effects", {"factor": "a", "level": "1"},
                       {"estimate": -0.0626, "ci_low": -0.0665, "ci_high": -0.0588, "p_adjusted": 0.037}),
                   Row("effects_by_step", {"factor": "a", "level": "1", "step": "250"}, {"estimate": -0.0279})), "")
    ok = ["a is better by 0.063 (0.059 to 0.067).", "a: -0.063 (95% CI -0.067 to -0.059), p = 0.037.",
          "a: -0.028 at step 250.", "It runs from -0.067 to -0.059.", "a: {{main_effects: a=1}}, 0.063 better."]
    for text in ok[:4]:
        assert check_quotes(text, study) == [], text
    assert check_quotes(ok[4], study, {"a: , ": "-main_effects[factor=a].estimate"}) == []
    bad = ["a is worse by 0.063 (0.059 to 0.067).",  # a magnitude without a word of gain
           "a is better by -0.063 (0.059 to 0.067).", "a: -0.063 (95% CI -0.067 to -0.058).",
           "a: -0.029 at step 250.", "a: -0.063, and 0.012 elsewhere."]
    for text in bad:
        assert check_quotes(text, study) != [], text
    assert check_quotes(ok[4], study, {"a: , ": "main_effects[factor=a].estimate"}) != []  # sign of the cell


def test_a_ladder_s_slope_prediction_and_tau_are_the_rows_they_quote():
    study = Study((Row("trends", {"arm": "rotary"}, {"slope": 0.0258, "slope_low": -0.0030, "slope_high": 0.0547,
                                                     "slope90_low": 0.0036, "slope90_high": 0.0481}),
                   Row("predictions", {"arm": "nope"}, {"predicted": 0.3134, "pred_low": 0.1606, "pred_high": 0.4661}),
                   Row("rank_agreement", {"rung_a": "small"}, {"tau": 1.0, "tau_low": 0.8, "tau_high": 1.0})), "")
    for text in ("a slope of +0.0258 (-0.0030 to +0.0547) per doubling", "90% CI +0.0036 to +0.0481",
                 "predicted +0.3134 (+0.1606 to +0.4661)", "tau 1.00 (0.80 to 1.00)"):
        assert check_quotes(text, study) == [], text
    for text in ("a slope of -0.0258 (-0.0030 to +0.0547) per doubling", "predicted +0.3134 (+0.1607 to +0.4661)",
                 "90% CI +0.0036 to +0.0482", "tau 1.00 (0.70 to 1.00)"):
        assert check_quotes(text, study) != [], text


def test_a_multiplier_is_the_cell_it_quotes_verbatim():
    study = Study((Row("worth", {"arm": "rotary", "worth": "1.43x (1.21-1.65)"},
                       {"step_cost": 1.112, "step_cost_low": 1.056, "step_cost_high": 1.172}),), "")
    for text in ("rotary: the baseline needs 1.43x (1.21-1.65) its steps.", "a step costs 1.11x (1.06-1.17)."):
        assert check_quotes(text, study) == [], text
    for text in ("rotary: the baseline needs 1.44x (1.21-1.65) its steps.", "rotary: 11.43x (1.21-1.65).",
                 "a step costs 1.11x (1.05-1.17)."):
        assert check_quotes(text, study) != [], text


# -- the designs' verdicts -------------------------------------------------------------------------------

def test_beyond_reports_simple_effects_not_additive_main_effects():
    main = pd.read_csv(REPO / "reports" / "beyond" / "tables" / "main_effects.csv").set_index("level")
    assert main.loc["rotary", "estimate"] == pytest.approx(-0.171, abs=0.001) and main.loc["rotary", "call"] == "better"
    assert abs(main.loc["rmsnorm", "estimate"]) < 0.005 and main.loc["rmsnorm", "p_adjusted"] > 0.05
    assert (main["kind"] == "simple effect at the baseline of the other factors").all()
    inter = pd.read_csv(REPO / "reports" / "beyond" / "tables" / "interactions.csv")
    assert inter["estimate"].isna().all() and inter["alias"].str.endswith(", aliased").all()
    assert "aliased" in (REPO / "reports" / "beyond" / "report.md").read_text()


def test_four_axes_main_effects_use_pure_error():
    main = pd.read_csv(REPO / "reports" / "four_axes" / "tables" / "main_effects.csv")
    assert (main["ci95"] < 0.005).all()  # the additive model gave +/-0.012
    assert set(main["call"]) == {"better", "worse", "equivalent"}
