"""Held-out evaluation: the mean loss of a split, each target's loss, and the test split's blocks.

Every evaluation scores every target of a split once, in fixed windows (`data.eval_windows`), so it
has no sampling noise. The test split is also kept as `TEST_BLOCKS` contiguous blocks
(`test_blocks.csv` in the run folder): the report counts which stretch of text is scored as a
source of variation with them.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from gptlab.run.data import eval_windows

TEST_BLOCKS = 20  # contiguous blocks of the test split whose losses each run keeps (test_blocks.csv)


def _window_losses(model: torch.nn.Module, data: torch.Tensor, block_size: int, batch_size: int,
                   device: torch.device, autocast: contextlib.AbstractContextManager,
                   reduction: str) -> Iterator[torch.Tensor]:
    """The losses of every target of `data` batch by batch, in text order (full windows, then the tail's new
    targets), summed per batch or not (`reduction`); the model in eval mode meanwhile."""
    was_training = model.training
    model.eval()
    try:
        for x, y, n_scored in eval_windows(data, block_size):
            for i in range(0, len(x), batch_size):
                xb, yb = x[i : i + batch_size].to(device), y[i : i + batch_size].to(device)
                with autocast:
                    logits, _ = model(xb)
                logits, yb = logits[:, -n_scored:], yb[:, -n_scored:]
                yield torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), yb.reshape(-1),
                                                        reduction=reduction)
    finally:
        model.train(was_training)


@torch.inference_mode()
def evaluate(model: torch.nn.Module, data: torch.Tensor, block_size: int, batch_size: int,
             device: torch.device, autocast: contextlib.AbstractContextManager) -> float:
    """Mean next-token loss (nats) over every target of `data`, in fixed windows: no sampling noise."""
    total = torch.zeros((), device=device, dtype=torch.float64)
    for loss in _window_losses(model, data, block_size, batch_size, device, autocast, "sum"):
        total += loss
    return total.item() / (len(data) - 1)


@torch.inference_mode()
def evaluate_per_target(model: torch.nn.Module, data: torch.Tensor, block_size: int, batch_size: int,
                        device: torch.device, autocast: contextlib.AbstractContextManager) -> torch.Tensor:
    """The next-token loss (nats) of every target of `data`, in text order: (len(data) - 1,) float64.

    The same windows as `evaluate` (whose mean this is, up to float rounding); the test split's blocks
    (`test_blocks`) are sums over contiguous stretches of it.
    """
    return torch.cat([loss.double().cpu() for loss in _window_losses(model, data, block_size, batch_size, device,
                                                                    autocast, "none")])


def test_blocks(losses: torch.Tensor, ids: torch.Tensor, tokenizer: Any, n_blocks: int = TEST_BLOCKS) -> list[dict[str, Any]]:
    """The test split's targets cut into `n_blocks` contiguous blocks: block, chars, tokens, mean loss (nats/token).

    Target i is token i + 1 of the split; a block's characters are those its target tokens decode to.
    The report's CIs count the text as a source of variation through these (which stretch of text is scored).
    """
    n = len(losses)
    bounds = [round(n * b / n_blocks) for b in range(n_blocks + 1)]
    blocks = []
    for b in range(n_blocks):
        lo, hi = bounds[b], bounds[b + 1]
        if hi <= lo:
            continue
        blocks.append({"block": b, "chars": len(tokenizer.decode(ids[lo + 1 : hi + 1].tolist())), "tokens": hi - lo,
                       "loss": losses[lo:hi].mean().item()})
    return blocks
