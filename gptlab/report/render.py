"""A tiny document model rendered to GitHub Markdown and to self-contained HTML, plus atomic writes.

Owns: the block types (`Heading`, `Para`, `Bullets`, `Code`, `Table`, `Image`), `to_markdown`
(figures referenced as `figures/NAME.png`), `to_html` (the same content, figures embedded as
base64 data URIs) and `atomic_write` (temp file in the target dir, then `os.replace`).
Inline markup understood in text: `code` and **bold**.
"""
from __future__ import annotations

import base64
import html
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import pandas as pd

from gptlab.report.fmt import fmt_value


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


Block = Union[Heading, Para, Bullets, Code, Table, Image]


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write `data` to `path` via a temp file in the same directory and os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # mode honours the umask
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def cell_texts(df: pd.DataFrame) -> list[list[str]]:
    """Every table cell as the text both renderers show."""
    return [[fmt_value(str(c), v).replace("\n", " ") for c, v in zip(df.columns, row)]
            for row in df.itertuples(index=False, name=None)]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"{'#' * b.level} {b.text}")
        elif isinstance(b, Para):
            out.append(b.text)
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {item}" for item in b.items))
        elif isinstance(b, Code):
            fence = "````" if "```" in b.text else "```"
            out.append(f"{fence}text\n{b.text.rstrip()}\n{fence}")
        elif isinstance(b, Table):
            head = [_md_cell(str(c)) for c in b.df.columns]
            rows = [head, ["---"] * len(head)] + [[_md_cell(t) for t in r] for r in cell_texts(b.df)]
            out.append("\n".join("| " + " | ".join(r) + " |" for r in rows))
        elif isinstance(b, Image):
            out.append(f"![{b.alt}](figures/{b.name})")
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.85em;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}pre{background:#f6f8fa;padding:.8em;overflow-x:auto}
img{max-width:100%}code{background:#f0f0f0;padding:0 3px}"""


def to_html(blocks: list[Block], title: str) -> str:
    out = [f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{CSS}</style></head><body>"]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Code):
            out.append(f"<pre>{html.escape(b.text.rstrip())}</pre>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{html.escape(str(c))}</th>" for c in b.df.columns)
            body = "".join("<tr>" + "".join(f"<td>{html.escape(t)}</td>" for t in r) + "</tr>"
                           for r in cell_texts(b.df))
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif isinstance(b, Image):
            data = base64.b64encode(b.png).decode("ascii")
            out.append(f"<figure><img alt='{html.escape(b.alt)}' src='data:image/png;base64,{data}'></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
