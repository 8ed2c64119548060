"""gptlab: an architecture ablation laboratory for GPT-style language models.

Public API (see DESIGN.md): `ModelConfig`, `build_model`, `REGISTRIES`.
"""
from gptlab.errors import GptlabError
from gptlab.model import REGISTRIES, ModelConfig, build_model
from gptlab.registry import Registry

__version__ = "0.1.0"
__all__ = ["ModelConfig", "build_model", "REGISTRIES", "Registry", "GptlabError", "__version__"]
