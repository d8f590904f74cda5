"""Property-based tests of the paper: studies generated as run records (tests/generated_studies.py), aggregated and
rendered by the study's own code, and every invariant of tests/paper_invariants.py asserted on each paper; then
each invariant shown failing on a hand-made study whose paper breaks it the way an earlier paper did.

    python -m pytest -m property                                   # 2 x 100 generated studies (CPU, GPU)
    COMPILE_STUDY_STUDIES=1000 python -m pytest -m property        # 2 x 1,000 new ones, drawn afresh
    python -m pytest tests/test_invariants.py -m golden            # the stored studies' papers

The generated studies are a tier of their own (`property`: CI runs its 200); by default they are derandomized
(the same studies every run, so that a failure reproduces), and COMPILE_STUDY_STUDIES=<n> draws n new ones per
device instead. Hypothesis prints the smallest study it finds that breaks an invariant.
"""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from compile_study.aggregate.estimate.walltime import read_calls
from compile_study.report import appendix, paper

from . import generated_studies as gen
from . import judgement_invariants as judged
from . import paper_invariants as inv
from .conftest import REPO

STUDIES = int(os.environ.get("COMPILE_STUDY_STUDIES", "0"))  # 0: the derandomized 100 per device
PROPERTY = settings(max_examples=STUDIES or 100, deadline=None, database=None, derandomize=not STUDIES,
                    print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def assert_invariants(spec: gen.Spec) -> None:
    found = inv.check(gen.paper(spec))
    assert found == {}, json.dumps(found, indent=1)


@pytest.mark.property
@PROPERTY
@given(gen.studies(device="cpu", max_batches=2 if not STUDIES else 3))
def test_generated_cpu_studies_keep_every_invariant(spec):
    assert_invariants(spec)


@pytest.mark.property
@PROPERTY
@given(gen.studies(device="cuda", max_batches=2 if not STUDIES else 3))
def test_generated_gpu_studies_keep_every_invariant(spec):
    assert_invariants(spec)


@pytest.mark.golden
@pytest.mark.parametrize("study", sorted(p.parent.name for p in (REPO / "reference").glob("*/config.yaml")))
def test_every_stored_paper_keeps_every_invariant(study):
    """The committed tables, decisions, figures' index and papers' report models of the stored studies, with their
    records, compile records and method checks (what the invariants re-derive their judgements from)."""
    from compile_study.aggregate.figures.figures import read_index
    from compile_study.core import compile_record, record
    from compile_study.core.layout import Layout
    from compile_study.report.build import build, read_checks

    d = REPO / "reference" / study
    summary, config = pd.read_csv(d / "summary.csv"), yaml.safe_load((d / "config.yaml").read_text())
    checks = read_checks({n: d / f"checks/{n}.json" for n in appendix.CHECK_KEYS})  # as the paper rule reads them
    device = "cpu" if json.loads((d / "environment.json").read_text())["device_type"] == "cpu" else "cuda"
    decisions, drawn = json.loads((d / "decisions.json").read_text()), read_index(d / "figures")
    parity, facts = pd.read_csv(d / "parity.csv"), json.loads((d / "facts.json").read_text())
    rep = build(summary, parity, pd.read_csv(d / "claims.csv"), decisions, json.loads((d / "environment.json").read_text()),
                facts, config, device, checks, "figures",
                read_calls(d / "calls.jsonl") if (d / "calls.jsonl").is_file() else [], drawn)
    model = config["model"]
    spec = gen.Spec(device, "hf" if model.get("hf_config") else "factory" if model.get("factory") else None, {})
    by_name = {n: json.loads((d / f"checks/{n}.json").read_text()) for n in appendix.CHECK_KEYS
               if (d / f"checks/{n}.json").is_file()}
    context = {"config": config, "facts": facts, "decisions": decisions, "drawn": drawn, "parity": parity,
               "checks": by_name, "readme": (d / "README.md").read_text(),
               "runs": record.table(sorted(p for p in (d / "runs").rglob("r*.json") if "trace" not in p.name)),
               "compiles": compile_record.table(Layout(str(d)).stored_compiles())}  # cold compiles, portable starts
    found = inv.check(gen.Paper(spec, summary, rep, paper.render(rep, "md"), context))
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
    assert "the top is not one chain of overlapping intervals" in " ".join(inv.comparative_words(p))
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
                                             "a plugged model's paper says 'transformer'",
                                             "a plugged model's paper does not state its parameters"]


