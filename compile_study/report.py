"""Fill the Jinja2 paper template from the summary, the environment and the data facts.

Every number in the paper is formatted here from those inputs; none is typed by hand.
Every string that reaches the paper goes through `md_escape` (Markdown) or `tex_escape` (LaTeX).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import jinja2
import pandas as pd

from compile_study import grid

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]#!|<>~$&%^])")
_TEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}


def md_escape(value) -> str:
    """Escape Markdown syntax (and HTML angle brackets) in a value shown as text."""
    text = " ".join(str(value).split())  # no newline can break a table row
    return _MD_SPECIAL.sub(r"\\\1", text)


def tex_escape(value) -> str:
    return "".join(_TEX_SPECIAL.get(c, c) for c in " ".join(str(value).split()))


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def fmt(value, digits: int = 2, suffix: str = "") -> str:
    """A number for the paper; missing values print as an em dash."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:,.{digits}f}{suffix}"


def failure_cell(row) -> str:
    """What a table cell says when its configuration did not produce a number."""
    label = {"oom": "OOM", "compile_error": "compile error", "nan": "non-finite loss"}.get(row["status"], row["status"])
    return f"{label} at batch {int(row['batch_size'])}"


def failed(row) -> bool:
    return row["status"] not in ("ok", "partial")


def config_label(r) -> str:
    return f"{r.compile_mode}, {r.compile_scope}, {r.shape_regime}, {r.precision}, batch {int(r.batch_size)}"


def top_kernels(r) -> list[dict]:
    """The run's top kernels (summary.csv keeps them as JSON text)."""
    return json.loads(r["profile_top_kernels"]) if isinstance(r["profile_top_kernels"], str) else []


def speedup_cells(r) -> dict:
    if failed(r) or r["compile_mode"] == "eager":
        return {"speedup": "—", "ci": "—", "verdict": "—" if failed(r) else "A/A"}
    ci = f"[{fmt(r['speedup_ci_low'])}, {fmt(r['speedup_ci_high'])}]" if _finite(r["speedup_ci_low"]) else "n < 2"
    return {"speedup": fmt(r["speedup"], 2, "×"), "ci": ci, "verdict": r["verdict"]}


def break_even(r) -> str:
    v = r["break_even_steps"]
    if r["compile_mode"] == "eager" or failed(r) or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return "never" if math.isinf(v) else fmt(v, 0)


def mode_rows(summary: pd.DataFrame) -> list[dict]:
    """The static-shape table: one row per precision, batch size and compile mode."""
    rows = []
    static = summary[(summary.shape_regime == "static") & (summary.compile_scope == "module")]
    for _, r in static.sort_values(["precision", "batch_size", "compile_mode"]).iterrows():
        compiled = r["compile_mode"] != "eager"
        rows.append({
            "precision": r["precision"], "batch_size": int(r["batch_size"]), "compile_mode": r["compile_mode"],
            "n": f"{int(r['n_ok'])}/{int(r['n'])}",
            "step_ms": failure_cell(r) if failed(r) else fmt(r["steady_step_ms"]),
            "eager_ms": fmt(r["reference_step_ms"]),
            **speedup_cells(r),
            "cross_process": fmt(r["cross_process_speedup"], 2, "×") if compiled and not failed(r) else "—",
            "cold_compile_s": fmt(r["cold_compile_s"], 1) if compiled else "—",
            "warm_compile_s": fmt(r["warm_compile_s"], 1) if compiled else "—",
            "break_even": break_even(r),
            "memory_ratio": fmt(r["memory_ratio"], 2) if compiled and not failed(r) else "—",
            "mfu": fmt(100 * r["mfu"], 1, "%") if not failed(r) else "—",
            "eval_accuracy": fmt(100 * r["eval_accuracy"], 1, "%") if not failed(r) else "—",
            "inference": fmt(r["inference_speedup"], 2, "×") if compiled and not failed(r) else "—",
            "inference_ms": fmt(r["inference_step_ms"], 2) if not failed(r) else "—",
        })
    return rows


def scope_rows(summary: pd.DataFrame) -> list[dict]:
    """What is compiled: per batch size and precision where more than the module scope ran."""
    keys = summary[summary.compile_scope != "module"][["precision", "batch_size"]].drop_duplicates()
    rows = []
    for _, k in keys.sort_values(["precision", "batch_size"]).iterrows():
        sel = summary[(summary.precision == k.precision) & (summary.batch_size == k.batch_size)
                      & (summary.shape_regime == "static") & summary.compile_mode.isin(["eager", "default"])]
        order = {s: i for i, s in enumerate(("module", "forward", "backward", "step", "graph-break"))}
        for _, r in sel.sort_values("compile_scope", key=lambda c: c.map(order)).sort_values(
                "compile_mode", kind="stable", key=lambda c: c != "eager").iterrows():
            ok, compiled = not failed(r), r["compile_mode"] != "eager"
            rows.append({
                "precision": r["precision"], "batch_size": int(r["batch_size"]),
                "what": "eager (reference)" if not compiled else r["compile_scope"],
                "step_ms": fmt(r["steady_step_ms"]) if ok else failure_cell(r),
                **speedup_cells(r),
                "graphs": fmt(r["graphs_compiled"], 0) if compiled and ok else "—",
                "breaks": fmt(r["graph_breaks"], 0) if compiled and ok else "—",
                "kernels": fmt(r["generated_kernels"], 0) if compiled and ok and _finite(r["generated_kernels"]) else "—",
                "forward_ms": fmt(r["forward_ms"]), "backward_ms": fmt(r["backward_ms"]),
                "optimizer_ms": fmt(r["optimizer_ms"]),
                "phase_speedups": " / ".join(fmt(r[f"{p}_speedup"], 2, "×") for p in ("forward", "backward", "optimizer"))
                if compiled and ok else "—",
                "cold_compile_s": fmt(r["cold_compile_s"], 1) if compiled and ok else "—",
            })
    return rows


