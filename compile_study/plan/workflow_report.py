"""What Snakemake's own report shows beside the files the rules mark with `report(...)` (their captions are
workflow/report/*.rst):

    snakemake --report results/cpu/report.html     # after a study: its paper, figures, tables, software, rules, run times

`software` gives the report's columns for environment.json: the versions and hardware the run records name.
"""

from __future__ import annotations

import json
from pathlib import Path

# environment.json's key -> the report's column (record.ENV_KEYS; a key lists every distinct value the records had)
SOFTWARE = {"torch": "torch", "triton": "Triton", "cuda": "CUDA", "python": "Python", "driver": "driver",
            "device_name": "device", "git_commit": "commit"}


def software(wildcards, output) -> dict[str, str]:
    """The labels of environment.json in the report (Snakemake calls this with the summarize job's output)."""
    env = json.loads(Path(output.environment).read_text())
    return {label: _text(env.get(key), key) for key, label in SOFTWARE.items()}


def _text(value, key: str) -> str:
    values = [str(v) for v in (value if isinstance(value, list) else [value]) if v not in (None, "")]
    if key == "git_commit":
        values = [v[:12] for v in values]
    return ", ".join(values) or "none"
