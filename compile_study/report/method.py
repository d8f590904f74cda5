"""The method and Setup sections as numbers, codes and labels: model and data, the grid, the timing and
interval rules (the constants of core/intervals.py), cache states and compile cost, where the time went, and the
conditions of the runs (hardware, cores, concurrency, TF32, calls, commits, versions).

Every definition is the one aggregate/summary.py implements; every condition is read from the records
(environment.json), the study's calls.jsonl and its method checks, and said to be unrecorded where it is.
"""

from __future__ import annotations

import re
from dataclasses import asdict

from compile_study.aggregate.decide import ordered
from compile_study.aggregate.summary import HOST_BOUND
from compile_study.core import disturbance, record, vocab
from compile_study.core.config import grid
from compile_study.core.intervals import BAND_SDS, LEVEL, MIN_N
from compile_study.report import numbers as n
from compile_study.report.advice import payback
from compile_study.report.document import Column, Figure, Para, Table, Text, plain
from compile_study.report.findings import Context, config, data_facts, model, once, value


@once
def _epoch_steps(ctx: Context) -> dict:
    """Each configuration's epoch steps as its runs recorded them, by (mode, scope, regime, precision, batch)."""
    s = ctx.summary
    return dict(zip(zip(s.compile_mode, s.compile_scope, s.shape_regime, s.precision, s.batch_size), s.epoch_steps))


def epoch_steps(ctx: Context, g: dict) -> str:
    """A sub-grid's epoch steps as its runs recorded them, per batch size ('60 at 32, 13 at 512'; a range where its
    regimes differ), or its cap where no run of it has numbers."""
    recorded = _epoch_steps(ctx)
    per: dict[int, list] = {}
    for k in grid.expand([g]):
        steps = recorded.get((k.compile_mode, k.compile_scope, k.shape_regime, k.precision, k.batch_size))
        if n.finite(steps):
            per.setdefault(int(k.batch_size), []).append(steps)
    per = {b: n.span(v, "count") for b, v in sorted(per.items())}
    if not per:
        return f"≤ {g['max_epoch_steps']}" if g.get("max_epoch_steps") else "whole split"
    return next(iter(per.values())) if len(per) == 1 else ", ".join(f"{v} at {b}" for b, v in per.items())


def grid_table(ctx: Context) -> Table:
    """The grid as the study's config has it: one row per sub-grid; its epoch steps as its runs had them."""
    rows = []
    for g in ctx.grids:
        scopes = g.get("compile_scope") or ["module"]
        rows.append([plain(g["name"]), ", ".join(map(str, g["compile_mode"])), ", ".join(scopes),
                     ", ".join(str(b) for b in g["batch_size"]), ", ".join(g["shape_regime"]), ", ".join(g["precision"]),
                     str(g["repeats"]), f"{g['warmup_steps']} / {g['timed_steps']} / {g['interleave_chunk']}",
                     epoch_steps(ctx, g)])
    cols = [Column("sub-grid"), Column("modes"), Column("scopes"),
            Column("batch sizes"), Column("shapes"), Column("precision"),
            Column("processes", "r"), Column("warm-up / timed / chunk", "r"), Column("epoch steps", "r")]
    return Table("grid", Text("method", "grid_caption"), cols, rows)


def intervals() -> dict:
    """The interval and verdict rules, from their constants."""
    return {"level": LEVEL, "min_n": MIN_N, "band_sds": BAND_SDS}


def costs(ctx: Context) -> dict:
    states = ctx.env.get("compiled_cache_states") or {}
    return {"cold": states.get("cold", 0), "warm": states.get("warm", 0), "recorded": bool(states),
            "shared": states.get(vocab.SEARCH_SHARED, 0), "shared_modes": ctx.env.get("search_shared_modes") or [],
            "gpu": ctx.gpu, "train_rows": ctx.train_rows, "payback": payback(ctx) is not None,
            # the peaks of the precisions the runs used (a CPU's peak.json measures a tf32 that no CPU run has)
            "peaks": [(p, v) for p, v in (ctx.env.get("peak_tflops") or {}).items() if p in set(ctx.summary.precision)],
            "phase": compile_phase(ctx)}


def time_spent(ctx: Context) -> dict | None:
    totals = {k: v for k, v in (ctx.env.get("overhead_s") or {}).items() if n.finite(v)}
    total = totals.pop("total_s", sum(totals.values()))
    if not totals or not total:
        return None
    parts = sorted(((k, v / total) for k, v in totals.items() if v > 0), key=lambda kv: -kv[1])
    return {"minutes": total / 60, "parts": parts[:3], "gpu": ctx.gpu, "figure": "overhead" in ctx.drawn}


