"""`Results`: everything the report needs from results/NAME/, as the load step reads it; `ReportError`.

Owns the bundle the later steps read (runs, cells, levels, curves, the ceiling, the unit, the outcome, the test
blocks, and what each kind of sweep read by its `load` hook), frozen and built once by the load step, and its derived
views (short labels, scale and scientific factors, the runs that count, and from the typed `SweepSpec` the
equivalence margin of every call, the seeds that give the error, the arms, the tuned space and the fixed settings),
and `read_text`, how any results file is read as text. No statistics here: the outcome rule is
`gptlab.stats.outcome`'s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gptlab.errors import GptlabError
from gptlab.report.load.block_losses import BlockLosses
from gptlab.run.config import SECTIONS, get_dotted
from gptlab.run.corpora import CORPUS_KEYS
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.summary_csv import SummaryCheck
from gptlab.stats.arms import ARM, baseline_seed_count
from gptlab.stats.design import effect_label, factor_short
from gptlab.stats.outcome import TEST_OUTCOME, VAL_OUTCOME, counts
from gptlab.sweep.kinds import scale_keys, seed_plan
from gptlab.sweep.runs import SweepSpec


class ReportError(GptlabError):
    """Missing or invalid results: the CLI prints the message as one line and exits 2."""


@dataclass(frozen=True, eq=False)
class Results:
    """Everything the report needs, read from results/NAME/: built once, whole, by the load step (`load_results`).

    `runs` has one row per estimation row of summary.csv; factor columns hold level labels (str), plus `cell`
    (label), `ok` (status == "ok") and `diverged_step`. `levels[f]` lists the labels of factor f in
    grid order; `cells` lists every cell of the design (grid minus exclude) in grid order. Its frames are
    never changed after it is built: a step that needs other runs takes a copy (`dataclasses.replace`).
    """
    results_dir: ResultsDir  # results/NAME: its files' paths (`.path`, the folder)
    name: str
    spec: SweepSpec  # sweep.yaml read back as the sweep ran it (`sweep.stored`; without one, the grid summary.csv
    # shows), with the report's `--margin` in it when given: the one owner of the margin (`margin`)
    factors: list[str]
    levels: dict[str, list[str]]
    baseline: dict[str, str]
    runs: pd.DataFrame
    cells: pd.DataFrame
    curves: pd.DataFrame
    environment: dict[str, list[str]] = field(default_factory=dict)
    ceiling: float = math.nan  # unigram loss of the validation split (diverged runs' sensitivity value)
    ceiling_note: str = ""  # where the ceiling came from, or why there is none
    unit: str = "nats/char"  # of every loss in runs and curves: nats/char, nats/token, or bits/char (tokenizers mix)
    outcome: str = VAL_OUTCOME  # the runs' column the effects are on: best_test_loss when every run has a test split
    discussion: str | None = None  # results/NAME/discussion.md, written by a person (Markdown), if any
    selection: pd.DataFrame = field(default_factory=pd.DataFrame)  # runs that chose a setting (role selection: a tuned
    # sweep's); `runs` are the estimation runs
    other_roles: pd.DataFrame = field(default_factory=pd.DataFrame)  # runs of any other role: in no effect
    every_run: pd.DataFrame = field(default_factory=pd.DataFrame)  # all of summary.csv, in order, with `role`: the
    # notebook's and the export's view of the study (`gptlab.load`); the statistics read `runs`
    test_blocks: BlockLosses = field(default_factory=BlockLosses)  # per-block test losses (the text's error), or why none
    summary_check: SummaryCheck = field(default_factory=SummaryCheck)  # summary.csv against the run folders
    kinds: dict[str, Any] = field(default_factory=dict)  # what each kind of sweep read (its `load` hook), by its key

    @property
    def margin(self) -> float:
        """The equivalence margin of every call: sweep.yaml's `report.equivalence_margin`, or the report's `--margin`."""
        return self.spec.report.equivalence_margin

    @property
    def counted(self) -> pd.DataFrame:
        """The runs the effects are on (`stats.outcome.counts`): finished ok, with a finite outcome."""
        return self.runs.loc[np.array([counts(r, self.outcome) for r in self.runs.to_dict("records")], dtype=bool)]

    def short(self, factor: str) -> str:
        """Factor name without its section ("model.norm" -> "norm") unless that is ambiguous."""
        return factor_short(self.factors, factor)

    def label(self, factor: str, level: str) -> str:
        """'norm=post' (`stats.design.effect_label`: rounds.csv names effects the same way)."""
        return effect_label(self.factors, factor, level)

    @property
    def has_test_split(self) -> bool:
        """Whether the effects are on the test split (`best_test_loss`) rather than on validation."""
        return self.outcome == TEST_OUTCOME

    @property
    def outcome_label(self) -> str:
        """The outcome in words, for sentences: 'best val loss' or 'test loss at the best val step'."""
        return "test loss at the best val step" if self.has_test_split else "best val loss"

    @property
    def seeds(self) -> list[int]:
        return sorted(int(s) for s in self.runs["seed"].dropna().unique())

    @property
    def scale(self) -> list[str]:
        """The factors whose levels are scales (the sweep's kinds' scale keys, `sweep.kinds.scale_keys`: `scale:`'s):
        effects are reported per level, never as effects."""
        return [f for f in scale_keys(self.spec) if f in self.factors]

    @property
    def corpora(self) -> list[str]:
        """The factors that choose the text (`data.dataset`, `data.path`) with more than one level."""
        return text_factors(self.factors, self.levels)

    @property
    def scientific(self) -> list[str]:
        """The factors whose effects the report makes calls on (every factor that is not a scale)."""
        return [f for f in self.factors if f not in self.scale]

    @property
    def error_seeds(self) -> int | None:
        """The seeds per cell whose runs alone give the effects' error: round 1's where a kind of the sweep decided the
        seeds in rounds (Stein: `sweep.kinds.seed_plan`), else None (every run's)."""
        plan = seed_plan(self.spec)
        return plan.first if plan is not None else None

    @property
    def arms(self) -> dict[str, dict[str, Any]]:
        """An arms sweep's arms (name -> settings, in the YAML's order); empty for a grid."""
        design = self.spec.arms
        return {n: dict(s) for n, s in design.arms.items()} if design is not None and ARM in self.factors else {}

    def fixed(self, dotted: str) -> Any:
        """A fixed run setting of the sweep: `base`'s value, else the run config's default (`train.schedule`: cosine)."""
        try:
            return get_dotted(self.spec.base, dotted)
        except (KeyError, TypeError):
            section, name = dotted.split(".", 1)
            return getattr(SECTIONS[section], name)

    def first_seeds(self, runs: pd.DataFrame, n_seeds: int) -> pd.Series:
        """Which of `runs` have a seed among their cell's first n_seeds (an arms baseline's: its Dunnett share)."""
        base = baseline_seed_count(n_seeds, len(self.arms) - 1) if self.arms else n_seeds
        return runs["seed"].astype(int) < (runs[ARM].eq(self.baseline[ARM]) * (base - n_seeds) + n_seeds
                                           if self.arms else n_seeds)


def text_factors(factors: list[str], levels: dict[str, list[str]]) -> list[str]:
    """Of `factors`, those that choose the text (`run.corpora.CORPUS_KEYS`) with more than one level."""
    return [k for k in CORPUS_KEYS if k in factors and len(levels[k]) > 1]


def read_text(path: Path) -> str:
    """A results file as UTF-8 text; a binary or mis-encoded file is a `ReportError` naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ReportError(f"{path}: not UTF-8 text (byte {exc.start}); is it the file you meant?") from None
