"""Remake a stored study's summary, figures and paper from its records, through the study's own DAG.

    python -m compile_study.rebuild reference/<name>
    # the same as: snakemake --cores 1 --directory reference/<name> --forcerun summarize

A stored study is a directory laid out as compile_study/layout.py says (config.yaml, facts.json, runs/, and
whatever parity/, peak.json, claims/mlp.json and checks/ the study produced); nothing is rerun.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from compile_study.layout import is_stored_study

SNAKEFILE = Path(__file__).resolve().parents[1] / "Snakefile"


def command(directory: str | Path, cores: int = 1) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--directory", str(directory),
            "--cores", str(cores), "--forcerun", "summarize", "--quiet", "rules"]


def rebuild(directory: str | Path) -> Path:
    """Regenerates the study's outputs in place; returns the path of its paper.md."""
    if not is_stored_study(directory):
        raise SystemExit(f"{directory}: not a stored study (it needs config.yaml and runs/)")
    subprocess.run(command(directory), check=True)
    return Path(directory) / "paper.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", help="a stored study: config.yaml, facts.json and runs/**/*.json")
    print(rebuild(parser.parse_args().directory))


if __name__ == "__main__":
    main()
