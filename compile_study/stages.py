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

from compile_study import figures
from compile_study.io import write_text_atomic
from compile_study.report import render

def read_json_if_there(path, default=None):
    return json.loads(Path(path).read_text()) if path and Path(path).is_file() else default


def _device_title(env: dict) -> str:
    name = env["device_name"] if isinstance(env["device_name"], str) else ", ".join(env["device_name"])
    return f"torch.compile training on {name} (torch {env['torch']})"


def figure_stage(
    summary_path: str | Path, environment_path: str | Path, record_paths: Iterable[str | Path], out_dir: str | Path
) -> list[Path]:
    """All figures into out_dir as <name>.png and <name>.pdf."""
    summary = pd.read_csv(summary_path)
    title = _device_title(json.loads(Path(environment_path).read_text()))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures.speedup_vs_batch_size(summary, title, out / "speedup")
    figures.regimes(summary, title, out / "regimes")
    figures.buckets(summary, title, out / "buckets")
    figures.timeline(list(record_paths), title, out / "timeline")
    figures.kernels(summary, title, out / "kernels")
    return [out / f"{name}.{ext}" for name in figures.FIGURES for ext in ("png", "pdf")]


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
    targets = [(template, out, False)] + ([(tex_template, tex_out, True)] if tex_template is not None else [])
    for tpl, dest, latex in targets:
        context = dict(
            config=config,
            grids=config["grids"][device],
            device=device,
            figures=Path(os.path.relpath(figure_dir, os.path.dirname(os.path.abspath(dest)))).as_posix(),
            checks=method_checks(checks_dir),
        )
        write_text_atomic(dest, render(tpl, summary, parity, env, facts, context, claims, latex=latex))
