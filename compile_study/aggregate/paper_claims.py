"""The paper's claims as records: each thing the abstract and the conclusions say holds (a configuration faster or
slower than eager, the group a recommendation names, an ordering, the trend over batch sizes, the precision, the
packing gain, each common claim checked), with the rule that decided it and the cells (configuration keys) it
reads, so that it can be judged again on any study that has those cells (aggregate/compare/rejudge.py).

    records(summary, decisions, claims)   # decisions.json's `claims` (aggregate/decide.py decide adds them)

A record: {"id", "rule" (a kind of RULES), "cells" (columns.key of each configuration it reads; a common claim's
MLP example is {"check": "mlp", "batch": 64}), "prefix" (the interval it reads: summary.csv's prefix),
"stated" (what the paper says: a verdict code, the top group, a compare code, a common claim's verdict),
"verdict" (on this study: "holds", by construction)}. The templates word the abstract's and the conclusions'
sentences from the records they cite (report/findings.py `Context.claim`; report/document.py `claim_ids` lists those a sentence carries), so that the claim list and the prose cannot
drift apart. Torch-free.
"""

from __future__ import annotations

import json

import pandas as pd

from compile_study.aggregate.columns import key
from compile_study.core import vocab

# a record's rule: which evaluator of aggregate/compare/rejudge.py judges it
RULES = {
    "verdict": "a configuration faster (slower) than eager: stats.verdict of its speedup interval against its A/A band",
    "top": "the group a recommendation names among the ranked cells: stats.top of their intervals (decide.ranking)",
    "compare": "one configuration's interval above another's: stats.compare",
    "trend": "every mode's speedup larger at the smallest batch than at the largest: stats.compare on each pair",
    "common": "a common claim's verdict (aggregate/claims.py), on the cells that decided it",
}
DECIDED = ("faster", "slower")  # the verdicts against eager the paper states as holding
STATED_COMMON = ("holds", "does-not-hold")  # the common claims' verdicts (claims.VERDICTS) the paper states as holding
MLP_CELL = {"check": "mlp", "batch": 64}


def main_precision(summary: pd.DataFrame) -> str | None:
    """The precision the abstract and the conclusions speak of: bf16 where measured (what one trains in), else the
    most measured."""
    h = vocab.usable(vocab.headline(summary))
    if h.empty:
        return None
    return "bf16" if "bf16" in set(h.precision) else h.precision.value_counts().index[0]


def label(k: dict) -> str:
    """A cell as a claim's id names it."""
    if "check" in k:
        return f"{k['check']} example bs{k['batch']}"
    regime = "" if k["regime"] == "static" else f" {k['regime']}"
    return f"{k['precision']} bs{k['batch']} {k['mode']} ({k['scope']}){regime}"


def verdict_id(k: dict, code: str) -> str:
    return f"{code} than eager: {label(k)}"


def top_id(by: str, precision: str, batch: int) -> str:
    return f"best by {by} at {precision} bs{batch}"


def compare_id(what: str, a: dict, b: dict, code: str) -> str:
    """A comparison of decide.comparisons (batch-trend, precision) as a claim's id."""
    return f"{'speedup' if what == 'batch-trend' else 'step time'}: {label(a)} {code} than {label(b)}"


def common_id(claim: str) -> str:
    return f"common claim: {claim}"


TREND_ID = "speedup larger at the smallest batch than at the largest, every mode"


def _record(rid: str, rule: str, cells: list[dict], prefix: str | None, stated) -> dict:
    return {"id": rid, "rule": rule, "cells": cells, "prefix": prefix, "stated": stated, "verdict": "holds"}


def verdict_records(summary: pd.DataFrame) -> list[dict]:
    """Every compiled static-shape configuration (any scope, every precision) the rule calls faster or slower than
    eager: the abstract counts the module's, the conclusions recommend the fast ones and warn of the slow ones."""
    s = vocab.usable(summary[(summary.shape_regime == "static") & (summary.compile_mode != "eager")])
    s = s[s.verdict.isin(DECIDED)]
    return [_record(verdict_id(key(r), r.verdict), "verdict", [key(r)], "speedup", r.verdict)
            for _, r in s.iterrows()]


