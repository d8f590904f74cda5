"""Regenerate summary, figure and paper from stored run records, without rerunning anything.

    python -m compile_study.rebuild reference/h200-2026-11-30-quick

The directory holds `config.yaml` (the study's merged config), `facts.json` (the data facts),
`runs/**/*.json` (the records) and, where the study produced them, `peak.json` (the measured matmul
peaks), `parity/**/*.json` and `claims/mlp.json`; summary.csv, parity.csv, claims.csv, environment.json,
figures/, paper.md and paper.tex (its LaTeX twin) are written beside them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from compile_study.stages import figure_stage, paper_stage, summary_stage

TEMPLATE = Path(__file__).resolve().parents[1] / "paper" / "templates" / "paper.md.j2"
TEX_TEMPLATE = TEMPLATE.with_name("paper.tex.j2")


def rebuild(directory: str | Path, template: str | Path = TEMPLATE, tex_template: str | Path = TEX_TEMPLATE) -> Path:
    """Writes paper.md and paper.tex into directory; returns the path of paper.md."""
    d = Path(directory)
    records = sorted(d.glob("runs/**/*.json"))
    if not records:
        raise SystemExit(f"{d}: no run records under runs/")
    old = [str(p) for p in records if json.loads(p.read_text()).get("schema_version", 1) < 2]
    if old:
        raise SystemExit(f"{d}: {len(old)} records of schema version 1 (e.g. {old[0]}); they are rendered by the "
                         "commit that made them (see the directory's README), not by this one")
    config = yaml.safe_load((d / "config.yaml").read_text())
    device = json.loads(records[0].read_text())["env"]["device_type"]
    parity = sorted(d.glob("parity/**/*.json"))
    summary_stage(records, d / "peak.json", parity, d / "claims" / "mlp.json", d / "facts.json", d / "summary.csv",
                  d / "parity.csv", d / "environment.json", d / "claims.csv")
    figure_stage(d / "summary.csv", d / "environment.json", records, d / "figures")
    paper_stage(template, d / "summary.csv", d / "parity.csv", d / "environment.json", d / "facts.json", d / "figures",
                d / "paper.md", config, device, d / "claims.csv", tex_template=tex_template, tex_out=d / "paper.tex",
                checks_dir=d)
    return d / "paper.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", help="a directory with config.yaml, facts.json and runs/**/*.json")
    print(rebuild(parser.parse_args().directory))


if __name__ == "__main__":
    main()
