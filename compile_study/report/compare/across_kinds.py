"""Across GPU kinds, in words (aggregate/compare/kinds.py decides): the README's results block (and `python -m
compile_study readme`) has this short section where the stored studies hold two or more GPU kinds: each shared
configuration's speedup on each kind with its interval, and which of the paper's claims hold on every kind.
Torch-free; no rule compares one kind's speedup with another's here."""

from __future__ import annotations

from pathlib import Path

from compile_study.aggregate.compare import kinds
from compile_study.aggregate.paper_claims import label
from compile_study.core.layout import Layout
from compile_study.report import numbers
from compile_study.report.compare.rejudged import WORDS

SHOWN = 2  # claims named that do not hold on every kind, before "and N more" (a sentence of at most 40 words)


def lines(found: dict | None) -> list[str]:
    """The section's Markdown lines ([] with fewer than two kinds)."""
    if not found:
        return []
    names = [kind for kind, _ in found["kinds"]]
    studies = "; ".join(f"{kind}: [`{name}`]({Layout(name).readme})" for kind, name in found["kinds"])
    out = ["", f"Across GPU kinds ({studies}): each compiled configuration every kind's study ran, its speedup over "
           "eager in the same process with its 95% interval on each kind. The intervals are each kind's own; no "
           "rule here judges one kind's speedup by another's.", "",
           "| configuration | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for _, r in found["cells"].iterrows():
        out.append(f"| {label(r.to_dict())} | " + " | ".join(numbers.interval(r[k]) for k in names) + " |")
    every = [c for c in found["claims"] if c["everywhere"]]
    others = [f"{c['id']} ({_codes(c)})" for c in found["claims"] if not c["everywhere"]]
    out += ["", f"Of the {len(found['claims'])} claims the kinds' papers state, {len(every)} hold on every kind, each "
            "judged on every kind's study by its own rule (`python -m compile_study compare`)."
            + (f" Those that do not: {_some(others)}." if others else "")]
    return out


def _codes(claim: dict) -> str:
    """Where a claim does not hold: 'does-not-hold on X; cannot-tell on Y'."""
    return "; ".join(f"{WORDS[code]} on {kind}" for kind, code in claim["codes"].items() if code != "holds")


def _some(items: list[str]) -> str:
    return "; ".join(items[:SHOWN]) + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def section(project: Path) -> list[str]:
    """The section for the project's stored studies."""
    return lines(kinds.across(kinds.kind_studies(project)))
