"""A paper's claims (aggregate/paper_claims.py records) judged again on another study: holds, does not hold, or
cannot tell, and why (torch-free).

    judged = rejudge(claims, Subject(summary, claims_csv, facts))   # one dict per claim, in the claims' order

Each claim is judged by the rule that made it (paper_claims.RULES), called on the other study's cells, one
evaluator per kind of rule: `verdict` (stats.verdict against the cell's own A/A band), `top` (decide.ranking:
stats.top), `compare` and `trend` (stats.compare), `common` (the claim's function of aggregate/claims.py on the
cells that decided it). The rule's own answer decides:
  holds          it says what the paper says
  does-not-hold  it says otherwise, on intervals with MIN_N processes or more that do not overlap the boundary (a
                 stated member of a recommended group measurably below the study's group, an ordering reversed,
                 a configuration no faster than eager, a common claim that goes the other way)
  cannot-tell    it cannot decide, saying why (WHY): a cell the study lacks (or whose runs failed), fewer than
                 MIN_N processes, an interval that overlaps the boundary (the A/A band, the other interval, the
                 claim's range), no A/A control, runs still disturbed after their redos
A claim some of whose cells are missing is judged on the others where they already contradict it, else
cannot-tell (missing cells).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from compile_study.aggregate import claims as common
from compile_study.aggregate.columns import interval_of
from compile_study.aggregate.decide import ranking
from compile_study.aggregate.paper_claims import label, records
from compile_study.core import stats, vocab
from compile_study.core.intervals import NAN
from compile_study.core.layout import Layout

CODES = ("holds", "does-not-hold", "cannot-tell")
MISSING, FEW, OVERLAP, NO_CONTROL, DISTURBED = ("missing cells", "too few processes", "interval too wide",
                                                "no A/A control", "runs disturbed")
WHY = (MISSING, FEW, OVERLAP, NO_CONTROL, DISTURBED)
_VERDICT_WHY = {"few-runs": FEW, "no-run": MISSING, "indistinct": OVERLAP, "no-control": NO_CONTROL,
                "disturbed": DISTURBED}


@dataclass(frozen=True)
class Subject:
    """The study a claim is judged on: its summary.csv, its claims.csv (None: none) and its facts.json."""

    summary: pd.DataFrame
    claims: pd.DataFrame | None
    facts: dict | None

    def row(self, cell: dict) -> pd.Series | None:
        """The cell's usable summary row, None where the study lacks it or its runs all failed."""
        s = self.summary
        rows = s[(s.compile_mode == cell["mode"]) & (s.compile_scope == cell["scope"]) & (s.shape_regime == cell["regime"])
                 & (s.precision == cell["precision"]) & (s.batch_size == cell["batch"])]
        rows = vocab.usable(rows)
        return rows.iloc[0] if len(rows) else None

    def rows(self, cells: list[dict]) -> tuple[pd.DataFrame, list[dict]]:
        """The cells' usable rows, and the cells without one."""
        found = [(c, self.row(c)) for c in cells]
        present = [r for _, r in found if r is not None]
        return (pd.DataFrame(present) if present else self.summary.iloc[:0]), [c for c, r in found if r is None]


def _result(code: str, why: str | None = None, missing: list[dict] | None = None) -> dict:
    return {"code": code, "why": why, "missing": missing or []}


def _decided(iv: stats.Interval) -> bool:
    return iv.n >= stats.MIN_N and math.isfinite(iv.low) and math.isfinite(iv.high)


def judge_verdict(claim: dict, study: Subject) -> dict:
    """stats.verdict of the cell's speedup interval against its own A/A band (a disturbed cell keeps the summary's
    withheld verdict)."""
    row = study.row(claim["cells"][0])
    if row is None:
        return _result("cannot-tell", MISSING, claim["cells"])
    band = stats.Band(row.aa_low, row.aa_high, NAN, NAN, int(row.aa_n) if math.isfinite(row.aa_n) else 0)
    code = "disturbed" if row.verdict == "disturbed" else stats.verdict(interval_of(row, claim["prefix"]), band)
    if code == claim["stated"]:
        return _result("holds")
    return _result("cannot-tell", _VERDICT_WHY[code]) if code in _VERDICT_WHY else _result("does-not-hold", code)


def _compare(a: pd.Series, b: pd.Series, prefix: str, stated: str) -> dict:
    code = stats.compare(interval_of(a, prefix), interval_of(b, prefix))
    if code == stated:
        return _result("holds")
    return _result("cannot-tell", FEW if code == "few-runs" else OVERLAP) if code in ("few-runs", "indistinct") \
        else _result("does-not-hold", code)


def judge_compare(claim: dict, study: Subject) -> dict:
    """stats.compare of the first cell's interval against the second's."""
    (a, b), missing = [study.row(c) for c in claim["cells"]], [c for c in claim["cells"] if study.row(c) is None]
    return _result("cannot-tell", MISSING, missing) if missing else _compare(a, b, claim["prefix"], claim["stated"])


def judge_trend(claim: dict, study: Subject) -> dict:
    """Every pair (smallest batch, largest batch) compared: holds where each says higher; does not hold where any
    says lower; otherwise cannot tell, with the first reason found."""
    cells = claim["cells"]
    pairs = [(cells[i], cells[i + 1]) for i in range(0, len(cells), 2)]
    found, missing = [], []
    for a, b in pairs:
        ra, rb = study.row(a), study.row(b)
        if ra is None or rb is None:
            missing += [c for c, r in ((a, ra), (b, rb)) if r is None]
        else:
            found.append(_compare(ra, rb, claim["prefix"], claim["stated"]))
    return _combine(found, missing)


