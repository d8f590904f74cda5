"""Snakemake's own report (`snakemake --report report.html`): the captions of workflow/report/ and the columns
`compile_study/plan/workflow_report.py` gives it. tests/test_workflow.py makes the tiny study's report and
checks that it shows every figure (`report_results` reads it)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from docutils.core import publish_parts
from jinja2 import Environment, StrictUndefined

from compile_study.aggregate.figures import figures
from compile_study.plan import workflow_report

from .conftest import GPU_REFERENCE, REPO

CAPTIONS = REPO / "workflow" / "report"


# The link targets Snakemake adds to every caption (snakemake/report/__init__.py), for a caption's Workflow_
LINKS = "\n\n.. _Workflow: javascript:show_panel('workflow')\n.. _Statistics: javascript:show_panel('statistics')\n"


def caption_html(name: str, **wildcards) -> str:
    """A caption as Snakemake renders it (Jinja2 with its settings, then docutils), failing on an undefined name;
    a docutils warning or error shows in the HTML as a system-message."""
    env = Environment(trim_blocks=True, lstrip_blocks=True, undefined=StrictUndefined)
    snakemake = SimpleNamespace(wildcards=SimpleNamespace(**wildcards), config={"device": "cpu"})
    text = env.from_string((CAPTIONS / name).read_text() + LINKS).render(snakemake=snakemake, categories={}, files=[])
    settings = {"report_level": 2, "halt_level": 5, "warning_stream": False}
    return publish_parts(text, writer="html", settings_overrides=settings)["body"]


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


def report_variable(html: str, name: str):
    """One of the JSON values a Snakemake report's page declares (`var results = {...};`)."""
    for match in re.finditer(rf"var {name} = ", html):  # the page's scripts declare other variables so named
        try:
            return json.JSONDecoder().raw_decode(html, match.end())[0]
        except json.JSONDecodeError:
            continue
    raise AssertionError(f"the report declares no {name} as JSON")


def text(html: str) -> str:
    return " ".join(re.sub("<[^>]+>", " ", html).split())


def check_report(report: Path, drawn: dict, rules: set[str]) -> None:
    """The study's Snakemake report shows every figure it drew, each with its caption, the paper, the software
    columns and the run time of every rule named."""
    html = report.read_text()
    results = {Path(path).name: entry for path, entry in report_variable(html, "results").items()}
    figures_shown = {name for name, e in results.items() if e["job_properties"]["rule"] == "figures"}
    assert figures_shown == {f"{name}.png" for name in drawn}
    for name in drawn:
        entry = results[f"{name}.png"]
        assert entry["labels"] == {"figure": name} and entry["mime_type"] == "image/png"
        assert text(entry["caption"]) == text(caption_html("figure.rst", figure=name))
    assert results["paper.md"]["labels"] == {"format": "Markdown"}
    env = report.parent / "environment.json"
    software = workflow_report.software(None, SimpleNamespace(environment=str(env)))
    assert results["environment.json"]["labels"] == software
    assert software["commit"] == json.loads(env.read_text())["git_commit"][:12]
    timed = {row["rule"] for row in report_variable(html, "runtimes_spec")["data"]["values"]}
    assert rules <= timed and rules <= set(report_variable(html, "rules"))
