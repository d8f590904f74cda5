"""The pieces a paper is made of: sections of paragraphs, lists, tables and figures.

build.py fills them; paper.py places them in Markdown or LaTeX. Every sentence is a `Text`: a macro of a
sentence template (paper/templates/sections/<file>.j2) and the data it is called with (numbers, intervals,
verdict codes and labels). A sentence may hold `code` spans and ⟦tab:key⟧ / ⟦fig:key⟧ references (resolved
per format); a table cell holds data only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Text:
    """Sentences written by macro `macro` of paper/templates/sections/<file>.j2, called with `data`. Strings in
    `data` that came from data files have passed through `plain`; everything else is numbers and codes."""

    file: str
    macro: str
    data: dict = field(default_factory=dict)


@dataclass
class Column:
    header: str
    align: str = "l"  # "l" text, "r" numbers (LaTeX widths come from the cells: report/tex_table.py)


@dataclass
class Table:
    key: str  # referenced as ⟦tab:key⟧
    caption: Text
    columns: list[Column]
    rows: list[list[str]]
    kind: str = "table"
    number: int = 0

    @property
    def landscape(self) -> bool:
        return len(self.columns) > 10


@dataclass
class Figure:
    key: str  # the file stem under the figure directory; referenced as ⟦fig:key⟧
    caption: Text
    path: str  # figure directory / key, without extension (Markdown adds .png, LaTeX .pdf)
    kind: str = "figure"
    number: int = 0


@dataclass
class Para:
    text: Text
    kind: str = "para"


@dataclass
class Items:
    items: list[Text]
    kind: str = "items"


@dataclass
class Section:
    title: str
    blocks: list = field(default_factory=list)
    prefix: str = ""  # "Appendix A" in the appendix


@dataclass
class Report:
    title: str
    byline: str  # data strings (device, versions, data set): escaped as a cell
    notices: list[Text]
    abstract: list[Text]
    main: list[Section]
    appendix: list[Section]
    numbers: dict[str, int] = field(default_factory=dict)  # "tab:modes" -> 1


def hide_paths(value) -> str:
    """No absolute local path reaches the paper: '/home/me/data/ag_news' -> '…/ag_news'."""
    return re.sub(r"(?<![\w.~])/(?:[^\s/]+/)+([^\s/]+)", r"…/\1", str(value))


def plain(value) -> str:
    """A data string made safe to place inside a sentence: no code spans, no reference marks, no absolute path."""
    return hide_paths(re.sub(r"[`⟦⟧]", "'", " ".join(str(value).split())))


def claim_ids(data) -> list[str]:
    """The ids of the claims' records (decisions.json `claims`) a Text's data carries, wherever they sit in it: what
    the sentence states as holding (tests/test_rejudge.py checks that each such sentence of the abstract and the
    conclusions carries its own)."""
    if isinstance(data, Text):
        return claim_ids(data.data)
    if isinstance(data, dict):
        own = [data["id"]] if {"id", "rule", "cells", "stated"} <= set(data) else []
        return own + [i for v in data.values() for i in claim_ids(v)]
    if isinstance(data, list | tuple):
        return [i for v in data for i in claim_ids(v)]
    return []
