"""summary.csv's intervals as columns, written once: for a prefix (speedup, gain, inference, step) its point
column and `<prefix>_low`, `<prefix>_high`, `<prefix>_method`, `<prefix>_n`. summary.py writes them; the
claims, the decisions and the report read a row's interval back through `interval_of`.

    interval_of(row, "gain")   # -> Interval(point=row.gain_over_eager_static, low=row.gain_low, ...)
"""

from __future__ import annotations

import math

from compile_study.core.intervals import LEVEL, Interval

# how a user reaches a configuration's compiled step (aggregate/payback.py): each way has a cost in seconds
# (`<way>_start`) and a break-even in steps (`<way>_break_even`; the cold way's is `break_even`, the paper's first)
WAYS = ("cold", "portable", "warm")


def start_prefix(way: str) -> str:
    return f"{way}_start"


def break_even_prefix(way: str) -> str:
    return "break_even" if way == "cold" else f"{way}_break_even"


# an interval's point column per prefix: every point shown beside an interval is that interval's centre
POINT = {"speedup": "speedup", "gain": "gain_over_eager_static", "inference": "inference_speedup", "step": "step_ms",
         "cold": "cold_compile_s"} | {start_prefix(w): f"{start_prefix(w)}_s" for w in WAYS} | {
         break_even_prefix(w): f"{break_even_prefix(w)}_steps" for w in WAYS}


def _finite(v) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def columns(prefix: str, iv: Interval) -> dict:
    """An interval as summary.csv's columns of `prefix`."""
    return {POINT[prefix]: iv.point, f"{prefix}_low": iv.low, f"{prefix}_high": iv.high, f"{prefix}_method": iv.method,
            f"{prefix}_n": iv.n}


def interval_of(row, prefix: str = "speedup") -> Interval:
    """The Interval of a summary row (a Series, dict or itertuples row) from its point, ends and n columns."""
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    n = get(f"{prefix}_n")
    method = get(f"{prefix}_method")
    return Interval(get(POINT[prefix]), get(f"{prefix}_low"), get(f"{prefix}_high"),
                    method if isinstance(method, str) else "", int(n) if _finite(n) else 0, LEVEL)
