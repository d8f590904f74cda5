"""The paper from the report model: measured values in the tables, escaping, references, grid facts from the
config, CPU wording, and the length of the main text on the stored H200 study."""

import json
import re

import pandas as pd
import pytest
import yaml

from compile_study.aggregate import claims, numbers
from compile_study.core import stats
from compile_study.report import build as report
from compile_study.report import paper

from .conftest import REPO
from .paper_study import HOSTILE, build, make_study

pytestmark = pytest.mark.unit

STORED = REPO / "reference" / "h200x2-2026-11-30"


@pytest.fixture
def study(tmp_path):
    return make_study(tmp_path)


def _cells(rep, key):
    return next(b for s in rep.main + rep.appendix for b in s.blocks if getattr(b, "key", None) == key).rows


def test_tables_hold_the_measured_values_with_interval_and_method(study):
    rep = build(study)
    row = next(r for r in _cells(rep, "modes") if r[:3] == ["bf16", "32", "default"])
    s = study["summary"].set_index(["compile_mode", "batch_size", "shape_regime", "compile_scope"])
    d = s.loc[("default", 32, "static", "module")]
    assert row[3] == numbers.ms(d.steady_step_ms) == "8.00"
    interval = f"{d.speedup:.2f}× [{d.speedup_low:.2f}, {d.speedup_high:.2f}] (95% t, n = 3)"
    assert row[4] == interval and d.speedup_method == "t on log ratio, n = 3"
    assert row[7] == f"{d.break_even_steps:,.0f} steps ({numbers.sig(d.break_even_steps / (120_000 // 32), 2)} epochs)"
    assert any(r[3] == "OOM at batch 4096" for r in _cells(rep, "modes"))
    md = paper.render(rep, "md")
    escaped = interval.replace("[", "\\[").replace("]", "\\]").replace("%", "\\%")
    assert f"| bf16 | 32 | default | 8.00 | {escaped} |" in md
    assert "| default | bf16 | 32 | 4.0e-03 | 5e-02 | pass | 81.0% | 79.5% | -1.5 | FAIL |".replace("%", "\\%") in md


def test_hostile_strings_are_escaped_in_both_formats(study):
    rep = build(study)
    md, tex = paper.render(rep, "md"), paper.render(rep, "tex")
    assert "<script>" not in md and "\n# injected" not in md and "\\<script\\>" in md
    assert "/home/someone" not in md + tex  # never an absolute local path in a sentence
    for block in re.findall(r"(?:^\|.*\n)+", md, re.M):  # every row of a table has its header's cells
        counts = {line.replace("\\|", "").count("|") for line in block.splitlines()}
        assert len(counts) == 1, block
    body = tex[tex.index(r"\begin{document}"):].replace(r"~\ref{", r"\ref{")  # the template's own ~
    toks = re.findall(r"\\(?:[A-Za-z]+|.)|.", body, re.S)
    for ch in "%#_^~$":
        assert ch not in toks, f"unescaped {ch}"
    for spec, rows in re.findall(r"\\begin\{longtable\}\{(.*?)\}\n(.*?)\\end\{longtable\}", body, re.S):
        columns = spec.count("p{")
        for row in rows.split("\\\\\n")[3:]:  # after the caption and the two header rows
            if row.strip() and "rule" not in row and "\\end" not in row:
                assert re.sub(r"\\&", "", row).count("&") == columns - 1, row
    assert r"GPU\_\allowbreak{}|x| \& 100\% \$5 \#1 \{a\} \textbackslash{}b" in tex
    assert "ref{tab:nothing}" not in tex  # a mark inside data stays text


def test_every_reference_resolves_and_numbers_follow_the_order_of_placement(study):
    rep = build(study)
    md, tex = paper.render(rep, "md"), paper.render(rep, "tex")
    placed = re.findall(r"\*\*Table (\d+)\.\*\*", md)
    assert placed == [str(i) for i in range(1, len(placed) + 1)]
    labels = set(re.findall(r"\\label\{((?:tab|fig):[\w-]+)\}", tex))
    assert set(re.findall(r"\\ref\{([^}]+)\}", tex)) <= labels and set(rep.numbers) == labels
    with pytest.raises(KeyError):  # a sentence that points at no table fails the render
        rep.abstract.append("see ⟦tab:nothing⟧")
        paper.render(rep, "md")


def test_grid_facts_come_from_the_config_and_small_numbers_keep_their_digits(tmp_path):
    study = make_study(tmp_path, hostile="cpu-box", device="cpu", peak=0.1423)
    study["config"]["grids"]["cpu"][0] |= {"batch_size": [8, 32], "max_epoch_steps": 10}
    md = paper.render(build(study), "md")
    assert "These are CPU numbers" in md and "caps epochs at 10 steps" in md
    assert "batch sizes 8 and 32" in md and "512" not in md.split("## Appendix")[0]
    assert "bf16 0.142 TFLOP/s" in md  # the CPU peak as measured, not "0.1"
    assert "Data: cpu-box; 0.63% of training rows are longer than 128 tokens".replace("%", "\\%") in md


