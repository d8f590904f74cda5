"""Where a cold start's seconds go, per configuration and way of reaching its compiled step: each compiler stage's
mean seconds with its interval over the processes (core/compile_stages.py STAGES; core/stats.py mean_interval), and
the measured latency's rest, for the cold compiles (rule cold_compile), the portable starts (rule portable_start)
and the warm-cache loads (the timed runs' first steps); per mode, the stage its cold compiles spend most in, said
only where every configuration of the mode agrees. environment.json keeps it as "compile_stages"; a study whose
records predate the stages gets {"measured": false} (the paper says so; it never shows zeros for them).
"""

from __future__ import annotations

import os

import pandas as pd

from compile_study.core import vocab
from compile_study.core.compile_stages import STAGES
from compile_study.core.intervals import Interval
from compile_study.core.layout import COMPILE_TLPARSE, COMPILE_TRACE
from compile_study.core.record import CONFIGURATION_KEYS
from compile_study.core.stats import compare, mean_interval

NOT_KEPT = "not kept with this stored study (`zcat <trace> > trace.log; tlparse trace.log -o <folder>` remakes it)"

TRACE_BUDGET = 0.03  # the structured traces may cost at most this share of the study's job seconds
STAGE_WAYS = ("cold", "portable", "warm")  # columns.WAYS' order: from an empty cache, from artifacts, from a cache
COLUMNS = [f"stage_{name}_s" for name in STAGES]


def _iv(values) -> dict:
    iv = mean_interval(values)
    return {"point": iv.point, "low": iv.low, "high": iv.high, "n": iv.n}


