"""The report model: every sentence's numbers and every table's rows of the paper, formatted once, here.

    rep = report.build(summary, parity, claims, environment, facts, config, device, checks, "figures")
    paper.render(rep, "md")   # or "tex": the templates only place what this module wrote

`summary` is summary.csv (one row per configuration, speedup intervals with their method), `claims` the
claims table (claims.py), `checks` the method checks ({"timer": rows, "drift": rows, "concurrency": its JSON}).
Sentences use two marks only: `code` spans and ⟦tab:key⟧ / ⟦fig:key⟧ references, resolved per format by
paper.py; strings that come from data pass through `plain` first so they cannot make marks. Main-text sections
are here, appendix sections in appendix.py, the abstract and conclusions in findings.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from compile_study.aggregate import numbers as n
from compile_study.core import vocab
from compile_study.report import appendix, conclusions, findings, method
from compile_study.report.document import Column, Figure, Items, Para, Report, Section, Table, plain


def label(r) -> str:
    return f"{r['compile_mode']}, batch {int(r['batch_size'])}, {r['precision']}"


def failed_cell(r) -> str:
    return f"{vocab.failure_label(r['status'])} at batch {int(r['batch_size'])}"


def compiled(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.compile_mode != "eager"]


# --- main-text tables ---------------------------------------------------------------------------------------
def modes_table(summary: pd.DataFrame) -> Table:
    """Static shapes, the module compiled: step time, speedup with its interval, verdict, compile cost, MFU."""
    rows = []
    h = vocab.headline(summary)
    h = h.assign(_m=h.compile_mode.map(vocab.COMPILE_MODES.index)).sort_values(["precision", "batch_size", "_m"])
    for _, r in h.iterrows():
        ok, comp = r["status"] in vocab.USABLE_STATUSES, r["compile_mode"] != "eager"
        verdict = (f"A/A band [{n.fixed(r['aa_low'])}, {n.fixed(r['aa_high'])}]" if not comp
                   else r["verdict"] if ok else "—")
        rows.append([r["precision"], str(int(r["batch_size"])), r["compile_mode"],
                     n.ms(r["steady_step_ms"]) if ok else failed_cell(r),
                     n.row_interval(r) if ok and comp else n.DASH, verdict,
                     n.seconds(r["cold_compile_s"]) if ok and comp else n.DASH,
                     n.break_even(r["break_even_steps"], r["batch_size"]) if ok and comp else n.DASH,
                     n.percent(r["mfu"]) if ok else n.DASH])
    cols = [Column("precision"), Column("batch", "r", 0.6), Column("mode", weight=1.5), Column("step (ms)", "r", 0.8),
            Column("speedup over eager [interval] (method)", "r", 2.6), Column("verdict", weight=1.7),
            Column("cold compile", "r", 0.9), Column("break-even (epochs of 120,000 rows)", "r", 1.8),
            Column("MFU", "r", 0.7)]
    caption = ("Static shapes, `torch.compile(model)`: median step, speedup over the in-process eager reference, "
               "verdict against the A/A band of its cell, cold compile time, break-even and MFU.")
    return Table("modes", caption, cols, rows)


def shapes_table(summary: pd.DataFrame) -> Table | None:
    """Every regime at the batch sizes where more than static shapes ran, on the common yardstick."""
    sizes = set(summary[summary.shape_regime != "static"].batch_size)
    sel = summary[summary.batch_size.isin(sizes) & (summary.compile_scope == "module")]
    if sel.empty:
        return None
    sel = sel.assign(_m=sel.compile_mode.map(vocab.COMPILE_MODES.index)).sort_values(["batch_size", "_m", "shape_regime"])
    rows = []
    for _, r in sel.iterrows():
        ok, comp = r["status"] in vocab.USABLE_STATUSES, r["compile_mode"] != "eager"
        limit = ("hit" if bool(r.get("recompile_limit_hit")) else "no") if comp and ok else n.DASH
        rows.append([str(int(r["batch_size"])), r["compile_mode"], r["shape_regime"],
                     n.sig(r["real_tokens_per_s"]) if ok else failed_cell(r),
                     n.row_interval(r, "gain") if ok else n.DASH,
                     n.count(r["graphs_compiled"]) if comp and ok else n.DASH, limit,
                     n.percent(r["padding_fraction"]) if ok else n.DASH,
                     n.seconds(r["cold_compile_s"]) if comp and ok else n.DASH])
    cols = [Column("batch", "r", 0.6), Column("mode", weight=1.4), Column("shapes", weight=1.8),
            Column("real tokens/s", "r", 1.0), Column("vs eager static [interval] (method)", "r", 2.4),
            Column("graphs", "r", 0.6), Column("recompile limit", weight=0.8), Column("padding", "r", 0.8),
            Column("cold compile", "r", 0.9)]
    yard = ("the median of eager's static runs at that batch size, across processes" if
            (sel.get("gain_yardstick", pd.Series(dtype=str)) == "eager static runs").any() else "eager in the same process")
    caption = ("Shape regimes: real (non-pad) tokens/s, and its ratio to eager on statically padded batches "
               f"({yard}; static rows: their speedup), one yardstick for every regime: padding saved and "
               "compilation together.")
    return Table("shapes", caption, cols, rows)


def best_step_table(summary: pd.DataFrame) -> Table | None:
    """Per batch size: eager, each compiled mode, the whole-step graph, with the profiler's host/device split."""
    static = vocab.usable(summary[(summary.shape_regime == "static") & summary.profile_device_busy_ms_per_step.notna()])
    p = findings.main_precision(summary)
    static = static[(static.precision == p) & static.compile_scope.isin(("module", "fused-adamw", "step-graph"))]
    if static.empty:
        return None
    order = {s: i for i, s in enumerate(("module", "fused-adamw", "step-graph"))}
    static = static.assign(_m=static.compile_mode.map(vocab.COMPILE_MODES.index),
                           _s=static.compile_scope.map(order)).sort_values(["batch_size", "_s", "_m"])
    rows = []
    for _, r in static.iterrows():
        what = "eager" if r["compile_mode"] == "eager" else r["compile_mode"]
        what += "" if r["compile_scope"] == "module" else f" ({r['compile_scope']})"
        floor = r["steady_step_ms"] / r["profile_device_busy_ms_per_step"]
        rows.append([str(int(r["batch_size"])), what, n.ms(r["steady_step_ms"]),
                     n.times(r["steady_step_ms"] and r["reference_step_ms"] / r["steady_step_ms"]),
                     n.ms(r["profile_cpu_ms_per_step"]), n.ms(r["profile_device_busy_ms_per_step"]),
                     n.percent(r["profile_idle_fraction"], 2), n.times(floor), n.count(r["profile_kernels_per_step"])])
    cols = [Column("batch", "r", 0.6), Column("what runs", weight=2.2), Column("step (ms)", "r"),
            Column("vs eager", "r", 0.8), Column("host CPU (ms/step)", "r"), Column("device busy (ms/step)", "r"),
            Column("device idle", "r", 0.8), Column("step / device busy", "r"), Column("kernels / step", "r")]
    caption = (f"How far each step is from its device-busy floor ({p}, static shapes; the profiler's numbers, "
               "taken after the timed block). *step / device busy* = 1.00× would mean no host time is exposed.")
    return Table("beststep", caption.replace("*", ""), cols, rows)


