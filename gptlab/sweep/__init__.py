"""The sweep: a YAML grid x seeds (`spec`), its summary.csv (`summary`), progress and the CLI.

`python -m gptlab.sweep SPEC.yaml` runs `gptlab.sweep.cli.main`.
"""
from gptlab.sweep.cli import main

__all__ = ["main"]