def _combine(found: list[dict], missing: list[dict]) -> dict:
    """Parts of one claim: any does-not-hold decides; else missing cells, then the first reason, else holds."""
    against = [f for f in found if f["code"] == "does-not-hold"]
    if against:
        return _result("does-not-hold", against[0]["why"], missing)
    if missing:
        return _result("cannot-tell", MISSING, missing)
    unsure = [f for f in found if f["code"] == "cannot-tell"]
    return _result("cannot-tell", unsure[0]["why"]) if unsure else _result("holds")


def judge_top(claim: dict, study: Subject) -> dict:
    """decide.ranking over the claim's cells: holds where the study's top group is the stated one; does not hold
    where a stated member lies measurably below the study's group, or the two groups share none; cannot tell where
    a cell is missing or has fewer than MIN_N processes, or the study's group holds more (overlapping intervals)."""
    rows, missing = study.rows(claim["cells"])
    if missing:
        return _result("cannot-tell", MISSING, missing)
    decided = ranking(rows, claim["prefix"])
    named = {tuple(k.values()) for k in claim["stated"]}
    top, below = ({tuple(k.values()) for k in decided[part]} for part in ("top", "below"))
    if top == named and not decided["few"]:
        return _result("holds")
    if named & below or (top and not top & named):
        return _result("does-not-hold", "best: " + ", ".join(label(k) for k in decided["top"]))
    return _result("cannot-tell", FEW if decided["few"] else OVERLAP)


def _common_verdict(claim: dict, study: Subject, rows: pd.DataFrame) -> tuple[str, list[dict]]:
    c = claim["prefix"]
    if c == "mlp":
        row = None if study.claims is None else study.claims[study.claims.claim == "mlp"]
        return (row.verdict.iloc[0], json.loads(row.evidence.iloc[0])) if row is not None and len(row) else ("not-measured", [])
    if c == "short-runs":
        return common.short_runs_claim(rows, study.facts) if study.facts else ("not-measured", [])
    judge = {"training": common.training_claim, "inference": common.inference_claim,
             "dynamic": common.dynamic_claim, "forward": common.forward_claim}[c]
    return judge(rows)


def judge_common(claim: dict, study: Subject) -> dict:
    """The common claim's own function (aggregate/claims.py) on the study's rows of the cells that decided it."""
    mlp = claim["prefix"] == "mlp"
    rows, missing = (study.summary.iloc[:0], []) if mlp else study.rows(claim["cells"])
    verdict, evidence = _common_verdict(claim, study, rows)
    if mlp and verdict == "not-measured":
        missing = claim["cells"]
    if verdict == claim["stated"] and not missing:
        return _result("holds")
    if verdict in ("holds", "does-not-hold", "depends") and verdict != claim["stated"]:
        return _result("does-not-hold", verdict, missing)
    if missing or verdict == "not-measured":
        return _result("cannot-tell", MISSING, missing or claim["cells"])
    codes = Counter(e.get("code") for e in evidence)
    return _result("cannot-tell", FEW if codes.get("few-runs", 0) >= len(evidence) else OVERLAP)


EVALUATORS = {"verdict": judge_verdict, "top": judge_top, "compare": judge_compare, "trend": judge_trend,
              "common": judge_common}


def rejudge(claims: list[dict], study: Subject) -> list[dict]:
    """Each claim with its judgement on `study`: the claim's id, rule and stated outcome, `code` (CODES), `why`
    (WHY, or what the rule said instead) and the cells the study lacks."""
    return [{"id": c["id"], "rule": c["rule"], "stated": c["stated"]} | EVALUATORS[c["rule"]](c, study) for c in claims]


def counts(judged: list[dict]) -> dict:
    """How many claims hold, do not hold, cannot be told; the ids that do not hold; the reasons counted."""
    by = {code: [j for j in judged if j["code"] == code] for code in CODES}
    return {"total": len(judged), **{code: len(v) for code, v in by.items()},
            "against": [j["id"] for j in by["does-not-hold"]],
            "why": dict(Counter(j["why"] for j in by["cannot-tell"]).most_common())}


def _file(path) -> Path | None:
    return Path(path) if path and Path(path).is_file() else None


def read_claims(summary_path, decisions_path, claims_path) -> list[dict]:
    """A study's claims: its decisions.json's `claims`, or, for a study whose decisions.json predates them, the
    records made from its summary.csv, decisions.json and claims.csv (paper_claims.records); [] without a summary."""
    decisions = json.loads(_file(decisions_path).read_text()) if _file(decisions_path) else {}
    if "claims" in decisions:
        return decisions["claims"]
    if not _file(summary_path):
        return []
    claims = pd.read_csv(claims_path) if _file(claims_path) else None
    return records(pd.read_csv(summary_path), decisions, claims)


def read_subject(summary_path, claims_path, facts_path) -> Subject | None:
    """A study's summary.csv, claims.csv and facts.json as a Subject; None where it has no summary.csv yet."""
    if not _file(summary_path):
        return None
    claims = pd.read_csv(claims_path) if _file(claims_path) else None
    facts = json.loads(_file(facts_path).read_text()) if _file(facts_path) else None
    return Subject(pd.read_csv(summary_path), claims, facts)


def stored_claims(directory: str | Path) -> list[dict]:
    layout = Layout(str(directory))
    return read_claims(layout.summary, layout.decisions, layout.claims)


def subject(directory: str | Path) -> Subject | None:
    layout = Layout(str(directory))
    return read_subject(layout.summary, layout.claims, layout.facts)
