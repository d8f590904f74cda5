"""Place a report model (build.py) into Markdown or LaTeX, and build the PDF.

    text = paper.render(build.build(...), "md")       # or "tex"
    paper.build_pdf("results/cpu/paper.tex")              # latexmk, when installed

Two kinds of template. The sentence templates (paper/templates/sections/*.j2, Jinja's usual delimiters) hold
every sentence of the paper as macros: `words(Text)` calls one with the numbers, intervals, codes and labels
of the report model, formatting numbers through the filters of numbers.py, and returns format-free prose.
One body (paper/templates/paper.j2) places the report's sections; the macros of the chosen format (md.j2 or
tex.j2) place paragraphs, lists, tables and figures. The Jinja environment of each format brings its
escaping: `prose` for sentences (`code` spans and ⟦tab:key⟧ references are the only markup), `cell` for table
cells and every string that came from data. Templates hold no arithmetic.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import jinja2

from compile_study.core.intervals import LEVEL, MIN_N
from compile_study.report import numbers, tex_table
from compile_study.report.document import Text, hide_paths

TEMPLATES = Path(__file__).resolve().parents[2] / "paper" / "templates"
FORMATS = ("md", "tex")
# The same delimiters for both formats: LaTeX braces and Markdown need no escaping from Jinja
DELIMITERS = dict(block_start_string="((*", block_end_string="*))", variable_start_string="(((",
                  variable_end_string=")))", comment_start_string="((=", comment_end_string="=))")

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]#!|<>~$&%^])")
_TEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}
TEX_UNICODE = "×—–−→Δ±≤≥≈∞…·"  # declared in tex.j2's preamble; any other non-Latin-1 character prints as ?
_MARK = re.compile(r"`([^`]*)`|⟦(tab|fig):([\w-]+)⟧")  # group 1: code; groups 2, 3: a reference


def md_escape(value) -> str:
    """Escape Markdown syntax (and HTML angle brackets) in a value shown as text; newlines become spaces."""
    return _md_raw(" ".join(str(value).split()))


def _md_raw(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", text)


def tex_escape(value) -> str:
    return _tex_raw(" ".join(str(value).split()))


def _tex_raw(text: str) -> str:
    return "".join(_TEX_SPECIAL.get(c, c if ord(c) < 256 or c in TEX_UNICODE else "?") for c in text)


_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def tex_cell(value) -> str:
    """A table cell: escaped, with break points after _ / :: and inside long CamelCase names, so that long
    identifiers wrap in narrow columns instead of running past them."""
    mark = "\x00"  # a break point, placed before escaping and made \allowbreak after it (data cannot hold it)
    words = [_CAMEL.sub(mark, w) if len(w) > 18 else w for w in " ".join(str(value).replace(mark, "").split()).split(" ")]
    text = " ".join(words).replace("_", "_" + mark).replace("/", "/" + mark).replace("::", "::" + mark)
    return _tex_raw(text).replace(mark, r"\allowbreak{}")


def tex_code(code: str) -> str:
    """A `code` span of a sentence: typewriter, breakable after - _ / :: (typewriter fonts do not hyphenate)."""
    breakable = tex_cell(code).replace("-", "-{}\\allowbreak{}")
    return "\\texttt{" + breakable + "}"


def _prose(text, escape, code, ref) -> str:
    """Sentences of the report: escape everything but `code` spans and ⟦tab:key⟧ references, which become the
    format's code and cross-reference."""
    out, pos, text = [], 0, words(text)
    for m in _MARK.finditer(text):
        out += [escape(text[pos:m.start()]), code(m[1]) if m[1] is not None else ref(m)]
        pos = m.end()
    return "".join(out + [escape(text[pos:])])


# sentences: every line break a template holds becomes a space (words() collapses whitespace), so a template may
# break a sentence anywhere; no trim_blocks, which would glue the words on either side of a block tag together
_SENTENCES = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                                autoescape=False)
_SENTENCES.filters |= numbers.FILTERS
_SENTENCES.tests["finite"] = numbers.finite  # `select("finite")`: the measured values of a list
_SENTENCES.globals |= {"level": LEVEL, "min_n": MIN_N}  # the interval rules, said as the code has them
_MODULES: dict[str, object] = {}
_BEFORE = re.compile(r"\s+([,;.:)])")  # a space a template left before punctuation


