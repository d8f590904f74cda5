"""Conclusions and recommendations ("for this model on this device, do X") as codes and numbers, each by a
stated rule over intervals (decided in aggregate/decide.py, read by findings.py) and traced to the table it rests on; the data of
"How far from the best step"; the paper's byline and notices. conclusions.j2 and beststep.j2 word them.
"""

from __future__ import annotations

import pandas as pd

from compile_study.aggregate.summary import HOST_BOUND
from compile_study.core import vocab
from compile_study.core.intervals import MIN_N
from compile_study.report import numbers as n
from compile_study.report.advice import answers, payback
from compile_study.report.document import Text, plain
from compile_study.report.findings import (
    Context,
    compiled,
    config,
    data_facts,
    per_batch,
    precisions,
    shape_findings,
    static_rows,
    value,
)
from compile_study.report.paper import words


def _profiled(ctx: Context) -> pd.DataFrame:
    s = vocab.usable(ctx.summary[(ctx.summary.shape_regime == "static") & (ctx.summary.precision == ctx.precision)])
    return s.dropna(subset=["profile_device_busy_ms_per_step", "profile_wall_ms_per_step"])


def _profile(r) -> dict:
    return config(r) | {"wall": r.profile_wall_ms_per_step, "busy": r.profile_device_busy_ms_per_step,
                        "idle": r.profile_idle_fraction, "host": r.profile_cpu_ms_per_step, "gap": r.host_ratio}


def best_step(ctx: Context) -> dict:
    """At the smallest and largest profiled batch: eager and the best module-scope configuration by the
    comparison rule (first of its top), each from its own profiler window; the whole step compiled; the whole-step
    graph's speedup split into the graph's and the compiler's (graph_split)."""
    s = _profiled(ctx)
    tops = {r["batch"]: r["top"] for r in ctx.rankings("speedup-module")}
    ends = []
    for b in sorted({s.batch_size.min(), s.batch_size.max()}) if len(s) else []:
        g = s[(s.batch_size == b) & (s.compile_scope == "module")]
        eager, top = g[g.compile_mode == "eager"], tops.get(int(b))
        best = compiled(g)[compiled(g).compile_mode == top[0]["mode"]] if top else g.iloc[:0]
        if len(eager) and len(best):
            ends.append({"batch": int(b), "eager": _profile(eager.iloc[0]), "best": _profile(best.iloc[0])})
    return {"ends": ends, "graph": bool((ctx.summary.compile_scope == "step-graph").any()), "step": step_scope(ctx),
            "split": graph_split(ctx)}


def step_scope(ctx: Context) -> list[dict]:
    """The whole step compiled (scope `step`) against the module in the same mode: host time, graphs, breaks and
    what compiled autograd traced, from the records' evidence."""
    s = vocab.usable(ctx.summary[(ctx.summary.shape_regime == "static") & (ctx.summary.precision == ctx.precision)])
    out = []
    for _, r in s[s.compile_scope == "step"].sort_values("batch_size").iterrows():
        module = s[(s.compile_scope == "module") & (s.batch_size == r.batch_size) & (s.compile_mode == r.compile_mode)]
        reasons = r.graph_break_reasons if isinstance(r.graph_break_reasons, str) else ""
        out.append(config(r) | {
            "host": r.profile_cpu_ms_per_step,
            "module_host": module.iloc[0].profile_cpu_ms_per_step if len(module) else None,
            "graphs": r.graphs_compiled, "breaks": r.graph_breaks,
            "reasons": [plain(p.strip()[:80]) for p in reasons.split(";")[:2] if p.strip()],
            "traced": r.get("compiled_autograd_captures"), "steps": r.subject_steps})
    return out


# --- the recommendations ----------------------------------------------------------------------------------------
def mode_advice(ctx: Context) -> Text | None:
    """One answer per batch size (report/advice.py answers, aggregate/advice.py): its fastest and, among those not shown
    slower than it, the cheapest to pay back by each way; "do not compile" where every configuration with MIN_N
    processes or more is slower."""
    if not [b for b in per_batch(ctx) if b["top"]]:
        return None
    decided = compiled(static_rows(ctx))
    decided = decided[decided.speedup_n >= MIN_N]
    verdicts = set(decided.verdict)
    found = [a | {"fastest": _named(ctx, a["fastest"]), "peers": [_named(ctx, c) for c in a["peers"]],
                  "cheapest": {w: _named(ctx, c) for w, c in a["cheapest"].items()}} for a in answers(ctx)]
    return Text("conclusions", "modes", {"answers": found, "precision": ctx.precision, "device": ctx.device_name,
                                         "kind": (ctx.pool or {}).get("kind"), "all_slower": verdicts == {"slower"},
                                         "any_faster": "faster" in verdicts,
                                         "pooled": len((ctx.pool or {}).get("studies") or [])})


def _named(ctx: Context, c: dict | None) -> dict | None:
    """An answer's configuration as the templates name it, with the answer's speedup and break-even steps."""
    if c is None:
        return None
    k = {f: c[f] for f in ("mode", "scope", "regime", "precision", "batch")}
    return ctx.named(k) | {f: c[f] for f in ("speedup", "steps") if f in c}


