"""What the paper advises, as numbers and codes: one answer per batch size (aggregate/advice.py: the fastest shown
faster than eager and the cheapest to pay back among those not shown slower), and when compiling pays back, per
configuration and way, with the configurations it recommends.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from compile_study.aggregate import advice
from compile_study.aggregate.columns import WAYS, break_even_prefix, start_prefix
from compile_study.aggregate.decide import ordered
from compile_study.core.intervals import LEVEL
from compile_study.report import numbers as n
from compile_study.report.findings import Context, config, once, static_rows


def break_even(r) -> dict:
    """A configuration's payback as the templates name it: per way of reaching its compiled step (columns.WAYS) the
    seconds it costs and its break-even, as intervals; the cold compiles as timed; how the cold start was charged
    (aggregate/payback.py HOWS) and the mode whose GEMM search it was charged; the cold way's break-even steps and
    epochs with their interval and method (`steps`, `epochs`: the paper's first), and summary.py's `payback` code."""
    ways = {w: {"cost": n.row_iv(r, start_prefix(w)), "steps": n.row_iv(r, break_even_prefix(w)),
                "method": r.get(f"{break_even_prefix(w)}_method")} for w in WAYS}
    return config(r) | {
        "cold": n.row_iv(r, "cold"), "ways": ways, "how": r.get("cold_start_how"), "search": r.get("cold_search"),
        "warm_s": r.get("warm_compile_s"), "warm_n": r.get("warm_n"),
        "steps": r.break_even_steps, "steps_low": r.break_even_low, "steps_high": r.break_even_high,
        "method": r.break_even_method, "epochs": r.break_even_epochs, "epochs_low": r.break_even_epochs_low,
        "epochs_high": r.break_even_epochs_high, "epoch_steps": r.get("full_epoch_steps"), "code": r.payback,
        "epoch_code": r.get("break_even_epoch_code")}


@once
def answers(ctx: Context) -> list[dict]:
    """One answer per batch size (aggregate/advice.py): the fastest shown faster than eager and, among those not
    shown slower than it, the cheapest to pay back by each way; on the pool of the GPU kind where it holds two or
    more stored studies besides this one, else on this study alone."""
    rows = ctx.pool.get("pooled") if ctx.pool else None
    return advice.answers(ctx.summary, ctx.precision, rows, len(ctx.pool.get("studies") or []) if ctx.pool else 0)


@once
def recommended(ctx: Context) -> list[dict]:
    """The configurations the paper recommends: the answers' (each batch size's fastest and cheapest)."""
    return [ctx.named(k) for k in advice.recommended(answers(ctx))]


@once
def payback(ctx: Context) -> dict | None:
    """When compiling pays, per compiled static configuration (every precision, the scopes one trains with): its
    break-even and the advice it gives (summary.py `payback`), and which of them the paper recommends."""
    h = pd.concat([static_rows(ctx, p) for p in sorted(set(ctx.summary.precision))])
    h = h[h.payback.notna()] if "payback" in h else h.iloc[:0]
    if h.empty:
        return None
    rows = [break_even(r) for _, r in ordered(h, "precision", "batch_size").iterrows()]
    named = ("mode", "scope", "regime", "precision", "batch")
    chosen = {tuple(c[k] for k in named) for c in recommended(ctx)}
    for c in rows:
        c["recommended"] = tuple(c[k] for k in named) in chosen
    phase = ctx.env.get("compile_phase") or {}
    hows = Counter(c["how"] for c in rows if isinstance(c["how"], str))
    return {"rows": rows, "recommended": [c for c in rows if c["recommended"]], "train_rows": ctx.train_rows,
            "precision": ctx.precision, "precisions": len(set(h.precision)) > 1, "hows": dict(hows),
            "factor": factor_used(phase.get("factor")), "at_once": phase.get("at_once"),
            "divided_at_once": [r.get("cold_at_once") for _, r in h.iterrows() if r.get("cold_start_how") == "divided"],
            "searched": [c for c in rows if isinstance(c["search"], str)],
            "portable": any(n.finite(c["ways"]["portable"]["cost"].point) for c in rows)}


def factor_used(facts: dict | None) -> dict | None:
    """The factor cold compiles among others were divided by and the study's own check (environment.json's
    compile_phase factor: aggregate/payback.py factor_facts), as intervals: {"used", "own", "k", "source"}."""
    if not facts:
        return None
    ivs = {side: n.decided_interval(facts[side] | {"method": "", "level": LEVEL}) if facts.get(side) else None
           for side in ("used", "own")}
    return ivs | {"k": (facts.get("used") or {}).get("k"), "source": (facts.get("used") or {}).get("source")}


def cold_epochs(ctx: Context) -> dict | None:
    """The payback table's configurations whose break-even has an interval, counted by where it lies against an
    epoch (aggregate/payback.py epoch_code: more, less, straddles), and whether every one never pays back: the
    abstract says a cold start takes more than an epoch only where each does."""
    p = payback(ctx)
    decided = [c for c in p["rows"] if c["epoch_code"] in ("more", "less", "straddles")] if p else []
    if not decided:
        return None
    counts = Counter(c["epoch_code"] for c in decided)
    return {"total": len(decided), "more": counts["more"], "less": counts["less"], "straddles": counts["straddles"],
            "never": all(c["code"] == "never" for c in decided)}
