"""One answer per batch size, by a stated rule that weighs speed and cost (torch-free); the paper's conclusions and
its payback table's "recommended" word it (report/advice.py `answers`).

    found = advice.answers(summary, "bf16", placed_rows, pooled_studies)

Per batch size, over the compiled configurations of static shapes in the main precision and the scopes one trains
with (vocab.TRAINING_SCOPES), each with MIN_N processes or more:

  evidence  the pool of the study's GPU kind (every study of it, this one among them) where it holds two or more
            stored studies besides this one (aggregate/compare/pool.py pooled: the pooled speedup, its 95% interval, and
            its prediction for a new host against eager's A/A band); otherwise this study's own speedup, interval and verdict, and the answer speaks for
            this host alone
  eligible  shown faster than eager by that evidence: the pool's prediction clears eager's band (pool verdict
            "faster"), or this study's verdict is "faster" (no pool); a configuration the pool's prediction finds
            within eager's band is never eligible, whatever this study measured
  fastest   the eligible configuration with the largest speedup (point), ties in the vocabulary's order
  peers     the eligible configurations not shown slower than the fastest (stats.compare of their intervals is
            not "lower"), the fastest among them
  cheapest  per way of reaching the compiled step (columns.WAYS: cold, portable, warm), the peer with the fewest
            break-even steps (the point; peers without a finite one are passed over; none: no answer for that way)

The recommended configurations of a batch size are its fastest and each way's cheapest: never a set the rule
orders, never one the pool finds within eager's band.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from compile_study.aggregate.columns import WAYS, break_even_prefix, interval_of
from compile_study.aggregate.decide import key, ordered
from compile_study.core import stats, vocab
from compile_study.core.intervals import LEVEL, MIN_N, Interval

POOLED = 2  # stored studies besides this one a pool needs before the answer speaks for the GPU kind


def _candidates(summary: pd.DataFrame, precision: str) -> pd.DataFrame:
    s = vocab.usable(summary[(summary.shape_regime == "static") & summary.compile_scope.isin(vocab.TRAINING_SCOPES)
                             & (summary.precision == precision) & (summary.compile_mode != "eager")])
    return ordered(s[s.speedup_n >= MIN_N], "batch_size")


def _pooled(rows: list[dict]) -> dict[tuple, dict]:
    return {(r["shape_regime"], r["precision"], int(r["batch_size"]), r["compile_mode"], r["compile_scope"]): r
            for r in rows}


def evidence(r: pd.Series, pool: dict[tuple, dict] | None) -> tuple[Interval, bool] | None:
    """A configuration's speedup interval and whether it is shown faster than eager: the pool's (pooled mean and
    95% interval; its prediction clears eager's band) where `pool` is given, else this study's; None where the
    pool holds no cell of it."""
    if pool is None:
        return interval_of(r), r.verdict == "faster"
    p = pool.get((r.shape_regime, r.precision, int(r.batch_size), r.compile_mode, r.compile_scope))
    if p is None:
        return None
    iv = Interval(float(np.exp(p["mean"])), float(np.exp(p["ci_low"])), float(np.exp(p["ci_high"])),
                  f"pooled over {int(p['k'])} stud{'y' if int(p['k']) == 1 else 'ies'}", int(p["processes"]), LEVEL)
    return iv, p["verdict"] == "faster"


def _cheapest(peers: list[tuple[pd.Series, Interval]]) -> dict[str, dict | None]:
    out = {}
    for way in WAYS:
        steps = [(r[f"{break_even_prefix(way)}_steps"], i) for i, (r, _) in enumerate(peers)
                 if f"{break_even_prefix(way)}_steps" in r and np.isfinite(r[f"{break_even_prefix(way)}_steps"])]
        out[way] = key(peers[min(steps)[1]][0]) | {"steps": float(min(steps)[0])} if steps else None
    return out


def answer(rows: pd.DataFrame, pool: dict[tuple, dict] | None) -> dict:
    """One batch size's answer (module docstring): `fastest` and each way's `cheapest` (keys), `peers`, the
    `eligible` and the configurations `held` (the pool's prediction within eager's band, or not shown faster)."""
    judged = [(r, e) for _, r in rows.iterrows() if (e := evidence(r, pool)) is not None]
    eligible = [(r, iv) for r, (iv, faster) in judged if faster]
    held = [key(r) for r, (_, faster) in judged if not faster]
    if not eligible:
        return {"fastest": None, "peers": [], "cheapest": dict.fromkeys(WAYS), "eligible": [], "held": held}
    best = max(range(len(eligible)), key=lambda i: (eligible[i][1].point, -i))
    top = eligible[best][1]
    peers = [(r, iv) for r, iv in eligible if stats.compare(iv, top) != "lower"]
    return {"fastest": key(eligible[best][0]) | {"speedup": top}, "peers": [key(r) | {"speedup": iv} for r, iv in peers],
            "cheapest": _cheapest(peers), "eligible": [key(r) for r, _ in eligible], "held": held}


def answers(summary: pd.DataFrame, precision: str | None, pool_rows: list[dict] | None, pooled: int) -> list[dict]:
    """Per batch size of the main precision: its answer, and whether it rests on the pool (`pooled`: the stored
    studies besides this one the pool of its kind holds; POOLED or more: the pool's evidence)."""
    if precision is None:
        return []
    pool = _pooled(pool_rows) if pool_rows is not None and pooled >= POOLED else None
    return [{"batch": int(b), "pooled": pool is not None} | answer(g, pool)
            for b, g in _candidates(summary, precision).groupby("batch_size", sort=True)]


def recommended(found: list[dict]) -> list[dict]:
    """The configurations the answers name (each batch size's fastest and each way's cheapest), each once."""
    out = []
    for a in found:
        for c in [a["fastest"], *a["cheapest"].values()]:
            k = {f: c[f] for f in ("mode", "scope", "regime", "precision", "batch")} if c else None
            if k and k not in out:
                out.append(k)
    return out
