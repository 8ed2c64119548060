"""Text from a run's checkpoint: `sample_from_run`, with the defaults every sample of the lab uses.

Checkpoints carry the run config and the tokenizer, so sampling needs neither the dataset, the
tokenizer cache nor the sweep that trained the run. `python -m gptlab.sample` is the command line.
"""
from __future__ import annotations

from pathlib import Path

import torch

from gptlab.errors import GptlabError
from gptlab.model import GPT, build_model
from gptlab.run.config import resolve_run_config
from gptlab.run.tokenizers import Tokenizer, tokenizer_from_state
from gptlab.run.rundir import RunDir

# The sample a run writes at its end and the report shows: same prompt, length and seed everywhere.
PROMPT, MAX_NEW_TOKENS, SEED = "\n", 200, 0


def load_checkpoint_model(run_dir: str | Path, which: str = "best") -> tuple[GPT, Tokenizer]:
    """The model and tokenizer saved in `run_dir/ckpt_{which}.pt` (loaded on CPU, eval mode)."""
    if which not in ("best", "last"):
        raise GptlabError(f"which must be 'best' or 'last', got {which!r}")
    state = RunDir(run_dir).load_checkpoint(which)
    if state is None:
        raise FileNotFoundError(f"no checkpoint at {RunDir(run_dir) / (RunDir.BEST if which == 'best' else RunDir.LAST)}")
    tokenizer = tokenizer_from_state(state["tokenizer"] if "tokenizer" in state else state["vocab"])
    cfg = resolve_run_config(state["config"]).bind_vocab(tokenizer.vocab_size)
    model = build_model(cfg.model)
    model.load_state_dict(state["model"])
    return model.eval(), tokenizer


def generate(model: GPT, tokenizer: Tokenizer, prompt: str = PROMPT, max_new_tokens: int = MAX_NEW_TOKENS, seed: int = SEED,
             temperature: float = 0.8, top_k: int | None = None) -> str:
    """The text of `max_new_tokens` tokens after `prompt`; same seed, same text."""
    idx = torch.tensor([tokenizer.encode(prompt or "\n")], dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    out = model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k, generator=generator)
    return tokenizer.decode(out[0, idx.size(1):])


def sample_from_run(run_dir: str | Path, prompt: str = PROMPT, max_new_tokens: int = MAX_NEW_TOKENS, seed: int = SEED,
                    temperature: float = 0.8, top_k: int | None = None, which: str = "best") -> str:
    """Generate `max_new_tokens` tokens after `prompt` (characters with char); same seed, same text."""
    model, tokenizer = load_checkpoint_model(run_dir, which)
    return generate(model, tokenizer, prompt, max_new_tokens, seed, temperature, top_k)
