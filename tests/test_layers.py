"""The package's layers: a lower layer never imports a higher one, and no module imports in a cycle.

    python -m pytest tests/test_layers.py -q

Layers, from the bottom (ARCHITECTURE.md draws them): core < measure < aggregate < report, plan; the report and
the plan stand side by side and neither imports the other; the package's own `__main__` (the command line) sits
above them all. Imports inside functions count too. The report
words numbers and decides none: it imports no statistics (core/stats.py, scipy, numpy, `statistics`), which
aggregate applies once (aggregate/decide.py, summary.py, claims.py). The
Snakefile and workflow/rules/*.smk only wire rules to the plan: they define no function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import REPO

pytestmark = pytest.mark.unit

PACKAGE = "compile_study"
LAYERS = ("core", "measure", "aggregate", "report", "plan")
LEVEL = {"core": 0, "measure": 1, "aggregate": 2, "report": 3, "plan": 3}  # a layer imports only lower levels
MAX_MODULES = 15  # no folder of the package holds more modules than this
STATISTICS = ("compile_study.core.stats", "scipy", "numpy", "statistics")  # what the report may not import


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path) -> set[str]:
    """Every compile_study module a file imports (`from compile_study.core import vocab` -> ...core.vocab)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    known = {module_name(p, root) for p in (root / PACKAGE).rglob("*.py")}
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        out |= {t if t in known else f"unresolved:{t}" for t in targets if t.split(".")[0] == PACKAGE}
    return out


def graph(root: Path) -> dict[str, set[str]]:
    return {module_name(p, root): imports(p, root) - {module_name(p, root)} for p in (root / PACKAGE).rglob("*.py")}


def layer(module: str) -> str | None:
    """The layer a module lives in (core .. plan); None for the package's top (its __main__ and __init__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def level(module: str) -> int:
    """0 for core .. 3 for report and plan; 4 for the package's top; -1 for an import that does not resolve."""
    if module.startswith("unresolved:"):
        return -1
    return LEVEL[layer(module)] if layer(module) else max(LEVEL.values()) + 1


def upward_imports(g: dict[str, set[str]]) -> list[str]:
    """Imports of a higher level, or of another layer on the same level (the report and the plan)."""
    return sorted(f"{m} -> {t}" for m, ts in g.items() for t in ts
                  if level(t) > level(m) or (level(t) == level(m) and layer(t) != layer(m)))


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles among modules (each found once, by depth-first search)."""
    found, state = [], {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = "open"
        for t in sorted(g.get(m, ())):
            if state.get(t) == "open":
                found.append(path[path.index(t):] + [t])
            elif t not in state:
                visit(t, path + [t])
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m, [m])
    return found


def test_every_module_lives_in_a_layer():
    loose = [m for m in graph(REPO) if layer(m) is None and m not in (PACKAGE, f"{PACKAGE}.__main__")]
    assert loose == [], "modules outside the layers: " + ", ".join(loose)


def crowded(root: Path) -> dict[str, int]:
    """The package's folders that hold more than MAX_MODULES modules (`__init__.py` not counted)."""
    counts = {str(d.relative_to(root)): len([p for p in d.glob("*.py") if p.name != "__init__.py"])
              for d in (root / PACKAGE).rglob("*") if d.is_dir() and d.name != "__pycache__"}
    return {d: n for d, n in counts.items() if n > MAX_MODULES}


def test_every_folder_holds_at_most_fifteen_modules():
    assert crowded(REPO) == {}


def test_no_layer_imports_a_higher_one_and_nothing_imports_in_a_cycle():
    g = graph(REPO)
    assert sorted(t for ts in g.values() for t in ts if t.startswith("unresolved:")) == []
    assert upward_imports(g) == []
    assert cycles(g) == []


def statistics_in_report(root: Path) -> list[str]:
    """Report modules that import a statistics module, or call one by the name `stats.` anywhere in their text."""
    out = []
    for path in sorted((root / PACKAGE / "report").rglob("*.py")):
        name = module_name(path, root)
        for node in ast.walk(ast.parse(path.read_text())):
            found = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) else [])
            out += [f"{name} imports {f}" for f in found if f.split(".")[0] in STATISTICS or f in STATISTICS]
        out += [f"{name} names stats." for line in path.read_text().splitlines() if "stats." in line]
    return out


def test_the_report_imports_no_statistics():
    assert statistics_in_report(REPO) == []


def test_the_check_sees_an_upward_import_and_a_cycle(tmp_path):
    """The checks above would fail on a deliberately bad package (a copy of this one, with three bad lines)."""
    import shutil

    shutil.copytree(REPO / PACKAGE, tmp_path / PACKAGE)
    vocab = tmp_path / PACKAGE / "core" / "vocab.py"
    vocab.write_text(vocab.read_text() + "\nfrom compile_study.report import build  # noqa\n")
    timing = tmp_path / PACKAGE / "measure" / "timing.py"
    timing.write_text(timing.read_text() + "\nfrom compile_study.measure import run  # noqa\n")
    findings = tmp_path / PACKAGE / "report" / "findings.py"
    findings.write_text(findings.read_text() + "\nfrom compile_study.core import stats  # noqa\nBEST = stats.top\n")
    g = graph(tmp_path)
    assert statistics_in_report(tmp_path) == ["compile_study.report.findings imports compile_study.core.stats",
                                              "compile_study.report.findings names stats."]
    assert "compile_study.core.vocab -> compile_study.report.build" in upward_imports(g)
    assert any("compile_study.measure.timing" in c and "compile_study.measure.run" in c for c in cycles(g))
    study = tmp_path / PACKAGE / "plan" / "study.py"
    study.write_text(study.read_text() + "\nfrom compile_study.report import build  # noqa\n")
    assert "compile_study.plan.study -> compile_study.report.build" in upward_imports(graph(tmp_path))
    for i in range(MAX_MODULES + 1):
        (tmp_path / PACKAGE / "report" / "compare" / f"extra_{i}.py").write_text("")
    assert crowded(tmp_path) == {f"{PACKAGE}/report/compare": MAX_MODULES + 6}


def test_the_rule_files_only_wire():
    """No function and no logic of their own in the Snakefile or a rule file: each `run:` block is one call."""
    import re

    for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]:
        text = path.read_text()
        assert not re.search(r"^\s*def \w+", text, re.M), f"{path.name} defines a function"
        assert "lambda" not in text, f"{path.name} has a lambda"
        for block in re.findall(r"^    run:\n((?:        .*\n?)+)", text, re.M):
            assert len(ast.parse(block.replace("        ", "", 1).strip().replace("\n        ", "\n")).body) == 1, (
                f"{path.name}: a run: block of more than one statement")