def precision_advice(ctx: Context) -> Text | None:
    pairs = [p for p in precisions(ctx) if p["code"] == "higher" and p["claim"]]
    return Text("conclusions", "precision", {"p": pairs[-1]}) if pairs else None


PADS_LESS = ("bucketed", "packed")  # regimes that pad less than static shapes by design


def shapes_advice(ctx: Context) -> Text | None:
    """Per batch size with several regimes: a regime is advised only when it is the single top of the ranking
    by gain. Static shapes on top say "padding to max_len costs nothing" only where the evidence is in the grid:
    a compiled bucketed or packed configuration, padding less, measurably below them (`pads_less`)."""
    found = []
    for f in shape_findings(ctx):
        if len(f["top"]) == 1 and f["below"] and f["claim"] and len({c["regime"] for c in f["top"] + f["below"]}) > 1:
            top = f["top"][0]
            less = [c for c in f["below"] if vocab.Regime.parse(c["regime"]).kind in PADS_LESS
                    and n.finite(c["padding"]) and n.finite(top["padding"]) and c["padding"] < top["padding"]]
            found.append(f | {"pads_less": less})
    return Text("conclusions", "shapes", {"found": found}) if found else None


def payback_advice(ctx: Context) -> Text | None:
    """Per configuration recommended above (tops with MIN_N processes that are faster than eager): compile for runs
    longer than its own break-even, with its interval; never a maximum over configurations."""
    p = payback(ctx)
    chosen = [c for c in (p or {}).get("rows", []) if c["recommended"] and c["code"] == "pays-after"]
    return Text("conclusions", "payback", {"chosen": chosen}) if chosen else None


def slower_advice(ctx: Context) -> Text | None:
    """Configurations measurably slower than eager (any scope, static shapes, main precision): their claims."""
    claims = [c for c in ctx.stated("verdict") if c["stated"] == "slower" and c["cells"][0]["precision"] == ctx.precision]
    slow = [ctx.named(c["cells"][0]) for c in claims]
    return Text("conclusions", "slower", {"slow": slow, "claims": claims}) if slow else None


def host_advice(ctx: Context) -> Text | None:
    """At the smallest profiled batch, the best module-scope configuration's profiled step over its device-busy
    time (one process's profiler window); above HOST_BOUND the host still sets the pace."""
    ends = best_step(ctx)["ends"]
    if not ends or not ctx.gpu:
        return None
    best = ends[0]["best"]
    graph = _profiled(ctx)
    graph = graph[(graph.compile_scope == "step-graph") & (graph.batch_size == best["batch"])]
    return Text("conclusions", "host", {"c": best, "bound": HOST_BOUND,
                                        "graph": _profile(graph.iloc[0]) if len(graph) else None})


def graph_split(ctx: Context) -> dict:
    """The step graph's speedup split into the CUDA graph's share and the compiler's (aggregate/decide.py
    graph_split), main precision (`split`); the step graph's configurations without the eager control, whose split
    is not yet measured (`missing`). Both empty where no step graph ran (or decisions.json predates the split)."""
    decided = ctx.decisions.get("graph_split") or {"split": [], "missing": []}
    split = [{"c": ctx.named(d["step_graph"]), "control": ctx.named(d["control"]),
              **{part: n.decided_interval(d[part]) for part in ("total", "graph", "compiler")}}
             for d in decided["split"] if d["step_graph"]["precision"] == ctx.precision]
    missing = [ctx.named(k) for k in decided["missing"] if k["precision"] == ctx.precision]
    return {"split": split, "missing": missing}


def evidence_advice(ctx: Context) -> Text | None:
    c = compiled(ctx.head)
    few = int((c.speedup_n.fillna(0) < MIN_N).sum())
    return Text("conclusions", "evidence", {"few": few, "total": len(c)}) if few else None


def items(ctx: Context) -> list[Text]:
    rules = (mode_advice, precision_advice, shapes_advice, payback_advice, slower_advice, host_advice,
             evidence_advice)
    return [t for t in (rule(ctx) for rule in rules) if t is not None]


# --- the head of the paper ---------------------------------------------------------------------------------------
def byline(ctx: Context) -> str:
    e = ctx.env
    versions = [(name, value(e[k])) for k, name in (("triton", "triton"), ("cuda", "CUDA"))
                if e.get(k) not in (None, "None", [], "")]
    return words(Text("head", "byline", {"gpu": ctx.gpu, "device": ctx.device_name, "torch": value(e.get("torch")),
                                         "versions": versions, "data": plain(ctx.facts["description"])}))


def notices(ctx: Context) -> list[Text]:
    capped = [(plain(g["name"]), g["max_epoch_steps"]) for g in ctx.grids if g.get("max_epoch_steps")]
    truncated = ctx.facts["splits"]["train"].get("truncated_fraction")
    data = {"gpu": ctx.gpu, "cores": value(ctx.env.get("cpu_cores")), "capped": capped, "data": data_facts(ctx),
            "warnings": [plain(w) for w in ctx.facts.get("warnings") or []],
            "truncated": truncated if n.finite(truncated) and truncated > 0 else None, "max_len": ctx.facts["max_len"]}
    return [Text("head", name, data) for name in ("device", "synthetic", "data")
            if name != "device" or not ctx.gpu
            if name != "synthetic" or data["data"]["synthetic"]
            if name != "data" or data["warnings"] or data["truncated"]]
