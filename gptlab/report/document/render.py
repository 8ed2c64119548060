"""The report's render step: the document's blocks rendered to GitHub Markdown and self-contained HTML, and written.

Owns: `to_markdown` (figures referenced as `figures/NAME.png`), `to_html` (the same content, figures
embedded as base64 data URIs, in a Jinja2 page whose wide tables scroll under sticky headers), and
`write`, which writes a report's folder: every file through `gptlab.runio`'s atomic writes, and a
manifest of them, so that the next generation removes what it no longer writes. Every piece of text is Markdown,
rendered to HTML by markdown-it-py (CommonMark plus tables; raw HTML in the text is escaped).
"""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Mapping

import pandas as pd
from jinja2 import Environment
from markdown_it import MarkdownIt

from gptlab.report.document.blocks import Block, Bullets, Code, Heading, Image, Markdown, Para, Table
from gptlab.report.fmt import fmt_value
from gptlab.runio import atomic_write_bytes, atomic_write_text

_MD = MarkdownIt("commonmark", {"html": False}).enable("table")  # html False: raw HTML is shown, not run


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
        elif isinstance(b, Markdown):
            out.append(b.text.strip())
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    return _MD.renderInline(text)


CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
.table-wrap{overflow:auto;max-height:75vh;margin:1em 0;border:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;white-space:nowrap}
thead th{position:sticky;top:0;background:#f3f3f3;z-index:1}
td:first-child,th:first-child{text-align:left}pre{background:#f6f8fa;padding:.8em;overflow-x:auto}
img{max-width:100%}code{background:#f0f0f0;padding:0 3px}"""

PAGE = Environment(autoescape=True).from_string(
    "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{{ title }}</title><style>{{ css | safe }}</style>"
    "</head><body>\n{% for part in body %}{{ part | safe }}\n{% endfor %}</body></html>\n")


def _html_block(b: Block) -> str:
    if isinstance(b, Heading):
        return f"<h{b.level}>{_inline(b.text)}</h{b.level}>"
    if isinstance(b, Para):
        return f"<p>{_inline(b.text)}</p>"
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, Code):
        return f"<pre>{html.escape(b.text.rstrip())}</pre>"
    if isinstance(b, Table):
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in b.df.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(t)}</td>" for t in r) + "</tr>" for r in cell_texts(b.df))
        return f"<div class='table-wrap'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    if isinstance(b, Image):
        data = base64.b64encode(b.png).decode("ascii")
        return f"<figure><img alt='{html.escape(b.alt)}' src='data:image/png;base64,{data}'></figure>"
    return _MD.render(b.text)  # Markdown


def to_html(blocks: list[Block], title: str) -> str:
    return PAGE.render(title=title, css=CSS, body=[_html_block(b) for b in blocks])


MANIFEST = ".manifest.json"  # the files the last generation of a report wrote, relative to its folder


def write(out: Path, title: str, blocks: list[Block], tables: Mapping[str, pd.DataFrame],
          figures: Mapping[str, bytes], texts: Mapping[str, str] | None = None) -> None:
    """Write a report's folder: tables/NAME.csv, figures/NAME, report.md and report.html (titled `title`), and
    `texts` (file name -> text: the samples' `samples.json`, when there is one) beside them.

    Every file is written atomically; files the previous generation wrote (its `.manifest.json`) that this
    one does not are removed, and nothing else in the folder is touched.
    """
    texts = texts or {}
    for name, df in tables.items():
        atomic_write_text(out / "tables" / f"{name}.csv", df.to_csv(index=False))
    for name, png in figures.items():
        atomic_write_bytes(out / "figures" / name, png)
    for name, text in texts.items():
        atomic_write_text(out / name, text)
    atomic_write_text(out / "report.md", to_markdown(blocks))
    atomic_write_text(out / "report.html", to_html(blocks, title))
    written = sorted([f"tables/{n}.csv" for n in tables] + [f"figures/{n}" for n in figures] + list(texts)
                     + ["report.md", "report.html"])
    try:
        previous = json.loads((out / MANIFEST).read_text(encoding="utf-8")).get("files", [])
    except (OSError, ValueError, AttributeError):
        previous = []
    for name in previous:
        path = (out / str(name)).resolve()
        if name not in written and path.is_relative_to(out.resolve()) and path.is_file():
            path.unlink()
    atomic_write_text(out / MANIFEST, json.dumps({"files": written}, indent=1) + "\n")
