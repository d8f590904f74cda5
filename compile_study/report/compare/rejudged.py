"""The paper's claims judged again on a reviewer's study (aggregate/compare/rejudge.py), in words: the reproduction
report's first sentence, what it says where the two studies ran on different kinds of GPU, and the claims' table.

    sentence(judged, device)   # "On your NVIDIA H100 80GB HBM3: 4 of 23 of the paper's claims hold, ..."

The verdicts come from aggregate/compare/rejudge.py; this module only writes them down. Torch-free.
"""

from __future__ import annotations

from pathlib import Path

from compile_study.aggregate.compare import compare as cmp
from compile_study.aggregate.compare import rejudge
from compile_study.aggregate.paper_claims import label

SHOWN = 3  # claims named in the first sentence's parenthesis before "and N more"
WORDS = {"holds": "holds", "does-not-hold": "does not hold", "cannot-tell": "cannot be told"}  # rejudge.CODES


def _some(ids: list[str]) -> str:
    shown = "; ".join(ids[:SHOWN])
    return shown + (f"; and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def sentence(judged: list[dict], device: str) -> str:
    """The report's first sentence: how many of the stored paper's claims hold on this study, how many do not
    (which) and how many cannot be told (why, counted)."""
    c = rejudge.counts(judged)
    if not c["total"]:
        return (f"On your {device}: the stored paper states no claim to judge again (nothing in it is decided on "
                "intervals of three or more processes, or it has no summary.csv)")
    text = f"On your {device}: {c['holds']} of {c['total']} of the paper's claims hold, {c['does-not-hold']} do not"
    if c["against"]:
        text += f" ({_some(c['against'])})"
    text += f", {c['cannot-tell']} cannot be told"
    if c["why"]:
        text += " (" + ", ".join(f"{n} for {why}" for why, n in c["why"].items()) + ")"
    return text


def other_kind(stored_device: str, study_device: str, stored: str) -> str:
    """What the report says first where the study's GPU kind is not the stored study's."""
    return (f"The stored study `{stored}` ran on {stored_device}, not on your {study_device}: this report judges "
            "the paper's claims on your study and does not judge its speedups cell by cell against another kind's "
            "(whether a speedup carries across GPU kinds is a finding, not a rule)")


def _stated(j: dict) -> str:
    s = j["stated"]
    if j["rule"] == "top":
        return "best: " + ", ".join(label(k) for k in s)
    return str(s)


def _why(j: dict) -> str:
    if not j["why"]:
        return ""
    missing = f": {', '.join(label(k) for k in j['missing'])}" if j["missing"] else ""
    return j["why"] + missing


def table_lines(judged: list[dict]) -> list[str]:
    """One row per claim: its id, rule, what the paper says, the verdict on this study and why."""
    if not judged:
        return []
    lines = ["| claim | rule | the paper says | on this study | why |", "|---|---|---|---|---|"]
    for j in judged:
        lines.append(f"| {j['id']} | {j['rule']} | {_stated(j)} | {WORDS[j['code']]} | {_why(j)} |")
    return lines


def rule_text() -> str:
    return ("Each claim of the paper (its abstract and conclusions: a configuration faster or slower than eager, the "
            "group a recommendation names, an ordering, the trend over batch sizes, the precision, the best shape "
            "regime, each common claim) is a record of the stored study's decisions.json with the rule that decided "
            "it and the cells it reads; here that rule is applied to your study's cells "
            "(`compile_study/aggregate/compare/rejudge.py`). **Holds**: the rule says what the paper says. **Does not hold**: "
            "it says otherwise on decided intervals. **Cannot tell**: a cell is missing or failed, has too few "
            "processes, or its interval overlaps the boundary (the A/A band, the other interval, the claim's range).")


def devices(result: cmp.Comparison) -> tuple[str, str]:
    """The stored study's and this study's device (GPU or CPU model), as their records name it."""
    return result.versions.loc["device_name", "stored"], result.versions.loc["device_name", "study"]


def same_kind(result: cmp.Comparison) -> bool:
    """Did both studies run on one kind of device? Only then are their speedups judged cell by cell."""
    stored, study = devices(result)
    return stored == study


def refused(result: cmp.Comparison) -> bool:
    """Did the two studies train on different data (and no verdict is given anyway)? Then neither their cells
    nor the paper's claims are judged."""
    return bool(result.data_differences) and not result.allow_different_data


def opening(result: cmp.Comparison, names: tuple[str, str], judged: list[dict] | None, headline: str,
            advice: list[str]) -> list[str]:
    """The reproduction report's opening: on another kind, that first; the paper's claims on this study, unless
    the two trained on different data; then, on the same kind (or where the data differ), the cell-by-cell
    `headline`, and on the same kind its `advice` (paragraphs)."""
    stored, study = devices(result)
    lines = [] if same_kind(result) else [other_kind(stored, study, names[0]) + ".", ""]
    if judged is not None and not refused(result):
        lines += [f"**{sentence(judged, study)}.**", ""]
    if same_kind(result) or refused(result):  # different data: said first, on any kind
        lines += [headline, ""]
    return lines + ([x for a in advice for x in (a, "")] if same_kind(result) else [])


def judge_dirs(stored: str | Path, study: str | Path) -> list[dict] | None:
    """The stored study's claims judged on the study (both directories), None where the study has no summary."""
    subject = rejudge.subject(study)
    return rejudge.rejudge(rejudge.stored_claims(stored), subject) if subject else None