def words(text: Text | str) -> str:
    """The prose of a Text (a sentence template's macro called with its data), whitespace collapsed."""
    if not isinstance(text, Text):
        return " ".join(str(text).split())
    if text.file not in _MODULES:
        _MODULES[text.file] = _SENTENCES.get_template(f"sections/{text.file}.j2").make_module()
    macro = getattr(_MODULES[text.file], text.macro, None)
    if macro is None:
        raise KeyError(f"paper/templates/sections/{text.file}.j2 has no macro {text.macro!r}")
    return _BEFORE.sub(r"\1", " ".join(str(macro(**text.data)).split())).replace("( ", "(")


def term(macro: str, **data) -> str:
    """A word of terms.j2 for a table cell (a verdict, a configuration's mode and scope)."""
    return words(Text("terms", macro, data))


_BODIES: dict[str, jinja2.Environment] = {}  # one per format: its templates compile once per process
_REFS: dict[str, int] = {}  # the report being rendered: its table and figure numbers ("tab:modes" -> 1)


def _environment(fmt: str, refs: dict[str, int]) -> jinja2.Environment:
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r} is not one of {FORMATS}")
    _REFS.clear()
    _REFS.update(refs)
    if fmt not in _BODIES:
        _BODIES[fmt] = _body_environment(fmt)
    return _BODIES[fmt]


def _body_environment(fmt: str) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False, trim_blocks=True, lstrip_blocks=True,
                             **DELIMITERS)
    names = {"tab": "Table", "fig": "Figure"}
    if fmt == "md":
        def ref(m):
            return f"{names[m[2]]} {_REFS[f'{m[2]}:{m[3]}']}"  # a KeyError names a reference to nothing
        env.filters |= {"cell": lambda v: md_escape(hide_paths(v)), "prose": lambda t: _prose(t, _md_raw, lambda c: f"`{c}`", ref)}
    else:
        def ref(m):
            _REFS[f"{m[2]}:{m[3]}"]  # noqa: B018 -- the same check as Markdown's: a reference to nothing fails
            return f"{names[m[2]]}~\\ref{{{m[2]}:{m[3]}}}"
        env.filters |= {"cell": lambda v: tex_cell(hide_paths(v)),
                        "prose": lambda t: _prose(t, _tex_raw, tex_code, ref),
                        "colspec": tex_table.colspec, "tablesize": tex_table.tablesize}
    env.globals["macros"] = f"{fmt}.j2"
    return env


def render(report, fmt: str) -> str:
    """The paper as Markdown ("md") or LaTeX ("tex") from one report model."""
    text = _environment(fmt, report.numbers).get_template("paper.j2").render(r=report)
    return re.sub(r"\n{3,}", "\n\n", text)  # one blank line between blocks, whatever the macros left


def describe(markdown: str) -> str:
    """One line on a rendered Markdown paper for the paper rule's log: its words, tables and figures."""
    words = word_counts(markdown)
    tables = len(re.findall(r"^\*\*Table \d+\.\*\*", markdown, re.M))
    figures = len(re.findall(r"^\*Figure \d+\.\*", markdown, re.M))
    return (f"{words['main']:,} words in the main text and {words['appendix']:,} in the appendix (tables apart: "
            f"{words['main_tables'] + words['appendix_tables']:,}); {tables} tables, {figures} figures")


def word_counts(markdown: str) -> dict[str, int]:
    """Words of the main text and of the appendix of a rendered Markdown paper; table rows and figure lines
    are counted apart (`*_tables`), since a reader reads them differently."""
    head, _, appendix = markdown.partition("\n## Appendix")
    out = {}
    for part, text in (("main", head), ("appendix", appendix)):
        lines = text.splitlines()
        table = [line for line in lines if line.startswith("|")]
        prose = [line for line in lines if not line.startswith(("|", "![", "<!--"))]
        out[part] = sum(bool(re.search(r"\w", w)) for line in prose for w in line.split())
        out[f"{part}_tables"] = sum(bool(re.search(r"\w", w)) for line in table for w in line.replace("|", " ").split())
    return out


_NUMBER = re.compile(r"(?<![\w.])[-−]?\d[\d,.]*")  # 7,600 / 1.65 / 95 — not the digits inside H200 or bf16
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\d*])")
_LABEL = re.compile(r"^(\*\*Table \d+\.\*\*|\*Figure \d+\.\*|- )\s*")


