"""Text from a run's checkpoint: `sample_from_run`, with the defaults every sample of the lab uses.

Checkpoints carry the run config and the tokenizer, so sampling needs neither the dataset nor the
tokenizer cache. A run trained with a plugin's registry entry (an activation, a tokenizer...) needs that
plugin to be rebuilt: `import_sweep_plugins` imports those the sweep that trained it named (the
`plugins:` of `results/NAME/sweep.yaml`, `sweep_plugins`), or those given, and no others. The report's
samples and `python -m gptlab.sample`, the command line, both use this module.
"""
from __future__ import annotations

from pathlib import Path

import torch

from gptlab.errors import GptlabError, first_line
from gptlab.model import GPT, build_model
from gptlab.plugins import import_plugins, resolve_plugin, stored_plugins
from gptlab.run.config import resolve_run_config
from gptlab.run.resultsdir import ResultsDir
from gptlab.run.rundir import RunDir
from gptlab.run.tokenizers import Tokenizer, tokenizer_from_state

# The sample a run writes at its end and the report shows: same prompt, length and seed everywhere. The prompt is
# PROMPT wherever the vocabulary has it, else its first token (`default_prompt`).
PROMPT, MAX_NEW_TOKENS, SEED = "\n", 200, 0


def load_checkpoint_model(run_dir: str | Path, which: str = "best") -> tuple[GPT, Tokenizer]:
    """The model and tokenizer saved in `run_dir/ckpt_{which}.pt` (loaded on CPU, eval mode)."""
    if which not in ("best", "last"):
        raise GptlabError(f"which must be 'best' or 'last', got {which!r}")
    state = RunDir(run_dir).load_checkpoint(which)
    if state is None:
        runs = ResultsDir(run_dir).runs_dir
        hint = ""
        if runs.is_dir():  # a sweep's results folder: its checkpoints are in its runs' folders
            first = next((p.name for p in sorted(runs.iterdir()) if p.is_dir()), "RUN_ID")
            hint = f"; {run_dir} is a sweep's results folder: give one of its runs, e.g. {runs / first}"
        raise FileNotFoundError(f"no checkpoint at {RunDir(run_dir) / (RunDir.BEST if which == 'best' else RunDir.LAST)}"
                                f"{hint}")
    folder = RunDir(run_dir)
    path = folder / (RunDir.BEST if which == "best" else RunDir.LAST)
    if not isinstance(state, dict) or not {"config", "model"} <= set(state) or not {"tokenizer", "vocab"} & set(state):
        raise GptlabError(f"{path} is not a gptlab checkpoint (it needs a config, a model and a tokenizer)")
    if (folder / RunDir.CONFIG).exists() and not folder.holds(state["config"]):
        raise GptlabError(f"{path} does not match this run's config ({folder / RunDir.CONFIG}): it holds another "
                          "run's model; sample the run folder it came from")
    try:
        tokenizer = tokenizer_from_state(state["tokenizer"] if "tokenizer" in state else state["vocab"])
        cfg = resolve_run_config(state["config"]).bind_vocab(tokenizer.vocab_size)
        model = build_model(cfg.model)
        model.load_state_dict(state["model"])
    except GptlabError as err:
        raise GptlabError(f"{path}: {err}") from None
    except Exception as err:  # a hand-made or foreign file: wrong types, shapes or keys inside
        raise GptlabError(f"{path} cannot be loaded as the model its config describes ({type(err).__name__}: "
                          f"{first_line(err, 160, 'no detail')})") from None
    return model.eval(), tokenizer


def default_prompt(tokenizer: Tokenizer) -> str:
    """PROMPT (a newline) where the vocabulary has it, else its first token (id 0: a character of the corpus).

    A corpus without a newline (a user's text with its lines joined, one long string) has no newline in its
    character vocabulary: prompting with one would fail, at its very end, a run that trained every step."""
    try:
        if tokenizer.encode(PROMPT):
            return PROMPT
    except GptlabError:  # not in the vocabulary
        pass
    return tokenizer.decode([0])


def generate(model: GPT, tokenizer: Tokenizer, prompt: str | None = None, max_new_tokens: int = MAX_NEW_TOKENS,
             seed: int = SEED, temperature: float = 0.8, top_k: int | None = None) -> str:
    """The text of `max_new_tokens` tokens after `prompt` (none or empty: `default_prompt`); same seed, same text.
    A prompt given with a character the vocabulary lacks is the tokenizer's one-line error."""
    idx = torch.tensor([tokenizer.encode(prompt or default_prompt(tokenizer))], dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    out = model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k, generator=generator)
    return tokenizer.decode(out[0, idx.size(1):])


def sample_from_run(run_dir: str | Path, prompt: str | None = None, max_new_tokens: int = MAX_NEW_TOKENS,
                    seed: int = SEED, temperature: float = 0.8, top_k: int | None = None, which: str = "best") -> str:
    """Generate `max_new_tokens` tokens after `prompt` (none: `default_prompt`; characters with char); same seed,
    same text."""
    model, tokenizer = load_checkpoint_model(run_dir, which)
    return generate(model, tokenizer, prompt, max_new_tokens, seed, temperature, top_k)


def sweep_plugins(results_dir: ResultsDir | str | Path) -> list[str]:
    """The plugin entries the sweep of `results_dir` (results/NAME) named: its sweep.yaml's `plugins:`.

    They are stored resolved (absolute .py paths or module names) when the sweep starts. No sweep.yaml
    (a run trained by `python -m gptlab.train`) means no plugins.
    """
    return stored_plugins(ResultsDir(results_dir).sweep_yaml)


def import_sweep_plugins(run_dir: str | Path, entries: list[str] | None = None) -> list[str]:
    """Import the plugins a run needs: `entries` if given, else those of the sweep that trained it.

    `run_dir` is results/NAME/runs/RUN_ID; a run directory elsewhere has no sweep, so only `entries`.
    Returns the entries imported. A plugin that cannot be found or imported is one GptlabError.
    """
    results_dir = ResultsDir.holding(Path(run_dir).resolve())
    if entries is None:
        entries = sweep_plugins(results_dir) if results_dir is not None else []
        where = f" (named by {results_dir.sweep_yaml}; pass --plugin to name them yourself)" \
            if results_dir is not None else ""
    else:
        where = ""
    try:
        resolved = [resolve_plugin(entry, Path.cwd()) for entry in entries]
        import_plugins(resolved, [str(Path.cwd())])
    except GptlabError as err:
        raise GptlabError(f"{err}{where}") from None
    return resolved
