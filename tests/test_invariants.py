"""Property-based tests of the paper: studies generated as run records (tests/generated_studies.py), aggregated and
rendered by the study's own code, and every invariant of tests/paper_invariants.py asserted on each paper; then
each invariant shown failing on a hand-made study whose paper breaks it the way an earlier paper did.

    python -m pytest tests/test_invariants.py -m unit      # 2 x 100 generated studies (CPU, GPU)
    python -m pytest tests/test_invariants.py -m golden    # 1,000 more, and the stored studies' papers

The unit profile is derandomized (the same studies every run, so a failure reproduces); the golden one draws new
ones each time. Hypothesis prints the smallest study it finds that breaks an invariant.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from compile_study.aggregate.walltime import read_calls
from compile_study.report import appendix, paper

from . import generated_studies as gen
from . import paper_invariants as inv
from .conftest import REPO

UNIT = settings(max_examples=100, deadline=None, database=None, derandomize=True, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
LARGE = settings(UNIT, max_examples=1000, derandomize=False)


def assert_invariants(spec: gen.Spec) -> None:
    found = inv.check(gen.paper(spec))
    assert found == {}, json.dumps(found, indent=1)


@pytest.mark.unit
@UNIT
@given(gen.studies(device="cpu", max_batches=2))
def test_generated_cpu_studies_keep_every_invariant(spec):
    assert_invariants(spec)


@pytest.mark.unit
@UNIT
@given(gen.studies(device="cuda", max_batches=2))
def test_generated_gpu_studies_keep_every_invariant(spec):
    assert_invariants(spec)


@pytest.mark.golden
@LARGE
@given(gen.studies())
def test_a_thousand_more_generated_studies_keep_every_invariant(spec):
    assert_invariants(spec)


@pytest.mark.golden
@pytest.mark.parametrize("study", sorted(p.parent.name for p in (REPO / "reference").glob("*/config.yaml")))
def test_every_stored_paper_keeps_every_invariant(study):
    """The committed tables, decisions and papers' report models of the stored studies."""
    from compile_study.report.build import build, read_checks

    d = REPO / "reference" / study
    summary, config = pd.read_csv(d / "summary.csv"), yaml.safe_load((d / "config.yaml").read_text())
    checks = read_checks({n: d / f"checks/{n}.json" for n in appendix.CHECK_KEYS})  # as the paper rule reads them
    device = "cpu" if json.loads((d / "environment.json").read_text())["device_type"] == "cpu" else "cuda"
    rep = build(summary, pd.read_csv(d / "parity.csv"), pd.read_csv(d / "claims.csv"),
                json.loads((d / "decisions.json").read_text()), json.loads((d / "environment.json").read_text()),
                json.loads((d / "facts.json").read_text()), config, device, checks, "figures",
                read_calls(d / "calls.jsonl") if (d / "calls.jsonl").is_file() else [], {})
    model = config["model"]
    spec = gen.Spec(device, "hf" if model.get("hf_config") else "factory" if model.get("factory") else None, {})
    found = inv.check(gen.Paper(spec, summary, rep, paper.render(rep, "md"), {"config": config}))
    assert found == {}, json.dumps(found, indent=1)


# --- each invariant, broken by a hand-made study -------------------------------------------------------------------
def hand_made(device: str = "cuda", plug: str | None = None) -> gen.Paper:
    """Eager and two compiled modes at batch 32, three processes each: `reduce-overhead` clearly faster than
    `default`, both faster than eager."""
    C = gen.Configuration
    precision = "fp32" if device == "cpu" else "bf16"
    spec = gen.Spec(device, plug, {(precision, 32): 10.0}, [
        C("eager", "module", "static", precision, 32, 1.0, 0.01, 3, 1),
        C("default", "module", "static", precision, 32, 1.3, 0.01, 3, 3),
        C("reduce-overhead", "module", "static", precision, 32, 3.0, 0.01, 3, 3)])
    p = gen.paper(spec)
    assert inv.check(p) == {}  # as the study's code makes it, it keeps every invariant
    return p


