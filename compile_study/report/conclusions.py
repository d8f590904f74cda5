"""Conclusions and recommendations ("for this model on this device, do X"), each computed by a rule from the
summary and traced to the table it rests on; and the text of "How far from the best step".
"""

from __future__ import annotations

import pandas as pd

from compile_study.aggregate import numbers as n
from compile_study.core import vocab
from compile_study.core.vocab import Regime
from compile_study.report.findings import Context, _join, _value, compiled, shape_rows


def _best_per_batch(h: pd.DataFrame) -> pd.DataFrame:
    """Per batch size, the compiled mode with the highest speedup."""
    c = compiled(h).dropna(subset=["speedup"])
    return c.loc[c.groupby("batch_size").speedup.idxmax()].sort_values("batch_size")


def mode_advice(ctx: Context) -> str | None:
    """Rule: the mode with the highest speedup at each batch size (main precision); one mode if it wins at all;
    no compilation where even that mode is measurably slower than eager everywhere."""
    best = _best_per_batch(ctx.head[ctx.head.precision == ctx.precision])
    if best.empty:
        return None
    slower = best[best.verdict == "slower"]
    if len(slower) == len(best):  # even the best mode's interval lies below the A/A band at every batch size
        speeds = _join([f"{n.times(r.speedup)} at {int(r.batch_size)}" for r in best.itertuples()])
        return (f"Do not compile: in {ctx.precision} even the fastest compiled mode is measurably slower than eager "
                f"at every batch size measured ({speeds}; ⟦tab:modes⟧).")
    if best.compile_mode.nunique() == 1:
        mode = best.compile_mode.iloc[0]
        return (f"Compile with `mode=\"{mode}\"`: in {ctx.precision} it is the fastest mode at every batch size "
                f"measured ({_join([f'{n.times(r.speedup)} at {int(r.batch_size)}' for r in best.itertuples()])}; "
                "⟦tab:modes⟧).")
    parts = [f"`{r.compile_mode}` at batch {int(r.batch_size)} ({n.times(r.speedup)})" for r in best.itertuples()]
    return f"The fastest mode depends on the batch size in {ctx.precision}: {_join(parts)} (⟦tab:modes⟧)."


def precision_advice(ctx: Context) -> str | None:
    """Rule: at the largest batch size measured in every precision, the precision with the shortest step."""
    h = compiled(ctx.head)
    if h.precision.nunique() < 2:
        return None
    per = h.groupby("batch_size").precision.nunique()
    b = per[per == per.max()].index.max()
    fastest = h[h.batch_size == b].groupby("precision").steady_step_ms.min().sort_values()
    steps = _join([f"{p} {n.ms(v)} ms" for p, v in fastest.items()])
    return (f"Train in {fastest.index[0]}: at batch {int(b)} the fastest compiled steps are {steps} (⟦tab:modes⟧).")


def shapes_advice(ctx: Context) -> str | None:
    """Rule: per batch size with several regimes, the regime with the most real tokens/s on the common yardstick."""
    out = []
    for b, g in shape_rows(ctx).items():
        g = g.assign(_g=g.gain_over_eager_static.fillna(g.speedup)).dropna(subset=["_g"])
        if g.empty:
            continue
        r = g.loc[g._g.idxmax()]
        kind = vocab.Regime.parse(r.shape_regime).kind
        advice = {"bucketed": "pad to a few bucket lengths", "packed": "pack sequences into full rows",
                  "static": "padding to max_len costs nothing here"}.get(kind, "pad each batch to its longest row")
        out.append(f"At batch {b}, {advice}: `{r.compile_mode}` on {r.shape_regime} gives {n.times(r._g)} eager's "
                   f"real tokens/s on static batches, the most measured (⟦tab:shapes⟧).")
    return " ".join(out) or None


def payback_advice(ctx: Context) -> str | None:
    """Rule: the recommended mode's longest finite break-even over batch sizes, in steps and epochs."""
    best = _best_per_batch(ctx.head[ctx.head.precision == ctx.precision])
    fin = best[best.break_even_steps.map(n.finite)]
    if fin.empty:
        return None
    r = fin.loc[fin.break_even_steps.idxmax()]
    return (f"Compile only for runs longer than {n.break_even(r.break_even_steps, r.batch_size)} at batch "
            f"{int(r.batch_size)} (the longest break-even of the fastest modes); shorter runs, such as smoke tests and "
            "small fine-tunes, finish sooner eager (⟦tab:modes⟧).")