@pytest.mark.unit
def test_a_plugged_models_paper_in_the_built_in_models_words_is_caught():
    """The CNN's paper was titled "... a small transformer text classifier" and called its convolutions' FLOPs
    "matmul FLOPs"."""
    plugged = hand_made(plug="factory")
    assert plugged.markdown.startswith("# What torch.compile does to training a plugged text classifier, `GeneratedModel`")
    assert "flop_counter" in plugged.markdown and inv.device_and_model(plugged) == []
    plugged.markdown = plugged.markdown.replace("a plugged text classifier, `GeneratedModel`",
                                                "a small transformer text classifier", 1)
    plugged.markdown = plugged.markdown.replace("MFU is the FLOPs per step", "MFU is matmul FLOPs per step")
    found = inv.device_and_model(plugged)
    for word in ("small transformer", "transformer text classifier", "matmul FLOPs", "transformer"):
        assert f"a plugged model's paper says {word!r}" in found, word



# --- round two (issue 51): each judgement invariant, broken the way an earlier paper broke it -------------------------
def with_intervals(spec: gen.Spec, intervals: dict) -> gen.Paper:
    """The study's paper with some configurations' speedup intervals set: {(mode, scope, regime, batch): (point,
    low, high)}, each over three processes and faster than eager."""
    def edit(s: pd.DataFrame) -> pd.DataFrame:
        for (mode, scope, regime, batch), (point, low, high) in intervals.items():
            at = (s.compile_mode == mode) & (s.compile_scope == scope) & (s.shape_regime == regime) & (s.batch_size == batch)
            s.loc[at, ["speedup", "speedup_low", "speedup_high", "speedup_n", "verdict", "payback"]] = [
                point, low, high, 3, "faster", "pays-after"]
        return s
    return gen.paper(spec, edit)


def _study(device: str, batches: list[int], modes: list[str], scopes=("module",), precision="bf16", **kw) -> gen.Spec:
    C = gen.Configuration
    configs = [C(m, s, "static", precision, b, 1.0 if m == "eager" else 1.5, 0.01, 3, 3 if m != "eager" else 1)
               for b in batches for m in ["eager", *modes] for s in (("module",) if m == "eager" else scopes)
               if gen.vocab.runs_with(m, s, "static")]
    return gen.Spec(device, kw.pop("plug", None), {(precision, b): 10.0 for b in batches}, configs, seed=3, **kw)


@pytest.mark.unit
def test_a_recommendation_among_overlapping_intervals_is_caught():
    """At batch 512 the paper recommended `default` (module) at 1.57x [1.26, 1.96] beside the best, and not
    `reduce-overhead` (module) at 1.74x [1.73, 1.75], whose whole interval lies inside default's: the old rule put
    in the top only what overlapped the best. Today one answer: the fastest and the soonest to pay back among
    those not shown slower; a configuration below them, or "any of" a chain, is caught."""
    p = with_intervals(_study("cuda", [512], ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]), {
        ("max-autotune", "module", "static", 512): (1.775, 1.77, 1.78), ("default", "module", "static", 512): (1.57, 1.26, 1.96),
        ("reduce-overhead", "module", "static", 512): (1.74, 1.73, 1.75),
        ("max-autotune-no-cudagraphs", "module", "static", 512): (1.2, 1.15, 1.25)})
    ranking = _ranking(p)
    assert len(ranking["top"]) == 3 and len(ranking["below"]) == 1  # one chain above the fourth
    assert judged.recommendations_separated(p) == [] and inv.comparative_words(p) == []
    rows = next(t for t in inv.texts(p.report) if (t.file, t.macro) == ("payback", "rule")).data["p"]["rows"]
    assert next(c for c in rows if c["mode"] == "max-autotune")["recommended"]  # the fastest
    assert not next(c for c in rows if c["mode"] == "max-autotune-no-cudagraphs")["recommended"]
    ranking["below"] = [c for c in ranking["top"] if c["mode"] == "reduce-overhead"]  # the old rule's ranking
    ranking["top"] = [c for c in ranking["top"] if c["mode"] != "reduce-overhead"]
    assert any("reduce-overhead (module) is called below default (module) but overlaps it" in v
               for v in inv.comparative_words(p))
    next(c for c in rows if c["mode"] == "max-autotune-no-cudagraphs")["recommended"] = True  # shown slower
    assert any("max-autotune-no-cudagraphs (module) at batch 512 is recommended" in v
               for v in judged.recommendations_separated(p))
    p.markdown += "\nAt batch 512, use any of `default` (module) and `max-autotune` (module).\n"
    assert any("use any of" in v for v in judged.recommendations_separated(p))


