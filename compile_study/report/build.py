"""The report model: the paper's sections as blocks (sentences as template calls with their numbers, tables
as rows of formatted cells, figures), built once from the study's files.

    rep = build.build(summary, parity, claims, decisions, environment, facts, config, device, checks, "figures",
                      calls=[...], drawn=("speedup", ...))
    paper.render(rep, "md")   # or "tex"

`summary` is summary.csv (one row per configuration), `claims` claims.csv (codes and numbers), `decisions`
decisions.json (every ranking, comparison and method-check verdict: aggregate/decide.py), `checks` the
method checks ({"timer": rows, "drift": rows, "concurrency": its JSON}), `calls` calls.jsonl, `drawn` the
figures aggregate/figures/figures.py made (its index): only those are placed and cited. Every sentence is a Text
(document.py): a macro of paper/templates/sections/*.j2 and its data; findings.py, method.py, conclusions.py
and appendix.py compute that data.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from compile_study.aggregate.columns import WAYS
from compile_study.core import vocab
from compile_study.core.intervals import BREAK_EVEN_SIDE
from compile_study.measure.checks import spec as check_spec
from compile_study.report import advice, appendix, conclusions, findings, front, method, method_checks, stages
from compile_study.report import numbers as n
from compile_study.report.document import Column, Figure, Items, Para, Report, Section, Table, Text
from compile_study.report.findings import Context, config, ordered, regime_rows
from compile_study.report.paper import term, words


def failed_cell(r) -> str:
    return f"{vocab.failure_label(r['status'])} at batch {int(r['batch_size'])}"


# --- main-text tables ---------------------------------------------------------------------------------------
def modes_table(ctx: Context) -> Table:
    """Static shapes, the module compiled: step, speedup with its interval, verdict, MFU (cold compile and
    break-even: payback_table)."""
    rows = []
    for _, r in ordered(vocab.headline(ctx.summary), "precision", "batch_size").iterrows():
        ok, comp = r["status"] in vocab.USABLE_STATUSES, r["compile_mode"] != "eager"
        c = ok and comp
        verdict = f"A/A band [{n.fixed(r['aa_low'])}, {n.fixed(r['aa_high'])}]" if not comp else (
            term("verdict_cell", code=r["verdict"]) if ok else n.DASH)
        rows.append([r["precision"], str(int(r["batch_size"])), r["compile_mode"],
                     n.ms(r["steady_step_ms"]) if ok else failed_cell(r),
                     n.row_interval(r) if c else n.DASH, verdict, n.percent(r["mfu"]) if ok else n.DASH])
    cols = [Column("precision"), Column("batch", "r"), Column("mode"),
            Column("median step (ms)", "r"), Column("speedup [interval] (method)", "r"), Column("verdict"),
            Column("MFU", "r")]
    return Table("modes", Text("modes", "table_caption", {"rows": ctx.train_rows,
                                                         "payback": advice.payback(ctx) is not None}), cols, rows)


def gain_cell(r) -> str:
    """A gain with its interval, or why a row has none (it is the yardstick, or its cell has no eager static runs)."""
    if n.finite(r["gain_over_eager_static"]):
        return n.row_interval(r, "gain")
    return "yardstick" if r["gain_method"] == "the yardstick" else "none: no eager static runs"


def shapes_table(ctx: Context) -> Table | None:
    """Every regime at the batch sizes where more than static shapes ran, against eager on static batches."""
    sel = regime_rows(ctx)
    if sel.empty:
        return None
    rows = []
    for _, r in sel.iterrows():
        ok, comp = r["status"] in vocab.USABLE_STATUSES, r["compile_mode"] != "eager"
        limit = ("hit" if bool(r.get("recompile_limit_hit")) else "no") if comp and ok else n.DASH
        rows.append([str(int(r["batch_size"])), r["compile_mode"], r["shape_regime"],
                     n.sig(r["real_tokens_per_s"]) if ok else failed_cell(r),
                     gain_cell(r) if ok else n.DASH,
                     n.count(r["graphs_compiled"]) if comp and ok else n.DASH, limit,
                     n.percent(r["padding_fraction"]) if ok else n.DASH,
                     n.seconds(r["cold_start_s"]) if comp and ok else n.DASH])
    cols = [Column("batch", "r"), Column("mode"), Column("shapes"),
            Column("real tokens/s", "r"), Column("gain [interval] (method)", "r"),
            Column("graphs", "r"), Column("recompile limit"), Column("padding", "r"),
            Column("cold start", "r")]
    return Table("shapes", Text("shapes", "table_caption", {"precision": ctx.precision,
                                                          "payback": advice.payback(ctx) is not None}), cols, rows)


def best_step_table(ctx: Context) -> Table | None:
    """Per batch size: eager, each compiled mode, the whole-step graph: the profiler's wall and device-busy time
    of one process (repeat 0) and what follows from them alone."""
    s = vocab.usable(ctx.summary[(ctx.summary.shape_regime == "static") & (ctx.summary.precision == ctx.precision)
                                 & ctx.summary.compile_scope.isin(("module", "fused-adamw", "step-graph"))])
    s = s.dropna(subset=["profile_device_busy_ms_per_step", "profile_wall_ms_per_step"])
    if s.empty:
        return None
    rows = []
    for _, r in ordered(s, "batch_size").iterrows():
        rows.append([str(int(r["batch_size"])), term("mode", c=config(r), code=False), n.ms(r["steady_step_ms"]),
                     n.ms(r["profile_wall_ms_per_step"]), n.ms(r["profile_device_busy_ms_per_step"]),
                     n.percent(r["profile_idle_fraction"], 2), n.times(r["host_ratio"])])
    cols = [Column("batch", "r"), Column("what runs"), Column("median timed step (ms)", "r"),
            Column("profiled step (ms)", "r"), Column("device busy (ms/step)", "r"), Column("device idle", "r"),
            Column("timed step / device busy", "r")]
    return Table("beststep", Text("beststep", "table_caption", {"precision": ctx.precision}), cols, rows)


def claims_table(ctx: Context) -> Table | None:
    cs = findings.claims(ctx)
    if not cs:
        return None
    rows = [[words(Text("claims", "statement", {"id": c["id"]})), words(Text("claims", "verdict", {"code": c["verdict"]})),
             words(Text("claims", "evidence", {"id": c["id"], "ev": c["evidence"], "rows": ctx.train_rows}))]
            for c in cs]
    cols = [Column("claim"), Column("verdict"), Column("evidence")]
    return Table("claims", Text("claims", "table_caption"), cols, rows)


# --- sections ---------------------------------------------------------------------------------------------------
def _fig(ctx: Context, key: str, file: str, data: dict | None = None) -> list[Figure]:
    """The figure if aggregate/figures/figures.py made it (its caption macro is `<key>_caption` in `file`, called with
    `data` and what the figure's index says it drew)."""
    if key not in ctx.drawn:
        return []
    return [Figure(key, Text(file, f"{key}_caption", (data or {}) | ctx.drawn[key]), f"{ctx.figures}/{key}")]


def _para(file: str, macro: str, data: dict) -> Para:
    return Para(Text(file, macro, data))


def modes_section(ctx: Context) -> Section:
    figs = {"speedup": "speedup" in ctx.drawn}
    scopes = bool((ctx.summary.compile_scope != "module").any())  # appendix.scopes_table exists
    blocks = [_para("modes", "results", {"batches": findings.per_batch(ctx), "precision": ctx.precision,
                                         "beststep": best_step_table(ctx) is not None, "scopes": scopes,
                                         "figure": figs["speedup"], "trend": findings.batch_trend(ctx),
                                         "precisions": len(set(ctx.head.precision))}),
              _para("modes", "verdicts", {"v": findings.verdicts(ctx)})]
    timer, launcher = method_checks.timer_para(ctx), method_checks.decided_launcher(ctx)
    if timer or (launcher and launcher["verdict"] not in ("within-noise", None)):
        blocks.append(_para("modes", "checks", {"timer": timer.text.data["found"] if timer else [], "launcher": launcher}))
    if len(set(ctx.head.precision)) > 1:
        blocks.append(_para("modes", "precisions", {"pairs": findings.precisions(ctx)}))
    blocks += [modes_table(ctx), *_fig(ctx, "speedup", "modes")]
    return Section("Does torch.compile speed up training?", blocks)


def utilisation_section(ctx: Context) -> Section | None:
    """Model FLOP utilisation over every configuration and its roofline figure: detail, in the appendix (the main
    tables give each configuration's MFU)."""
    mfu = findings.mfu(ctx)
    if not mfu:
        return None
    return Section("Model FLOP utilisation", [_para("modes", "mfu", {"m": mfu, "figure": "roofline" in ctx.drawn}),
                                              *_fig(ctx, "roofline", "modes")])


def shapes_section(ctx: Context) -> Section:
    table = shapes_table(ctx)
    if table is None:
        return Section("Static, dynamic and bucketed shapes", [_para("shapes", "only_static", {})])
    found = findings.shape_findings(ctx)
    return Section("Static, dynamic and bucketed shapes", [
        _para("shapes", "findings", {"found": found, "figure": "regimes" in ctx.drawn,
                                     "timeline": ctx.drawn.get("timeline")}), table,
        *_fig(ctx, "regimes", "shapes"), *_fig(ctx, "timeline", "shapes")])


def _steps(iv) -> str:
    """Break-even steps with their interval where they have one ('never' where no step is saved)."""
    if n.finite(iv.low) and n.finite(iv.point):
        return f"{n.steps(iv.point)} [{n.steps(iv.low)}, {n.steps(iv.high)}]"
    return n.steps(iv.point)


def payback_table(ctx: Context, p: dict) -> Table:
    """Per compiled configuration (static shapes, the scopes one trains with, every precision): per way of reaching
    its compiled step (columns.WAYS: from an empty cache, from a filled one) the seconds it costs and its break-even,
    and when it pays."""
    rows = []
    shown = [w for w in WAYS if w == "cold" or any(n.finite(c["ways"][w]["cost"].point) for c in p["rows"])]
    for c in p["rows"]:  # module and regional of one cell side by side, each with the step it gives
        ways = [cell for w in shown for cell in (n.interval(c["ways"][w]["cost"], False, n.seconds), _steps(c["ways"][w]["steps"]))]
        rows.append([c["precision"], str(c["batch"]), term("mode", c=c, code=False), n.interval(c["step"], False, n.ms),
                     *ways, words(Text("payback", "when", {"code": c["code"], "recommended": c["recommended"]}))])
    heads = [Column(words(Text("payback", "way_header", {"way": w, "what": what})), "r") for w in shown
             for what in ("cost", "steps")]
    cols = [Column("precision"), Column("batch", "r"), Column("what runs"), Column("step (ms), geometric mean [interval]", "r"), *heads,
            Column("when it pays")]
    caption = Text("payback", "table_caption", {"train_rows": ctx.train_rows, "portable": "portable" in shown})
    return Table("payback", caption, cols, rows)


def payback_section(ctx: Context) -> Section | None:
    p = advice.payback(ctx)
    if p is None:
        return None
    return Section("When does compiling pay?", [
        _para("payback", "rule", {"p": p, "figure": "breakeven" in ctx.drawn, "side": BREAK_EVEN_SIDE}),
        _para("payback", "advice", {"p": p}), payback_table(ctx, p), *_fig(ctx, "breakeven", "payback")])


def best_step_section(ctx: Context) -> Section:
    table = best_step_table(ctx)
    data = conclusions.best_step(ctx) | {"table": table is not None, "gpu": ctx.gpu, "figure": "kernels" in ctx.drawn,
                                        "profiled": ctx.summary.profile_kernels_per_step.notna().any()}
    blocks = [_para("beststep", "text", data)] + ([table] if table is not None else [])
    return Section("How far from the best step", blocks + _fig(ctx, "kernels", "beststep", {"gpu": ctx.gpu}))


def main_sections(ctx: Context) -> list[Section]:
    """The main text: method, setup, the three questions, the best step, the claims, the conclusions."""
    out = [Section("Question and method", method.blocks(ctx)), Section("Setup", method.setup(ctx)),
           modes_section(ctx), shapes_section(ctx)]
    out += [s for s in (payback_section(ctx),) if s is not None]
    out.append(stages.section(ctx))
    out.append(best_step_section(ctx))
    if findings.claims(ctx):  # the table of claims with their evidence is in the appendix
        out.append(Section("Common claims, checked", [_para("claims", "groups", {"c": findings.claim_counts(ctx)})]))
    advice = conclusions.items(ctx)
    out.append(Section("Conclusions and recommendations",
                       [Items(advice)] if advice else [_para("conclusions", "nothing", {})]))
    return out


def _number(sections: list[Section], numbers: dict[str, int]) -> None:
    counters = {"table": 0, "figure": 0}
    for s in sections:
        for b in s.blocks:
            if b.kind in counters:
                counters[b.kind] += 1
                b.number = counters[b.kind]
                numbers[f"{'tab' if b.kind == 'table' else 'fig'}:{b.key}"] = b.number


def build(summary: pd.DataFrame, parity: pd.DataFrame, claims: pd.DataFrame | None, decisions: dict, environment: dict,
          facts: dict, config: dict, device: str, checks: dict, figure_dir_rel: str, calls: list[dict] | None = None,
          drawn: dict | None = None, pool: dict | None = None, in_progress: int | None = None,
          kinds: dict | None = None) -> Report:
    """The whole paper as blocks (see the module docstring); `in_progress`: the call it is made in, not yet logged;
    `kinds`: the stored studies across GPU kinds (kinds.json, layout.KINDS), an appendix of its own where they hold
    two or more."""
    ctx = Context(summary.copy(), claims, decisions, environment, facts, config, device, figure_dir_rel, calls or [],
                  checks or {}, dict(drawn or {}), dict(pool or {}), in_progress)
    main = main_sections(ctx)
    utilisation = utilisation_section(ctx)
    across = appendix.kinds_section(kinds) if ctx.gpu else None
    extra = ([utilisation] if utilisation else []) + appendix.sections(ctx, parity, claims_table(ctx)) + (
        [across] if across else [])
    for i, s in enumerate(extra):
        s.prefix = f"Appendix {chr(ord('A') + i)}"
    numbers: dict[str, int] = {}
    _number(main + extra, numbers)
    return Report(title=words(Text("head", "title", {"model": findings.model(ctx)})),
                  byline=conclusions.byline(ctx), notices=conclusions.notices(ctx), abstract=front.abstract(ctx),
                  main=main, appendix=extra, numbers=numbers)




def read_checks(paths: dict) -> dict:
    """The method checks' files (check name -> path; a name absent or a file missing: none) -> the report's
    checks (each check's CHECK, measure/checks/spec.py): its file whole, or its rounds' results."""
    def check(name: str) -> dict:
        path = paths.get(name)
        return json.loads(Path(path).read_text()) if path and Path(path).is_file() else {}

    return {c.key: check(c.name) if c.whole else check(c.name).get("results", []) for c in check_spec.method_checks().values()}


def pool_of(summary: pd.DataFrame, env: dict, host_effect: str | None, study: str | None) -> dict:
    """This study in the pool of its GPU kind (aggregate/compare/pool.py, from the stored estimate's cells): `rows`, its
    cells placed in the pool of the other studies (pool.place, the study left out where stored); `pooled`, the
    kind's every study this one among them (pool.pooled: what the paper says of the kind); `studies`, the others;
    {} without the estimate."""
    from compile_study.aggregate.compare import hosts

    if not host_effect or not Path(host_effect).is_file():
        return {}
    return pool_in(summary, env.get("device_name"), hosts.load(host_effect), study)


def pool_in(summary: pd.DataFrame, kind: str | None, stored: dict, study: str | None) -> dict:
    """pool_of from the stored estimate's dict (hosts.load's)."""
    from compile_study.aggregate.compare import pool

    mine, cells = pool.cells_from_summary(summary), pool.members(stored, kind)
    every = pd.concat([cells[cells.study != study], mine.assign(study=study or "this study")], ignore_index=True)
    return {"kind": kind, "studies": [s for s in pool.studies(stored, kind) if s != study],
            "rows": pool.place(mine, cells, leave_out=study).to_dict("records"),
            "pooled": pool.pooled(every).to_dict("records")}


def write(inputs: dict, config: dict, device: str, md_out: str | Path, tex_out: str | Path,
          study: str | None = None) -> None:
    """The study directory's files (layout.py) -> paper.md and paper.tex (figure paths relative to each paper).

    inputs: summary, parity, claims, decisions, environment, facts, figures, and where present calls (calls.jsonl),
    the method checks (timer_check, reference_drift, concurrency, launcher, compile_concurrency) and the stored
    host-effect estimate (host_effect: the pools of every GPU kind); study: this study's name in the pool."""
    from compile_study.aggregate.estimate.walltime import read_calls
    from compile_study.aggregate.figures.figures import read_index
    from compile_study.core.calls.session import call_in_progress
    from compile_study.core.io import write_text_atomic
    from compile_study.report import paper

    claims = pd.read_csv(inputs["claims"]) if inputs.get("claims") else None
    kinds = json.loads(Path(inputs["kinds"]).read_text()) if inputs.get("kinds") else None
    summary, parity = pd.read_csv(inputs["summary"]), pd.read_csv(inputs["parity"])
    env = json.loads(Path(inputs["environment"]).read_text())
    decisions = json.loads(Path(inputs["decisions"]).read_text())
    facts = json.loads(Path(inputs["facts"]).read_text())
    checks = read_checks(inputs)
    calls = read_calls(inputs["calls"]) if inputs.get("calls") else []
    drawn = read_index(inputs["figures"])
    pooled = pool_of(summary, env, inputs.get("host_effect"), study)
    in_progress = call_in_progress(Path(md_out).parent)  # made inside a session's call, which is logged after it
    for fmt, dest in (("md", md_out), ("tex", tex_out)):
        figs = Path(os.path.relpath(inputs["figures"], os.path.dirname(os.path.abspath(dest)))).as_posix()
        rep = build(summary, parity, claims, decisions, env, facts, config, device, checks, figs, calls, drawn, pooled,
                    in_progress, kinds)
        write_text_atomic(dest, paper.render(rep, fmt))