def ranking_records(decisions: dict, precision: str | None) -> list[dict]:
    """Per ranking the paper words (by speedup: the recommendation per batch; by gain: the shape regime advised) at
    the main precision: its top group among the ranked cells, and each ordering within it."""
    out = []
    for r in decisions.get("rankings", []):
        if r["by"] not in ("speedup", "gain") or r["precision"] != precision or not r["top"]:
            continue
        prefix = "speedup" if r["by"] == "speedup" else "gain"
        if r["below"] or len(r["top"]) > 1:  # one ranked configuration alone claims no order
            out.append(_record(top_id(r["by"], r["precision"], r["batch"]), "top", r["top"] + r["below"], prefix, r["top"]))
        for a in r["apart"]:
            for above in a["above"]:
                out.append(_record(f"{label(above)} above {label(a['lower'])} by {r['by']}", "compare",
                                   [above, a["lower"]], prefix, "higher"))
    return out


def comparison_records(decisions: dict) -> list[dict]:
    """The batch-trend comparisons and the precisions the rule decided (higher or lower), and the trend the
    abstract states when every batch-trend comparison says higher."""
    out, trend = [], [c for c in decisions.get("comparisons", []) if c["what"] == "batch-trend"]
    for c in decisions.get("comparisons", []):
        if c["code"] in ("higher", "lower"):
            out.append(_record(compare_id(c["what"], c["a"], c["b"], c["code"]), "compare",
                               [c["a"], c["b"]], c["by"], c["code"]))
    if trend and all(c["code"] == "higher" for c in trend):
        cells = [k for c in trend for k in (c["a"], c["b"])]
        out.append(_record(TREND_ID, "trend", cells,
                           "speedup", "higher"))
    return out


def common_cells(claim: str, evidence: list[dict]) -> list[dict]:
    """The cells that decided a common claim: its evidence's configurations with a code other than few-runs (the
    MLP example's batch-64 rounds)."""
    if claim == "mlp":
        return [MLP_CELL] if any(e.get("batch") == 64 and e.get("code") != "few-runs" for e in evidence) else []
    return [{k: e[k] for k in ("mode", "scope", "regime", "precision", "batch")} for e in evidence
            if "mode" in e and e.get("code") != "few-runs"]


def common_records(claims: pd.DataFrame | None) -> list[dict]:
    """Each common claim the paper says holds or does not hold (claims.csv), with the cells that decided it."""
    if claims is None or claims.empty:
        return []
    return [_record(common_id(c.claim), "common", common_cells(c.claim, json.loads(c.evidence)), c.claim,
                    c.verdict) for c in claims.itertuples() if c.verdict in STATED_COMMON]


def records(summary: pd.DataFrame, decisions: dict, claims: pd.DataFrame | None) -> list[dict]:
    """decisions.json's `claims`: every claim of the paper, each judged "holds" on the study that made it."""
    found = (verdict_records(summary) + ranking_records(decisions, main_precision(summary))
             + comparison_records(decisions) + common_records(claims))
    seen, out = set(), []
    for r in found:  # one record per id (a comparison can be both an ordering in a ranking and a trend)
        if r["id"] not in seen:
            seen.add(r["id"])
            out.append(r)
    return out


# what each common claim's function reads of a cell's summary row besides its key (aggregate/claims.py)
COMMON_READS = {"training": ("speedup",), "inference": ("inference",), "dynamic": ("speedup", "verdict"),
                "short-runs": ("break_even", "payback", "cold_start"), "mlp": ("mlp",), "forward": ("speedup",)}


def inputs(claim: dict) -> set[tuple]:
    """What a claim reads: (cell, quantity) pairs, the cell as a tuple of its key's values and the quantity a
    summary.csv interval prefix ("aa": the cell's A/A band). A study that changes none of a claim's inputs leaves
    its verdict as it was (tests/test_rejudge.py holds the evaluators to it)."""
    cells = [tuple(c.values()) for c in claim["cells"]]
    if claim["rule"] == "verdict":
        return {(c, q) for c in cells for q in (claim["prefix"], "aa")}
    reads = COMMON_READS[claim["prefix"]] if claim["rule"] == "common" else (claim["prefix"],)
    return {(c, q) for c in cells for q in reads}
