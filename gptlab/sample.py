"""`python -m gptlab.sample`: text from a run's checkpoint (`gptlab.run.sampling`), or from nanoGPT's.

A run trained with a plugin's registry entry (an activation, a tokenizer...) needs that plugin to be
rebuilt: the sample command imports the plugins the sweep that trained the run named, or those given
with `--plugin`, and no others (`gptlab.run.sampling.import_sweep_plugins`).

A nanoGPT `ckpt.pt` (`--nanogpt-ckpt`) loads into the lab's
baseline model (pre-LN, GELU, learned positions, tied head), whose state_dict is nanoGPT's key for
key; its character vocabulary is rebuilt from the text it was trained on (nanoGPT keeps it in a
pickle, which the lab does not load), and `--eval` prints its full validation loss.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from gptlab.errors import GptlabError, exit_status, first_line, hidden_package
from gptlab.model import GPT, build_model
from gptlab.run.sampling import (
    default_prompt,
    generate,
    import_sweep_plugins,
    load_checkpoint_model,
    sample_from_run,
    sweep_plugins,
)
from gptlab.run.tokenizers import CharTokenizer

__all__ = ["generate", "import_sweep_plugins", "load_checkpoint_model", "load_nanogpt_checkpoint", "main",
           "sample_from_run", "sweep_plugins"]


NANOGPT_PREFIX = "_orig_mod."  # what torch.compile puts before every key of a compiled model's state_dict


def load_nanogpt_checkpoint(path: str | Path, dataset: str = "tinyshakespeare",
                            data_path: str | None = None) -> tuple[GPT, CharTokenizer, torch.Tensor]:
    """A nanoGPT checkpoint as the lab's baseline model, with the tokenizer and val split of its text."""
    from gptlab.model import ModelConfig
    from gptlab.run.data import load_dataset
    path = Path(path)
    if not path.is_file():
        raise GptlabError(f"--nanogpt-ckpt: no file at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        args, weights = dict(state["model_args"]), state["model"]
    except Exception as err:  # pickle errors, a foreign file, missing keys
        raise GptlabError(f"--nanogpt-ckpt: {path} is not a nanoGPT checkpoint (needs 'model' and 'model_args'; "
                          f"{type(err).__name__}: {first_line(err)})") from None
    weights = {k.removeprefix(NANOGPT_PREFIX): v for k, v in weights.items()}
    weights = {k: v for k, v in weights.items() if not (k.endswith(".attn.bias") and v.dim() == 4)}  # causal mask
    data = load_dataset(dataset, data_path)
    if data.tokenizer.vocab_size != args.get("vocab_size"):
        raise GptlabError(f"--nanogpt-ckpt: the checkpoint has {args.get('vocab_size')} tokens, the text's character "
                          f"vocabulary {data.tokenizer.vocab_size}: pass --data with the text it was trained on")
    cfg = ModelConfig(vocab_size=int(args["vocab_size"]), block_size=int(args["block_size"]),
                      n_layer=int(args["n_layer"]), n_head=int(args["n_head"]), n_embd=int(args["n_embd"]),
                      dropout=0.0, bias=bool(args.get("bias", False)), norm="pre", norm_type="layernorm",
                      activation="gelu", position="learned", tying="tied")
    model = build_model(cfg)
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as err:
        raise GptlabError(f"--nanogpt-ckpt: {first_line(err)}") from None
    return model.eval(), data.tokenizer, data.val


MAX_TOKENS = 100_000  # about 100 kB of text: minutes on a CPU; more is a job for a loop of calls, not one command


def token_count(raw: str) -> int:
    """`--tokens`: a whole number from 1 to MAX_TOKENS (argparse turns the error into one line, exit 2)."""
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_TOKENS:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_TOKENS:,}, got {raw!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    if (hidden := hidden_package()) is not None:  # a bare folder named gptlab shadows the package: nothing would work
        return exit_status(hidden)
    parser = argparse.ArgumentParser(prog="python -m gptlab.sample", description="Sample text from a trained run.")
    parser.add_argument("run_dir", nargs="?", help="a run directory holding ckpt_best.pt / ckpt_last.pt")
    parser.add_argument("--nanogpt-ckpt", metavar="PATH", help="a nanoGPT ckpt.pt instead of a run directory")
    parser.add_argument("--data", metavar="PATH", help="with --nanogpt-ckpt: the text it was trained on "
                        "(default: Tiny Shakespeare)")
    parser.add_argument("--eval", action="store_true", help="with --nanogpt-ckpt: print the full validation loss")
    parser.add_argument("--prompt", default=None, help="text to continue (default: a newline, or the vocabulary's first "
                        "token where the text has no newline)")
    parser.add_argument("--tokens", type=token_count, default=500,
                        help=f"tokens to generate, 1 to {MAX_TOKENS:,} (characters with data.tokenizer char)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--temperature", type=float, default=0.8, help="softmax temperature")
    parser.add_argument("--top-k", type=int, default=None, help="sample only from the k likeliest tokens")
    parser.add_argument("--which", choices=["best", "last"], default="best", help="which checkpoint")
    parser.add_argument("--plugin", action="append", metavar="ENTRY", help="a plugin module or .py file the run "
                        "needs (repeatable; default: the plugins: of the sweep.yaml of the sweep that trained it)")
    args = parser.parse_args(argv)
    if (args.run_dir is None) == (args.nanogpt_ckpt is None):
        parser.error("give a run directory or --nanogpt-ckpt PATH (one of the two)")
    if args.eval and args.nanogpt_ckpt is None:
        parser.error("--eval works with --nanogpt-ckpt; a run's validation loss is its summary.json's best_val_loss")
    try:
        if args.nanogpt_ckpt:
            model, tokenizer, val = load_nanogpt_checkpoint(args.nanogpt_ckpt, data_path=args.data)
            if args.eval:
                from gptlab.run.evaluation import evaluate
                loss = evaluate(model, val, model.config.block_size, 64, torch.device("cpu"),
                                torch.autocast("cpu", enabled=False))
                print(f"val loss {loss:.4f} nats/char (full validation split)")
        else:
            import_sweep_plugins(args.run_dir, args.plugin)  # before the checkpoint's config is resolved
            model, tokenizer = load_checkpoint_model(args.run_dir, args.which)
        prompt = args.prompt or default_prompt(tokenizer)  # printed with the text: the one it continues
        text = generate(model, tokenizer, prompt, args.tokens, args.seed, args.temperature, args.top_k)
    except (GptlabError, FileNotFoundError) as err:
        return exit_status(err)
    print(prompt + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
