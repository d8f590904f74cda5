"""Snakemake's own report (`snakemake --report report.html`): the captions of workflow/report/ and the columns
`compile_study/report/workflow_report.py` gives it. tests/test_workflow.py makes the tiny study's report and
checks that it shows every figure (`report_results` reads it)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from docutils.core import publish_parts
from jinja2 import Environment, StrictUndefined

from compile_study.aggregate import figures
from compile_study.report import workflow_report

from .conftest import GPU_REFERENCE, REPO

CAPTIONS = REPO / "workflow" / "report"


def caption_html(name: str, **wildcards) -> str:
    """A caption as Snakemake renders it (Jinja2 with its settings, then docutils), failing on an undefined name."""
    env = Environment(trim_blocks=True, lstrip_blocks=True, undefined=StrictUndefined)
    snakemake = SimpleNamespace(wildcards=SimpleNamespace(**wildcards), config={"device": "cpu"})
    text = env.from_string((CAPTIONS / name).read_text()).render(snakemake=snakemake, categories={}, files=[])
    return publish_parts(text, writer="html", settings_overrides={"report_level": 5})["body"]


@pytest.mark.unit
@pytest.mark.parametrize("figure", figures.FIGURES)
def test_every_figure_the_study_can_draw_has_its_caption(figure):
    html = caption_html("figure.rst", figure=figure)
    assert "system-message" not in html and f"<tt class=\"docutils literal\">{figure}</tt>" in html
    assert len(re.sub("<[^>]+>", "", html).split()) > 30  # what it shows, then where it is drawn from


@pytest.mark.unit
@pytest.mark.parametrize("name", ["paper.rst", "summary.rst", "claims.rst", "software.rst", "workflow.rst"])
def test_every_caption_renders_without_a_docutils_error(name):
    html = caption_html(name)
    assert "system-message" not in html and len(re.sub("<[^>]+>", "", html).split()) > 20


@pytest.mark.unit
def test_the_software_columns_are_the_versions_the_records_name():
    output = SimpleNamespace(environment=str(GPU_REFERENCE / "environment.json"))
    env = json.loads((GPU_REFERENCE / "environment.json").read_text())
    assert workflow_report.software(None, output) == {
        "torch": env["torch"], "Triton": env["triton"], "CUDA": env["cuda"], "Python": env["python"],
        "driver": env["driver"], "device": env["device_name"], "commit": env["git_commit"][:12]}


@pytest.mark.unit
def test_a_cpu_study_has_no_cuda_and_several_values_are_all_listed(tmp_path):
    path = tmp_path / "environment.json"
    path.write_text(json.dumps({"torch": ["2.13.0+cpu", "2.13.1+cpu"], "triton": [], "cuda": [], "driver": [],
                                "python": "3.11.2", "device_name": "Intel(R) Xeon(R) Processor", "git_commit": "0" * 40}))
    labels = workflow_report.software(None, SimpleNamespace(environment=str(path)))
    assert labels["torch"] == "2.13.0+cpu, 2.13.1+cpu" and labels["CUDA"] == labels["Triton"] == "none"
    assert labels["commit"] == "0" * 12


def report_results(html: str) -> dict[str, dict]:
    """The results a Snakemake report holds: file name -> its entry (caption, labels, category...)."""
    match = re.search(r"var results = (\{.*?\});\n", html, re.S)
    assert match, "no results in the report"
    return {Path(k).name: v for k, v in json.loads(match[1]).items()}
