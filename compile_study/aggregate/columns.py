"""summary.csv's intervals as columns, written once: for a prefix (speedup, gain, inference, step) its point
column and `<prefix>_low`, `<prefix>_high`, `<prefix>_method`, `<prefix>_n`. summary.py writes them; the
claims, the decisions and the report read a row's interval back through `interval_of`. What each point means
(MEANING) and the payback columns beside them (PAYBACK) are said here too, for docs/columns.md.

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


# What each interval's point is, in which unit, and where it is made (docs/columns.md; aggregate/column_dictionary.py
# adds the ends, method and n every family shares, ENDS): a new prefix of POINT needs its line here
MEANING = {
    "speedup": ("the eager reference's step over the subject's, timed interleaved in the same process "
                "(in_process_speedup), geometric mean across the configuration's processes", "ratio",
                "core/stats.py speedup_table"),
    "gain": ("real (non-pad) tokens/s over eager's on static batches of the same batch size and precision, each side "
             "across its own processes (ratio of geometric means)", "ratio", "aggregate/summary.py _gains"),
    "inference": ("eval-mode step, eager over subject in the same process (inference_speedup), geometric mean across "
                  "processes", "ratio", "aggregate/summary.py _config_row"),
    "step": ("the subject's steady-state step (steady_step_ms), geometric mean across processes (the step time the "
             "comparison rule orders configurations by)", "ms", "aggregate/summary.py _config_row"),
    "cold": ("a cold compile as timed (the compile phase's, else the cold runs' epoch-1 overhead), geometric mean "
             "across compiles", "s", "aggregate/summary.py _against_eager, aggregate/payback.py cold_compiles"),
    start_prefix("cold"): ("seconds to the first compiled step from an empty cache, as a user alone pays it (the "
                           "compile-concurrency factor divided out, a shared GEMM search added)", "s",
                           "aggregate/payback.py cold_costs"),
    start_prefix("portable"): ("seconds to the first compiled step from shipped cache artifacts (a portable start)",
                               "s", "aggregate/payback.py portable_costs"),
    start_prefix("warm"): ("seconds to the first compiled step from a filled cache: the warm-cache load net of "
                           "eager's warm-up", "s", "aggregate/payback.py warm_costs"),
    break_even_prefix("cold"): ("steps after which compiling pays from an empty cache: cold_start_s over the seconds "
                                "a step saves (inf: never)", "steps", "aggregate/payback.py payback_cells"),
    break_even_prefix("portable"): ("steps after which compiling pays from shipped artifacts (inf: never)", "steps",
                                    "aggregate/payback.py payback_cells"),
    break_even_prefix("warm"): ("steps after which compiling pays from a filled cache (inf: never)", "steps",
                                "aggregate/payback.py payback_cells"),
}
ENDS = {"low": ("lower end of the {level:.0%} interval of `{point}` (empty: fewer than {min_n} values)", "{unit}"),
        "high": ("upper end of the {level:.0%} interval of `{point}`", "{unit}"),
        "method": ("how the interval of `{point}` was made, or why it has none", "text"),
        "n": ("values (processes, compiles) the interval of `{point}` rests on", "count")}
# the payback columns beside each way's interval (aggregate/payback.py payback_cells, empty_columns)
PAYBACK = {
    "payback": ("when compiling pays (payback): pays-after, never, not-shown-faster, few-runs, no-control, "
                "no-cold-compile; empty for eager", "code"),
    "cold_start_how": ("how the cold compiles were charged (payback.HOWS): alone, divided, contended, first-runs",
                       "code"),
    "cold_at_once": ("how many compiles ran at once with the compile phase's cold compiles, time-weighted over each "
                     "(at_once.mean_at_once), their mean; empty without a compile phase", "compiles"),
    "cold_search": ("the compile mode whose shared GEMM search cold_start_s adds (empty: none)", "text"),
    "full_epoch_steps": ("steps of one epoch over the training rows at the batch size", "steps"),
    "break_even_epochs": ("break_even_steps in epochs", "epochs"),
    "break_even_epochs_low": ("break_even_low in epochs", "epochs"),
    "break_even_epochs_high": ("break_even_high in epochs", "epochs"),
    "break_even_epoch_code": ("where the break-even's interval lies against one epoch (payback.epoch_code): more, "
                              "less, straddles, few-runs; empty for eager", "code"),
}


def _finite(v) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def columns(prefix: str, iv: Interval) -> dict:
    """An interval as summary.csv's columns of `prefix`."""
    return {POINT[prefix]: iv.point, f"{prefix}_low": iv.low, f"{prefix}_high": iv.high, f"{prefix}_method": iv.method,
            f"{prefix}_n": iv.n}


def key(r) -> dict:
    """A configuration as the decisions, the claims and the paper name it (summary.csv's compile_mode,
    compile_scope, shape_regime, precision and batch_size)."""
    get = r.get if hasattr(r, "get") else (lambda k, d=None: getattr(r, k, d))
    return {"mode": get("compile_mode"), "scope": get("compile_scope"), "regime": get("shape_regime"),
            "precision": get("precision"), "batch": int(get("batch_size"))}


def interval_of(row, prefix: str = "speedup") -> Interval:
    """The Interval of a summary row (a Series, dict or itertuples row) from its point, ends and n columns."""
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    n = get(f"{prefix}_n")
    method = get(f"{prefix}_method")
    return Interval(get(POINT[prefix]), get(f"{prefix}_low"), get(f"{prefix}_high"),
                    method if isinstance(method, str) else "", int(n) if _finite(n) else 0, LEVEL)