def claims_table(claims: pd.DataFrame | None) -> Table | None:
    if claims is None or claims.empty:
        return None
    rows = [[plain(c.claim), plain(c.verdict), plain(c.evidence)] for c in claims.itertuples()]
    cols = [Column("claim", weight=2.0), Column("verdict", weight=1.2), Column("evidence", weight=5.0)]
    return Table("claims", "Common claims about `torch.compile`, each judged by the rule written beside it in "
                 "`compile_study/aggregate/claims.py`.", cols, rows)


def _number(sections: list[Section], numbers: dict[str, int]) -> None:
    counters = {"table": 0, "figure": 0}
    for s in sections:
        for b in s.blocks:
            if b.kind in counters:
                counters[b.kind] += 1
                b.number = counters[b.kind]
                numbers[f"{'tab' if b.kind == 'table' else 'fig'}:{b.key}"] = b.number


def main_sections(ctx: findings.Context, summary: pd.DataFrame) -> list[Section]:
    """The main text: method, the three questions, the best step, the claims, the conclusions."""
    def fig(key, caption):
        return Figure(key, caption, f"{ctx.figures}/{key}")

    def paras(*texts):
        return [Para(t) for t in texts if t]

    has = {c: summary[c].notna().any() if c in summary else False
           for c in ("achieved_tflops", "profile_kernels_per_step", "break_even_steps")}
    shapes, best, claims = shapes_table(summary), best_step_table(summary), claims_table(ctx.claims)
    overhead = any(n.finite(v) for v in (ctx.env.get("overhead_s") or {}).values())
    out = [Section("Question and method", method.blocks(ctx) + ([fig("overhead", "Where the study's time went, summed "
                                                                     "over its runs.")] if overhead else []))]
    modes = paras(findings.modes_sentence(ctx), findings.precision_sentence(ctx), findings.verdict_sentence(ctx))
    modes += [modes_table(summary), fig("speedup", "Speedup over eager vs batch size, static shapes, with each "
                                                   "configuration's interval; grey: the A/A band.")]
    if has["achieved_tflops"]:
        modes += paras(findings.mfu_sentence(ctx))
        modes.append(fig("roofline", "Achieved matmul TFLOP/s vs batch size per mode and shape regime; the line is "
                                     "the measured peak of the precision (roofline)."))
    out.append(Section("Does torch.compile speed up training?", modes))
    if shapes is not None:
        text = findings.shapes_sentence(ctx)
        out.append(Section("Static, dynamic and bucketed shapes",
                           paras(text) + [shapes, fig("regimes", "Real (non-pad) tokens/s by shape regime and mode, "
                                                                 "with eager on static batches as the baseline.")]))
    else:
        out.append(Section("Static, dynamic and bucketed shapes", paras(
            "Only static shapes are in this study's grid: dynamic and bucketed shapes were not measured.")))
    if has["break_even_steps"]:
        out.append(Section("When compilation pays for itself", paras(findings.payback_sentence(ctx)) + [
            fig("breakeven", "Cold compile time vs the steps it takes to earn it back, per configuration.")]))
    step = paras(conclusions.best_step_text(ctx, best)) + ([best] if best is not None else [])
    if has["profile_kernels_per_step"]:
        step.append(fig("kernels", "Kernels launched per step and device idle share, eager vs compiled."))
    out.append(Section("How far from the best step", step))
    if claims is not None:
        out.append(Section("Common claims, checked", paras(findings.claims_sentence(ctx)) + [claims]))
    advice = conclusions.items(ctx, {"scopes"} if (summary.compile_scope != "module").any() else set())
    out.append(Section("Conclusions and recommendations", [Items(advice)] if advice else paras(
        "No compiled configuration has numbers in this study, so there is nothing to recommend.")))
    return out