def blocks(ctx: Context) -> list:
    """The method section: model and data, timing, intervals, costs, time spent (the grid's table is the
    appendix's first: appendix.py sections)."""
    out = [Para(Text("method", "model_and_data", {"model": model(ctx), "data": data_facts(ctx)})),
           Para(Text("method", "timing", {"gpu": ctx.gpu, "autotune": ctx.env.get("autotune_search"),
                                          "launcher": launcher(ctx)})),
           Para(Text("method", "intervals", intervals())), Para(Text("method", "costs", costs(ctx)))]
    traced = (ctx.env.get("compile_stages") or {}).get("trace")
    if traced:  # what the stages' accounting and the kept traces cost (aggregate/stages.py trace_cost)
        out.append(Para(Text("method", "stage_cost", {"c": traced})))
    spent = time_spent(ctx)
    out.append(Para(Text("method", "time_spent", {"spent": spent, "gpu": ctx.gpu})))
    if spent and spent["figure"]:
        parts = ctx.drawn["overhead"].get("parts") or []  # the bars drawn: the caption glosses those names don't explain
        out.append(Figure("overhead", Text("method", "overhead_caption", {"parts": parts}), f"{ctx.figures}/overhead"))
    return out


# --- Setup: the conditions the numbers were measured under ------------------------------------------------------
TIMED_RUN = re.compile(r"timed_run=(\d+)")


def concurrency(ctx: Context) -> dict:
    """How many timed runs went at once (the calls' `--resources timed_run=N`) and whether the check of what
    that costs ran (checks/concurrency.json), was configured but is missing, or was not configured."""
    at_once = [int(m[1]) for c in ctx.calls for m in TIMED_RUN.finditer(" ".join(c.get("command") or []))]
    return {"at_once": max(at_once) if at_once else None, "check": check_state(ctx, "concurrency")}


def launcher(ctx: Context) -> dict:
    """Whether the runs were forked by the warm launcher (measure/process/launch.py; environment.json `launcher`) and the
    state of the check comparing such a process with a fresh one (checks/launcher.json; check_state)."""
    return {"forked": ctx.env.get("launcher") == "warm", "check": check_state(ctx, "launcher")}


def check_state(ctx: Context, name: str) -> str:
    """Whether a method check ran (checks/<name>.json), did not apply, was configured but is missing, or was not
    configured."""
    check = ctx.checks.get(name) or {}
    configured = name in (ctx.config.get("checks") or {}).get(ctx.device, [])
    return ("ran" if check.get("applicable") else "not-applicable" if check else
            "missing" if configured else "not-configured")


def calls(ctx: Context) -> dict:
    """The calls that ran the study, as logged: how many, how many a time limit stopped (the session saw the stop
    signal, or the call ran under `timeout` and has its exit status 124); the call the paper is made in where it
    is not logged yet (`in_progress`); and the grid's runs against the records made."""
    planned = len(grid.expand(ctx.grids))
    stop = [bool(c.get("stopped_by")) or (c.get("exit_status") == 124 and "timeout" in (c.get("command") or [])[:1])
            for c in ctx.calls]
    stopped = sum(stop)
    failed = sum(1 for c, s in zip(ctx.calls, stop, strict=True) if not s and c.get("exit_status") != 0)
    return {"n": len(ctx.calls), "stopped": stopped, "failed": failed, "planned": planned,
            "made": int(ctx.env.get("n_records") or 0), "in_progress": ctx.in_progress}


def commits(ctx: Context) -> dict:
    per = ctx.env.get("records_per_commit") or {}
    return {"commits": [(c[:12], k) for c, k in per.items()], "dirty": ctx.env.get("dirty_records"),
            "mixed": ctx.env.get("mixed_configurations"), "records": int(ctx.env.get("n_records") or 0)}


def host(ctx: Context) -> dict:
    e = ctx.env
    versions = [(name, value(e[k])) for k, name in (("torch", "torch"), ("triton", "Triton"), ("cuda", "CUDA"),
                                                     ("driver", "driver"), ("python", "Python"))
                if e.get(k) not in (None, "None", [], "")]
    return {"device": ctx.device_name, "gpu": ctx.gpu, "cpu": value(e.get("cpu_model")),
            "cores": value(e.get("cpu_cores")), "per_job": value(e.get("cpu_affinity")) if e.get("cpu_affinity") else None,
            "versions": versions, "hosts": sorted({plain(c.get("hostname")) for c in ctx.calls if c.get("hostname")})}


def matmul(ctx: Context) -> dict:
    """The float32 matmul setting each precision's runs recorded ('highest': TF32 off), where recorded."""
    per = ctx.env.get("float32_matmul_precision") or {}
    return {"per": [(p, ", ".join(v)) for p, v in per.items()], "fp32": per.get("fp32")}


