"""The unigram ceiling of a sweep: the loss of a model that knows only the characters' (or tokens') frequencies.

The report's reference for a diverged run (counted at it in the sensitivity analysis) and the cap of the
LR sensitivity's losses; computed from the data section of the sweep's runs (`run.data.unigram_val_loss`).
"""
from __future__ import annotations

import math

import pandas as pd
import yaml

from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir


def unigram_ceiling(results_dir: ResultsDir, runs: pd.DataFrame, per_token: bool = False, split: str = "val") -> tuple[float, str]:
    """Unigram loss of the validation (or test) split of the runs' dataset (from a run's config.yaml; never downloads).

    Per character (a char unigram) unless `per_token`: then per token of the runs' own tokenizer.
    """
    for run_id in runs["run_id"]:
        try:
            data = (yaml.safe_load((results_dir.run(run_id) / RunDir.CONFIG).read_text(encoding="utf-8"))
                    or {}).get("data")
        except (OSError, ValueError, yaml.YAMLError, AttributeError):
            continue
        if isinstance(data, dict):
            break
    else:
        return math.nan, "no run's config.yaml names its data"
    from gptlab.run.data import unigram_val_loss
    from gptlab.errors import GptlabError
    name = str(data.get("dataset") or "tinyshakespeare")
    try:
        tokenizer = {"tokenizer": data.get("tokenizer") or "char", "vocab_size": data.get("vocab_size")} \
            if per_token else {}
        loss = unigram_val_loss(name, data.get("path"), float(data.get("val_fraction") or 0.1), **tokenizer,
                                test_fraction=float(data.get("test_fraction") or 0.0), split=split)
    except (GptlabError, OSError, ValueError) as exc:
        return math.nan, str(exc)
    return loss, f"unigram loss of the {'test' if split == 'test' else 'validation'} split of {name}"
