"""The appendix of the report model: per-configuration detail, scopes, noise, shapes, profiler, kernels, parity,
method checks (their tables and sentences: method_checks.py), runs not made and environment. Rows are formatted cells; captions and sentences are Texts of
appendix.j2; sections with no data are left out, and GPU-only columns are left out of a CPU study's tables.
"""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd

from compile_study.aggregate.paper_claims import label
from compile_study.core import vocab
from compile_study.core.config import grid
from compile_study.core.intervals import BAND_SDS, LEVEL
from compile_study.core.record import RunKey
from compile_study.measure.checks.spec import report_keys
from compile_study.report import numbers as n
from compile_study.report.compare.rejudged import WORDS
from compile_study.report.conclusions import step_scope
from compile_study.report.document import Column, Para, Section, Table, Text, plain
from compile_study.report.findings import Context, config, ordered, regime_rows, value
from compile_study.report.method import disturbed_runs, grid_table
from compile_study.report.method_checks import (
    check_tables,
    compile_concurrency_para,
    concurrency_para,
    launcher_para,
    timer_para,
)
from compile_study.report.paper import term


def _ok(r) -> bool:
    return r["status"] in vocab.USABLE_STATUSES


def _failed(r) -> str:
    return f"{vocab.failure_label(r['status'])} at batch {int(r['batch_size'])}"


def _cols(spec: str) -> list[Column]:
    """'precision|batch:r|...' -> columns; ':r' right-aligns (LaTeX widths come from the cells: tex_table.py)."""
    out = []
    for part in spec.split("|"):
        head, _, fmt = part.partition(":")
        if fmt not in ("", "l", "r"):
            raise ValueError(f"column {head!r}: alignment {fmt!r} is not 'l' or 'r'")
        out.append(Column(head, fmt or "l"))
    return out


def _verdict(code: str) -> str:
    return term("verdict_cell", code=code)


def detail_table(ctx: Context) -> Table:
    rows = []
    for _, r in ordered(vocab.headline(ctx.summary), "precision", "batch_size").iterrows():
        ok, c = _ok(r), _ok(r) and r["compile_mode"] != "eager"
        warm = f"{n.seconds(r['warm_compile_s'])} ({int(r['warm_n'])})" if c and n.finite(r["warm_compile_s"]) else n.DASH
        rows.append([r["precision"], str(int(r["batch_size"])), r["compile_mode"], f"{int(r['n_ok'])}/{int(r['n'])}",
                     n.ms(r["steady_step_ms"]) if ok else _failed(r), n.ms(r["reference_step_ms"]),
                     n.row_interval(r, with_method=False) if c else n.DASH,
                     n.times(r["cross_process_speedup"]) if c else n.DASH, warm,
                     n.fixed(r["memory_ratio"]) if c else n.DASH, n.percent(r["eval_accuracy"]) if ok else n.DASH,
                     n.ms(r["inference_step_ms"]) if ok else n.DASH, n.row_interval(r, "inference") if c else n.DASH])
    cols = _cols("precision|batch:r|mode|n ok:r|median step (ms):r|eager, same process (ms):r|speedup [interval]:r|"
                 "cross-process speedup:r|warm compile (warm runs):r|memory ratio:r|eval acc.:r|inference (ms):r|"
                 "inference speedup:r")
    return Table("detail", Text("appendix", "detail_caption"), cols, rows)


