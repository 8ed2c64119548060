"""Summaries written under an earlier status rule, read under today's: a run's status judged again from its own curve.

A summary.json whose `status_rule` is not `gptlab.statuses.STATUS_RULE` (summaries written before the
rule carry none) and whose status is one the rule gives (`JUDGED`: ok, collapsed, unstable) was judged
by an earlier rule: a 5% margin on its best validation loss, or nothing at all. `RunDir.summary()`, the
one door every reader of a run's result goes through (the sweep's planners and tuners, summary.csv's
rows, the report's loader, `--reuse`), passes it through `reclassified`: its metrics.csv's training
losses are judged by `statuses.judge` against the unigram loss of its training split, in its own tokens
(recorded in the summary as `unigram_train_loss`, else computed from the data section it recorded, never
downloading, once per corpus and process). A run whose status changes is returned with its new status,
`"reclassified": true` and the note why (or the earlier rule's note removed); nothing is written: the
file keeps what the run recorded. A run whose corpus is not on this machine keeps its recorded status,
logged once per corpus, as does one whose metrics.csv cannot be read (`RunDir.metric_rows`: binary, missing);
`diverged` and `failed` are never judged again.
"""
from __future__ import annotations

import functools
import logging
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from gptlab.errors import GptlabError, first_line
from gptlab.runio import read_yaml
from gptlab.statuses import JUDGED, STATUS_RULE, judge

log = logging.getLogger(__name__)

RECLASSIFIED = "reclassified"  # the key a summary read under the rule carries (True) when the rule changed its status
DataKey = tuple[str, Any, float, str, Any, float]  # dataset, path, val_fraction, tokenizer, vocab_size, test_fraction


def needs_rule(summary: dict[str, Any]) -> bool:
    """Whether a summary was judged by an earlier rule: a status the rule gives, and not today's `status_rule`."""
    return summary.get("status") in JUDGED and summary.get("status_rule") != STATUS_RULE


def reclassified(summary: dict[str, Any], config_path: Path,
                 rows: Sequence[Mapping[str, float]] | None) -> dict[str, Any]:
    """`summary` under today's rule (a new dict when its status or note changes, else `summary` itself); `rows`: its
    metrics.csv as numbers (`RunDir.metric_rows`), None when unreadable."""
    if not needs_rule(summary):
        return summary
    unigram = summary.get("unigram_train_loss")
    if isinstance(unigram, bool) or not isinstance(unigram, (int, float)):
        key = data_key(summary, config_path)
        unigram = None if key is None else unigram_of(key)
    if unigram is None:
        return summary
    train = train_losses(rows)
    if train is None:
        return summary
    verdict = judge(train, float(unigram))
    if verdict.status == summary.get("status"):
        return summary
    return {**summary, "status": verdict.status, "error": verdict.note, "unigram_train_loss": unigram,
            RECLASSIFIED: True}


def train_losses(rows: Sequence[Mapping[str, float]] | None) -> tuple[float, ...] | None:
    """A run's metrics.csv training losses in row order (finite ones), None when it has none readable."""
    return None if rows is None else tuple(r["train_loss"] for r in rows if math.isfinite(r["train_loss"]))


def data_key(summary: dict[str, Any], config_path: Path) -> DataKey | None:
    """The run's data section, defaults filled in, as a hashable key; None when the run recorded none."""
    config = summary.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("data"), dict):
        try:
            config = read_yaml(config_path) if config_path.is_file() else None
        except (OSError, ValueError, yaml.YAMLError):
            config = None
    data = config.get("data") if isinstance(config, dict) else None
    if not isinstance(data, dict):
        return None
    from gptlab.run.config import build_section

    try:
        d = build_section("data", data)
    except (GptlabError, TypeError, ValueError):  # a section this version cannot read: the run stays as recorded
        return None
    return d.dataset, d.path, d.val_fraction, d.tokenizer, d.vocab_size, d.test_fraction


@functools.lru_cache(maxsize=64)
def unigram_of(key: DataKey) -> float | None:
    """The unigram loss (nats/token) of the training split `key` names; None (logged once) without its corpus."""
    from gptlab.run.data import unigram_val_loss

    dataset, path, val_fraction, tokenizer, vocab_size, test_fraction = key
    try:
        return unigram_val_loss(dataset, path, val_fraction, False, tokenizer, vocab_size, test_fraction, split="train")
    except (GptlabError, OSError, ValueError) as err:
        log.warning("runs on %s are read with the status they recorded, not judged again (%s)", path or dataset,
                    first_line(err, empty=type(err).__name__))
        return None