def _ranking(p: gen.Paper) -> dict:
    t = next(t for t in inv.texts(p.report) if t.file == "modes" and t.macro == "results")
    return t.data["batches"][0]


@pytest.mark.unit
def test_a_ranking_against_the_rule_or_on_too_few_processes_is_caught():
    p = hand_made()
    ranking = _ranking(p)
    assert [c["mode"] for c in ranking["top"] + ranking["below"]] == ["reduce-overhead", "default"]
    ranking["top"].append(ranking["below"].pop())  # "not distinguishable" for two intervals that do not overlap
    assert "is in the top but the rule separates it from the best" in " ".join(inv.comparative_words(p))
    p = hand_made()
    p.markdown = p.markdown.replace("## Setup", "`default` (module) is faster than eager at 1.30× (single run).\n\n## Setup")
    assert any("quotes fewer processes" in v for v in inv.comparative_words(p))


@pytest.mark.unit
def test_a_threshold_that_is_not_its_configurations_break_even_is_caught():
    """The paper once advised 'runs longer than 34,835 steps', the longest break-even of all, and called every
    shorter run sooner eager, though Table 2 gave reduce-overhead at batch 32 a break-even of 1,817 steps."""
    p = hand_made()
    row = p.summary.query("compile_mode == 'reduce-overhead' and shape_regime == 'static'").iloc[0]
    right = f"pays after {paper.numbers.steps(row.break_even_steps)} steps"
    assert right in p.markdown
    p.markdown = p.markdown.replace(right, "pays after 34,835 steps")
    p.markdown += "\nCompile only for runs longer than 34,835 steps: that is the longest break-even. Shorter runs finish sooner eager.\n"
    found = inv.recommendations(p)
    assert any("not its break-even" in v for v in found) and any("longest break-even" in v for v in found)
    assert any("not tied to its configuration" in v for v in found)


@pytest.mark.unit
def test_a_number_of_the_abstract_in_no_table_is_caught():
    p = hand_made()
    p.markdown = p.markdown.replace("\n## Abstract\n\n", "\n## Abstract\n\nCompiled, it ran 9.87× faster.\n", 1)
    assert inv.numbers_traced(p) == ["9.87 (in the abstract) is in no table"]


@pytest.mark.unit
def test_a_duplicated_row_and_a_configuration_in_no_table_are_caught():
    """The shapes table once held two rows '512 | eager | static' (bf16 and fp32) with no precision column."""
    p = hand_made()
    modes = next(t for t in inv.tables(p.report) if t.key == "modes")
    modes.rows.append(list(modes.rows[0]))
    p.markdown += "\nAt batch 64, `max-autotune` (module) at batch 64 ran best.\n"
    found = inv.tables_and_names(p)
    assert any(v.startswith("table modes: two rows read") for v in found)
    assert any("`max-autotune` (module) at batch 64' names a configuration no table holds" in v for v in found)


@pytest.mark.unit
def test_gpu_words_in_a_cpu_paper_and_built_in_words_in_a_plugged_one_are_caught():
    cpu = hand_made("cpu")
    assert "TF32" not in cpu.markdown and inv.device_and_model(cpu) == []
    cpu.markdown += "\nThe fp32 runs kept TF32 off. Versions: torch 2.11, Triton —.\n"
    assert inv.device_and_model(cpu) == ["a CPU paper says 'TF32'", "a CPU paper says 'Triton'"]
    plugged = hand_made(plug="hf")
    assert "2 layers of width 128" in plugged.markdown and "1,234,567 parameters" in plugged.markdown
    plugged.markdown = plugged.markdown.replace("1,234,567 parameters", "its parameters") + "\n a 4-layer transformer"
    assert inv.device_and_model(plugged) == ["a plugged model's paper says '-layer transformer'",
                                             "a plugged model's paper does not state its parameters"]

