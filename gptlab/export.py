"""`python -m gptlab.export results/NAME --tensorboard DIR`: the command line of the report's TensorBoard export.

A thin entry kept at this name because the command is public; the export itself is `gptlab.report.export`.
"""
from __future__ import annotations

import sys

from gptlab.report.export import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
