"""Across GPU kinds, in words (aggregate/kinds.py decides): the README's results block (and `python -m
compile_study readme`) has this short section where the stored studies hold two or more GPU kinds: each shared
configuration's speedup on each kind with its interval, and which of the paper's claims hold on every kind.
Torch-free; no rule compares one kind's speedup with another's here."""

from __future__ import annotations

from pathlib import Path

from compile_study.aggregate import kinds
from compile_study.aggregate.paper_claims import label
from compile_study.report import numbers

SHOWN = 8  # claims named that hold on every kind, before "and N more"


def lines(found: dict | None) -> list[str]:
    """The section's Markdown lines ([] with fewer than two kinds)."""
    if not found:
        return []
    names = [kind for kind, _ in found["kinds"]]
    studies = "; ".join(f"{kind}: [`{name}`]({name}/README.md)" for kind, name in found["kinds"])
    out = ["", f"Across GPU kinds ({studies}): each compiled configuration every kind's study ran, its speedup over "
           "eager in the same process with its 95% interval on each kind. The intervals are each kind's own; no "
           "rule here judges one kind's speedup by another's.", "",
           "| configuration | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for _, r in found["cells"].iterrows():
        out.append(f"| {label(r.to_dict())} | " + " | ".join(numbers.interval(r[k]) for k in names) + " |")
    every = [c for c in found["claims"] if c["everywhere"]]
    ids = [f"{c['id']} (stated on {' and '.join(c['stated_on'])})" for c in every]
    shown = "; ".join(ids[:SHOWN]) + (f"; and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")
    counts = {code: sum(code in c["codes"].values() for c in found["claims"]) for code in ("does-not-hold", "cannot-tell")}
    out += ["", f"Of the {len(found['claims'])} claims the kinds' papers state, {len(every)} hold on every kind"
            + (f": {shown}" if every else "") + f". {counts['does-not-hold']} do not hold on some kind and "
            f"{counts['cannot-tell']} cannot be told on some kind (`python -m compile_study compare <stored> <study>` "
            "judges one study against another's claims)."]
    return out


def section(project: Path) -> list[str]:
    """The section for the project's stored studies."""
    return lines(kinds.across(kinds.kind_studies(project)))
