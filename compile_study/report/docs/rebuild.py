"""Remake a stored study's summary, figures and paper from its records, through the study's own DAG.

    python -m compile_study rebuild reference/<name>
    # the same as: snakemake --cores 1 --directory reference/<name> --forcerun summarize
    python -m compile_study rebuild --all
    # every golden file: reference/host-effect.json, each stored study under reference/, README's and docs/'s blocks

A stored study is a directory laid out as compile_study/core/layout.py says (config.yaml, facts.json, runs/, and
whatever parity/, peak.json, claims/mlp.json and measure/checks/ the study produced); nothing is rerun. After an
intended change of wording or of a summary column, `--all` regenerates what tests/test_rebuild.py compares.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from compile_study.core.layout import STORED, Layout, is_stored_study
from compile_study.core.layout import stored_studies as studies_holding

PROJECT = Path(__file__).resolve().parents[3]
SNAKEFILE = PROJECT / "Snakefile"


def command(directory: str | Path, cores: int = 1) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--directory", str(directory),
            "--cores", str(cores), "--forcerun", "summarize", "--quiet", "rules"]


def rebuild(directory: str | Path) -> Path:
    """Regenerates the study's outputs in place; returns the path of its paper.md."""
    if not is_stored_study(directory):
        raise SystemExit(f"{directory}: not a stored study (it needs config.yaml and runs/)")
    subprocess.run(command(directory), check=True)
    return Path(Layout(str(directory)).paper("md"))


def stored_studies(project: Path = PROJECT) -> list[Path]:
    return [s for s in studies_holding(Layout(".").config, project / STORED) if is_stored_study(s)]


def rebuild_all(project: Path = PROJECT) -> list[Path]:
    """Every golden file: the host-effect estimate the reproduction reports read, the finding across GPU kinds
    (kinds.json, layout.KINDS), each stored study rebuilt, then the generated blocks of README.md and docs/ (among
    them docs/reproduction.md's quoted pair, judged again with the estimate, and its host effect) -> the files
    rewritten."""
    from compile_study.aggregate.compare import kinds
    from compile_study.core.layout import host_effect_path
    from compile_study.report.compare import host_effect
    from compile_study.report.docs import project_docs

    host_effect.main(["--project", str(project)])
    found = kinds.write(project)  # what each GPU study's paper quotes across kinds
    papers = [rebuild(study) for study in stored_studies(project)]
    project_docs.main([str(project / "README.md")])
    return [host_effect_path(project), found] + papers + project_docs.documents(project)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", nargs="?", help="a stored study: config.yaml, facts.json and runs/**/*.json")
    parser.add_argument("--all", action="store_true", help="every stored study under reference/ and the README block")
    args = parser.parse_args(argv)
    if args.all == bool(args.directory):
        parser.error("give a stored study's directory or --all")
    for path in rebuild_all() if args.all else [rebuild(args.directory)]:
        print(path)


if __name__ == "__main__":
    main()