def _sources(compiles: pd.DataFrame | None, records: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Each way's processes whose records hold stages: (configuration, stage columns, latency, rest)."""
    out = {}
    if compiles is not None and not compiles.empty:
        ok = compiles[(compiles.status == "ok") & compiles.compile_stages_s.notna()]
        for way in ("cold", "portable"):
            out[way] = ok[ok.start == way].assign(latency_s=lambda d: d.cold_compile_s)
    if "compile_stages_s" in records:
        warm = records[(records.status == "ok") & (records.compile_mode != "eager")
                       & (records.inductor_cache == "warm") & records.compile_stages_s.notna()]
        out["warm"] = warm.assign(latency_s=lambda d: d.compile_stages_s + d.compile_rest_s)
    return {w: d for w, d in out.items() if not d.empty}


def stage_rows(compiles: pd.DataFrame | None, records: pd.DataFrame) -> list[dict]:
    """One row per configuration and way with stages: its keys, the way, n, each stage's interval, the rest's and
    the latency's (mode, scope, regime, precision, batch order; ways in STAGE_WAYS' order)."""
    rows = []
    for way, runs in _sources(compiles, records).items():
        for key, group in runs.groupby(list(CONFIGURATION_KEYS), sort=False):
            plain = (v.item() if hasattr(v, "item") else v for v in key)  # numpy's ints as JSON's
            rows.append(dict(zip(CONFIGURATION_KEYS, plain)) | {
                "way": way, "n": len(group), "stages": {s: _iv(group[f"stage_{s}_s"]) for s in STAGES},
                "rest": _iv(group.compile_rest_s), "latency": _iv(group.latency_s)})
    order = {m: i for i, m in enumerate(vocab.COMPILE_MODES)}
    return sorted(rows, key=lambda r: (order.get(r["compile_mode"], 99), r["compile_scope"], r["shape_regime"],
                                       r["precision"], int(r["batch_size"]), STAGE_WAYS.index(r["way"])))


def leading(rows: list[dict]) -> dict[str, dict]:
    """Per mode, over its configurations' cold compiles: the stage with the most mean seconds, its share of the
    stages' sum (lowest and highest over the configurations), and whether every configuration agrees ("agree";
    else "mixed", with each configuration's stage)."""
    out: dict[str, dict] = {}
    for r in (r for r in rows if r["way"] == "cold"):
        means = {s: r["stages"][s]["point"] for s in STAGES}
        top, total = max(means, key=means.get), sum(means.values())
        mode = out.setdefault(r["compile_mode"], {"stages": [], "shares": []})
        mode["stages"].append(top)
        mode["shares"].append(means[top] / total if total > 0 else float("nan"))
    for mode in out.values():
        agree = len(set(mode["stages"])) == 1
        mode |= {"code": "agree" if agree else "mixed", "stage": mode["stages"][0] if agree else None,
                 "share": [min(mode["shares"]), max(mode["shares"])], "configurations": len(mode["stages"])}
    return out


def _interval(d: dict) -> Interval:
    return Interval(d["point"], d["low"], d["high"], "", d["n"], float("nan"))


def skipped(rows: list[dict]) -> dict[str, dict]:
    """What a portable start and a warm load skip, per way: the stages whose seconds lie below the same
    configuration's cold compiles' (stats.compare: both intervals on MIN_N processes or more, not overlapping) in
    every configuration that has both ("stages"; "configurations": how many), and in how many no comparison could
    be made for want of processes ("few_runs")."""
    cold = {tuple(r[k] for k in CONFIGURATION_KEYS): r for r in rows if r["way"] == "cold"}
    out = {}
    for way in STAGE_WAYS[1:]:
        pairs = [(cold[key], r) for r in rows if r["way"] == way
                 and (key := tuple(r[k] for k in CONFIGURATION_KEYS)) in cold]
        if not pairs:
            continue
        codes = [{s: compare(_interval(r["stages"][s]), _interval(c["stages"][s])) for s in STAGES} for c, r in pairs]
        decided = [c for c in codes if "few-runs" not in c.values()]
        every = [s for s in STAGES if decided and all(c[s] == "lower" for c in decided)]
        out[way] = {"stages": every, "configurations": len(decided), "few_runs": len(codes) - len(decided)}
    return out


def trace_cost(compiles: pd.DataFrame | None, records: pd.DataFrame) -> dict | None:
    """What the structured traces cost: torch's own count of writing them (compile.trace's overhead_s) summed, over
    the study's job seconds (every run's and compile's total_s), against TRACE_BUDGET ("within" / "over"); None
    where no compile kept a trace."""
    if compiles is None or compiles.empty or "trace" not in compiles:
        return None
    kept = compiles[compiles.trace.map(lambda t: isinstance(t, dict))].sort_values(list(CONFIGURATION_KEYS))
    if kept.empty:
        return None
    traces = list(kept.trace)
    seconds = sum(t.get("overhead_s") or 0.0 for t in traces)
    jobs = (pd.to_numeric(compiles.total_s, errors="coerce").sum()
            + pd.to_numeric(records.get("overhead_total_s", pd.Series(dtype=float)), errors="coerce").sum())
    share = seconds / jobs if jobs > 0 else float("nan")
    files = [_files(r) for _, r in kept.iterrows()]
    unkept = [f for f, t in zip(files, traces) if t.get("tlparse") and not f["tlparse"]]
    return {"traces": len(traces), "seconds": seconds, "job_seconds": float(jobs), "share": share,
            "budget": TRACE_BUDGET, "code": "within" if share <= TRACE_BUDGET else "over",
            "tlparse": sum(1 for f in files if f["tlparse"]),
            "skipped": sorted({t["tlparse_skipped"] for t in traces if t.get("tlparse_skipped")}
                              | ({NOT_KEPT} if unkept else set())),
            "files": files}


def _files(row) -> dict:
    """A kept trace's and its report's paths in the study's directory (core/layout.py COMPILE_TRACE, COMPILE_TLPARSE)."""
    keys = {k: row[k] for k in CONFIGURATION_KEYS} | {"index": 0}
    keys["batch_size"] = int(keys["batch_size"])
    return {"mode": row["compile_mode"], "scope": row["compile_scope"], "regime": row["shape_regime"],
            "precision": row["precision"], "batch": keys["batch_size"], "trace": COMPILE_TRACE.format(**keys),
            "tlparse": _report(row["trace"].get("tlparse"), row.get("record_dir"), COMPILE_TLPARSE.format(**keys))}


def _report(made: str | None, record_dir: str | None, kept: str) -> str | None:
    """tlparse's report as the study holds it, beside the compile's record (wherever the study is read from), else
    None: a stored study keeps each trace but not the report (about 4 MB a configuration on a GPU), which tlparse
    remakes from the trace (NOT_KEPT)."""
    if made and record_dir and os.path.isdir(os.path.join(record_dir, os.path.basename(kept))):
        return f"{kept}/index.html"
    return None


def summary(compiles: pd.DataFrame | None, records: pd.DataFrame) -> dict:
    """environment.json's "compile_stages": whether the stages were measured, the rows, each mode's leading stage,
    what the other ways skip, and what the traces cost."""
    rows = stage_rows(compiles, records)
    if not rows:
        return {"measured": False}
    return {"measured": True, "stages": list(STAGES), "rows": rows, "modes": leading(rows), "skipped": skipped(rows),
            "trace": trace_cost(compiles, records)}
