"""Each invariant of what compiling costs and of the figures (tests/cost_invariants.py) shown failing on a hand-made
study whose paper breaks it the way an earlier paper did; tests/test_invariants.py holds them on generated
studies and the stored ones.

    python -m pytest tests/test_cost_invariants.py -m unit
"""

from __future__ import annotations

import pytest

from . import cost_invariants as costs
from . import generated_studies as gen
from . import paper_invariants as inv
from .test_invariants import _study, hand_made

pytestmark = pytest.mark.unit


def _text(p: gen.Paper, file: str, macro: str):
    return next(t for t in inv.texts(p.report) if (t.file, t.macro) == (file, macro))


def searched_study(concurrency=(1.3, 1.4, 1.5)) -> gen.Paper:
    """A compile phase of eight at once: `default` compiled among the others, `max-autotune` searching its GEMMs
    alone, `max-autotune-no-cudagraphs` starting from that search; the compile-concurrency check beside them."""
    p = gen.paper(_study("cuda", [512], ["default", "max-autotune", "max-autotune-no-cudagraphs"], phase=8,
                         concurrency=concurrency))
    assert inv.check(p) == {}
    return p


def test_a_break_even_that_leaves_out_its_search_or_charges_contended_compiles_is_caught():
    """max-autotune-no-cudagraphs' break-even (5,987 steps) once used its own 29 s, "cold, GEMM search shared",
    while the search it relied on took 172.6 s; and every cold compile that ran eight at once was charged as timed,
    though a user compiles alone."""
    p = searched_study()
    s = p.summary.set_index("compile_mode")
    assert s.loc["max-autotune-no-cudagraphs", "cold_search"] == "max-autotune"
    assert s.loc["max-autotune-no-cudagraphs", "cold_start_s"] > s.loc["max-autotune", "cold_start_s"]
    assert s.loc["default", "cold_start_how"] == "divided"
    assert s.loc["default", "cold_start_s"] < s.loc["default", "cold_compile_s"]  # the slowdown divided out
    rule = _text(p, "payback", "rule")
    assert "divided by the slowdown at the number that ran with it" in gen.render.words(rule)
    old = p.summary.cold_start_s.copy()
    p.summary["cold_start_s"] = p.summary.cold_compile_s  # the old rule: each compile as timed, no search
    found = costs.break_evens_charged(p)
    assert any(v.startswith("max-autotune-no-cudagraphs (module) at batch 512: cold start") for v in found)
    assert any(v.startswith("default (module) at batch 512: cold start") for v in found)
    p.summary["cold_start_s"] = old
    rule.data["p"]["hows"] = {}  # the old rule paragraph: nothing on how compiles that ran at once were charged
    assert "the payback rule does not say how compiles that ran at once were charged" in costs.break_evens_charged(p)


def test_cold_compiles_divided_as_if_k_ran_with_each_or_by_a_factor_holding_one_are_caught():
    """The yardstick divided every cold compile by its check's 1.42x [0.96, 2.09] as if eight had run with each,
    though by their windows some had 3.65 at once, while the quick studies, without the check, left the same
    compiles undivided: the two differed 1.8x by accounting alone."""
    p = searched_study()
    s = p.summary.set_index("compile_mode")
    assert 1 < s.loc["default", "cold_at_once"] < 8  # four held slots at once: three default compiles and one shared
    old = p.summary.cold_start_s.copy()
    at = p.summary.compile_mode == "default"
    p.summary.loc[at, "cold_start_s"] = p.summary.loc[at, "cold_compile_s"] / 1.4  # the old rule: each as if k at once
    assert any(v.startswith("default (module) at batch 512: cold start") for v in costs.break_evens_charged(p))
    p.summary["cold_start_s"] = old
    underpowered = searched_study(concurrency=(0.9, 1.4, 2.0))  # its interval holds 1: the kept check's factor
    words = gen.render.words(_text(underpowered, "payback", "rule"))
    assert "That factor is the check kept in `benchmarks/compile-at-once/`, as this study's own (1.36× [0.50, 3.68]) holds 1" in words
    assert "1.38× [1.17, 1.62] at eight" in words
    none = gen.paper(_study("cuda", [512], ["default"], phase=8))  # no check: divided the same way
    assert none.summary.set_index("compile_mode").loc["default", "cold_start_how"] == "divided"
    assert "this study having none" in gen.render.words(_text(none, "payback", "rule"))


def test_advice_that_a_shorter_run_finishes_sooner_eager_whatever_its_cache_is_caught():
    """"A shorter run finishes sooner eager" ignored the 2-3-s warm-cache start a user with a filled cache pays."""
    p = gen.paper(_study("cuda", [32], ["reduce-overhead"], phase=8))  # every timed run from a filled cache
    assert "from a filled cache it pays only the warm-cache load" in p.markdown
    p.markdown = p.markdown.replace(p.markdown.partition("A run from an empty cache shorter")[2].partition("\n")[0],
                                    "")
    p.markdown = p.markdown.replace("A run from an empty cache shorter", "A shorter run finishes sooner eager than "
                                    "with that configuration.", 1)
    assert any("forgets a filled cache" in v for v in inv.recommendations(p))