def build(summary: pd.DataFrame, parity: pd.DataFrame, claims: pd.DataFrame | None, environment: dict, facts: dict,
          config: dict, device: str, checks: dict, figure_dir_rel: str) -> Report:
    """The whole paper as formatted strings and rows (see the module docstring)."""
    summary = summary.copy()  # one block of memory: the selections below are many
    ctx = findings.Context(summary, claims, environment, facts, config, device, figure_dir_rel)
    main = main_sections(ctx, summary)
    extra = appendix.sections(summary, parity, environment, config, device, checks)
    for i, s in enumerate(extra):
        s.prefix = f"Appendix {chr(ord('A') + i)}"
    numbers: dict[str, int] = {}
    _number(main + extra, numbers)
    return Report(title="What torch.compile does to training a small transformer text classifier",
                  byline=findings.byline(ctx), notices=findings.notices(ctx), abstract=findings.abstract(ctx),
                  main=main, appendix=extra, numbers=numbers)


def write(inputs: dict, config: dict, device: str, md_out: str | Path, tex_out: str | Path) -> None:
    """The study directory's files (layout.py) -> paper.md and paper.tex (figure paths relative to each paper).

    inputs: summary, parity, claims, environment, facts, figures, and the method checks present
    (timer_check, reference_drift, concurrency, launcher)."""
    from compile_study.core.io import write_text_atomic
    from compile_study.report import paper

    def check(name: str) -> dict:
        path = inputs.get(name)
        return json.loads(Path(path).read_text()) if path and Path(path).is_file() else {}

    claims = pd.read_csv(inputs["claims"]) if inputs.get("claims") else None
    summary, parity = pd.read_csv(inputs["summary"]), pd.read_csv(inputs["parity"])
    env = json.loads(Path(inputs["environment"]).read_text())
    facts = json.loads(Path(inputs["facts"]).read_text())
    checks = {key: check(name) if name in ("concurrency", "launcher") else check(name).get("results", [])
              for name, key in appendix.CHECK_KEYS.items()}
    for fmt, dest in (("md", md_out), ("tex", tex_out)):
        figs = Path(os.path.relpath(inputs["figures"], os.path.dirname(os.path.abspath(dest)))).as_posix()
        rep = build(summary, parity, claims, env, facts, config, device, checks, figs)
        write_text_atomic(dest, paper.render(rep, fmt))
