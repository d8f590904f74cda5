"""The downstream stages as plain functions: records -> summary -> figure -> paper.

The Snakemake shims call them one rule at a time; `compile_study.rebuild` calls them in a row to
regenerate a paper from stored records (e.g. reference/) without rerunning anything.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from compile_study import figures, paper, record, report
from compile_study.claims import claims_table
from compile_study.io import write_json_atomic, write_text_atomic
from compile_study.summary import add_mfu, environment, load_records, summarize

PARITY_COLUMNS = [
    "compile_mode", "precision", "batch_size", "loss_steps", "train_steps", "max_rel_loss_diff", "loss_rtol",
    "loss_ok", "eager_accuracy", "compiled_accuracy", "accuracy_delta_points", "accuracy_ok",
]


def parity_table(parity_paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per parity check; an eager-only study has none (the table keeps its header)."""
    rows = [json.loads(Path(p).read_text()) for p in parity_paths]
    return pd.DataFrame([{k: r[k] for k in PARITY_COLUMNS} for r in rows], columns=PARITY_COLUMNS)


def read_json_if_there(path: str | Path | None, default=None):
    """A JSON file's content, or `default` where there is no such file (stored studies made before it existed)."""
    return json.loads(Path(path).read_text()) if path and Path(path).is_file() else default


def summary_stage(
    record_paths: Iterable[str | Path],
    peak_path: str | Path | None,
    parity_paths: Iterable[str | Path],
    mlp_path: str | Path | None,
    facts_path: str | Path,
    summary_out: str | Path,
    parity_out: str | Path,
    environment_out: str | Path,
    claims_out: str | Path,
) -> pd.DataFrame:
    """Records -> summary.csv, parity.csv, environment.json and claims.csv (peak and MLP results are optional:
    stored studies from before they existed have none)."""
    records = load_records(record_paths)
    peaks = read_json_if_there(peak_path, {"peaks": {}})["peaks"]
    summary = add_mfu(summarize(records), peaks)
    mlp = read_json_if_there(mlp_path)
    write_text_atomic(summary_out, summary.to_csv(index=False))
    write_text_atomic(parity_out, parity_table(parity_paths).to_csv(index=False))
    write_text_atomic(claims_out, claims_table(summary, mlp, json.loads(Path(facts_path).read_text())).to_csv(index=False))
    write_json_atomic(environment_out, environment(records) | {"peak_tflops": {p: v["tflops"] for p, v in peaks.items()}})
    return summary


def figure_stage(
    summary_path: str | Path, environment_path: str | Path, record_paths: Iterable[str | Path], out_dir: str | Path
) -> list[Path]:
    """All figures into out_dir as <name>.png and <name>.pdf."""
    env = json.loads(Path(environment_path).read_text())
    return figures.draw_all(pd.read_csv(summary_path), record.table(list(record_paths)), env, out_dir)


def method_checks(checks_dir: str | Path | None) -> dict:
    """Rows of the timer check and the reference-drift check (benchmarks/), where they were run."""
    return {key: read_json_if_there(Path(checks_dir) / name if checks_dir else None, {"results": []})["results"]
            for key, name in (("timer", "timer_check.json"), ("drift", "reference_drift.json"))}


def paper_stage(
    template: str | Path,
    summary_path: str | Path,
    parity_path: str | Path,
    environment_path: str | Path,
    facts_path: str | Path,
    figure_dir: str | Path,
    out: str | Path,
    config: dict,
    device: str,
    claims_path: str | Path | None = None,
    tex_template: str | Path | None = None,
    tex_out: str | Path | None = None,
    checks_dir: str | Path | None = None,
) -> None:
    """The Markdown paper into out and, when tex_template and tex_out are given, its LaTeX twin into tex_out
    (same data, same numbers; figure paths relative to each output file). `checks_dir`: where the by-hand
    benchmarks of the method left their JSON (timer_check.json, reference_drift.json), if anywhere."""
    if (tex_template is None) != (tex_out is None):
        raise ValueError("tex_template and tex_out go together")
    claims = pd.read_csv(claims_path) if claims_path and Path(claims_path).is_file() else None
    summary, parity = pd.read_csv(summary_path), pd.read_csv(parity_path)
    env, facts = json.loads(Path(environment_path).read_text()), json.loads(Path(facts_path).read_text())
    for fmt, dest in [("md", out)] + ([("tex", tex_out)] if tex_out is not None else []):
        figs = Path(os.path.relpath(figure_dir, os.path.dirname(os.path.abspath(dest)))).as_posix()
        rep = report.build(summary, parity, claims, env, facts, config, device, method_checks(checks_dir), figs)
        write_text_atomic(dest, paper.render(rep, fmt))
