"""Numbers as the study writes them: a fixed count of significant digits, the same on every CPU.

Vectorised reductions (numpy, pandas) sum in an order that depends on the CPU's instruction set, so the same records
give 0.8259104106275778 on one machine and 0.8259104106275776 on another (same library versions). Every float the
study derives from records into a file that is compared or committed passes through `fixed`: JSON through `dumps`
(decisions, environment, host effect, JSON inside another file), CSV through `csv_text`. The records themselves
(runs, compiles, checks: core/io.py `write_json_atomic`) keep what was measured, as written once on the machine that
measured it; nothing regenerates them. The digits `fixed` writes are the value rounded to SIGNIFICANT significant
digits, printed as Python's shortest repr: a difference of a few units in the last place moves a written value only
where it lies within those few units of a rounding boundary (about one value in 10^4 at 12 digits;
tests/test_rebuild.py perturbs a study's reductions to show its files unchanged).
"""

from __future__ import annotations

import json
import math

SIGNIFICANT = 12  # digits every statistic here needs at most; a float64 carries 15-17, the last ones noise


def fixed(x: float) -> float:
    """x rounded to SIGNIFICANT significant digits (nan and the infinities as they are)."""
    return float(f"{x:.{SIGNIFICANT}g}") if math.isfinite(x) else float(x)


def tidy(obj):
    """obj with every float in it (nested in dicts, lists and tuples, numpy's floats too) `fixed`; the rest as
    it is. Booleans and integers are not floats and stay exact."""
    if isinstance(obj, float):  # numpy.float64 is a float too
        return fixed(obj)
    if isinstance(obj, dict):
        return {k: tidy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [tidy(v) for v in obj]
    if type(obj).__module__ == "numpy" and hasattr(obj, "dtype") and obj.dtype.kind == "f" and obj.ndim == 0:
        return fixed(float(obj))  # numpy.float32 and other float scalars that are not Python floats
    return obj


def dumps(obj, **kwargs) -> str:
    """json.dumps of `tidy(obj)`: JSON whose floats carry SIGNIFICANT digits at most."""
    return json.dumps(tidy(obj), **kwargs)


def csv_text(frame) -> str:
    """A DataFrame as CSV (no index) with every float cell `fixed`, float and object columns alike."""
    return frame.map(tidy).to_csv(index=False)
