"""The blocks a report's document is made of: `Heading`, `Para`, `Bullets`, `Code`, `Table`, `Image`, `Markdown`.

The document step (`gptlab.report.document`) arranges them; `render` writes them as Markdown and HTML.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import pandas as pd


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
