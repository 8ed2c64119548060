"""The test blocks of a sweep's estimation runs: each run's loss per block of its test text, read through `RunDir`.

Owns which runs' `test_blocks.csv` the report uses and what their numbers mean. The blocks are used
when the effects are on the test loss and every ok estimation run with a test loss has them, with the
same blocks, adding up to its test loss; the effects' CIs then count the text as well as the seeds
(`gptlab.stats.text_share`). Otherwise `BlockLosses.missing` says why not (the report then keeps the
seed-only model, and its sentences say so). A block's loss is in the results' unit: nats/token (nats/char
for the char tokenizer) weighted by its tokens, or, when tokenizers mix, bits/char weighted by its characters.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gptlab.run.resultsdir import ResultsDir
from gptlab.stats.text_share import Blocks

LN2 = math.log(2.0)
REL_TOL = 1e-4  # how closely a run's blocks must add up to its test loss


@dataclass(frozen=True)
class BlockLosses:
    """The blocks of every ok estimation run, or why the report does without them.

    `losses` and `weights`: one row per run (index run_id), one column per block; `missing` is empty
    when they are used, else one of "no test split", "no blocks" (`without` runs of `runs` lack a
    test_blocks.csv), "unlike blocks" (runs' blocks differ) or "not their loss" (`culprit`'s blocks do
    not add up to its test loss).
    """
    losses: pd.DataFrame = field(default_factory=pd.DataFrame)
    weights: pd.DataFrame = field(default_factory=pd.DataFrame)
    missing: str = "no test split"
    runs: int = 0
    without: int = 0
    culprit: str = ""

    @property
    def present(self) -> bool:
        return not self.missing

    @property
    def n_blocks(self) -> int:
        return self.losses.shape[1]

    def for_runs(self, run_ids: pd.Series, values: pd.Series) -> Blocks | None:
        """The blocks of these runs, in their order; a run without blocks (a diverged run counted at a ceiling
        loss) counts at its value in every block. None when the report does without blocks."""
        if not self.present:
            return None
        ids = list(run_ids)
        losses = self.losses.reindex(ids).to_numpy(float, copy=True)
        weights = self.weights.reindex(ids).to_numpy(float, copy=True)
        flat = np.isnan(losses).any(axis=1)
        losses[flat] = np.asarray(values, float)[flat, None]
        weights[flat] = self.weights.mean(axis=0).to_numpy(float)
        return Blocks(losses, weights)


def read_test_blocks(results_dir: ResultsDir, runs: pd.DataFrame, outcome: str, unit: str) -> BlockLosses:
    """The blocks of the ok runs of `runs` that have a finite `outcome` (only when it is `best_test_loss`)."""
    if outcome != "best_test_loss":
        return BlockLosses()
    used = runs[runs["ok"] & np.isfinite(runs[outcome].astype(float))]
    frames = {}
    for run_id in used["run_id"]:
        rows = results_dir.run(run_id).test_blocks()
        if rows:
            frames[run_id] = pd.DataFrame(rows).apply(pd.to_numeric, errors="coerce").set_index("block")
    if len(frames) < len(used) or not len(used):
        return BlockLosses(missing="no blocks", runs=len(used), without=len(used) - len(frames))
    blocks = next(iter(frames.values())).index
    if len(blocks) < 2 or any(not f.index.equals(blocks) or f.isna().to_numpy().any() for f in frames.values()):
        return BlockLosses(missing="unlike blocks", runs=len(used))
    losses, weights = {}, {}
    for run_id, f in frames.items():
        if unit == "bits/char":  # tokenizers mix: each block in bits per its own characters
            losses[run_id], weights[run_id] = f["loss"] * f["tokens"] / f["chars"] / LN2, f["chars"]
        else:
            losses[run_id], weights[run_id] = f["loss"], f["tokens"]
    losses, weights = pd.DataFrame(losses).T, pd.DataFrame(weights).T
    if (weights.to_numpy() <= 0).any():
        return BlockLosses(missing="unlike blocks", runs=len(used))
    total = (losses * weights).sum(axis=1) / weights.sum(axis=1)
    loss = used.set_index("run_id")[outcome].astype(float)
    off = (total - loss.reindex(total.index)).abs() > REL_TOL * loss.reindex(total.index).abs().clip(lower=1.0)
    if off.any():
        return BlockLosses(missing="not their loss", runs=len(used), culprit=str(off[off].index[0]))
    return BlockLosses(losses=losses, weights=weights.div(weights.sum(axis=1), axis=0), missing="", runs=len(used))
