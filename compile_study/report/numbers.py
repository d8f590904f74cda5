"""How a number is written in the paper: one place for digits, units, intervals and missing values.

    >>> interval(Interval(1.523, 1.471, 1.58, "", 5, 0.95))
    '1.52× [1.47, 1.58] (95% t, n = 5)'

The sentence templates (paper/templates/sections/*.j2) use these as filters (`{{ x | times }}`) and the
table builders call them directly, so a value reads the same in every sentence and table. Torch-free.
"""

from __future__ import annotations

import math
import re

from compile_study.aggregate.columns import interval_of
from compile_study.core.intervals import LEVEL, MIN_N, Interval

DASH = "—"  # a value that was not measured or does not apply


def finite(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def sig(value, digits: int = 3) -> str:
    """A number with about `digits` significant digits, thousands separated, never in scientific notation:
    771.5 -> '772', 51.14 -> '51.1', 0.1423 -> '0.142', 12345.6 -> '12,346'."""
    if not finite(value):
        return DASH
    v = float(value)
    if v == 0:
        return "0"
    places = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    return f"{v:,.{places}f}"


def fixed(value, places: int = 2) -> str:
    return f"{float(value):,.{places}f}" if finite(value) else DASH


def times(value) -> str:
    """A ratio as the paper shows it: two decimals and ×."""
    return f"{float(value):.2f}×" if finite(value) else DASH


def percent(fraction, digits: int = 3) -> str:
    return f"{sig(100 * float(fraction), digits)}%" if finite(fraction) else DASH


def percent2(fraction) -> str:
    """A share to two significant digits: 0.1405 -> '14%', 0.0168 -> '1.7%'."""
    return percent(fraction, 2)


def ms(value) -> str:
    return sig(value, 3) if finite(value) else DASH


def seconds(value) -> str:
    return f"{float(value):,.1f} s" if finite(value) else DASH


def count(value) -> str:
    return f"{float(value):,.0f}" if finite(value) else DASH


def steps(value) -> str:
    """Break-even steps: a count, or 'never' where no step is saved."""
    if isinstance(value, float) and math.isinf(value):
        return "never"
    return count(value)


def epochs(value) -> str:
    """Break-even epochs: two significant digits, or 'never'."""
    if isinstance(value, float) and math.isinf(value):
        return "never"
    return sig(value, 2)


def method(iv: Interval) -> str:
    """How an interval was made, as printed beside it: '95% t, n = 5', '95%, Bonferroni, n = 3' (a cost or a
    break-even joined from several parts), 'n = 2, no interval', 'single run', or a cost's own reason for none
    ('1 cold compile, no interval')."""
    if iv.n >= MIN_N and finite(iv.low):
        return f"{LEVEL:.0%}{', Bonferroni' if iv.method.startswith('Bonferroni') else ' t'}, n = {iv.n}"
    if re.match(r"(\d+|no) [a-zA-Z]", iv.method or "") and not iv.method.startswith("n = "):
        return iv.method  # a cost's part measured too few times, named: '1 cold compile, no interval'
    return "single run" if iv.n == 1 else f"n = {iv.n}, no interval"


def decided_interval(d: dict) -> Interval:
    """An interval of decisions.json (None for a missing end) as the filters read it."""
    nan = float("nan")
    return Interval(*(nan if d[k] is None else d[k] for k in ("point", "low", "high")), d["method"], d["n"],
                    nan if d["level"] is None else d["level"])


def interval(iv: Interval | None, with_method: bool = True, fmt=times) -> str:
    """'1.52× [1.47, 1.58] (95% t, n = 5)'; with fewer than MIN_N processes no brackets, and the method is
    always said ('1.24× (n = 2, no interval)'), so that a bare point is never read as an interval's. A
    break-even whose upper end is infinite (the step's saving may be nil) reads '8,219 [3,627, never]'."""
    if isinstance(iv, dict):  # claims.csv's evidence: {"point", "low", "high", "n"}, None for a missing end
        iv = Interval(*(iv.get(k) if iv.get(k) is not None else math.nan for k in ("point", "low", "high")), "",
                      int(iv.get("n") or 0), LEVEL)
    if iv is None or not finite(iv.point):
        return DASH
    open_above = finite(iv.low) and iv.high == math.inf  # a break-even whose saving's interval reaches 0
    if iv.n < MIN_N or not (finite(iv.low) and (finite(iv.high) or open_above)):
        return f"{fmt(iv.point)} ({method(iv)})"
    unit = re.search(r"[^\d.,]*$", fmt(iv.point)).group()
    high = fmt(iv.high).removesuffix(unit) if finite(iv.high) or fmt is steps else "unbounded"  # steps: "never"
    body = f"{fmt(iv.point)} [{fmt(iv.low).removesuffix(unit)}, {high}]"
    return f"{body} ({method(iv)})" if with_method else body


def row_interval(row, prefix: str = "speedup", with_method: bool = True) -> str:
    """A summary row's interval: prefix 'speedup', 'gain', 'inference' or 'step' (summary.csv's columns)."""
    return interval(row_iv(row, prefix), with_method, ms if prefix == "step" else times)


row_iv = interval_of  # a summary row's Interval: aggregate/columns.py holds summary.csv's column names


def span(values, fmt=times) -> str:
    """'1.15–1.40×' over finite values (one value: itself); fmt is a formatter or a name of FILTERS."""
    fmt = FILTERS[fmt] if isinstance(fmt, str) else fmt
    v = sorted(float(x) for x in values if finite(x))
    if not v:
        return DASH
    lo, hi = fmt(v[0]), fmt(v[-1])
    if lo == hi:
        return lo
    unit = re.search(r"[^\d.,]*$", hi).group()  # '×', ' s', '%': written once, after the upper end
    return f"{lo.removesuffix(unit) if lo.endswith(unit) else lo}–{hi}"


WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def word(value) -> str:
    """Small counts in words ('no', 'one', ... 'ten'), larger ones in digits: 'compiled once', not '1 times'."""
    n = int(value)
    return WORDS[n] if 0 <= n < len(WORDS) else f"{n:,}"


def join(parts, last: str = "and") -> str:
    """'a', 'a and b', 'a, b and c'."""
    parts = [str(p) for p in parts]
    if not parts:
        return ""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + f" {last} " + parts[-1]


FILTERS = {"sig": sig, "fixed": fixed, "times": times, "percent": percent, "percent2": percent2, "ms": ms, "seconds": seconds,
           "count": count, "steps": steps, "epochs": epochs, "iv": interval, "span": span, "word": word, "listing": join,
           "method": method, "ms_iv": lambda iv: interval(iv, True, ms), "seconds_iv": lambda iv: interval(iv, True, seconds)}
