"""Every pointer a reader may follow leads somewhere: each dotted `compile_study.…` name and each repository path
cited in the package's docstrings and comments, the workflow's rules, schema and scripts, the paper's templates,
README.md and ARCHITECTURE.md resolves (a module of the package and the names it defines; a path, or its glob, exists; a document such as
ARCHITECTURE.md is one of the project's).

    python -m pytest tests/test_pointers.py -q

A path names a file of the repository when its first part is one of the repository's own top-level entries
(`workflow/rules/common.smk`), a layer of the package (`core/stats.py`, read under compile_study/) or the
templates' `sections/`; placeholders (`reference/<name>`, `results/{device}`) and `*` are globs that must match
something. A study's own files (`checks/timer_check.json`) resolve inside a stored study; what a study makes
under results/, resources/ or logs/ is not in the repository and is not checked.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest
import yaml

from .conftest import REPO

pytestmark = pytest.mark.unit

LAYERS = ("core", "measure", "checks", "aggregate", "report")
# what a study, the workflow, the tests, the set-up or a container build make: not in the repository (the
# set-up's .venv is the host's; inside the image its python links to a path the image lacks)
MADE = (
    "results", "resources", "logs", ".snakemake", ".pytest_cache", ".venv", "containers/build",
    "containers/compile-study.sif",
)
FORMER = ("reference/h200-2026-12-02", "reference/h200-full-2026-12-02")  # stored studies since replaced, named where the text tells their history
DOTTED = re.compile(r"(?<![\w./-])compile_study(?:\.[A-Za-z_]\w*)+(?::\w+)?|from (compile_study[\w.]*) import (\w+)")
PATH = re.compile(r"(?<![\w./<>*-])((?:[\w.<>*-]+/)+[\w.<>*-]*[\w>*])")
# a module's path and a name it defines: `core/config/grid.py` `expand`, vocab.py SCOPE_MODES (backticked or in capitals)
NAMED = re.compile(r"([\w/]+\.py)`? (?:`(\w+)(?:\(\))?`|([A-Z][A-Z0-9_]{2,})\b)")
DOC = re.compile(r"(?<![\w/.-])([A-Z][A-Z_]*\.md)\b")  # README.md, ARCHITECTURE.md: the project's own documents
PLACEHOLDER = re.compile(r"\{[^{}\s]*\}|<[^<>\n]*>")  # {device}, {paper,md,tex}, <a CPU study>: read as *


def python_prose(text: str) -> str:
    """A Python file's docstrings and comments, with everything else blanked (so that line numbers still hold)."""
    keep = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                keep |= set(range(first.lineno, first.end_lineno + 1))
    lines = text.splitlines()
    out = [line if i + 1 in keep else "" for i, line in enumerate(lines)]
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            row = tok.start[0] - 1
            out[row] = out[row] + " " + tok.string
    return "\n".join(out)


def smk_prose(text: str) -> str:
    """A rule file's docstrings and comments (an .smk file is not plain Python), line by line."""
    out, inside = [], False
    for line in text.splitlines():
        quotes = line.count('"""')
        out.append(line if inside or quotes else line.partition("#")[2])
        inside ^= quotes % 2 == 1
    return "\n".join(out)


