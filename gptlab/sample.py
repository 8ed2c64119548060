"""Text generation from a run's checkpoint: `sample_from_run` and `python -m gptlab.sample`.

Checkpoints carry the run config and the vocabulary, so sampling needs neither the dataset nor
the sweep that trained the run.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

from gptlab.config import resolve_run_config
from gptlab.data import CharTokenizer
from gptlab.errors import GptlabError
from gptlab.model import GPT, build_model


def load_checkpoint_model(run_dir: str | Path, which: str = "best") -> tuple[GPT, CharTokenizer]:
    """The model and tokenizer saved in `run_dir/ckpt_{which}.pt` (loaded on CPU, eval mode)."""
    if which not in ("best", "last"):
        raise GptlabError(f"which must be 'best' or 'last', got {which!r}")
    path = Path(run_dir) / f"ckpt_{which}.pt"
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    state = torch.load(path, map_location="cpu", weights_only=True)
    tokenizer = CharTokenizer(state["vocab"])
    cfg = resolve_run_config(state["config"])
    model = build_model(dataclasses.replace(cfg.model, vocab_size=tokenizer.vocab_size))
    model.load_state_dict(state["model"])
    return model.eval(), tokenizer


def sample_from_run(run_dir: str | Path, prompt: str = "\n", max_new_tokens: int = 200, seed: int = 0,
                    temperature: float = 0.8, top_k: int | None = None, which: str = "best") -> str:
    """Generate `max_new_tokens` characters after `prompt`; same seed, same text."""
    model, tokenizer = load_checkpoint_model(run_dir, which)
    idx = torch.tensor([tokenizer.encode(prompt or "\n")], dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    out = model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k, generator=generator)
    return tokenizer.decode(out[0, idx.size(1):])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gptlab.sample", description="Sample text from a trained run.")
    parser.add_argument("run_dir", help="a run directory holding ckpt_best.pt / ckpt_last.pt")
    parser.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    parser.add_argument("--tokens", type=int, default=500, help="characters to generate")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--temperature", type=float, default=0.8, help="softmax temperature")
    parser.add_argument("--top-k", type=int, default=None, help="sample only from the k likeliest tokens")
    parser.add_argument("--which", choices=["best", "last"], default="best", help="which checkpoint")
    args = parser.parse_args(argv)
    try:
        text = sample_from_run(args.run_dir, args.prompt, args.tokens, args.seed, args.temperature, args.top_k, args.which)
    except (GptlabError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(args.prompt + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
