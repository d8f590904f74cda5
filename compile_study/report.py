"""Fill the Jinja2 paper template from the summary, the environment and the data facts.

Every number in the paper is formatted here from those inputs; none is typed by hand.
Every string that reaches the paper goes through `md_escape` (Markdown) or `tex_escape` (LaTeX).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import jinja2
import pandas as pd

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


def fmt(value, digits: int = 2, suffix: str = "") -> str:
    """A number for the paper; missing values print as an em dash."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:,.{digits}f}{suffix}"


def failure_cell(row) -> str:
    """What a table cell says when its configuration did not produce a number."""
    label = {"oom": "OOM", "compile_error": "compile error", "nan": "non-finite loss"}.get(row["status"], row["status"])
    return f"{label} at batch {int(row['batch_size'])}"


def results_rows(summary: pd.DataFrame) -> list[dict]:
    """The results table: one row per configuration, formatted (escaping happens in the template)."""
    rows = []
    for _, r in summary.sort_values(["shape_regime", "precision", "batch_size", "compile_mode"]).iterrows():
        failed = r["status"] not in ("ok", "partial")
        ci = (
            f"[{fmt(r['speedup_ci_low'])}, {fmt(r['speedup_ci_high'])}]"
            if math.isfinite(r["speedup_ci_low"])
            else "n < 2"
        )
        rows.append(
            {
                "shape_regime": r["shape_regime"],
                "precision": r["precision"],
                "batch_size": int(r["batch_size"]),
                "compile_mode": r["compile_mode"],
                "n": f"{int(r['n_ok'])}/{int(r['n'])}",
                "step_ms": failure_cell(r) if failed else fmt(r["steady_step_ms"]),
                "eager_ms": fmt(r["eager_step_ms"]),
                "speedup": "—" if failed or r["compile_mode"] == "eager" else fmt(r["speedup"], 2, "×"),
                "speedup_ci": "—" if failed or r["compile_mode"] == "eager" else ci,
                "cold_compile_s": "—" if r["compile_mode"] == "eager" or failed else fmt(r["cold_compile_s"], 1),
                "warm_compile_s": "—" if r["compile_mode"] == "eager" or failed else fmt(r["warm_compile_s"], 1),
                "epoch1_s": fmt(r["epoch1_s"], 1),
                "epoch2_s": fmt(r["epoch2_s"], 1),
                "samples_per_s": fmt(r["samples_per_s"], 0),
                "eval_accuracy": fmt(100 * r["eval_accuracy"], 1, "%") if not failed else "—",
                "peak_mem_mib": fmt(r["peak_memory_bytes"] / 2**20, 0) if not failed else "—",
            }
        )
    return rows


def make_environment(loader_dir: str | Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(loader_dir)),
        undefined=jinja2.StrictUndefined,  # a missing value fails the render instead of printing nothing
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters |= {"md": md_escape, "tex": tex_escape, "fmt": fmt}
    return env


def render(template_path: str | Path, summary: pd.DataFrame, environment: dict, facts: dict, context: dict) -> str:
    template_path = Path(template_path)
    tpl = make_environment(template_path.parent).get_template(template_path.name)
    best = summary[(summary.compile_mode != "eager") & (summary.status == "ok")].dropna(subset=["speedup"])
    best_row = best.loc[best.speedup.idxmax()].to_dict() if len(best) else None
    return tpl.render(
        rows=results_rows(summary),
        env=environment,
        facts=facts,
        best=best_row,
        n_configs=len(summary),
        **context,
    )
