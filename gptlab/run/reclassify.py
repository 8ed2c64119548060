"""Summaries written before the `collapsed` rule, read under it: an old `ok` run that did not learn reads `collapsed`.

A summary.json whose status is ok and which has no `unigram_val_loss` was written before the runner
applied the rule of `gptlab.statuses`. `RunDir.summary()`, the one door every reader of a run's
result goes through (the sweep's planners and tuners, summary.csv's rows, the report's loader,
`--reuse`), passes it through `reclassified`: the unigram loss of the run's validation split, in
its own tokens, is computed from the data section it recorded (the summary's `config`, else the
folder's config.yaml), never downloading, once per corpus and process. A run that did not learn is
returned as `collapsed` with `"reclassified": true`, the unigram loss and the note why. Nothing is
written: the file keeps what the run recorded. A run whose corpus is not on this machine stays ok,
logged once per corpus.
"""
from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

import yaml

from gptlab.errors import GptlabError, first_line
from gptlab.runio import read_yaml
from gptlab.statuses import COLLAPSED, OK, collapse_note, is_collapsed

log = logging.getLogger(__name__)

RECLASSIFIED = "reclassified"  # the key a summary read under the rule carries (True) when the rule changed its status
DataKey = tuple[str, Any, float, str, Any, float]  # dataset, path, val_fraction, tokenizer, vocab_size, test_fraction


def needs_rule(summary: dict[str, Any]) -> bool:
    """Whether a summary predates the rule: status ok with no `unigram_val_loss` recorded."""
    return summary.get("status") == OK and "unigram_val_loss" not in summary


def reclassified(summary: dict[str, Any], config_path: Path) -> dict[str, Any]:
    """`summary` under the `collapsed` rule (a new dict when its status changes, else `summary` itself)."""
    best = summary.get("best_val_loss")
    if not needs_rule(summary) or isinstance(best, bool) or not isinstance(best, (int, float)):
        return summary
    key = data_key(summary, config_path)
    unigram = None if key is None else unigram_of(key)
    if unigram is None or not is_collapsed(best, unigram):
        return summary
    return {**summary, "status": COLLAPSED, "error": collapse_note(float(best), unigram), "unigram_val_loss": unigram,
            RECLASSIFIED: True}


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
    """The unigram loss (nats/token) of the validation split `key` names; None (logged once) without its corpus."""
    from gptlab.run.data import unigram_val_loss

    dataset, path, val_fraction, tokenizer, vocab_size, test_fraction = key
    try:
        return unigram_val_loss(dataset, path, val_fraction, False, tokenizer, vocab_size, test_fraction)
    except (GptlabError, OSError, ValueError) as err:
        log.warning("runs on %s recorded as ok are not checked for the collapsed rule (%s)", path or dataset,
                    first_line(err, empty=type(err).__name__))
        return None
