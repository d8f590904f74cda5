"""How a number is written in the paper: one place for digits, units, intervals and missing values.

    >>> interval(1.523, 1.471, 1.58, "t on log ratio, n = 5")
    '1.52× [1.47, 1.58] (95% t, n = 5)'

Used by the report model (report.py, appendix.py) and the claims (claims.py), so a value reads the same in
every sentence, table and claim. Torch-free.
"""

from __future__ import annotations

import math
import re

DASH = "—"  # a value that was not measured or does not apply
TRAIN_ROWS = 120_000  # the full AG News train split: break-even is also said in its epochs


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


def shown(value) -> float:
    """The value a reader sees for a ratio (1.3996 is shown as 1.40): rules that quote the paper use it."""
    return round(float(value), 2)


def percent(fraction, digits: int = 3) -> str:
    return f"{sig(100 * float(fraction), digits)}%" if finite(fraction) else DASH


def ms(value) -> str:
    return sig(value, 3) if finite(value) else DASH


def seconds(value) -> str:
    return f"{float(value):,.1f} s" if finite(value) else DASH


def count(value) -> str:
    return f"{float(value):,.0f}" if finite(value) else DASH


def method_label(method: str) -> str:
    """The interval's method as printed beside it ('t on log ratio, n = 5' -> '95% t, n = 5')."""
    return str(method).replace("t on log ratio", "95% t")


def interval(point, low, high, method: str) -> str:
    """'1.52× [1.47, 1.58] (95% t, n = 5)'; a range of two runs says so; a single run has no brackets."""
    if not finite(point):
        return DASH
    if not (finite(low) and finite(high)):
        return f"{times(point)} ({method_label(method)})"
    return f"{times(point)} [{float(low):.2f}, {float(high):.2f}] ({method_label(method)})"


def row_interval(row, prefix: str = "speedup") -> str:
    """The interval of a summary row: prefix 'speedup', 'gain' or 'inference' (summary.csv's column names)."""
    get = row.get if hasattr(row, "get") else (lambda k: getattr(row, k, None))  # a Series, dict or itertuples row
    point = get({"speedup": "speedup", "gain": "gain_over_eager_static", "inference": "inference_speedup"}[prefix])
    return interval(point, get(f"{prefix}_low"), get(f"{prefix}_high"), get(f"{prefix}_method") or "single run")


def steps_per_epoch(batch_size: int, rows: int = TRAIN_ROWS) -> int:
    return rows // int(batch_size)  # the last partial batch is dropped


def break_even(steps, batch_size: int) -> str:
    """'2,197 steps (1.2 epochs)': epochs of the full 120,000-row train split at that batch size."""
    if not finite(steps) and not (isinstance(steps, float) and math.isinf(steps)):
        return DASH
    if math.isinf(float(steps)):
        return "never (no step saved)"
    epochs = float(steps) / steps_per_epoch(batch_size)
    return f"{float(steps):,.0f} steps ({sig(epochs, 2)} epochs)"


def span(values, fmt=times) -> str:
    """'1.15–1.40×' over finite values (one value: itself)."""
    v = sorted(float(x) for x in values if finite(x))
    if not v:
        return DASH
    lo, hi = fmt(v[0]), fmt(v[-1])
    if lo == hi:
        return lo
    unit = re.search(r"[^\d.,]*$", hi).group()  # '×', ' s', '%': written once, after the upper end
    return f"{lo.removesuffix(unit) if lo.endswith(unit) else lo}–{hi}"
