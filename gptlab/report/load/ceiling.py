"""The unigram ceiling of a sweep: the loss of a model that knows only the characters' (or tokens') frequencies.

The report's reference for a diverged run (counted at it in the sensitivity analysis) and the cap of the
LR sensitivity's losses; computed from the data section of the sweep's runs (`run.data.unigram_val_loss`), or,
when the text is missing, taken from the validation split's unigram loss each run recorded in its summary.json.
"""
from __future__ import annotations

import math

import pandas as pd
import yaml

from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir, RunSummary
from gptlab.runio import read_yaml


def unigram_ceiling(
    results_dir: ResultsDir, runs: pd.DataFrame, per_token: bool = False, split: str = "val"
) -> tuple[float, str]:
    """Unigram loss of the validation (or test) split of the runs' dataset (from the runs' config.yaml; never downloads).

    Per character (a char unigram) unless `per_token`: then per token of the runs' own tokenizer. A sweep over
    several texts gets the highest of their unigram losses (a diverged run counted at the worst of them).
    """
    sections: dict[tuple, dict] = {}
    for run_id in runs["run_id"]:
        try:
            data = (read_yaml(results_dir.run(run_id) / RunDir.CONFIG) or {}).get("data")
        except (OSError, ValueError, yaml.YAMLError, AttributeError):
            continue
        if isinstance(data, dict):
            key = tuple(str(data.get(k)) for k in ("dataset", "path", "val_fraction", "test_fraction", "tokenizer",
                                                     "vocab_size"))
            sections.setdefault(key, data)
    if not sections:
        return math.nan, "no run's config.yaml names its data"
    from gptlab.errors import GptlabError
    from gptlab.run.data import unigram_val_loss
    losses = []
    for data in sections.values():
        name = str(data.get("dataset") or "tinyshakespeare")
        try:
            tokenizer = {"tokenizer": data.get("tokenizer") or "char", "vocab_size": data.get("vocab_size")} \
                if per_token else {}
            losses.append((unigram_val_loss(name, data.get("path"), float(data.get("val_fraction") or 0.1),
                                            **tokenizer, test_fraction=float(data.get("test_fraction") or 0.0),
                                            split=split), name))
        except (GptlabError, OSError, ValueError) as exc:
            chars = all(str(d.get("tokenizer") or "char") == "char" for d in sections.values())
            recorded = _recorded(results_dir, runs) if split == "val" and (per_token or chars) else []
            if not recorded:
                return math.nan, str(exc)
            return max(recorded), ("the highest unigram loss of the validation split the runs recorded in their "
                                   f"summary.json (the text itself is not here: {exc})")
    loss, name = max(losses)
    where = f"{'test' if split == 'test' else 'validation'} split of {name}"
    return loss, (f"unigram loss of the {where}" if len(losses) == 1 else
                  f"the highest unigram loss of the {len(losses)} texts' splits, that of the {where}")


def _recorded(results_dir: ResultsDir, runs: pd.DataFrame) -> list[float]:
    """The unigram losses of the validation split that the runs recorded when they trained (summary.json, per token of
    their tokenizer), for a text that is no longer here."""
    out = []
    for run_id in runs["run_id"]:
        try:
            value = float((results_dir.run(run_id).summary() or RunSummary()).unigram_val_loss)
        except (ValueError, TypeError):  # none recorded, or not a number
            continue
        if math.isfinite(value):
            out.append(value)
    return out
