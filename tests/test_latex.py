"""The LaTeX paper builds into a PDF (latexmk, where installed) with no undefined reference, no overfull box
and every figure embedded, and says so (pages, passes, warnings) for the PDF rule's log; no heading is the last
line of a page; a table's columns are as wide as its cells where the line has room; figures are byte-stable;
build_pdf says when it cannot run."""

import hashlib
import re
import shutil
import subprocess

import pytest

from compile_study.aggregate.figures import figures
from compile_study.report import paper, tex_table
from compile_study.report.document import Column, Table, Text

from .conftest import REPO
from .paper_study import build, make_study

needs_latexmk = pytest.mark.skipif(shutil.which("latexmk") is None,
                                   reason="latexmk not installed (Debian: latexmk texlive-latex-recommended "
                                          "texlive-fonts-recommended)")
needs_poppler = pytest.mark.skipif(shutil.which("pdftotext") is None,
                                   reason="pdftotext not installed (Debian: poppler-utils)")
STORED_PDFS = sorted(REPO.glob("reference/*/paper.pdf"))


@pytest.fixture
def built(tmp_path):
    """A hostile study's paper.tex beside its figures/, and the report it came from."""
    study = make_study(tmp_path / "records")
    figures.draw_all(study["summary"], study["records"], study["environment"], tmp_path / "figures")
    study["drawn"] = figures.read_index(tmp_path / "figures")
    rep = build(study)
    (tmp_path / "paper.tex").write_text(paper.render(rep, "tex"))
    return tmp_path, rep


@pytest.mark.golden  # latexmk builds the PDF, or every figure is drawn: the generated files' tier
@needs_latexmk
def test_pdf_builds_clean_and_embeds_every_figure_made(built):
    d, rep = built
    said = paper.build_pdf(d / "paper.tex")
    log = (d / paper.LATEX_DIR / "paper.log").read_text(errors="replace")
    pages = int(re.search(r"^Output written on .*\((\d+) pages", log, re.M)[1])
    assert said.startswith(f"built paper.pdf: {pages} pages, ") and pages > 5, said  # the PDF rule's log line
    assert re.search(r"^latexmk ran pdflatex [1-9]\d* times?$", said, re.M), said
    assert re.search(r"^warnings in the last pass: \d+$", said, re.M), said
    assert (d / "paper.pdf").stat().st_size > 20_000
    assert not re.search(r"undefined", log, re.I), re.findall(r".*undefined.*", log, re.I)[:3]
    assert "Overfull" not in log, re.findall(r"Overfull.*", log)[:3]
    placed = [b.key for s in rep.main + rep.appendix for b in s.blocks if b.kind == "figure"]
    assert sorted(placed) == sorted(figures.read_index(d / "figures"))  # every figure made is placed, no other
    assert all(f"figures/{key}.pdf" in log for key in placed)


@pytest.mark.golden  # latexmk builds the PDF, or every figure is drawn: the generated files' tier
@needs_latexmk
def test_a_latex_error_is_raised_with_its_first_line(tmp_path):
    tex = tmp_path / "broken.tex"
    tex.write_text("\\documentclass{article}\\begin{document}\\nosuchcommand\\end{document}\n")
    with pytest.raises(RuntimeError, match="Undefined control sequence"):
        paper.build_pdf(tex)


@pytest.mark.unit
def test_without_latexmk_the_pdf_is_skipped_not_failed(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert paper.build_pdf(tmp_path / "paper.tex") == "skipped: latexmk not installed"


@pytest.mark.golden  # latexmk builds the PDF, or every figure is drawn: the generated files' tier
def test_figures_are_byte_stable_and_only_those_with_data_are_drawn(built):
    d, _ = built
    first = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (d / "figures").glob("*.pdf")}
    study = make_study(d / "again")
    figures.draw_all(study["summary"], study["records"], study["environment"], d / "figures")
    again = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (d / "figures").glob("*.pdf")}
    assert first == again and set(first) == {f"{name}.pdf" for name in figures.read_index(d / "figures")}
    assert "buckets.pdf" not in first and "timeline.pdf" not in first  # one bucket set, no epoch-1 series: no data


def _pages(pdf) -> list[list[str]]:
    """The text lines of each page of a PDF (pdftotext -layout), blank lines and page numbers left out."""
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    return [[line.strip() for line in page.splitlines() if line.strip() and not line.strip().isdigit()]
            for page in text.split("\f")[:-1]]


def _ends_with_a_heading(pages: list[list[str]], titles: list[str]) -> list[int]:
    """The pages whose last line is a section heading ("3  Setup", "B  Per-configuration detail")."""
    heading = re.compile(r"^(\d+|[A-Z])\s+(" + "|".join(map(re.escape, titles)) + r")$")
    return [i + 1 for i, lines in enumerate(pages) if lines and heading.match(lines[-1])]