def scopes_table(ctx: Context) -> Table | None:
    s = ctx.summary
    keys = s[s.compile_scope != "module"][["precision", "batch_size"]].drop_duplicates()
    if keys.empty:
        return None
    rows = []
    for k in keys.sort_values(["precision", "batch_size"]).itertuples():
        sel = s[(s.precision == k.precision) & (s.batch_size == k.batch_size) & (s.shape_regime == "static")]
        sel = ordered(sel.assign(_e=sel.compile_mode != "eager"), "_e")
        for _, r in sel.iterrows():
            ok, c = _ok(r), _ok(r) and r["compile_mode"] != "eager"
            timed = c or _ok(r) and r["compile_scope"] in vocab.GRAPH_SCOPES  # eager's whole-step graph: a speedup
            phases = " / ".join(n.times(r[f"{p}_speedup"]) for p in ("forward", "backward", "optimizer"))
            rows.append([r["precision"], str(int(r["batch_size"])),
                         term("mode", c=config(r), code=False),
                         n.ms(r["steady_step_ms"]) if ok else _failed(r), n.row_interval(r) if timed else n.DASH,
                         _verdict(r["verdict"]) if timed else n.DASH, n.count(r["graphs_compiled"]) if c else n.DASH,
                         n.count(r["graph_breaks"]) if c else n.DASH, phases if c else n.DASH,
                         n.seconds(r["cold_start_s"]) if c else n.DASH])
    cols = _cols("precision|batch:r|what is compiled|median step (ms):r|speedup [interval] (method):r|verdict|"
                 "graphs:r|graph breaks:r|phase speedups fwd / bwd / opt (one process)|cold start:r")
    scopes = sorted(set(s.compile_scope), key=vocab.COMPILE_SCOPES.index)
    return Table("scopes", Text("appendix", "scopes_caption", {"scopes": scopes}), cols, rows)


def noise_table(ctx: Context) -> Table:
    s, rows = ctx.summary, []
    eager = vocab.usable(s[(s.compile_mode == "eager") & (s.compile_scope == "module")])
    for _, r in eager.sort_values(["reference_regime", "precision", "batch_size"]).iterrows():
        cell = s[(s.reference_regime == r["reference_regime"]) & (s.precision == r["precision"])
                 & (s.batch_size == r["batch_size"]) & (s.compile_mode != "eager")]
        rows.append([r["reference_regime"], r["precision"], str(int(r["batch_size"])), str(int(r["n_ok"])),
                     n.row_interval(r), f"[{n.fixed(r['aa_low'], 3)}, {n.fixed(r['aa_high'], 3)}]",
                     n.fixed(r["aa_chunk_noise"], 4), n.fixed(r["aa_between_sd"], 4),
                     n.percent(r["step_cv_across_repeats"], 2),
                     n.percent(cell.step_cv_across_repeats.max(), 2) if len(cell) else n.DASH])
    cols = _cols("shapes|precision|batch:r|eager processes:r|A/A ratio [interval] (method):r|A/A band:r|"
                 "chunk noise (log SD):r|between-process SD (log):r|eager CV across processes:r|max compiled CV:r")
    return Table("noise", Text("appendix", "noise_caption", {"sds": BAND_SDS}), cols, rows)


def variance_para(ctx: Context) -> Para | None:
    """How much of the step's spread between processes the host's recorded state explains (aggregate/variance.py)."""
    found = ctx.env.get("step_variance")
    return Para(Text("appendix", "variance", {"v": found})) if found else None


def spread_para(ctx: Context) -> Para | None:
    """Why the default mode's speedup at the largest static batch spreads between processes (aggregate/spread.py)."""
    found = (ctx.env.get("step_variance") or {}).get("compiled")
    return Para(Text("appendix", "spread", {"s": found})) if found else None


def regime_table(ctx: Context) -> Table | None:
    sel = regime_rows(ctx)
    if sel.empty:
        return None
    rows = []
    for _, r in sel.iterrows():
        ok, c = _ok(r), _ok(r) and r["compile_mode"] != "eager"
        fallback = n.count(r["eager_fallback_steps"]) if c and r.get("recompile_limit_hit") else n.DASH
        row = [str(int(r["batch_size"])), r["compile_mode"], r["shape_regime"],
               n.row_interval(r) if c else (n.DASH if ok else _failed(r)), _verdict(r["verdict"]) if c else n.DASH,
               n.count(r["distinct_shapes"]) if ok else n.DASH, fallback]
        row += [n.count(r["cudagraph_recordings"]) if c else n.DASH] if ctx.gpu else []
        row += [n.seconds(r[f"{state}_epoch1_s"]) if ok else n.DASH for state in ("cold", "warm")]
        rows.append(row + [n.seconds(r["epoch2_s"]) if ok else n.DASH])
    graphs = "CUDA-graph recordings:r|" if ctx.gpu else ""
    cols = _cols("batch:r|mode|shapes|speedup, same batches [interval] (method):r|verdict|"
                 f"distinct shapes:r|eager steps past the limit:r|{graphs}epoch 1, cold:r|epoch 1, warm:r|epoch 2:r")
    kinds = [k for k in vocab.REGIME_KINDS if k in {vocab.Regime.parse(x).kind for x in sel.shape_regime}]
    return Table("regimes", Text("appendix", "regimes_caption", {"kinds": kinds, "precision": ctx.precision}), cols, rows)


