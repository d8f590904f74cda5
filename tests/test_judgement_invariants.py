"""The paper's judgements, round three (issue 68): each invariant of tests/judgement_invariants.py and
tests/cost_invariants.py added for it, shown failing on a hand-made study whose paper breaks it the way a stored
paper did (tests/test_invariants.py runs them all on generated studies).
"""

from __future__ import annotations

import pytest

from compile_study.aggregate import payback
from compile_study.report import paper
from compile_study.report.document import Text

from . import cost_invariants as costs
from . import generated_studies as gen
from . import judgement_invariants as judged
from . import paper_invariants as inv
from .paper_reading import table
from .test_invariants import _study, hand_made


@pytest.mark.unit
def test_a_timer_correction_worded_as_a_double_negation_is_caught():
    """The H100 grid's paper: "`default` (module) at batch 512 is 1.59× [1.19, 2.12]: faster than eager, not not
    distinguishable from eager"."""
    p = gen.paper(_study("cuda", [32], ["default"], timer=(("default", 32, "bf16", 0.9, True),)))
    para = next(t for t in inv.texts(p.report) if (t.file, t.macro) == ("modes", "checks"))
    f = para.data["timer"][0]
    assert f["corrected"] and f["moved"] is not None
    f |= {"verdict": "indistinct", "moved_verdict": "faster"}  # the correction moved an indistinct speedup to faster
    md = paper.render(p.report, "md")
    assert "faster than eager; uncorrected, it is not distinguishable from eager." in md
    p.markdown = md
    assert judged.read_once(p) == []
    p.markdown = md.replace("faster than eager; uncorrected, it is not", "faster than eager, not not")
    found = judged.read_once(p)
    assert len(found) == 1 and found[0].startswith("a double negation: Corrected for the timer check")


@pytest.mark.unit
def test_a_part_of_the_run_time_named_but_never_defined_is_caught():
    """Every GPU paper led its overhead sentence with "gpu wait 26%", and Figure 1 drew it, with no word of what
    it is."""
    p = hand_made()
    assert "gpu wait" in p.context["drawn"]["overhead"]["parts"]
    figure = next(b for s in p.report.main for b in s.blocks if b.kind == "figure" and b.key == "overhead")
    assert "gpu wait: a run's wait for its turn on its GPU" in paper.words(figure.caption)
    spent = next(t for t in inv.texts(p.report) if (t.file, t.macro) == ("method", "time_spent"))
    spent.data["spent"]["parts"] = [("gpu_wait_s", 0.26), ("compile_s", 0.2)]
    p.markdown = paper.render(p.report, "md")
    assert "gpu wait 26%, compile 20% (Figure 1; gpu wait: a run's wait for its turn on its GPU" in p.markdown.replace("\\", "")
    assert judged.parts_defined(p) == []
    p.markdown = p.markdown.replace("; gpu wait: a run's wait for its turn on its GPU while other work held it)", ")")
    figure.caption = Text("method", "overhead_caption", {"parts": []})  # the old caption: no gloss
    found = judged.parts_defined(p)
    assert found[0].startswith("'gpu wait' first used undefined: The study's runs took")
    assert found[1] == "the overhead figure draws 'gpu wait' without defining it"


@pytest.mark.unit
def test_a_step_column_its_label_misnames_is_caught():
    """Table 3's caption said "Step: the compiled step's median" over the geometric mean with its t interval (8.97
    ms against Table 1's median 8.69 for the same cell)."""
    p = hand_made()
    assert judged.step_labels(p) == []
    p.summary.loc[p.summary.compile_mode == "default", "steady_step_ms"] = 8.69  # the median apart from the mean
    table(p.report, "payback").caption = Text("modes", "table_caption", {"rows": 1, "payback": False})
    found = judged.step_labels(p)  # the payback table's geometric mean under a label that says median
    assert any(v.startswith("table payback: default (module) at batch 32's step") and
               v.endswith("is not its steady_step_ms 8.69, as its label says") for v in found), found


@pytest.mark.unit
def test_a_claim_given_a_verdict_without_its_own_hedge_is_caught():
    """The prose read "Holds: dynamic shapes erase the gain" for the claim "Dynamic shapes can erase the compiled
    gain over eager" (evidence 1.10× [1.01, 1.21])."""
    p = hand_made()
    assert judged.claims_as_claimed(p) == []
    old = {"dynamic": "dynamic shapes erase the gain", "short-runs": "compilation costs more on short runs",
           "forward": "compile only the forward", "training": "20–40% faster training"}
    for id, was in old.items():
        p.markdown = p.markdown.replace(paper.words(Text("claims", "topic", {"id": id})).replace("%", "\\%"), was)
    found = judged.claims_as_claimed(p)
    for was in old.values():
        assert f"a claim not in its own words: {was!r}" in found, (was, found)


@pytest.mark.unit
def test_every_cold_start_said_to_take_more_than_an_epoch_where_one_interval_holds_an_epoch_is_caught():
    """The yardstick's abstract: "Wherever measured ..., a cold start takes more than an epoch to earn back", while
    `default` (step-graph) at batch 32 had a break-even of [212.65, ...] steps against a 213-step epoch."""
    def straddle(s):
        at = s.compile_mode == "default"
        s.loc[at, ["break_even_low", "break_even_high", "break_even_n"]] = [212.65, 400.0, 3]
        s.loc[at, "break_even_epoch_code"] = payback.epoch_code("pays-after", 212.65, 400.0, 3, 214)
        return s

    p = gen.paper(hand_made().spec, straddle)
    assert p.summary.loc[p.summary.compile_mode == "default", "break_even_epoch_code"].iloc[0] == "straddles"
    assert ("A cold start (compiling from an empty cache) takes more than an epoch (a pass over 6,840 training rows) to "
            "earn back in one of the two configurations with an interval.") in p.markdown.replace("\\", "")
    assert costs.cold_start_epochs(p) == []
    p.markdown = p.markdown.replace("A cold start (compiling from an empty cache) takes more than an epoch (a pass "
                                    "over 6,840 training rows) to earn back in one of the two configurations with an "
                                    "interval.", "Wherever measured in three or more processes, a cold start (compiling "
                                    "from an empty cache) takes more than an epoch (a pass over 6,840 training rows) to "
                                    "earn back.")
    assert costs.cold_start_epochs(p) == ["the abstract says every cold start takes more than an epoch to earn back: "
                                          "['more', 'straddles']"]