def _titles(markdown: str) -> list[str]:
    return [re.sub(r"^Appendix [A-Z]: ", "", m) for m in re.findall(r"^## (.+)$", markdown, re.M)]


@pytest.mark.unit
@needs_poppler
def test_the_heading_check_sees_a_heading_at_the_foot_of_a_page():
    pages = [["Some text.", "B       Per-configuration detail"], ["precision batch mode"]]
    assert _ends_with_a_heading(pages, ["Per-configuration detail"]) == [1]
    assert _ends_with_a_heading([["Some text.", "3 Setup"]], ["Per-configuration detail"]) == []


@pytest.mark.golden  # latexmk builds the PDF, or every figure is drawn: the generated files' tier
@needs_poppler
@pytest.mark.parametrize("pdf", STORED_PDFS, ids=[p.parent.name for p in STORED_PDFS])
def test_no_heading_of_a_stored_paper_is_the_last_line_of_a_page(pdf):
    """The GPU paper's "B Per-configuration detail" stood alone at the foot of page 9, its landscape table on the
    next page: a heading now goes with what follows it (tex.j2)."""
    titles = _titles((pdf.parent / "paper.md").read_text())
    pages = _pages(pdf)
    assert len(titles) > 10 and len(pages) > 5
    assert _ends_with_a_heading(pages, titles) == []


@pytest.mark.golden  # latexmk builds the PDF, or every figure is drawn: the generated files' tier
@needs_latexmk
@needs_poppler
def test_no_heading_of_a_built_paper_is_the_last_line_of_a_page(built):
    d, rep = built
    paper.build_pdf(d / "paper.tex")
    titles = [s.title for s in rep.main + rep.appendix]
    assert _ends_with_a_heading(_pages(d / "paper.pdf"), titles) == []


def _table(columns: list[str], rows: list[list[str]]) -> Table:
    return Table("t", Text("modes", "table_caption", {"rows": 1}), [Column(c) for c in columns], rows)


@pytest.mark.unit
def test_a_table_that_fits_the_line_gives_every_column_its_widest_cell():
    """Table 2's shape: a long mode name, a long interval, a short precision. Where the line has room, no cell
    wraps and each column's share follows its widest cell (hand-set shares once gave 'bf16' more room than
    '1.25× [1.08, 1.45] (95% t, n = 3)' had)."""
    t = _table(["precision", "mode", "speedup [interval] (method)"],
               [["bf16", "max-autotune-no-cudagraphs", "1.25× [1.08, 1.45] (95% t, n = 3)"], ["fp32", "eager", "—"]])
    size, shares = tex_table.layout(t)
    widths, wrapped = tex_table.fit(tex_table.cells(t), tex_table.room(t, 8.0))
    assert size == "footnotesize" and wrapped == 0
    assert shares[2] > shares[1] > shares[0] and abs(sum(shares) - 1) < 1e-9
    assert widths[2] >= tex_table.em("1.25× [1.08, 1.45] (95% t, n = 3)")


@pytest.mark.unit
def test_a_table_too_wide_for_the_line_wraps_as_few_lines_as_it_can():
    """Nine columns of Table 2's cells do not fit in 8 pt: the cells that must wrap are the few long ones, each
    to two lines, never a column of intervals wrapping every row."""
    row = ["bf16", "512", "max-autotune-no-cudagraphs", "11.4", "1.26× [1.14, 1.39] (95% t, n = 3)", "faster",
           "none (GEMM search shared)", "34,835 (2,680)", "15.1%"]
    rows = [row] + [["bf16", "32", "default", "10.9", "1.25× [1.08, 1.45] (95% t, n = 3)", "not distinguishable",
                     "18.2 s (1)", "9,788 (46)", "1.02%"]] * 8
    t = _table(["precision", "batch", "mode", "step (ms)", "speedup [interval] (method)", "verdict",
                "cold compile (cold runs)", "break-even steps (epochs)", "MFU"], rows)
    columns = tex_table.cells(t)
    widths, extra = tex_table.fit(columns, tex_table.room(t, 8.0))
    assert 0 < extra <= 3  # the first row's long mode, GEMM note and break-even; the eight others on one line
    assert all(tex_table.lines(cell, widths[4]) == 1 for cell in columns[4][0])  # every interval on one line
    assert sum(widths) <= tex_table.room(t, 8.0) + 1e-9
    assert tex_table.layout(t)[0] == "footnotesize"  # 7 pt would not set every cell on one line either


@pytest.mark.unit
def test_a_table_that_fits_only_in_the_smaller_font_is_set_in_it():
    t = _table(["a", "b"], [["x " * 40, "y " * 40]])  # about 62 ems in all: over 8 pt's room (59), under 7 pt's (67)
    assert tex_table.fit(tex_table.cells(t), tex_table.room(t, 8.0))[1] > 0
    assert tex_table.layout(t)[0] == "scriptsize"