def test_numbers_read_as_the_paper_shows_them():
    assert numbers.interval(1.523, 1.471, 1.58, "t on log ratio, n = 5") == "1.52× [1.47, 1.58] (95% t, n = 5)"
    assert numbers.interval(1.3, float("nan"), float("nan"), "single run") == "1.30× (single run)"
    assert [numbers.sig(v) for v in (771.49, 51.138, 0.14231, 12345.6)] == ["771", "51.1", "0.142", "12,346"]
    assert numbers.break_even(float("inf"), 32).startswith("never") and numbers.shown(1.3996) == 1.40
    assert numbers.span([15.31, 17.6], numbers.seconds) == "15.3–17.6 s"


@pytest.mark.skipif(not (STORED / "summary.csv").is_file(), reason="the stored H200 study is not in this checkout")
def test_main_text_of_the_stored_h200_paper_is_at_most_3000_words():
    summary = pd.read_csv(STORED / "summary.csv")
    facts = json.loads((STORED / "facts.json").read_text())
    mlp = json.loads((STORED / "claims" / "mlp.json").read_text())
    env = json.loads((STORED / "environment.json").read_text())
    checks = {k: json.loads((STORED / f).read_text())["results"] if (STORED / f).is_file() else []
              for k, f in (("timer", "checks/timer_check.json"), ("drift", "checks/reference_drift.json"))}
    rep = report.build(summary, pd.read_csv(STORED / "parity.csv"), claims.claims_table(summary, mlp, facts), env,
                       facts, yaml.safe_load((STORED / "config.yaml").read_text()), "cuda", checks, "figures")
    words = paper.word_counts(paper.render(rep, "md"))
    assert words["main"] + words["main_tables"] <= 3000, words
    assert words["appendix"] + words["appendix_tables"] > 0
    titles = [s.title for s in rep.main]
    assert titles[-1] == "Conclusions and recommendations" and "How far from the best step" in titles
    assert all(re.search(r"⟦tab:\w+⟧", item) for item in rep.main[-1].blocks[0].items)  # each traced to a table


def _concurrency_check(ratios, gpu="NVIDIA H200") -> dict:
    """A concurrency check's JSON as compile_study.checks.concurrency writes it (the fields the paper reads)."""
    iv = stats.speedup_interval(ratios)
    results = [{"ratio": r, "overlap": 0.97 + i / 100} for i, r in enumerate(ratios)]
    return {"applicable": True, "gpus": [gpu, gpu], "shares": 2, "cores": [list(range(8)), list(range(8, 16))],
            "compile_mode": "eager", "shape_regime": "static", "precision": "bf16", "batch_size": 32,
            "results": results, "summary": {"ratio": iv.point, "low": iv.low, "high": iv.high, "method": iv.method,
                                            "n": iv.n, "overlaps": [r["overlap"] for r in results]}}


def test_the_concurrency_check_is_one_sentence_against_its_cells_band_and_absent_where_it_did_not_apply(study):
    study["checks"]["concurrency"] = _concurrency_check([1.01, 1.02, 1.00], gpu=HOSTILE)
    md, tex = (paper.render(build(study), fmt) for fmt in ("md", "tex"))
    iv = stats.speedup_interval([1.01, 1.02, 1.00])
    eager = study["summary"].query("compile_mode == 'eager' and batch_size == 32 and shape_regime == 'static'").iloc[0]
    para = next(line for line in md.splitlines() if "Two timed runs at once" in line)
    for number in (iv.point, iv.low, iv.high, eager.aa_low, eager.aa_high):  # its interval against its cell's band
        assert f"{number:.2f}" in para
    assert "n = 3" in para and "8 cores" in para and "97–99" in para and "no measurable difference" in para
    assert "/home/someone" not in md + tex and "Two timed runs at once" in tex
    study["checks"]["concurrency"] = _concurrency_check([1.30, 1.31, 1.32])
    assert "two at once are measurably slower." in paper.render(build(study), "md")
    study["checks"]["concurrency"] = {"applicable": False, "reason": "1 GPU(s) on this host"}
    assert "Two timed runs at once" not in paper.render(build(study), "md")


@pytest.mark.skipif(not (STORED / "summary.csv").is_file(), reason="the stored H200 study is not in this checkout")
def test_packing_is_read_against_padding_in_the_same_mode_from_the_summary():
    s = pd.read_csv(STORED / "summary.csv")
    ro = s[(s.compile_mode == "reduce-overhead") & (s.compile_scope == "module") & (s.batch_size == 256)
           & (s.precision == "bf16")].set_index("shape_regime").real_tokens_per_s
    bucketed = next(r for r in ro.index if r.startswith("bucketed"))
    text = (STORED / "paper.md").read_text()
    expected = (f"batch 256, `reduce-overhead` packed (1) {numbers.times(ro['packed'] / ro['static'])} static (1), "
                f"{numbers.times(ro['packed'] / ro[bucketed])} bucketed (4)")
    assert expected in text
    # the regime gains use eager's static runs as the yardstick, not the run's own static reference
    packed = s[(s.shape_regime == "packed") & (s.compile_mode == "reduce-overhead") & (s.batch_size == 256)].iloc[0]
    assert packed.gain_yardstick == "eager static runs"
