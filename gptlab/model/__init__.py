"""The model parts: one registry per ablation axis and the one parametric GPT built from them.

Imports only torch and `gptlab.registry`; nothing here knows about runs, sweeps or reports.
"""
from gptlab.model.gpt import GPT, REGISTRIES, Block, ModelConfig, build_model

__all__ = ["GPT", "REGISTRIES", "Block", "ModelConfig", "build_model"]