@pytest.mark.unit
def test_a_trend_that_one_of_its_configurations_breaks_is_caught():
    """The abstract read "... by more at batch 32 than at batch 512" while `default` (module) was 1.27x at 32 and
    1.57x at 512: the trend came from `reduce-overhead` alone."""
    p = with_intervals(_study("cuda", [32, 512], ["default", "reduce-overhead"]), {
        ("default", "module", "static", 32): (1.27, 1.20, 1.34), ("default", "module", "static", 512): (1.57, 1.26, 1.96),
        ("reduce-overhead", "module", "static", 32): (2.94, 2.78, 3.11),
        ("reduce-overhead", "module", "static", 512): (1.74, 1.73, 1.75)})
    assert judged.trends_hold(p) == [] and "by more at batch" not in p.markdown
    assert "larger with `reduce-overhead` (module); not measurably different" in p.markdown
    p.markdown = p.markdown.replace("measured in three or more processes.", "measured in three or more processes, by "
                                    "more at batch 32 than at batch 512.", 1)
    p.markdown = p.markdown.replace("larger with `reduce-overhead` (module); not measurably different (the intervals "
                                    "overlap) with `default` (module)", "larger with `reduce-overhead` (module)")
    found = judged.trends_hold(p)
    assert "the takeaway's trend does not hold for default (bf16): indistinct" in found
    assert "the trend sentence leaves out default" in found


@pytest.mark.unit
def test_padding_costs_nothing_every_precision_and_the_host_pace_without_their_evidence_are_caught():
    """A kick-the-tires paper said "padding to max_len costs nothing here" with no compiled bucketed or packed
    configuration in its grid; the RoBERTa paper said "in every profiled configuration the host sets the pace"
    against its own table's 1.04x; both said "every precision" with bf16 alone."""
    p = hand_made()
    assert judged.evidence_present(p) == [] and "every precision" not in p.markdown
    p.markdown = p.markdown.replace("\n## Appendix", (
        "\n- At batch 32, padding to max_len costs nothing here: `default` (module) on static batches gains more.\n\n"
        "Table 1 gives the module compiled in every precision.\n\nIn every profiled configuration the host sets the "
        "pace, so the speedups may not carry.\n\n## Appendix"), 1)
    p.summary.loc[p.summary.compile_mode == "default", "host_ratio"] = 1.04
    found = judged.evidence_present(p)
    assert any("'padding to max_len costs nothing' with no compiled regime that pads less" in v for v in found)
    assert "'every precision' with one precision" in found
    assert any("host is said to set the pace of default (module) at batch 32, 1.04x" in v for v in found)


@pytest.mark.unit
def test_a_timer_correction_without_eager_timed_and_without_its_rounds_is_caught():
    """The timer check corrected `default` at batch 512 by 1.07x without timing eager at 512, and never said that
    its rounds spread by 10%."""
    spec = _study("cuda", [32], ["reduce-overhead"], timer=(("reduce-overhead", 32, "bf16", 0.93, False),))
    p = gen.paper(spec)
    assert judged.timer_corrections(p) == [] and "did not time eager at batch 32" in p.markdown
    found = p.context["decisions"]["checks"]["timer"][0]
    assert not found["corrected"] and "moved" not in found
    found["moved"] = {"point": 1.4, "low": 1.3, "high": 1.5, "method": "", "n": 3, "level": 0.95}  # eager read as 1
    para = next(t for t in inv.texts(p.report) if (t.file, t.macro) == ("appendix", "timer"))
    para.data["found"][0] |= {"spread": None}  # the old paragraph: no rounds
    found = judged.timer_corrections(p)
    assert "reduce-overhead at batch 32 is corrected by a timer check that did not time eager there" in found
    assert "a timer check's disagreement is given without the spread of its rounds" in found


@pytest.mark.unit
def test_parity_at_chance_a_readme_of_empty_lists_and_a_gain_without_eagers_are_caught():
    """The CPU paper's parity "passed" at 25% accuracy, chance for four classes; its README printed "triton [],
    CUDA [], driver []"; it quoted the dynamic gain 1.14x with no word of eager's 1.27x on the same batches."""
    C = gen.Configuration
    spec = gen.Spec("cpu", None, {("fp32", 8): 10.0}, [
        C("eager", "module", "static", "fp32", 8, 1.0, 0.01, 3, 1), C("default", "module", "static", "fp32", 8, 1.0, 0.01, 3, 3),
        C("eager", "module", "dynamic", "fp32", 8, 1.0, 0.0, 1, 1), C("default", "module", "dynamic", "fp32", 8, 0.9, 0.0, 1, 1)],
        seed=5, accuracy=(("default", "fp32", 0.25, 0.25),))
    p = gen.paper(spec)
    assert judged.chance_and_words(p) == []
    parity = next(t for t in inv.tables(p.report) if t.key == "parity")
    assert parity.rows[0][-1] == "at chance (25.0%)" and "no triton, CUDA or driver" in p.context["readme"]
    parity.rows[0][-1] = "pass"  # the old verdict: within a point of eager's, both at chance
    p.context["readme"] += "\n- Hardware and versions: a 2-core CPU; torch 2.11.0, triton [], CUDA [], driver [].\n"
    shapes = next(t for t in inv.texts(p.report) if (t.file, t.macro) == ("shapes", "findings"))
    for c in shapes.data["found"][0]["few"]:
        c["eager"] = None  # the old sentence: the compiled gain alone
    found = judged.chance_and_words(p)
    assert any(v.startswith("parity of default (fp32) passes at 25%") for v in found)
    assert "the README prints '[]'" in found
    assert "default on dynamic batches at batch 8: its gain without eager's" in found


