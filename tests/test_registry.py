"""The generic Registry: decorator registration, lookup errors, duplicates, wildcards."""
from __future__ import annotations

import pytest

from gptlab import REGISTRIES, GptlabError, Registry


def test_register_and_get_returns_the_factory_not_an_instance():
    reg = Registry("widget")

    @reg.register("round")
    class Round:
        """A round widget."""

    assert reg.get("round") is Round
    assert reg.get("round")() is not reg.get("round")()
    assert reg.names() == ["round"] and "round" in reg and len(reg) == 1
    assert reg.summary("round") == "A round widget."


def test_duplicate_name_is_rejected():
    reg = Registry("widget")
    reg.register("a")(lambda: 1)
    with pytest.raises(GptlabError, match="already registered"):
        reg.register("a")(lambda: 2)


def test_unknown_name_lists_valid_names_and_suggests_the_closest():
    reg = Registry("widget")
    for name in ("sinusoidal", "learned"):
        reg.register(name)(object)
    with pytest.raises(GptlabError) as err:
        reg.get("sinusodal")
    message = str(err.value)
    assert "did you mean 'sinusoidal'" in message
    assert "valid: sinusoidal, learned" in message


def test_wildcard_query_keeps_registration_order():
    reg = Registry("widget")
    for name in ("gelu", "relu", "gelu_tanh"):
        reg.register(name)(object)
    assert reg.names("gelu*") == ["gelu", "gelu_tanh"]
    assert reg.names("*elu") == ["gelu", "relu"]


def test_the_four_axes_hold_the_required_entries():
    assert list(REGISTRIES) == ["norm", "norm_type", "activation", "position", "tying"]
    for axis, required in {"norm": ["pre", "post"], "activation": ["gelu", "relu"],
                           "position": ["learned", "sinusoidal"], "tying": ["tied", "untied"]}.items():
        assert REGISTRIES[axis].names()[:2] == required