def profile_rows(summary: pd.DataFrame) -> list[dict]:
    """Profiler evidence for the static, module-scope configurations: kernels, idle time, top kernel."""
    rows = []
    sel = summary[(summary.shape_regime == "static") & (summary.compile_scope == "module") & (summary.status != "oom")]
    for _, r in sel.sort_values(["precision", "batch_size", "compile_mode"]).iterrows():
        if not _finite(r["profile_kernels_per_step"]):
            continue
        top = top_kernels(r)
        rows.append({
            "precision": r["precision"], "batch_size": int(r["batch_size"]), "compile_mode": r["compile_mode"],
            "kernels": fmt(r["profile_kernels_per_step"], 0),
            "eager_kernels": fmt(r["reference_profile_kernels_per_step"], 0),
            "idle": fmt(100 * r["profile_idle_fraction"], 0, "%") if _finite(r["profile_idle_fraction"]) else "—",
            "eager_idle": fmt(100 * r["reference_profile_idle_fraction"], 0, "%")
            if _finite(r["reference_profile_idle_fraction"]) else "—",
            "cpu_ms": fmt(r["profile_cpu_ms_per_step"], 2),
            "busy_ms": fmt(r["profile_device_busy_ms_per_step"], 2),
            "triton": fmt(r["profile_triton_kernels_distinct"], 0),
            "top": f"{top[0]['name'][:60]} ({100 * top[0]['share']:.0f}%)" if top else "—",
        })
    return rows


def top_kernel_rows(summary: pd.DataFrame, batch_sizes: tuple[int, ...]) -> list[dict]:
    """The top 5 kernels of eager, default and reduce-overhead at the given batch sizes (static, module)."""
    rows = []
    sel = summary[(summary.shape_regime == "static") & (summary.compile_scope == "module")
                  & summary.batch_size.isin(batch_sizes) & summary.compile_mode.isin(["eager", "default", "reduce-overhead"])]
    for _, r in sel.sort_values(["precision", "batch_size", "compile_mode"]).iterrows():
        for rank, k in enumerate(top_kernels(r), 1):
            rows.append({"precision": r["precision"], "batch_size": int(r["batch_size"]),
                         "compile_mode": r["compile_mode"], "rank": rank, "name": k["name"][:90],
                         "calls": fmt(k["calls_per_step"], 0), "ms": fmt(k["ms_per_step"], 3),
                         "share": fmt(100 * k["share"], 1, "%")})
    return rows


def noise_rows(summary: pd.DataFrame) -> list[dict]:
    """Per cell: the A/A control and how much step times move between repeats."""
    rows = []
    for (regime, precision, bs), g in summary.groupby(["reference_regime", "precision", "batch_size"]):
        eager = g[g.compile_mode == "eager"]
        if eager.empty:
            continue
        e = eager.iloc[0]
        compiled = g[(g.compile_mode != "eager") & (g.shape_regime == regime)]
        rows.append({
            "regime": regime, "precision": precision, "batch_size": int(bs), "n": int(e["n_ok"]),
            "aa_ratio": fmt(e["aa_ratio"], 3),
            "aa_band": fmt(100 * (e["aa_band"] - 1), 1, "%") if _finite(e["aa_band"]) else "—",
            "eager_cv": fmt(100 * e["step_cv_across_repeats"], 1, "%"),
            "compiled_cv": fmt(100 * compiled.step_cv_across_repeats.max(), 1, "%") if len(compiled) else "—",
        })
    return rows