@pytest.mark.unit
def test_an_abstract_with_terms_used_before_they_are_defined_is_caught():
    """The yardstick's abstract named `default` (step-graph) and packed batches without saying what they are (its
    215 words: tests/test_readability.py)."""
    p = hand_made()
    assert judged.abstract_readable(p) == []
    old = ("On NVIDIA H200, `torch.compile(model)` trained faster than eager in each of the two static-shape "
           "configurations measured in three or more processes. At batch 32 in bf16, `default` (step-graph) is the "
           "fastest of the configurations with three or more processes, at 10.44× [6.40, 17.04]. At batch 512, "
           "`reduce-overhead` (module) on packed batches gives the most real tokens per second. " + "Words " * 160)
    abstract = p.markdown.partition("\n## Abstract\n")[2].partition("\n## ")[0]
    p.markdown = p.markdown.replace(abstract, "\n" + old + "\n\n")
    found = judged.abstract_readable(p)
    for term in ("static-shape", r"\(step-graph\)", "packed batches", r"\(module\)"):
        assert any(f"uses {term!r} before defining it" in v for v in found), term


# --- issue 68: the step graph's speedup split into the CUDA graph's and the compiler's ----------------------------
def _graph_study(control: bool) -> gen.Spec:
    """Eager, the module and the step graph at batches 32 and 512; its eager control at 32 where `control`."""
    C = gen.Configuration
    configs = [C("eager", "module", "static", "bf16", b, 1.0, 0.01, 3, 1) for b in (32, 512)]
    configs += [C("default", s, "static", "bf16", b, x, 0.05, 3, 3) for b in (32, 512)
                for s, x in (("module", 1.5), ("step-graph", 6.0))]
    configs += [C("eager", "eager-step-graph", "static", "bf16", 32, 4.0, 0.05, 3, 1)] if control else []
    return gen.Spec("cuda", None, {("bf16", b): 10.0 for b in (32, 512)}, configs, seed=3)


@pytest.mark.unit
def test_the_step_graph_split_is_said_where_its_control_ran_and_a_wrong_or_missing_split_is_caught():
    """The split sentence appears at batch 32 (control measured), the not-yet-measured one at 512 (none); its numbers
    multiply back to the step graph's speedup. A split whose compiler share does not, a split dropped and a
    not-yet-measured sentence dropped are each caught."""
    import dataclasses
    import re

    p = gen.paper(_graph_study(control=True))
    assert inv.graph_split(p) == []
    (said,) = inv.SPLIT.finditer(inv.plain(p.markdown))
    assert (said[1], said[3]) == ("default", "32")
    assert "not yet measured" in p.markdown and "`default` (step-graph) at batch 512" in p.markdown
    wrong = inv.plain(p.markdown).replace(f"and {said[5]}×", "and 9.99×")
    assert any("the split reads" in v for v in inv.graph_split(dataclasses.replace(p, markdown=wrong)))
    assert any("is not its" in v for v in inv.graph_split(dataclasses.replace(p, markdown=wrong)))
    dropped = re.sub(r"Of `default` \(step-graph\)'s .*? the compiler's\.", "", inv.plain(p.markdown))
    assert inv.graph_split(dataclasses.replace(p, markdown=dropped)) == [
        "default (step-graph) at batch 32: both it and its control were measured, and the paper does not split its "
        "speedup"]
    q = gen.paper(_graph_study(control=False))
    assert inv.graph_split(q) == [] and not inv.SPLIT.search(inv.plain(q.markdown))
    quiet = inv.UNSPLIT.sub("", inv.plain(q.markdown))
    assert len(inv.graph_split(dataclasses.replace(q, markdown=quiet))) == 2  # both batches unsaid