def scope_advice(ctx: Context) -> str | None:
    """Rule: at each batch size with other scopes, is the module scope the fastest default-mode scope?"""
    s = vocab.usable(ctx.summary[(ctx.summary.shape_regime == "static") & (ctx.summary.compile_mode == "default")])
    sizes = sorted(set(s[~s.compile_scope.isin(("module",))].batch_size))
    if not sizes:
        return None
    b = sizes[0]
    other = s[(s.batch_size == b) & (s.compile_scope != "module")]
    g = s[(s.batch_size == b) & (s.precision == other.precision.iloc[0])].dropna(subset=["speedup"])
    parts = _join([f"{r.compile_scope} {n.times(r.speedup)}" for r in g.itertuples()])
    best = g.loc[g.speedup.idxmax()].compile_scope
    lead = ("Compile the module (`torch.compile(model)`)" if best == "module" else f"Compile the {best} scope")
    return f"{lead}: at batch {b} ({g.precision.iloc[0]}, default mode) the scopes give {parts} (⟦tab:scopes⟧)."


def best_step_text(ctx: Context, table) -> str:
    """Where the host still costs: eager and the fastest mode at the smallest and largest profiled batch."""
    graph = ctx.summary[ctx.summary.compile_scope == "step-graph"]
    tail = ("The whole-step CUDA graph (scope `step-graph`: compiled model, loss, backward and a fused capturable AdamW "
            "captured as one graph) was not measured in this study's grid." if graph.empty else
            "The `step-graph` rows capture compiled model, loss, backward and a fused capturable AdamW as one CUDA graph.")
    if table is None:
        return "No profiled run in this study's grid: the host/device split was not measured. " + tail
    s = vocab.usable(ctx.summary[(ctx.summary.shape_regime == "static") & (ctx.summary.precision == ctx.precision)
                                 & ctx.summary.profile_device_busy_ms_per_step.notna()])
    out = []
    for b in sorted({s.batch_size.min(), s.batch_size.max()}):
        g = s[(s.batch_size == b) & (s.compile_scope == "module")]
        eager, comp = g[g.compile_mode == "eager"], compiled(g)
        if eager.empty or comp.empty:
            continue
        e, c = eager.iloc[0], comp.loc[comp.steady_step_ms.idxmin()]
        out.append(f"At batch {int(b)}, eager's step takes {n.ms(e.steady_step_ms)} ms while the device is busy "
                   f"{n.ms(e.profile_device_busy_ms_per_step)} ms of it ({n.percent(e.profile_idle_fraction, 2)} idle); "
                   f"`{c.compile_mode}` takes {n.ms(c.steady_step_ms)} ms, "
                   f"{n.times(c.steady_step_ms / c.profile_device_busy_ms_per_step)} its device-busy time.")
    return " ".join(out + [tail, step_scope_text(ctx) or "", packing_text(ctx) or "",
                           "⟦tab:beststep⟧ lists every profiled configuration."])


def packing_text(ctx: Context) -> str | None:
    """Packed rows against padded ones in the same compile mode, across processes (medians of real tokens/s), and
    the graphs each regime compiled (1: no recompilation after the first graph)."""
    s = vocab.usable(ctx.summary[(ctx.summary.precision == ctx.precision) & (ctx.summary.compile_scope == "module")])
    kind = s.shape_regime.map(lambda r: Regime.parse(r).kind)
    out = []
    for (b, mode), g in s[kind == "packed"].groupby(["batch_size", "compile_mode"]):
        if mode == "eager":
            continue
        same = s[(s.batch_size == b) & (s.compile_mode == mode)]
        parts = [f"{n.times(g.real_tokens_per_s.iloc[0] / o.real_tokens_per_s)} {name} "
                 f"({n.count(o.graphs_compiled)})"
                 for name in ("static", "bucketed") for _, o in same[kind[same.index] == name].head(1).iterrows()]
        if parts:
            out.append(f"batch {int(b)}, `{mode}` packed ({n.count(g.graphs_compiled.iloc[0])}) {', '.join(parts)}")
    if not out:
        return None
    return ("Packing instead of padding, real tokens/s in the same mode (medians across processes; graphs "
            f"compiled per run in brackets): {'; '.join(out)} (⟦tab:shapes⟧).")