def test_a_method_check_worded_off_the_one_rule_is_caught():
    """The compile-concurrency check's 1.42x [0.96, 2.09] was "not distinguishable from its time alone" while the
    launcher check's equally wide interval was "underpowered"."""
    p = searched_study(concurrency=(0.9, 1.4, 2.0))
    decided = p.context["decisions"]["checks"]["compile_concurrency"]
    assert decided["verdict"] == "underpowered" and costs.checks_by_one_rule(p) == []
    decided["verdict"] = "indistinct"  # the old rule: read against 1 as a speedup
    p.markdown += "\nAmong the others a cold compile took 1.42× its time alone: not distinguishable from its time alone.\n"
    found = costs.checks_by_one_rule(p)
    assert "the compile_concurrency check reads indistinct, its rule underpowered" in found
    assert any("called not distinguishable" in v for v in found)


def test_dynamic_shapes_summarised_backwards_and_plotted_as_paying_are_caught():
    """"Dynamic shapes erase the gain" was said not to hold on 1.10x [1.01, 1.21] (not distinguishable from eager)
    because 3 graphs served 6 shapes, and the break-even figure plotted that configuration."""
    C = gen.Configuration
    spec = gen.Spec("cuda", None, {("bf16", 256): 10.0}, [
        C("eager", "module", "static", "bf16", 256, 1.0, 0.01, 3, 1), C("default", "module", "static", "bf16", 256, 1.5, 0.01, 3, 3),
        C("eager", "module", "dynamic", "bf16", 256, 1.0, 0.01, 3, 1),
        C("default", "module", "dynamic", "bf16", 256, 1.0, 0.1, 3, 3)], seed=11)

    def erased(s):
        at = (s.shape_regime == "dynamic") & (s.compile_mode == "default")
        s.loc[at, ["speedup", "speedup_low", "speedup_high", "speedup_n", "verdict", "payback"]] = [
            1.10, 1.01, 1.21, 3, "indistinct", "not-shown-faster"]
        return s

    p = gen.paper(spec, erased)
    groups = _text(p, "claims", "groups").data["c"]["by"]
    assert "dynamic" in groups["holds"] and costs.dynamic_by_rule(p) == []
    groups["holds"].remove("dynamic")
    groups.setdefault("does-not-hold", []).append("dynamic")  # the old rule: fewer graphs than shapes
    p.context["drawn"].setdefault("breakeven", {"configs": [], "ways": ["cold"], "log_x": False, "log_y": False})
    p.context["drawn"]["breakeven"]["configs"].append(
        {"mode": "default", "scope": "module", "regime": "dynamic", "precision": "bf16", "batch": 256})
    found = costs.dynamic_by_rule(p)
    assert "dynamic shapes erase the gain: the paper says does-not-hold, the rule holds" in found
    assert any(v.startswith("the break-even figure plots default (module) on dynamic batches") for v in found)


def test_figures_that_leave_out_what_the_text_cites_or_mislabel_their_runs_are_caught():
    """The break-even figure omitted the recommended step-graph configurations on a linear axis crushed by one
    172.6-s point; the timeline's caption said "compilations included" of runs that started from a warm cache; the
    roofline omitted series the text cited; a CPU paper had a "gpu wait" bar."""
    p = gen.paper(_study("cuda", [32], ["default"], scopes=("module", "step-graph"), phase=8))
    assert costs.figures_honest(p) == []
    be = p.context["drawn"]["breakeven"]
    graph = next(c for c in be["configs"] if c["scope"] == "step-graph")
    be["configs"].remove(graph)  # the old figure: the module alone
    be["log_x"] = not be["log_x"]
    p.context["drawn"]["timeline"] = {"mode": "reduce-overhead", "batch": 32, "cache": ["warm"], "runs": 2}
    p.markdown += "\n*Figure 9.* Step times of epoch 1, compilations included.\n"
    low = _text(p, "modes", "mfu").data["m"]["low"]
    p.context["drawn"]["roofline"]["configs"] = [c for c in p.context["drawn"]["roofline"]["configs"]
                                                 if (c["mode"], c["scope"]) != (low["mode"], low["scope"])]
    found = costs.figures_honest(p)
    assert any(v.startswith("the break-even figure leaves out the recommended") and "step-graph" in v for v in found)
    assert any(v.startswith("the break-even figure's log_x") for v in found)
    assert "the timeline's runs started from a warm cache and its words say compilations are included" in found
    assert any(v.startswith("the roofline leaves out") for v in found)
    cpu = hand_made("cpu")
    assert "gpu wait" not in cpu.context["drawn"]["overhead"]["parts"]
    cpu.context["drawn"]["overhead"]["parts"].append("gpu wait")
    assert "a CPU study's overhead figure has a bar 'gpu wait'" in costs.figures_honest(cpu)
