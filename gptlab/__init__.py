"""gptlab: an architecture ablation laboratory for GPT-style language models.

Public API (docs/ARCHITECTURE.md): `ModelConfig`, `build_model`, `REGISTRIES`, and `load(results_dir)`: a
sweep's results (runs, curves, the report's tables) as DataFrames, for notebooks (`gptlab.report.study`). The model's
names are imported on first use, so that `import gptlab` (which every `python -m gptlab.X` runs first) imports no torch.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gptlab.errors import GptlabError
from gptlab.registry import Registry

if TYPE_CHECKING:
    from gptlab.model import REGISTRIES, ModelConfig, build_model
    from gptlab.report.study import Study

MODEL_NAMES = ("ModelConfig", "build_model", "REGISTRIES")  # `gptlab.model`'s, imported on first use (`__getattr__`)

__version__ = "0.1.0"
__all__ = ["ModelConfig", "build_model", "REGISTRIES", "Registry", "GptlabError", "load", "__version__"]


def load(results_dir: Path | str, *, margin: float | None = None) -> Study:
    """A sweep's results folder (`results/NAME`) as a `Study`: `runs`, `curves`, `main_effects`,
    `interactions`, `calls`, `effects_by_step`, `effects_by_scale` and `tables` (every report table),
    DataFrames computed on first access by the report's own code. `margin` overrides the sweep's
    `report.equivalence_margin` (the load step resolves it: `Study.margin`). A folder that is not a sweep's results
    raises `GptlabError` (one line), as does a bad margin.
    """
    from gptlab.report.load import load_results  # lazily: `import gptlab` stays free of the report
    from gptlab.report.study import Study

    return Study(results=load_results(results_dir, margin))


def __getattr__(name: str) -> Any:
    """The model's public names, imported (with torch) when first asked for: `python -m gptlab.sweep` runs this
    package first, and a command must set up its stop signals before torch's second or more of import."""
    if name in MODEL_NAMES:
        from gptlab import model

        return getattr(model, name)
    raise AttributeError(f"module 'gptlab' has no attribute {name!r}")