def step_scope_text(ctx: Context) -> str | None:
    """Why the whole step compiled (scope `step`) gains what it gains: its host time, graphs, breaks and what
    compiled autograd traced, against the module compiled in the same mode, from the records' evidence."""
    s = vocab.usable(ctx.summary[(ctx.summary.shape_regime == "static") & (ctx.summary.precision == ctx.precision)])
    out = []
    for _, r in s[s.compile_scope == "step"].sort_values("batch_size").iterrows():
        module = s[(s.compile_scope == "module") & (s.batch_size == r.batch_size) & (s.compile_mode == r.compile_mode)]
        host = f"host CPU {n.ms(r.profile_cpu_ms_per_step)} ms per step"
        if len(module) and n.finite(module.iloc[0].profile_cpu_ms_per_step):
            host += f" against {n.ms(module.iloc[0].profile_cpu_ms_per_step)} ms for the compiled module"
        traced = r.get("compiled_autograd_captures")
        autograd = (f"; compiled autograd traced backward {n.count(traced)} times in {n.count(r.subject_steps)} steps"
                    if n.finite(traced) else "")
        reasons = f" ({plain_reasons(r.graph_break_reasons)})" if isinstance(r.graph_break_reasons, str) else ""
        out.append(f"At batch {int(r.batch_size)} the whole step compiled (`{r.compile_mode}`, scope `step`) runs "
                   f"{n.times(r.speedup)} eager: {host}, {n.count(r.graphs_compiled)} graphs and "
                   f"{n.count(r.graph_breaks)} graph breaks{reasons}{autograd}.")
    return " ".join(out) or None


def plain_reasons(text: str, limit: int = 2) -> str:
    """The first graph-break reasons, shortened for a sentence."""
    return "; ".join(part.strip()[:80] for part in text.split(";")[:limit])


def host_advice(ctx: Context) -> str | None:
    """Rule: if the fastest compiled step at the smallest batch is > 1.25× its device-busy time, the host still costs."""
    s = vocab.usable(vocab.headline(ctx.summary))
    s = compiled(s[(s.precision == ctx.precision)]).dropna(subset=["profile_device_busy_ms_per_step"])
    if s.empty:
        return None
    g = s[s.batch_size == s.batch_size.min()]
    r = g.loc[g.steady_step_ms.idxmin()]
    gap = r.steady_step_ms / r.profile_device_busy_ms_per_step
    if gap <= 1.25:
        return (f"At batch {int(r.batch_size)} `{r.compile_mode}` is within {n.times(gap)} of its device-busy time: "
                "little host time is left to remove (⟦tab:beststep⟧).")
    graph = ctx.summary[ctx.summary.compile_scope == "step-graph"]
    what = ("the whole-step CUDA graph rows show how much of it a single graph removes" if len(graph)
            else "capturing the whole step in one CUDA graph is the next thing to measure")
    return (f"At small batches the host still sets the pace: `{r.compile_mode}` at batch {int(r.batch_size)} takes "
            f"{n.times(gap)} its device-busy time; {what} (⟦tab:beststep⟧).")


def evidence_advice(ctx: Context) -> str | None:
    c = compiled(ctx.head)
    few = c[c.speedup_n.fillna(0) < 3] if "speedup_n" in c else c.iloc[0:0]
    if few.empty:
        return None
    return (f"{len(few)} of {len(c)} compiled static-shape configurations rest on fewer than three processes and carry "
            "no verdict; rerun them with at least three repeats before relying on their digits (⟦tab:modes⟧).")


def items(ctx: Context, tables: dict) -> list[str]:
    rules = [mode_advice(ctx), precision_advice(ctx), shapes_advice(ctx), payback_advice(ctx),
             scope_advice(ctx) if "scopes" in tables else None, host_advice(ctx), evidence_advice(ctx)]
    device = _value(ctx.env.get("device_name"))
    return [f"For this model on {device}: {r[0].lower()}{r[1:]}" if i == 0 else r
            for i, r in enumerate(x for x in rules if x)]