def short_kernel(name: str) -> str:
    """A kernel's readable name: no return type, template arguments, parameters or namespaces; never cut mid-token.
    'void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float, ...' -> 'GammaBeta…Template'."""
    text, depth, out = str(name).removeprefix("void "), 0, []
    for ch in text:
        if ch in "<({":
            depth += 1
        elif ch in ">)}" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    parts = [p.strip() for p in "".join(out).split("::") if p.strip()]
    return parts[-1] if parts else str(name)


def top_kernels(r) -> list[dict]:
    text = r.get("profile_top_kernels")
    return json.loads(text) if isinstance(text, str) and text.strip() else []


def profile_table(ctx: Context) -> Table | None:
    sel = vocab.usable(vocab.headline(ctx.summary)).dropna(subset=["profile_kernels_per_step"])
    if sel.empty:
        return None
    rows = []
    for _, r in ordered(sel, "precision", "batch_size").iterrows():
        top = top_kernels(r)
        row = [r["precision"], str(int(r["batch_size"])), r["compile_mode"], n.count(r["profile_kernels_per_step"]),
               n.count(r["reference_profile_kernels_per_step"])]
        row += [n.percent(r["profile_idle_fraction"], 2), n.percent(r["reference_profile_idle_fraction"], 2)] if ctx.gpu else []
        row += [n.ms(r["profile_cpu_ms_per_step"])]
        row += [n.ms(r["profile_device_busy_ms_per_step"]), n.count(r["profile_triton_kernels_distinct"])] if ctx.gpu else []
        rows.append(row + [f"{short_kernel(top[0]['name'])} ({n.percent(top[0]['share'], 2)})" if top else n.DASH])
    kind = sel.kernel_kind.dropna().iloc[0] if sel.kernel_kind.notna().any() else "kernels"
    gpu = "idle:r|eager idle:r|" if ctx.gpu else ""
    busy = "device busy (ms/step):r|Triton kernels:r|" if ctx.gpu else ""
    cols = _cols(f"precision|batch:r|mode|{kind} / step:r|eager {kind} / step:r|{gpu}host CPU (ms/step):r|"
                 f"{busy}top {'kernel' if ctx.gpu else 'operator'} (share)")
    return Table("profile", Text("appendix", "profile_caption"), cols, rows)


def kernel_table(ctx: Context) -> Table | None:
    sel = vocab.usable(vocab.headline(ctx.summary)).dropna(subset=["profile_kernels_per_step"])
    sel = sel[sel.compile_mode.isin(("eager", "default", "reduce-overhead"))]
    if sel.empty:
        return None
    sizes = sorted({int(sel.batch_size.min()), int(sel.batch_size.max())})
    rows = [[r["precision"], str(int(r["batch_size"])), r["compile_mode"], str(i), short_kernel(k["name"]),
             n.count(k["calls_per_step"]), n.ms(k["ms_per_step"]), n.percent(k["share"], 2)]
            for _, r in ordered(sel[sel.batch_size.isin(sizes)], "precision", "batch_size").iterrows()
            for i, k in enumerate(top_kernels(r), 1)]
    cols = _cols(f"precision|batch:r|mode|#:r|{'kernel' if ctx.gpu else 'operator'}|calls / step:r|"
                 "ms / step:r|share:r")
    return Table("kernels", Text("appendix", "kernels_caption", {"sizes": sizes, "gpu": ctx.gpu}), cols, rows) if rows else None


