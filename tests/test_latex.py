"""The LaTeX paper builds into a PDF (latexmk, where installed) with no undefined reference, no overfull box
and every figure embedded; figures are byte-stable; build_pdf says when it cannot run."""

import hashlib
import re
import shutil

import pytest

from compile_study.aggregate import figures
from compile_study.report import paper

from .paper_study import build, make_study

pytestmark = pytest.mark.unit

needs_latexmk = pytest.mark.skipif(shutil.which("latexmk") is None,
                                   reason="latexmk not installed (Debian: latexmk texlive-latex-recommended "
                                          "texlive-fonts-recommended)")


@pytest.fixture
def built(tmp_path):
    """A hostile study's paper.tex beside its figures/, and the report it came from."""
    study = make_study(tmp_path / "records")
    figures.draw_all(study["summary"], study["records"], study["environment"], tmp_path / "figures")
    study["drawn"] = figures.read_index(tmp_path / "figures")
    rep = build(study)
    (tmp_path / "paper.tex").write_text(paper.render(rep, "tex"))
    return tmp_path, rep


@needs_latexmk
def test_pdf_builds_clean_and_embeds_every_figure_made(built):
    d, rep = built
    assert paper.build_pdf(d / "paper.tex") == "built"
    log = (d / paper.LATEX_DIR / "paper.log").read_text(errors="replace")
    assert (d / "paper.pdf").stat().st_size > 20_000
    assert not re.search(r"undefined", log, re.I), re.findall(r".*undefined.*", log, re.I)[:3]
    assert "Overfull" not in log, re.findall(r"Overfull.*", log)[:3]
    placed = [b.key for s in rep.main + rep.appendix for b in s.blocks if b.kind == "figure"]
    assert sorted(placed) == sorted(figures.read_index(d / "figures"))  # every figure made is placed, no other
    assert all(f"figures/{key}.pdf" in log for key in placed)


@needs_latexmk
def test_a_latex_error_is_raised_with_its_first_line(tmp_path):
    tex = tmp_path / "broken.tex"
    tex.write_text("\\documentclass{article}\\begin{document}\\nosuchcommand\\end{document}\n")
    with pytest.raises(RuntimeError, match="Undefined control sequence"):
        paper.build_pdf(tex)


def test_without_latexmk_the_pdf_is_skipped_not_failed(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert paper.build_pdf(tmp_path / "paper.tex") == "skipped: latexmk not installed"


def test_figures_are_byte_stable_and_only_those_with_data_are_drawn(built):
    d, _ = built
    first = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (d / "figures").glob("*.pdf")}
    study = make_study(d / "again")
    figures.draw_all(study["summary"], study["records"], study["environment"], d / "figures")
    again = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (d / "figures").glob("*.pdf")}
    assert first == again and set(first) == {f"{name}.pdf" for name in figures.read_index(d / "figures")}
    assert "buckets.pdf" not in first and "timeline.pdf" not in first  # one bucket set, no epoch-1 series: no data
