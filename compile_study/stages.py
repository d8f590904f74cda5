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

from compile_study.figures import speedup_vs_batch_size
from compile_study.io import write_json_atomic, write_text_atomic
from compile_study.report import render
from compile_study.summary import environment, load_records, summarize


def summary_stage(record_paths: Iterable[str | Path], summary_out: str | Path, environment_out: str | Path) -> pd.DataFrame:
    records = load_records(record_paths)
    summary = summarize(records)
    write_text_atomic(summary_out, summary.to_csv(index=False))
    write_json_atomic(environment_out, environment(records))
    return summary


def _device_title(env: dict) -> str:
    name = env["device_name"] if isinstance(env["device_name"], str) else ", ".join(env["device_name"])
    return f"torch.compile training speedup on {name} (torch {env['torch']})"


def figure_stage(summary_path: str | Path, environment_path: str | Path, outputs: list[str | Path]) -> None:
    env = json.loads(Path(environment_path).read_text())
    speedup_vs_batch_size(pd.read_csv(summary_path), _device_title(env), [str(p) for p in outputs])


def paper_stage(
    template: str | Path,
    summary_path: str | Path,
    environment_path: str | Path,
    facts_path: str | Path,
    figure_path: str | Path,
    out: str | Path,
    config: dict,
    device: str,
) -> None:
    text = render(
        template,
        pd.read_csv(summary_path),
        json.loads(Path(environment_path).read_text()),
        json.loads(Path(facts_path).read_text()),
        dict(
            config=config,
            grid=config["grids"][device],
            device=device,
            figure=os.path.relpath(figure_path, os.path.dirname(os.path.abspath(out))),
        ),
    )
    write_text_atomic(out, text)