def _accuracy(r) -> str:
    """A parity row's accuracy verdict as summary.py judge_parity decided it (a table made before it: by the check's
    own flag)."""
    code = getattr(r, "accuracy_verdict", None)
    code = code if isinstance(code, str) else "pass" if r.accuracy_ok else "fail"
    return {"pass": "pass", "fail": "FAIL", "at-chance": f"at chance ({n.percent(getattr(r, 'chance_accuracy', None))})"}[code]


def parity_table(parity: pd.DataFrame) -> Table | None:
    if parity is None or parity.empty:
        return None
    rows = [[r.compile_mode, r.precision, str(int(r.batch_size)), f"{r.max_rel_loss_diff:.1e}", f"{r.loss_rtol:.0e}",
             "pass" if r.loss_ok else "FAIL", n.percent(r.eager_accuracy), n.percent(r.compiled_accuracy),
             n.fixed(r.accuracy_delta_points, 1), _accuracy(r)]
            for r in parity.sort_values(["precision", "compile_mode"]).itertuples()]
    cols = _cols("mode|precision|batch:r|max rel. loss diff:r|tolerance:r|loss|eager acc.:r|compiled acc.:r|"
                 "Δ (points):r|accuracy")
    chance = parity.chance_accuracy.dropna() if "chance_accuracy" in parity else pd.Series(dtype=float)
    at_chance = int((parity.get("accuracy_verdict", pd.Series(dtype=object)) == "at-chance").sum())
    return Table("parity", Text("appendix", "parity_caption", {
        "chance": float(chance.iloc[0]) if len(chance) else None, "at_chance": at_chance, "checks": len(parity)}), cols, rows)


def missing_runs(summary: pd.DataFrame, grids: list[dict]) -> list[list[str]]:
    """Configurations of the grid with fewer records than repeats: planned, made, missing."""
    expected = Counter(key.with_repeat(0) for key in grid.expand(grids))  # one count per configuration
    have = Counter({RunKey.of(r._asdict() | {"repeat": 0}): int(r.n) for r in summary.itertuples()})
    return [[k.compile_mode, k.compile_scope, k.shape_regime, k.precision, str(k.batch_size), str(want), str(have[k]),
             str(want - have[k])] for k, want in sorted(expected.items(), key=str) if have[k] < want]


def outcome_blocks(ctx: Context) -> list:
    s = ctx.summary
    failed = [{"c": config(r), "status": vocab.failure_label(r["status"]), "error": plain(r["error"])}
              for _, r in s[~s.status.isin(("ok",))].iterrows()]
    errors = [{"c": config(r), "error": plain(r["evidence_errors"])} for _, r in s[s.evidence_errors.notna()].iterrows()]
    out = [Para(Text("appendix", "failures", {"failed": failed, "errors": errors}))] if failed or errors else []
    missing = missing_runs(s, ctx.grids)
    if missing:
        cols = _cols("mode|scope|shapes|precision|batch:r|processes planned:r|made:r|missing:r")
        out.append(Table("missing", Text("appendix", "missing_caption"), cols, missing))
    return out


def environment_para(ctx: Context) -> Para:
    e = ctx.env
    keys = (("device_name", "device"), ("cpu_model", "CPU"), ("torch", "torch"), ("triton", "Triton"),
            ("cuda", "CUDA"), ("driver", "driver"), ("python", "Python"))
    items = [(name, value(e[k])) for k, name in keys if e.get(k) not in (None, "None", [], "")]
    statuses = [(plain(k), c) for k, c in (e.get("statuses") or {}).items()]
    return Para(Text("appendix", "environment", {"items": items, "cores": value(e.get("cpu_cores")),
                                                 "records": e.get("n_records"), "statuses": statuses,
                                                 "autotune": e.get("autotune_search")}))


# a method check's name (config `checks`) -> its key in the report's `checks` (each module's CHECK)
CHECK_KEYS = report_keys()


