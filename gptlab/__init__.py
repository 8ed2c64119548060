"""gptlab: an architecture ablation laboratory for GPT-style language models.

Public API (docs/ARCHITECTURE.md): `ModelConfig`, `build_model`, `REGISTRIES`, and `load(results_dir)`: a
sweep's results (runs, curves, the report's tables) as DataFrames, for notebooks (`gptlab.report.study`).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gptlab.errors import GptlabError
from gptlab.model import REGISTRIES, ModelConfig, build_model
from gptlab.registry import Registry

if TYPE_CHECKING:
    from gptlab.report.study import Study

__version__ = "0.1.0"
__all__ = ["ModelConfig", "build_model", "REGISTRIES", "Registry", "GptlabError", "load", "__version__"]


def load(results_dir: Path | str, *, margin: float | None = None) -> Study:
    """A sweep's results folder (`results/NAME`) as a `Study`: `runs`, `curves`, `main_effects`,
    `interactions`, `calls`, `effects_by_step`, `effects_by_scale` and `tables` (every report table),
    DataFrames computed on first access by the report's own code. `margin` overrides the sweep's
    `report.equivalence_margin`. A folder that is not a sweep's results raises `GptlabError` (one line).
    """
    from gptlab.report.study import load as load_study  # lazily: `import gptlab` stays free of the report
    return load_study(results_dir, margin=margin)
