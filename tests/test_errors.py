"""`gptlab.errors`: the one-line messages, and the first line of an error's message however empty it is."""
from __future__ import annotations

import pytest

from gptlab.errors import first_line


@pytest.mark.parametrize("error, line", [
    (EOFError(), "no message"),  # torch's error for an empty checkpoint: str() is ''
    (ValueError(""), "no message"),
    (RuntimeError("\n  \n"), "no message"),
    (RuntimeError("  first\nsecond"), "first"),
    ("plain text\nmore", "plain text"),
])
def test_first_line_of_any_message_empty_or_not(error, line):
    assert first_line(error) == line


def test_first_line_is_cut_and_its_empty_word_given():
    assert first_line(OSError("x" * 500), limit=120) == "x" * 120
    assert first_line(EOFError(), empty="no detail") == "no detail"