def regime_rows(summary: pd.DataFrame) -> list[dict]:
    """The shape-regime table, at the batch sizes where more than the static regime ran."""
    sizes = summary[summary.shape_regime != "static"].batch_size.unique()
    rows = []
    sel = summary[summary.batch_size.isin(sizes) & (summary.compile_scope == "module")]
    for _, r in sel.sort_values(["batch_size", "compile_mode", "shape_regime"]).iterrows():
        compiled = r["compile_mode"] != "eager"
        ok = not failed(r)
        fallback = int(r["eager_fallback_steps"]) if ok and _finite(r["eager_fallback_steps"]) else 0
        rows.append({
            "batch_size": int(r["batch_size"]), "compile_mode": r["compile_mode"], "shape_regime": r["shape_regime"],
            "tokens_per_s": fmt(r["real_tokens_per_s"], 0) if ok else failure_cell(r),
            "gain": fmt(r["gain_over_eager_static"], 2, "×") if ok else "—",
            **speedup_cells(r),
            "cold_compile_s": fmt(r["cold_compile_s"], 1) if compiled and ok else "—",
            "graphs": fmt(r["graphs_compiled"], 0) if compiled and ok else "—",
            "limit": (f"hit: {fallback} eager steps" if r["recompile_limit_hit"] else "no") if compiled and ok else "—",
            "cudagraphs": fmt(r["cudagraph_recordings"], 0) if compiled and ok else "—",
            "padding": fmt(100 * r["padding_fraction"], 1, "%") if ok else "—",
            "epoch1_s": fmt(r["epoch1_s"], 1), "epoch2_s": fmt(r["epoch2_s"], 2),
        })
    return rows


# LaTeX templates use delimiters that cannot be mistaken for TeX braces
LATEX_DELIMITERS = dict(block_start_string="((*", block_end_string="*))", variable_start_string="(((",
                        variable_end_string=")))", comment_start_string="((=", comment_end_string="=))")


def missing_runs(summary: pd.DataFrame, grids: list[dict]) -> list[str]:
    """Configurations of the grid with fewer records than repeats (a stored study cut short; a complete
    Snakemake study has a record, ok or failed, for every run)."""
    expected = Counter(key[:-1] for key in grid.expand(grids))  # run key without the repeat
    have = Counter({(r.compile_mode, r.compile_scope, int(r.batch_size), r.shape_regime, r.precision): int(r.n)
                    for r in summary.itertuples()})
    return [f"{mode}, {scope}, {regime}, {precision}, batch {bs}: {have[key]} of {n} repeats"
            for key, n in sorted(expected.items(), key=str) if have[key] < n
            for mode, scope, bs, regime, precision in [key]]


def make_environment(loader_dir: str | Path, latex: bool = False) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(loader_dir)),
        undefined=jinja2.StrictUndefined,  # a missing value fails the render instead of printing nothing
        keep_trailing_newline=True,
        autoescape=False,
        **(LATEX_DELIMITERS if latex else {}),
    )
    env.filters |= {"md": md_escape, "tex": tex_escape, "fmt": fmt}
    return env


def parity_rows(parity: pd.DataFrame) -> list[dict]:
    return [
        {
            "compile_mode": r.compile_mode, "precision": r.precision, "batch_size": int(r.batch_size),
            "loss_steps": int(r.loss_steps), "train_steps": int(r.train_steps),
            "rel": f"{r.max_rel_loss_diff:.1e}", "rtol": f"{r.loss_rtol:.0e}", "loss_ok": "pass" if r.loss_ok else "FAIL",
            "eager_acc": fmt(100 * r.eager_accuracy, 1, "%"), "compiled_acc": fmt(100 * r.compiled_accuracy, 1, "%"),
            "delta": fmt(r.accuracy_delta_points, 1), "acc_ok": "pass" if r.accuracy_ok else "FAIL",
        }
        for r in parity.sort_values(["precision", "compile_mode"]).itertuples()
    ]


def render(template_path: str | Path, summary: pd.DataFrame, parity: pd.DataFrame, environment: dict, facts: dict,
           context: dict, claims: pd.DataFrame | None = None, latex: bool = False) -> str:
    """The paper from its template: Markdown, or LaTeX (latex=True: the template uses LATEX_DELIMITERS)."""
    template_path = Path(template_path)
    tpl = make_environment(template_path.parent, latex).get_template(template_path.name)
    context = {"checks": {"timer": [], "drift": []}} | context
    ok = summary[(summary.compile_mode != "eager") & (summary.status == "ok")].dropna(subset=["speedup"])
    best = ok.loc[ok.speedup.idxmax()].to_dict() if len(ok) else None
    failures = [
        {"config": config_label(r), "cell": failure_cell(r), "error": r.error}
        for _, r in summary[summary.status.isin(["oom", "compile_error", "nan", "error", "partial"])].iterrows()
    ]
    return tpl.render(
        mode_rows=mode_rows(summary),
        noise_rows=noise_rows(summary),
        regime_rows=regime_rows(summary),
        scope_rows=scope_rows(summary),
        profile_rows=profile_rows(summary),
        top_kernel_rows=top_kernel_rows(summary, (32, 512)),
        claim_rows=[] if claims is None else claims.to_dict("records"),
        parity_rows=parity_rows(parity) if len(parity) else [],
        failures=failures,
        evidence_errors=[{"config": config_label(r), "error": r.evidence_errors}
                         for _, r in summary[summary.evidence_errors.notna()].iterrows()],
        env=environment,
        facts=facts,
        best=best,
        n_configs=len(summary),
        missing=missing_runs(summary, context["grids"]) if "grids" in context else [],
        **context,
    )
