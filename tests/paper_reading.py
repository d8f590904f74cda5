"""How the invariants read a paper (tests/paper_invariants.py, tests/judgement_invariants.py): its sentences as
report-model Texts, its tables, its parts of Markdown, and a summary row's interval.

    for t in texts(paper.report): ...          # paper: generated_studies.Paper
"""

from __future__ import annotations

from compile_study.aggregate.columns import interval_of
from compile_study.report.document import Figure, Items, Para, Table, Text
from compile_study.report.paper import sentences


def texts(report) -> list[Text]:
    """Every sentence of the report model: abstract, paragraphs, list items and captions."""
    out = list(report.abstract)
    for section in report.main + report.appendix:
        for b in section.blocks:
            out += ([b.text] if isinstance(b, Para) else list(b.items) if isinstance(b, Items) else
                    [b.caption] if isinstance(b, Table | Figure) else [])
    return out


def tables(report) -> list[Table]:
    return [b for s in report.main + report.appendix for b in s.blocks if isinstance(b, Table)]


def table(report, key: str) -> Table | None:
    return next((t for t in tables(report) if t.key == key), None)


def text(report, file: str, macro: str) -> Text | None:
    return next((t for t in texts(report) if (t.file, t.macro) == (file, macro)), None)


def plain(markdown: str) -> str:
    """Markdown with its escapes undone."""
    return markdown.replace("\\", "")


def part(markdown: str, heading: str) -> str:
    """One section's Markdown (escapes undone), from its heading to the next."""
    return plain(markdown).partition(f"\n## {heading}\n")[2].partition("\n## ")[0]


def abstract_sentences(markdown: str) -> list[str]:
    return sentences(part(markdown, "Abstract"))


def main_text(markdown: str) -> str:
    return plain(markdown).partition("\n## Appendix")[0]


def row_of(summary, c: dict):
    """The summary row of a configuration named as the report names it (mode, scope, regime, precision, batch)."""
    s = summary
    rows = s[(s.compile_mode == c["mode"]) & (s.compile_scope == c["scope"]) & (s.shape_regime == c["regime"])
             & (s.precision == c["precision"]) & (s.batch_size == c["batch"])]
    return rows.iloc[0] if len(rows) else None


def iv(row, prefix: str = "speedup"):
    return interval_of(row, prefix)
