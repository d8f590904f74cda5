"""The method checks' part of the appendix (appendix.py places it): the timer and drift checks' tables, a table for
any check that declares one (measure/checks/spec.py), and the
sentences of the timer, concurrency, launcher and compile-concurrency checks, each with the interval, band and
verdict aggregate/decide.py decided for it (one rule for every check: decide.check_code).
"""

from __future__ import annotations

from compile_study.measure.checks.spec import MethodCheck, method_checks
from compile_study.report import numbers as n
from compile_study.report.document import Column, Para, Table, Text, plain
from compile_study.report.findings import Context


def _cols(spec: str) -> list[Column]:
    """'mode|batch:r|...' -> columns; ':r' right-aligns."""
    return [Column(h, f or "l") for h, _, f in (part.partition(":") for part in spec.split("|"))]


def check_tables(checks: dict) -> list[Table]:
    out = []
    if checks.get("timer"):
        rows = [[r["compile_mode"], str(r["batch_size"]), r["precision"], n.fixed(r["harness_median_ms"], 3),
                 n.fixed(r["timer_median_ms"], 3), n.fixed(r.get("do_bench_median_ms"), 3),
                 n.fixed(r["harness_vs_timer"], 3), "yes" if r["within_3pct"] else "no"] for r in checks["timer"]]
        out.append(Table("timer", Text("appendix", "timer_caption"), _cols(
            "mode|batch:r|precision|harness (ms):r|Timer (ms):r|do_bench (ms):r|harness / Timer:r|within 3%"), rows))
    if checks.get("drift"):
        rows = [[r["compile_mode"], str(r["batch_size"]), n.fixed(r["before_ms"], 3), n.fixed(r["after_compile_ms"], 3),
                 n.fixed(r["interleaved_ms"], 3), n.fixed(r["interleaved_compiled_ms"], 3),
                 n.times(r["in_process_speedup"]), n.times(r["speedup_vs_before"])] for r in checks["drift"]]
        out.append(Table("drift", Text("appendix", "drift_caption"), _cols(
            "mode|batch:r|eager before (ms):r|after compile (ms):r|interleaved (ms):r|compiled (ms):r|"
            "in-process speedup:r|vs eager before:r"), rows))
    return out + [t for t in map(lambda c: declared_table(c, checks), method_checks().values()) if t]


def declared_table(check: MethodCheck, checks: dict) -> Table | None:
    """A check that declares a `table` (measure/checks/spec.py): one row a result, one column a key of it, captioned
    by what the check says it checks."""
    results = checks.get(check.key)
    if not check.table or not results:
        return None
    rows = [[_shown(r.get(k)) for k in check.table] for r in results]
    columns = [Column(k.replace("_", " "), "r" if all(_number(r.get(k)) for r in results) else "l") for k in check.table]
    return Table(check.key, Text("appendix", "check_caption", {"says": check.says}), columns, rows)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _shown(v) -> str:
    """A result's value in a declared table: a count as it is, a measure to three significant digits, a flag as
    yes or no."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    return n.sig(v) if isinstance(v, float) else str(v)


def _cell(check: dict) -> dict:
    """The grid cell a method check ran, as the templates name configurations (module scope)."""
    return {"mode": check["compile_mode"], "scope": "module", "regime": check["shape_regime"],
            "precision": check["precision"], "batch": check["batch_size"]}


def _decided(decided: dict) -> dict:
    """A method check's interval, band and verdict as aggregate/decide.py decided them."""
    band = decided["band"]
    return {"iv": n.decided_interval(decided["interval"]), "rounds": decided["rounds"], "verdict": decided["verdict"],
            "band": {"low": band[0], "high": band[1]} if band else None}


def concurrency_para(check: dict, decided: dict | None) -> Para | None:
    """The concurrency check's step-time ratio (two at once over one alone) against its cell's A/A band; the
    verdict code reads a ratio as a speedup, so the template says "faster" of it as "two at once are slower"."""
    if not check.get("applicable") or not decided:
        return None
    return Para(Text("appendix", "concurrency", _decided(decided) | {
        "gpu": plain(check["gpus"][0]), "cores": len(check["cores"][0]), "shares": check["shares"], "c": _cell(check),
        "overlap_low": decided["overlap"][0], "overlap_high": decided["overlap"][1]}))


def launcher_para(check: dict, decided: dict | None) -> Para | None:
    """The launcher check (measure/checks/launcher.py): the same cell by a process the warm launcher forked and by a fresh
    Python process; the ratio of their in-process speedups against the cell's A/A band (read as a speedup)."""
    if not check.get("applicable") or not decided:
        return None
    return Para(Text("appendix", "launcher", _decided(decided) | {
        "warm_s": decided["fixed_cost_s"]["warm"], "fresh_s": decided["fixed_cost_s"]["fresh"], "c": _cell(check)}))


def compile_concurrency_para(check: dict, decided: dict | None) -> Para | None:
    """The compile-concurrency check (measure/checks/compile_concurrency.py): a cold compile among k at once on c cores each
    over the same compile alone with the whole host, read against 1 (aggregate/decide.py compile_concurrency)."""
    if not check.get("applicable") or not decided:
        return None
    return Para(Text("appendix", "compile_concurrency", _decided(decided) | {
        "k": decided["k"], "cores": decided["cores_per_compile"], "host_cores": decided["host_cores"],
        "alone_s": decided["alone_s"], "batch_s": decided["batch_s"], "c": _cell(check)}))


def decided_launcher(ctx: Context) -> dict | None:
    """The launcher check's interval, rounds and verdict as decided (None where it did not run or apply)."""
    decided = (ctx.decisions.get("checks") or {}).get("launcher")
    return _decided(decided) if decided and (ctx.checks.get("launcher") or {}).get("applicable") else None


def timer_para(ctx: Context) -> Para | None:
    """The timer check's disagreements where they bear on a speedup (aggregate/decide.py timer_disagreements)."""
    found = (ctx.decisions.get("checks") or {}).get("timer") or []
    if not found:
        return None
    return Para(Text("appendix", "timer", {"found": [
        {"c": ctx.named(f["config"]) | {"verdict": f["verdict"]}, "ratio": f["ratio"], "eager_ratio": f["eager_ratio"],
         "corrected": f["corrected"], "factor": f.get("factor"), "verdict": f["verdict"],
         "moved": n.decided_interval(f["moved"]) if f.get("moved") else None, "moved_verdict": f.get("moved_verdict"),
         "rounds": f["rounds"], "spread": f["spread"], "eager_spread": f["eager_spread"], "harness_ms": f["harness_ms"],
         "step": n.decided_interval(f["step"]), "step_code": f["step_code"]} for f in found]}))