def schema_prose(text: str) -> str:
    """A YAML file's descriptions and comments."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("description", "$comment") and isinstance(v, str):
                    found.append(v)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(yaml.safe_load(text))
    return "\n".join(found + [line.partition("#")[2] for line in text.splitlines() if "#" in line])


def sources(root: Path) -> dict[Path, str]:
    """The prose of every file a reader follows pointers from."""
    out = {}
    for pattern in ("compile_study/**/*.py", "workflow/scripts/*.py", "tests/*.py", "benchmarks/*.py", "locks/*.py"):
        out |= {p: python_prose(p.read_text()) for p in root.glob(pattern)}
    out |= {p: smk_prose(p.read_text()) for p in [root / "Snakefile", *root.glob("workflow/rules/*.smk")]}
    out |= {p: schema_prose(p.read_text()) for p in [*root.glob("workflow/schemas/*.yaml"), root / "config.yaml"]}
    out |= {p: p.read_text() for p in [*root.glob("paper/templates/**/*.j2"), root / "README.md", root / "ARCHITECTURE.md",
                                        *root.glob("docs/*.md")]}
    return out


def _defined(node) -> set[str]:
    """The names a module or class body defines (functions, classes, assignments, imports)."""
    out = set()
    for n in node.body:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(n.name)
        elif isinstance(n, ast.Assign | ast.AnnAssign):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(n, ast.Import | ast.ImportFrom):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return out


def resolves_dotted(root: Path, name: str) -> bool:
    """`compile_study.core.stats.verdict` or `compile_study.measure.run:run_job`: a module of the package (read,
    not imported, so that no torch is loaded) and the names it, or a class of it, defines."""
    module, _, attr = name.partition(":")
    parts = module.split(".") + ([attr] if attr else [])
    for i in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:i])
        file = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if file.is_file():
            break
    else:
        return False
    node = ast.parse(file.read_text())  # the longest prefix that is a module: what follows is defined in it
    for a in parts[i:]:
        if a not in _defined(node):
            return False
        node = next((n for n in node.body if isinstance(n, ast.ClassDef) and n.name == a), ast.Module(body=[]))
    return True


def _module_file(root: Path, path: str) -> str | None:
    """The dotted name of a package module cited by its path (`core/config/grid.py`, `compile_study/core/config/grid.py`)."""
    for base in (root, root / "compile_study"):
        if (base / path).is_file() and (base / path).resolve().is_relative_to(root / "compile_study"):
            return ".".join((base / path).relative_to(root).with_suffix("").parts)
    return None


def _glob(root: Path, path: str) -> bool:
    pattern = path
    return any(root.glob(pattern)) if "*" in pattern else (root / pattern).exists()


def resolves_path(root: Path, path: str) -> bool | None:
    """True or False for a repository path; None for a token that names none (tokens/s, A/A, a study's output)."""
    first = path.split("/")[0]
    tops = {p.name for p in root.iterdir()}
    if any(path == m or path.startswith(m + "/") for m in MADE) or path in FORMER:
        return None
    if first in LAYERS and path.endswith(".py") or first in LAYERS and path.endswith("/"):
        return _glob(root / "compile_study", path)
    if first == "sections":
        return _glob(root / "paper" / "templates", path)
    if first in tops and _glob(root, path):
        return True
    if re.fullmatch(r"(runs|parity|checks|claims|figures|damaged|tests)", first):  # a study's own files
        return any(_glob(study, path) for study in root.glob("reference/*/")) or None
    return False if first in tops else None


def broken(root: Path, texts: dict[Path, str] | None = None) -> list[str]:
    """`file:line: pointer` for each pointer that leads nowhere, in `texts` (default: every source's prose)."""
    out = []
    for path, text in sorted((sources(root) if texts is None else texts).items()):
        rel = path.relative_to(root)
        for lineno, line in enumerate(text.splitlines(), 1):
            for m in DOTTED.finditer(line):
                name = f"{m[1]}.{m[2]}" if m[1] else m[0]
                if not resolves_dotted(root, name):
                    out.append(f"{rel}:{lineno}: {name}")
            out += [f"{rel}:{lineno}: {m[1]}" for m in DOC.finditer(line) if not (root / m[1]).is_file()]
            for m in NAMED.finditer(line):
                module = _module_file(root, m[1])
                if module is not None and not resolves_dotted(root, f"{module}.{m[2] or m[3]}"):
                    out.append(f"{rel}:{lineno}: {m[1]} {m[2] or m[3]}")
            for m in PATH.finditer(PLACEHOLDER.sub("*", line)):
                if resolves_path(root, m[1]) is False:
                    out.append(f"{rel}:{lineno}: {m[1]}")
    return out


def test_every_cited_name_and_path_resolves():
    assert broken(REPO) == []


def test_the_check_finds_a_name_and_a_path_that_lead_nowhere():
    """Two sources with bad pointers, one in a docstring and one in a template, are read as the real ones are:
    each bad pointer is found, and code (not prose) that happens to hold a slash is not read as a pointer."""
    module = REPO / "compile_study" / "core" / "calls" / "deadline.py"
    template = REPO / "paper" / "templates" / "sections" / "terms.j2"
    texts = {module: python_prose('"""See compile_study.core.no_such_module and core/gone.py, not core/vocab.py."""\n'
                                  'X = "core/also_gone.py"  # compile_study.core.vocab.SCOPE_TEXT\n'
                                  '# core/vocab.py SCOPE_TEXT, core/config/grid.py `expand`, core/config/grid.py `gone()`\n'),
             template: "{#- see workflow/rules/nothing.smk, reference/<name> and compile_study.report.paper.words -#}\n"
                       "{#- as DESIGN.md says, not README.md -#}\n"}
    assert broken(REPO, texts) == ["compile_study/core/calls/deadline.py:1: compile_study.core.no_such_module",
                                   "compile_study/core/calls/deadline.py:1: core/gone.py",
                                   "compile_study/core/calls/deadline.py:2: compile_study.core.vocab.SCOPE_TEXT",
                                   "compile_study/core/calls/deadline.py:3: core/vocab.py SCOPE_TEXT",
                                   "compile_study/core/calls/deadline.py:3: core/config/grid.py gone",
                                   "paper/templates/sections/terms.j2:1: workflow/rules/nothing.smk",
                                   "paper/templates/sections/terms.j2:2: DESIGN.md"]


def anchors(markdown: str) -> set[str]:
    """The anchors a Markdown file's headings give (GitHub's rule: lower case, punctuation dropped, spaces to -)."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#{1,6} (.+)$", markdown, re.M)}


def dangling_links(root: Path) -> list[str]:
    """Every link of README.md and docs/*.md that leads nowhere: a relative path that does not exist from the file,
    or an anchor that no heading of its target gives."""
    out = []
    for doc in [root / "README.md", *sorted(root.glob("docs/*.md"))]:
        text = doc.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"https?://", target):
                continue
            path, _, anchor = target.partition("#")
            where = (doc.parent / path).resolve() if path else doc
            if not where.exists():
                out.append(f"{doc.relative_to(root)}: {target} (no such file)")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where.read_text()):
                out.append(f"{doc.relative_to(root)}: {target} (no such heading)")
    return out


@pytest.mark.unit
def test_every_link_of_the_readme_and_docs_leads_somewhere(tmp_path):
    assert dangling_links(REPO) == []
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Top\n\nSee [the docs](docs/a.md#b), [gone](docs/none.md), [top](#top).\n")
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Not b\n\n[back](../README.md#top)\n")
    assert dangling_links(tmp_path) == ["README.md: docs/a.md#b (no such heading)", "README.md: docs/none.md (no such file)"]
