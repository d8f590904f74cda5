"""A stored study is remade by the study's own DAG from its records, byte for byte."""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from compile_study.core.layout import Layout
from compile_study.core.record import RunKey
from compile_study.report.docs import rebuild

from .conftest import REPO

STORED = sorted(p.parent for p in (REPO / "reference").glob("*/config.yaml"))
REGENERATED = ("summary.csv", "parity.csv", "claims.csv", "decisions.json", "environment.json", "paper.md", "paper.tex", "README.md") + (
    ("paper.pdf",) if shutil.which("latexmk") else ())  # the PDF too where it is built (its date is fixed)


@pytest.mark.golden
@pytest.mark.parametrize("study", STORED, ids=[p.name for p in STORED])
def test_a_stored_study_rebuilds_byte_identical_through_the_dag(study: Path, tmp_path):
    copy = tmp_path / study.name
    shutil.copytree(study, copy, ignore=shutil.ignore_patterns(".snakemake", ".latex"))
    for name in REGENERATED:
        (copy / name).unlink()  # nothing is left to reuse: the DAG makes every one of them again
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(rebuild.command(copy), check=True, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for name in REGENERATED:
        assert (copy / name).read_bytes() == (study / name).read_bytes(), f"{name} differs from the committed one"
    # Cheap: under a minute of CPU time (Snakemake and its jobs), whatever else shares the host (a wall-clock
    # limit failed on a 16-core GPU host whose other 15 test processes were compiling)
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert not any((copy / "runs").rglob("*.tmp")) and cpu_s < 60, cpu_s
    logs = copy / ".snakemake" / "rebuild-logs"  # a stored study's own logs/ are its run's; a rebuild logs apart
    assert re.search(r"paper\.md, paper\.tex: [\d,]+ words in the main text", (logs / "paper.log").read_text())
    if shutil.which("latexmk"):  # the PDF rule's log says what latexmk made
        said = re.search(r"^built paper\.pdf: (\d+) pages", (logs / "paper_pdf.log").read_text(), re.M)
        assert said and int(said[1]) > 5
        if shutil.which("pdfinfo"):
            info = subprocess.run(["pdfinfo", str(copy / "paper.pdf")], capture_output=True, text=True).stdout
            assert re.search(rf"^Pages:\s+{said[1]}$", info, re.M), info


@pytest.mark.unit
def test_a_live_and_a_stored_study_share_one_layout():
    live, stored = Layout("results/cuda"), Layout(".")
    key = RunKey("default", "module", 32, "static", "bf16", 0)
    assert live.record(key) == "results/cuda/" + stored.record(key)
    for attr in ("summary", "facts", "config", "claims", "decisions", "environment", "figures", "peak", "mlp"):
        assert getattr(live, attr) == "results/cuda/" + getattr(stored, attr)
    assert live.paper("pdf") == "results/cuda/paper.pdf" and stored.check("timer_check") == "checks/timer_check.json"


@pytest.mark.unit
def test_rebuild_refuses_a_directory_that_is_not_a_stored_study(tmp_path):
    with pytest.raises(SystemExit, match="not a stored study"):
        rebuild.rebuild(tmp_path)


@pytest.mark.golden
def test_the_project_readme_quotes_the_stored_study_as_generated():
    """README.md's and docs/'s generated blocks (the findings, results, the commands' times, the studies' times, the
    tier records, the portable starts, the columns, docs/reproduction.md's quoted pair and host effect and the
    README's line on each) are what compile_study.report.docs.project_docs makes from the stored studies today
    (rerun `python -m compile_study readme README.md` after a study or the summary changes)."""
    from compile_study.report.compare import host_effect, reproduction
    from compile_study.report.docs import opening, project_docs, reproduced

    study = project_docs.quoted_study(REPO)
    made = project_docs.update_documents(REPO, study.relative_to(REPO))
    assert set(made) == set(project_docs.documents(REPO)) and (REPO / "docs" / "running.md") in made
    for path, text in made.items():
        assert text == path.read_text(), f"{path.relative_to(REPO)}: a generated block is not current"
    current = made[REPO / "README.md"]
    assert f"reference/{study.name}/README.md" in current and "| 512 | `reduce-overhead` |" in current
    assert "<!-- commands:" in current and "<!-- times:" in (REPO / "docs" / "running.md").read_text()
    moved = made[REPO / "docs" / "reproduction.md"]
    assert all(b in moved and b not in current for b in (reproduction.BEGIN, host_effect.BEGIN))
    assert current.index(opening.FINDINGS[0]) < current.index("## ") and reproduced.SUMMARY[0] in current


def _nudged(obj):
    """obj with every float one unit in the last place larger (the noise another CPU's reductions make)."""
    import math

    if isinstance(obj, float):
        return math.nextafter(obj, math.inf) if obj else obj  # relative noise: a zero stays zero
    if isinstance(obj, dict):
        return {k: _nudged(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_nudged(v) for v in obj]
    return obj


@pytest.mark.golden
@pytest.mark.parametrize("study", STORED, ids=[p.name for p in STORED])
def test_a_stored_studys_tables_do_not_carry_the_reductions_order_or_the_last_digit(study: Path, tmp_path):
    """What another CPU would do to the aggregation (records read in another order, every measured value one
    unit in the last place away) leaves the summary, claims, decisions and environment byte-identical: they
    carry core/digits.py's fixed digits, not the platform's."""
    import json

    from compile_study.aggregate import summary
    from compile_study.measure.checks.spec import method_checks

    layout = Layout(str(study))
    runs = tmp_path / "runs"
    paths = []
    for i, path in enumerate(reversed(layout.stored_records())):  # read in the other order
        rec = json.loads(Path(path).read_text())
        rec["metrics"] = _nudged(rec["metrics"])
        rel = Path(path).relative_to(study)
        (runs / rel).parent.mkdir(parents=True, exist_ok=True)
        (runs / rel).write_text(json.dumps(rec))
        paths.append(str(runs / rel))
    names = {"summary": "summary.csv", "parity": "parity.csv", "environment": "environment.json",
             "claims": "claims.csv", "decisions": "decisions.json"}
    out = {k: str(tmp_path / v) for k, v in names.items()}
    optional = {name: layout.check(name) for name in method_checks()}
    summary.write(paths, layout.stored_parity(), layout.facts, out, layout.peak, layout.mlp,
                  {k: v for k, v in optional.items() if Path(v).exists()}, list(reversed(layout.stored_compiles())))
    for k, name in names.items():
        assert Path(out[k]).read_bytes() == (study / name).read_bytes(), f"{name} differs"
