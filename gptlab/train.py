"""`python -m gptlab.train`: train one run from a YAML config and flags.

The run itself is `gptlab.run.runner.train_run`; this module is its command line only.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from gptlab.errors import GptlabError, exit_status, hidden_package
from gptlab.run.config import resolve_run_config, set_dotted, valid_keys
from gptlab.run.device import configure_process
from gptlab.run.rundir import RunSummary
from gptlab.run.runner import train_run
from gptlab.run.settings_help import flag_help
from gptlab.run.trainer import fmt_loss
from gptlab.runio import parse_yaml, read_yaml
from gptlab.statuses import FINISHED


# -- command line --------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gptlab.train",
        description="Train one GPT on a character corpus. Settings come from --config (a YAML with "
        "model/train/data/seed sections), then from the flags below.",
    )
    parser.add_argument("--config", help="YAML file with model/train/data sections and seed")
    parser.add_argument("--out", help="run directory (default: results/train/<run hash>)")
    for key in valid_keys():
        parser.add_argument(
            f"--{key}", dest=key, metavar="VALUE", help=flag_help(key) if "." in key else "random seed (default: 0)"
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    if (hidden := hidden_package()) is not None:  # a bare folder named gptlab shadows the package: nothing would work
        return exit_status(hidden)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        raw: dict[str, Any] = {}
        if args.config:
            raw = read_yaml(args.config) or {}
            if not isinstance(raw, dict):
                raise GptlabError(f"{args.config} must hold a mapping with model/train/data sections")
        for key in valid_keys():
            value = getattr(args, key)
            if value is not None:
                set_dotted(raw, key, parse_yaml(value))
        cfg = resolve_run_config(raw)
        if cfg.population:  # this trains alone: a lone run under a member's id would be neither
            raise GptlabError("population: true marks a run trained in a population (a sweep's executor.population); "
                              "this command trains a run alone: remove the key to train its lone run")
        run_dir = Path(args.out or Path("results") / "train" / cfg.run_hash())
        configure_process()
        summary = RunSummary.from_mapping(train_run(cfg, run_dir))
    except (GptlabError, FileNotFoundError) as err:
        return exit_status(err)
    print(f"{summary.status}: best val loss {fmt_loss(summary.best_val_loss)} at step {summary.best_step}; "
          f"run directory {run_dir}")
    return 0 if summary.status in FINISHED else 1


if __name__ == "__main__":
    sys.exit(main())
