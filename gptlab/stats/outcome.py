"""The outcome rule: which runs count, the unit of every loss, and which loss the effects are on; stated once.

The sweep (an adaptive sweep's seed rule, on summary.csv's rows: `gptlab.kinds.seeds.stages`) and the report (its
load step, on the same rows: `gptlab.report.load`) both apply it to plain records, one per run: summary.csv's row
(text or numbers) with the run's bits-per-character factor (`val_bpc_factor`, from its summary.json).

- **Which runs count** (`role_of`, `counts`): a run's role is its `role` (`stage` in results from before it), an
  empty one `estimation`; only estimation runs enter the effects, and of them only those that finished `ok` with a
  finite outcome.
- **The unit** (`outcome_of`): losses stay as trained (nats/char for a char tokenizer, nats/token otherwise) when
  every run has the same bits-per-char factor and the sweep trains on one text; otherwise nats/token of different
  tokenizers, or nats of different texts, are incomparable, and every loss is converted to bits per character
  (`in_unit`: a run's losses times its factor; its test loss is its own `best_test_bpc`: the test split has its
  own characters per token). A run that records no factor is a char run (from before tokenizers).
- **The outcome** (`outcome_of`): `best_test_loss` (the test loss at the best validation step) when every
  estimation run that has a best validation loss has a test loss, else `best_val_loss`. Validation chose each
  checkpoint (and, in a tuned sweep, each setting), so it is optimistically biased; the test split chose nothing.
  A sweep mixing runs with and without a test split falls back to validation for every run (`Outcome.mixed`).

Numbers only: no files (the callers read the rows), no sentences.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from gptlab.roles import ESTIMATION
from gptlab.statuses import OK

VAL_OUTCOME, TEST_OUTCOME = "best_val_loss", "best_test_loss"  # the runs' columns an outcome can be
LOSSES = ("best_val_loss", "final_val_loss", "final_train_loss")  # a run's own losses, converted by its factor
NATS_PER_CHAR, NATS_PER_TOKEN, BITS_PER_CHAR = "nats/char", "nats/token", "bits/char"  # the units
CHAR_BPC_FACTOR = 1 / math.log(2)  # a char run's bits-per-char factor: its nats/char / ln 2 (`run.summary_csv`'s)
ROLE_COLUMNS = ("role", "stage")  # where a record's role is: `stage` in results from before `role`


@dataclass(frozen=True)
class Outcome:
    """What a sweep's effects are on: the runs' column, the unit of every loss, and how many runs had a test loss."""

    column: str  # VAL_OUTCOME or TEST_OUTCOME
    unit: str  # NATS_PER_CHAR, NATS_PER_TOKEN or BITS_PER_CHAR
    measured: int = 0  # estimation runs with a best validation loss
    tested: int = 0  # of them, those with a test loss

    @property
    def mixed(self) -> bool:
        """Whether some measured runs have a test loss and others none (the outcome fell back to validation)."""
        return 0 < self.tested < self.measured


def number(value: Any) -> float:
    """A record's value as a float: summary.csv's text ("1.52", "") or a number; NaN where it is none."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def role_of(record: Mapping[str, Any]) -> str:
    """The run's role: its `role` (its `stage` in results from before it), `estimation` where empty."""
    column = next((c for c in ROLE_COLUMNS if c in record), None)
    value = record[column] if column is not None else ""
    text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value).strip()
    return text or ESTIMATION


def counts(record: Mapping[str, Any], column: str) -> bool:
    """Whether the run enters the effects: an estimation run that finished ok with a finite `column` (in the unit)."""
    return (role_of(record) == ESTIMATION and str(record.get("status", "")).strip().lower() == OK
            and math.isfinite(number(record.get(column))))


def bpc_factor(value: Any) -> float:
    """A run's bits-per-char factor (its nats/token x this = bits/char); a char run's where it records none."""
    factor = number(value)
    return factor if math.isfinite(factor) and factor else CHAR_BPC_FACTOR


def unit_of(factors: Sequence[float], several_texts: bool = False) -> str:
    """The unit of every loss of runs with these bits-per-char factors, in a sweep on one text or several (a corpus
    factor: `run.corpora.CORPUS_KEYS`) (module docstring)."""
    factors = np.asarray(factors, float)
    if not len(factors):
        return NATS_PER_CHAR
    if not several_texts and np.allclose(factors, factors[0], rtol=1e-9):
        return NATS_PER_CHAR if np.isclose(factors[0], CHAR_BPC_FACTOR, rtol=1e-9) else NATS_PER_TOKEN
    return BITS_PER_CHAR


def in_unit(record: Mapping[str, Any], unit: str) -> dict[str, float]:
    """The run's losses (`LOSSES` and its test loss) in `unit`, and `loss_scale`: what its own nats are multiplied by
    (its curves' too). Train losses are converted too: an approximation (the train text's characters per token)."""
    scale = bpc_factor(record.get("val_bpc_factor")) if unit == BITS_PER_CHAR else 1.0
    test = record.get("best_test_bpc") if unit == BITS_PER_CHAR else record.get(TEST_OUTCOME)
    return {"loss_scale": scale, **{c: number(record.get(c)) * scale for c in LOSSES}, TEST_OUTCOME: number(test)}


def outcome_of(records: Sequence[Mapping[str, Any]], several_texts: bool = False) -> Outcome:
    """The rule over a sweep's runs (every role's record: the unit is theirs all; the outcome the estimation runs')."""
    unit = unit_of([bpc_factor(r.get("val_bpc_factor")) for r in records], several_texts)
    losses = [in_unit(r, unit) for r in records if role_of(r) == ESTIMATION]
    measured = [r for r in losses if not math.isnan(r[VAL_OUTCOME])]
    tested = sum(not math.isnan(r[TEST_OUTCOME]) for r in measured)
    column = TEST_OUTCOME if measured and tested == len(measured) else VAL_OUTCOME
    return Outcome(column, unit, len(measured), tested)
