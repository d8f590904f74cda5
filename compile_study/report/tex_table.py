"""A LaTeX table's font size and column widths, from what its cells hold (tex.j2's `tablesize` and `colspec`).

    size, widths = tex_table.layout(table)   # "footnotesize", each column's share of the line (they sum to <= 1)

Widths are estimated from the glyph widths of Times Roman (the paper's font, mathptmx; from its AFM metrics).
Each column starts as wide as its longest word; the rest of the line
goes, step by step, where it saves the most lines of wrapped cells per em (a column widened until one of its
cells takes one line fewer). A table is set in \\footnotesize, or in \\scriptsize where only that sets every
cell on one line. (Table 2 of a GPU study wrapped its speedups and verdicts to two or three lines in columns of
hand-set shares.)
"""

from __future__ import annotations

import functools
import re
import string

# Times Roman advance widths in thousandths of an em (ptmr8a.afm); any other glyph counts as a digit's 500
GLYPHS = {
    **dict.fromkeys(string.digits, 500),
    **dict(zip(string.ascii_lowercase, (444, 500, 444, 500, 444, 333, 500, 500, 278, 278, 500, 278, 778, 500, 500,
                                        500, 500, 333, 389, 278, 500, 500, 722, 500, 500, 444))),
    **dict(zip(string.ascii_uppercase, (722, 667, 667, 722, 611, 556, 722, 722, 333, 389, 722, 611, 889, 722, 722,
                                        556, 722, 667, 556, 611, 722, 722, 944, 722, 722, 611))),
    " ": 250, ".": 250, ",": 250, ":": 278, ";": 278, "(": 333, ")": 333, "[": 333, "]": 333, "-": 333, "/": 278,
    "%": 833, "'": 333, "’": 333, "×": 564, "=": 564, "+": 564, "<": 564, ">": 564, "—": 1000, "–": 500, "&": 778,
}
MARGIN = 1.04  # the estimate errs wide: a column a little too wide costs nothing, one too narrow wraps a cell
SIZES = (("footnotesize", 8.0), ("scriptsize", 7.0))  # of the 10pt article class, in points
LINE_PT = {False: 481.9, True: 728.5}  # \linewidth on A4 with 2 cm margins: portrait, and landscape (pdflscape)
TABCOLSEP_PT = 3.0  # tex.j2 sets \tabcolsep to 3pt in every table
SPACE = MARGIN * 250 / 1000  # an interword space, in ems (a break after a hyphen has none: the estimate errs wide)
_BREAKS = re.compile(r"\s+|(?<=[-/_])")  # where a cell may wrap: spaces, and after - / _ (paper.tex_cell)


def em(text: str) -> float:
    """The width of `text` set in Times Roman, in ems."""
    return MARGIN * sum(GLYPHS.get(c, 500) for c in text) / 1000


def cells(table) -> list[tuple[list[list[float]], float]]:
    """Per column: each cell as the widths of its words in ems, and the least width that breaks no word. A
    header may wrap between its words; its longest word is a floor of the column."""
    out = []
    for i, column in enumerate(table.columns):
        words = [[em(w) for w in _BREAKS.split(" ".join(str(row[i]).split())) if w] for row in table.rows]
        header = max((em(w) for w in _BREAKS.split(column.header) if w), default=0.0)
        out.append((words, max([w for cell in words for w in cell] + [header])))
    return out


def lines(words: list[float], width: float) -> int:
    """The lines a cell of these words takes in a column `width` ems wide, wrapped word by word."""
    n, line = 1, -SPACE
    for w in words:
        if line + SPACE + w > width + 1e-9 and line > 0:  # 1e-9: a sum of the same widths in another order
            n, line = n + 1, w
        else:
            line += SPACE + w
    return n


def room(table, points: float) -> float:
    """The line's width left for the cells, in ems of a font of `points`."""
    return (LINE_PT[table.landscape] - 2 * len(table.columns) * TABCOLSEP_PT) / points


def layout(table) -> tuple[str, list[float]]:
    """The table's font size and each column's share of the line, as the module says."""
    for size, points in SIZES:
        widths, extra = fit(cells(table), room(table, points))
        if not extra:
            return size, _shares(widths)
    size, points = SIZES[0]
    return size, _shares(fit(cells(table), room(table, points))[0])


def fit(columns: list[tuple[list[list[float]], float]], space: float) -> tuple[list[float], int]:
    """Column widths in ems that fill `space` (the words' floor, if that is more), and the lines the cells take
    beyond one each."""
    total = functools.cache(lambda i, w: sum(lines(cell, w) for cell in columns[i][0]))
    # the widths at which a cell takes k lines or fewer, k = 1..4: where a column's line count can drop
    steps = [sorted({least} | {(sum(SPACE + w for w in cell) - SPACE) / k for cell in words for k in range(1, 5)})
             for words, least in columns]
    width = [least for _, least in columns]
    left = space - sum(width)
    while True:  # widen the column whose next step saves the most lines per em
        gains = [((total(i, width[i]) - total(i, x)) / (x - width[i]), i, x) for i, xs in enumerate(steps)
                 for x in xs if 0 < x - width[i] <= left]
        best = max((g for g in gains if g[0] > 0), default=None)
        if best is None:
            break
        _, i, x = best
        left, width[i] = left - (x - width[i]), x
    wrapped = {i: 1.0 for i in range(len(columns)) if total(i, width[i]) > len(columns[i][0])}
    share = wrapped or dict(enumerate(width))  # what is left goes to columns that still wrap, else to all alike
    weight = sum(share.values())
    width = [w + max(left, 0.0) * share.get(i, 0.0) / weight for i, w in enumerate(width)] if weight else width
    return width, sum(total(i, w) - len(columns[i][0]) for i, w in enumerate(width))


def _shares(widths: list[float]) -> list[float]:
    total = sum(widths)
    return [w / total for w in widths]


def colspec(table) -> str:
    """p-columns of the shares `layout` gives, numbers right-aligned (longtable needs fixed widths)."""
    pad = f"{2 * len(table.columns)}\\tabcolsep"
    cols = []
    for column, share in zip(table.columns, layout(table)[1]):
        align = r"\raggedleft" if column.align == "r" else r"\raggedright"
        permille = int(1000 * share)  # rounded down: the columns never add up to more than the width
        cols.append(f">{{{align}\\arraybackslash}}p{{\\dimexpr(\\linewidth-{pad})*{permille}/1000\\relax}}")
    return "".join(cols)


def tablesize(table) -> str:
    return layout(table)[0]
