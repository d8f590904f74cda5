"""Regenerate summary, figure and paper from stored run records, without rerunning anything.

    python -m compile_study.rebuild reference/h200-2026-11-30-quick

The directory holds `config.yaml` (the study's merged config), `facts.json` (the data facts),
`runs/**/*.json` (the records) and, where the study produced them, `peak.json` (the measured matmul
peaks), `parity/**/*.json` and `claims/mlp.json`; summary.csv, parity.csv, claims.csv, environment.json,
figures/ and paper.md are written beside them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from compile_study.stages import figure_stage, paper_stage, summary_stage

TEMPLATE = Path(__file__).resolve().parents[1] / "paper" / "templates" / "paper.md.j2"


def rebuild(directory: str | Path, template: str | Path = TEMPLATE) -> Path:
    d = Path(directory)
    records = sorted(d.glob("runs/**/*.json"))
    if not records:
        raise SystemExit(f"{d}: no run records under runs/")
    config = yaml.safe_load((d / "config.yaml").read_text())
    device = json.loads(records[0].read_text())["env"]["device_type"]
    parity = sorted(d.glob("parity/**/*.json"))
    summary_stage(records, d / "peak.json", parity, d / "claims" / "mlp.json", d / "facts.json", d / "summary.csv",
                  d / "parity.csv", d / "environment.json", d / "claims.csv")
    figure_stage(d / "summary.csv", d / "environment.json", records, d / "figures")
    paper_stage(template, d / "summary.csv", d / "parity.csv", d / "environment.json", d / "facts.json", d / "figures",
                d / "paper.md", config, device, d / "claims.csv")
    return d / "paper.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", help="a directory with config.yaml, facts.json and runs/**/*.json")
    print(rebuild(parser.parse_args().directory))


if __name__ == "__main__":
    main()