def setup(ctx: Context) -> list:
    """The Setup section's paragraph and the note on what carries to another host."""
    data = {"host": host(ctx), "concurrency": concurrency(ctx), "matmul": matmul(ctx), "calls": calls(ctx),
            "commits": commits(ctx), "recorded_calls": bool(ctx.calls), "env_keys": record.ENV_KEYS}
    return [Para(Text("setup", "conditions", data)), Para(Text("setup", "provenance", data)),
            Para(Text("setup", "disturbance", disturbed_runs(ctx))), Para(Text("setup", "carries", carries(ctx)))]


def compile_phase(ctx: Context) -> dict:
    """Where the cold compiles come from: the compile phase's records (summary.py compile_phase: how many, how many
    at once on how many cores, which ran alone), the configured count per configuration, and the compile-concurrency
    check's factor where it ran; or, for a study made before the compile phase, its first runs."""
    n_cold = ((ctx.config.get("compile_phase") or {}).get(ctx.device) or {}).get("n_cold")
    decided = (ctx.decisions.get("checks") or {}).get("compile_concurrency")
    return {"p": ctx.env.get("compile_phase") or {}, "n_cold": n_cold, "gpu": ctx.gpu,
            "check": {"iv": n.decided_interval(decided["interval"]), "verdict": decided["verdict"]} if decided else None}


def carries(ctx: Context) -> dict:
    """Which speedups may carry to another machine with the same device: those of compiled static configurations
    (main precision; the scopes of the best-step table) whose timed step and eager's in the cell are both within HOST_BOUND of their device-busy
    time (summary.py `host_bound`); where either is host-bound the speedup depends on the host's CPU too."""
    s = vocab.usable(ctx.summary[(ctx.summary.shape_regime == "static") & (ctx.summary.precision == ctx.precision)
                                 & ctx.summary.compile_scope.isin(("module", "fused-adamw", "step-graph"))])
    s = s.dropna(subset=["host_ratio"]) if "host_ratio" in s else s.iloc[:0]  # the rows of the profile table
    eager = {int(r.batch_size): bool(r.host_bound) for r in s[(s.compile_mode == "eager")
                                                               & (s.compile_scope == "module")].itertuples()}
    rows = [r for _, r in ordered(s[s.compile_mode != "eager"], "batch_size").iterrows() if int(r.batch_size) in eager]
    bound = [config(r) for r in rows if r.host_bound or eager[int(r.batch_size)]]
    free = [config(r) for r in rows if not (r.host_bound or eager[int(r.batch_size)])]
    own = bool(rows) and all(r.host_bound and eager[int(r.batch_size)] for r in rows)  # every step itself host-bound
    return {"gpu": ctx.gpu, "bound": bound, "free": free, "limit": HOST_BOUND, "own": own, "pool": pool_words(ctx)}


def pool_words(ctx: Context) -> dict | None:
    """This study in the pool of its GPU kind (ctx.pool, aggregate/compare/pool.py): the studies pooled, where its static
    configurations of the main precision fall in the prediction interval for a new host, and which the pool
    finds faster than eager on the kind (its prediction clears eager's A/A band) or not shown so; None without."""
    if not ctx.pool or not ctx.gpu:
        return None
    def named(rows: list[dict]) -> list[tuple[dict, dict]]:  # this study's static cells of the main precision
        keys = [({"mode": r["compile_mode"], "scope": r["compile_scope"], "regime": r["shape_regime"],
                  "precision": r["precision"], "batch": int(r["batch_size"])}, r) for r in rows]
        return [(ctx.named(k), r) for k, r in keys if ctx.has(k) and k["regime"] == "static"
                and k["precision"] == ctx.precision and (k["mode"] == "eager" or k["scope"] in vocab.TRAINING_SCOPES)]

    placed, kind = named(ctx.pool["rows"]), [(c, r) for c, r in named(ctx.pool["pooled"]) if c["mode"] != "eager"]
    return {"kind": ctx.pool["kind"], "k": len(ctx.pool["studies"]), "studies": ctx.pool["studies"],
            "configs": len(placed), "places": {p: sum(r["place"] == p for _, r in placed) for p in ("inside", "above", "below")},
            "faster": [c for c, r in kind if r["verdict"] == "faster"],
            "held": [c for c, r in kind if r["verdict"] == "within eager's band"]}


def disturbed_runs(ctx: Context) -> dict:
    """Runs redone after other work disturbed them, by reason, and those that stayed disturbed (summary.py
    disturbance_counts), the configured limits, and the configurations that get no verdict for it."""
    counts = ctx.env.get("disturbance") or {"recorded": 0, "records": int(ctx.env.get("n_records") or 0)}
    return {"d": {"redone_by": {}, "stayed_disturbed": 0} | counts, "gpu": ctx.gpu,
            "limits": asdict(disturbance.Limits.of(ctx.config.get("disturbance"))),
            "withheld": int((ctx.summary.get("verdict") == "disturbed").sum())}
