"""A study against the pool of its GPU kind, as the reproduction report words it: its first sentence and a section
of its own (the numbers and verdicts come from aggregate/compare/pool.py, whose docstring states the rule). Torch-free.

    against = pool_report.judge(study_records, hosts.load(), "results/cuda")
    pool_report.headline(against)      # the report's first sentence
    pool_report.lines(against)         # its section: the rule and one row per configuration
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from compile_study.aggregate.compare import pool
from compile_study.core.layout import HOST_EFFECT
from compile_study.report import numbers


@dataclass(frozen=True)
class Against:
    """A study's cells placed in the pool of its kind (pool.place), without the study itself."""

    kind: str | None  # the study's device name: which pool
    studies: list[str]  # the stored studies pooled (the study itself left out)
    table: pd.DataFrame  # pool.place's rows


def kind_of(records: pd.DataFrame) -> str | None:
    """The one device name a study's records hold (None: several or none)."""
    names = set(records.device_name.dropna())
    return next(iter(names)) if len(names) == 1 else None


def judge(records: pd.DataFrame, stored: dict, name: str) -> Against:
    """A study (its run records, its name: reference/<dir> where stored) against the pool of its kind, read from
    the stored estimate (hosts.load's dict)."""
    kind = kind_of(records)
    cells = pool.members(stored, kind)
    others = [s for s in pool.studies(stored, kind) if s != name]
    return Against(kind, others, pool.place(pool.cells_of(records), cells, leave_out=name))


def _studies(against: Against) -> str:
    return ", ".join(f"`{s}`" for s in against.studies) or "none"


def headline(against: Against) -> str:
    """The report's first sentence: how many stored studies the kind's pool holds beside this one, and where
    this study's configurations fall in it."""
    k = len(against.studies)
    if k < 2:
        held = "no stored study" if k == 0 else f"one stored study ({_studies(against)})"
        return (f"The pool of {against.kind or 'this device'} holds {held} besides this one: too few to say how "
                "hosts of the kind differ, so nothing here speaks for the GPU kind, only for the hosts compared")
    t = against.table
    place = t.place.value_counts() if len(t) else pd.Series(dtype=int)
    verdict = t.verdict.astype(str) if len(t) else pd.Series(dtype=str)
    return (f"Against the pool of {against.kind} ({k} stored studies besides this one), of {len(t)} configurations "
            f"the pool holds {place.get('inside', 0)} lie inside the 95% prediction interval for a new host, "
            f"{place.get('above', 0)} above and {place.get('below', 0)} below it; {int((verdict == 'reproduced').sum())}"
            f" reproduced, {int(verdict.str.startswith('differs').sum())} differ, "
            f"{int((verdict == 'inconclusive').sum())} inconclusive")


def rule_text() -> str:
    return ("The pool of a GPU kind holds every stored study of the built-in model made on that kind, on the same "
            "data (`compile_study/aggregate/compare/pool.py`, its cells in `" + HOST_EFFECT + "`); a configuration pools "
            "the cells whose protocol is this study's. Method: " + pool.METHOD + ". This study's cell is placed "
            "against the pooled mean ± t · sqrt(tau² + SE² + its own squared standard error): **differs** where it "
            "lies beyond that interval by more than the margin (the larger A/A band of the pool's cells and this "
            "study's), **reproduced** where the interval lies within [1/T, T] about the pooled mean (T the larger "
            "of 1.30× and the margin), else **inconclusive**, saying why.")


def _ratio(log: float) -> str:
    return numbers.times(math.exp(log)) if numbers.finite(log) else numbers.DASH


def _ends(low: float, high: float) -> str:
    """An interval's ends as the tables write them: [1.20, 1.34] (a dash without them)."""
    return f"[{math.exp(low):.2f}, {math.exp(high):.2f}]" if numbers.finite(low) else numbers.DASH


def _label(r: pd.Series) -> str:
    scope = "" if r.compile_scope == "module" else f" ({r.compile_scope})"
    return f"{r.shape_regime} {r.precision} bs{int(r.batch_size)} `{r.compile_mode}`{scope}"


def _tau(r: pd.Series) -> str:
    if r.tau2_from == "none":
        return "none estimated"
    own = "its own" if r.tau2_from == "own" else f"its class's ({r['class']})"
    return f"±{numbers.percent(math.exp(math.sqrt(r.tau2)) - 1, 2)}, {own}"


def lines(against: Against) -> list[str]:
    """The section: the pooled studies, the rule and one row per configuration the pool holds."""
    out = [f"Pooled: {_studies(against)} (this study left out where stored).", "", rule_text(), ""]
    if against.table.empty:
        return out + ["The pool holds none of this study's configurations."]
    out += ["| configuration | studies | pooled speedup [95%] | host effect (tau) | 95% prediction for a new host "
            "| this study | place | verdict |", "|---|---:|---|---|---|---|---|---|"]
    for _, r in against.table.iterrows():
        verdict = f"{r.verdict}: {r.reason}" if isinstance(r.reason, str) else r.verdict
        out.append(f"| {_label(r)} | {int(r.k)} | {_ratio(r['mean'])} {_ends(r.ci_low, r.ci_high)} "
                   f"| {_tau(r)} | {_ends(r.low, r.high)} | {_ratio(r.study_mean)} | {r.place} "
                   f"| {verdict} |")
    return out