def _prose_lines(markdown: str) -> list[str]:
    """The sentences' lines of a rendered Markdown paper: no heading, table row, image or comment; a caption or
    list item without its label; Markdown's escapes undone."""
    out = []
    for line in markdown.splitlines():
        if not line.strip() or line.startswith(("#", "|", "![", "<!--", "**GPU", "**CPU")):
            continue
        out.append(_LABEL.sub("", line.removeprefix("> ")).replace("\\", ""))
    return out


def sentences(text: str) -> list[str]:
    return [s for line in _prose_lines(text) for s in _SENTENCE_END.split(line) if re.search(r"\w", s)]


def readability(markdown: str) -> dict:
    """What a reader meets: the abstract's words, numbers and first sentence; the sentence lengths in words of the
    abstract and the main text (median, longest). tests/test_readability.py holds them to the paper's limits."""
    head, _, rest = markdown.partition("\n## Abstract\n")
    abstract, _, body = rest.partition("\n## ")
    main = ("## " + body).partition("\n## Appendix")[0]
    read = sentences(abstract) + sentences(main)
    lengths = sorted(len(s.split()) for s in read)
    first = sentences(abstract)[:1]
    return {"abstract_words": len(abstract.split()), "abstract_numbers": len(_NUMBER.findall(abstract.replace("\\", ""))),
            "takeaway": first[0] if first else "", "sentences": len(lengths),
            "median_words": lengths[len(lengths) // 2] if lengths else 0, "longest_words": lengths[-1] if lengths else 0,
            "longest": max(read, key=lambda s: len(s.split())) if lengths else ""}


LATEX_DIR = ".latex"  # latexmk's working files, beside the paper


def first_error(log: str) -> str:
    """The first TeX error of a log ("! Undefined control sequence." and the line after it)."""
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("!"):
            return " ".join(x.strip() for x in lines[i:i + 3])
    return lines[-1] if lines else "no log"


_WRITTEN = re.compile(r"^Output written on (.+) \((\d+) pages?, (\d+) bytes\)\.", re.M)
_WARNING = re.compile(r"^(LaTeX Warning|Package \S+ Warning|LaTeX Font Warning|Overfull|Underfull)", re.M)


def latex_summary(latexmk_output: str, log: str) -> str:
    """What the PDF rule's log keeps of a build: the PDF's pages and size, the pdflatex passes latexmk ran, and
    the last pass's warnings (LaTeX's whole log stays in `.latex/`)."""
    written = _WRITTEN.findall(log)
    passes = len(re.findall(r"^Run number \d+ of rule '(?:pdf)?latex'", latexmk_output, re.M))
    warnings = [line.strip() for line in log.splitlines() if _WARNING.match(line)]
    out = [f"built paper.pdf: {written[-1][1]} pages, {int(written[-1][2]):,} bytes" if written else "built paper.pdf",
           f"latexmk ran pdflatex {passes} time{'s' * (passes != 1)}" + (" (the PDF was up to date)" if not passes else ""),
           f"warnings in the last pass: {len(warnings)}"]
    return "\n".join(out + [f"  {w}" for w in warnings[:20]] + (["  ..."] if len(warnings) > 20 else []))


def build_pdf(tex_path: str | Path) -> str:
    """paper.pdf beside paper.tex with latexmk -> latex_summary ("built paper.pdf: 15 pages, ..."), or "skipped:
    latexmk not installed" where it is not.

    LaTeX's own files (aux, log, ...) stay in `.latex/` beside the paper (LATEX_DIR); only the PDF is placed
    next to the .tex. Raises RuntimeError with the log's first error when LaTeX fails."""
    if shutil.which("latexmk") is None:
        return "skipped: latexmk not installed"
    tex = Path(tex_path).resolve()
    out = tex.parent / LATEX_DIR
    # a fixed date in the PDF's metadata: the same .tex gives the same bytes (a stored study rebuilds byte-identical)
    env = os.environ | {"SOURCE_DATE_EPOCH": "0", "FORCE_SOURCE_DATE": "1"}
    proc = subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", f"-outdir={LATEX_DIR}",
                           tex.name], cwd=tex.parent, capture_output=True, text=True, env=env)
    log = out / tex.with_suffix(".log").name
    if proc.returncode != 0:
        text = log.read_text(errors="replace") if log.is_file() else proc.stdout + proc.stderr
        raise RuntimeError(f"latexmk failed on {tex.name}: {first_error(text)}")
    shutil.copyfile(out / tex.with_suffix(".pdf").name, tex.with_suffix(".pdf"))
    return latex_summary(proc.stdout + proc.stderr, log.read_text(errors="replace"))
