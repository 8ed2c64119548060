"""The blocks a report's document is made of: `Heading`, `Para`, `Bullets`, `Code`, `Table`, `Image`, `Markdown`.

The document step (`gptlab.report.document`) arranges them (`image`: a figure's block); `render` writes them as
Markdown and HTML.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

import pandas as pd

if TYPE_CHECKING:
    from gptlab.report.figures import Png


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Code:
    text: str


@dataclass
class Table:
    df: pd.DataFrame  # already rounded (fmt.round_frame); rendered with fmt.fmt_value


@dataclass
class Image:
    name: str  # file name under figures/
    alt: str
    png: bytes


@dataclass
class Markdown:
    text: str  # a whole Markdown document (e.g. a human-written discussion), kept as written


Block = Union[Heading, Para, Bullets, Code, Table, Image, Markdown]


def image(png: Png | None, alt: str) -> list[Block]:
    """A figure of the report (a field of `figures.Figures`) as its image block; none where the report has none."""
    return [Image(png.file, alt, png.data)] if png is not None else []