def sections(ctx: Context, parity: pd.DataFrame, claims: Table | None = None) -> list[Section]:
    tables = [("The grid", grid_table(ctx)), ("Common claims with their evidence", claims), ("Per-configuration detail", detail_table(ctx)), ("What is compiled", scopes_table(ctx)),
              ("Noise and controls", noise_table(ctx)), ("Shape regimes in detail", regime_table(ctx)),
              ("Profiler detail", profile_table(ctx)), ("Top kernels" if ctx.gpu else "Top operators", kernel_table(ctx)),
              ("Parity", parity_table(parity))]
    out = [Section(title, [t]) for title, t in tables if t is not None]
    decided = ctx.decisions.get("checks") or {}
    step = step_scope(ctx)
    if step and any(s.title == "What is compiled" for s in out):  # the whole step as one function, in detail
        next(s for s in out if s.title == "What is compiled").blocks.append(
            Para(Text("beststep", "step_detail", {"step": step})))
    for para in (variance_para(ctx), spread_para(ctx)):  # beside the noise table: what explains the spread it shows
        if para is not None:
            next(s for s in out if s.title == "Noise and controls").blocks.append(para)
    found = check_tables(ctx.checks) + [
        p for p in (timer_para(ctx), concurrency_para(ctx.checks.get("concurrency") or {}, decided.get("concurrency")),
                    launcher_para(ctx.checks.get("launcher") or {}, decided.get("launcher")),
                    compile_concurrency_para(ctx.checks.get("compile_concurrency") or {},
                                             decided.get("compile_concurrency"))) if p]
    missing = [name for name in ctx.config.get("checks", {}).get(ctx.device, []) if not ctx.checks.get(CHECK_KEYS[name])]
    if missing:
        found.append(Para(Text("appendix", "checks_missing", {"missing": missing})))
    if found:
        out.append(Section("Checks of the method", found))
    outcomes = outcome_blocks(ctx)
    if outcomes:
        out.append(Section("Failures, missing evidence, runs not made", outcomes))
    traces = ((ctx.env.get("compile_stages") or {}).get("trace") or {}).get("files")
    if traces:  # each configuration's first cold compile's structured trace and tlparse's report of it
        out.append(Section("Compiler traces", [Para(Text("appendix", "traces", {
            "files": traces, "skipped": ctx.env["compile_stages"]["trace"]["skipped"]}))]))
    rule = disturbed_runs(ctx)  # the rule that judged runs disturbed (the Setup gives what it found)
    out.append(Section("Environment", [environment_para(ctx)]
                       + ([Para(Text("setup", "disturbance_rule", rule))] if rule["d"].get("recorded") else [])))
    return out


KINDS_SHOWN = 4  # claims named that do not hold on every kind, before "and N more"


def kinds_section(kinds: dict | None) -> Section | None:
    """The stored studies across GPU kinds (kinds.json, layout.KINDS: aggregate/compare/kinds.py): each shared compiled
    configuration's speedup interval on each kind, and which claims hold on every kind; None under two kinds."""
    if not kinds or len(kinds.get("kinds") or []) < 2:
        return None
    names = [kind for kind, _ in kinds["kinds"]]
    rows = [[plain(label(c)), *(n.interval(n.decided_interval(c["intervals"][k])) for k in names)]
            for c in kinds["cells"]]
    others = [{"id": plain(c["id"]), "where": "; ".join(f"{WORDS[code]} on {plain(kind)}" for kind, code in
                                                       c["codes"].items() if code != "holds")}
              for c in kinds["claims"] if not c["everywhere"]]
    data = {"kinds": [{"kind": plain(k), "name": plain(name)} for k, name in kinds["kinds"]],
            "total": len(kinds["claims"]), "every": sum(c["everywhere"] for c in kinds["claims"]),
            "others": others[:KINDS_SHOWN], "more": max(len(others) - KINDS_SHOWN, 0)}
    table = Table("kinds", Text("appendix", "kinds_caption", {"level": LEVEL}),
                  [Column("configuration")] + [Column(plain(k), "r") for k in names], rows)
    return Section("Across GPU kinds", [Para(Text("appendix", "kinds", data)), table])
