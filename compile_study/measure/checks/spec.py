"""A method check as one plug-in module: it declares `CHECK = MethodCheck(...)`, and the plan, the estimate and the
paper find it here (`method_checks()`), with nothing else to edit.

    CHECK = MethodCheck(name="echo_check", key="echo", says="what it checks, in one sentence", prior_s=5,
                        table=("d_model",))
    def main(data_dir: str, out_path: str, model: dict) -> None: ...   # run in a process of its own

The declaration is read from the module's source, never by importing it: a check may import torch at its top,
and the plan that reads the declaration (when the workflow loads) must not. So every keyword is a literal
(`ast.literal_eval`). What each field gives:

- the plan (plan/checks.py): config `checks` may name it (an unknown name stops the workflow before any job);
  rule method_check runs its `main(data_dir, out_path, model)` in a process of its own on a lane, `shares` timed
  jobs' cores and, with `every_gpu`, every GPU (unless `in_process`: the plan drives it from Snakemake's own);
- the estimate (aggregate/estimate/): `prior_s` seconds a unit where no stored study logged its job, a unit
  each of its `cases` on the device (one where it has none);
- the paper (report/): its file under the report's `key`, read whole (`whole`) or its `results`; a check with
  `table` gets a table in the appendix, one row a result, one column a key of it, captioned by `says`.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

from compile_study.core.config.config_problem import Problem

HERE = Path(__file__).resolve().parent
PACKAGE = "compile_study.measure.checks"


@dataclass(frozen=True)
class MethodCheck:
    name: str  # config `checks` names it; its module is measure/checks/<name>.py, its file checks/<name>.json
    key: str  # the report's key for its results
    says: str  # what it checks, one sentence (the appendix's caption of a `table`)
    prior_s: float  # the estimate's seconds a unit, where no stored study logged its job
    cases: dict = field(default_factory=dict)  # device -> the cases it measures there (the estimate's units)
    whole: bool = False  # the report reads its file whole, not only its `results`
    in_process: bool = False  # it drives processes from Snakemake's own (the plan runs it), measuring none itself
    shares: int = 1  # a timed job's cores it takes (two processes at once: 2)
    every_gpu: bool = False  # it holds every GPU (the whole `timed_run` pool)
    table: tuple = ()  # the keys of a result its appendix table shows, one column each

    @property
    def module(self) -> str:
        return f"{PACKAGE}.{self.name}"

    def units(self, device: str) -> int:
        return len(self.cases.get(device, ())) or 1


class CheckDeclarationError(ValueError):
    """A module's CHECK that cannot be read without importing the module (a keyword that is no literal)."""


def declaration(path: Path) -> MethodCheck | None:
    """The module's `CHECK = MethodCheck(...)`, read from its source; None where it declares none."""
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["CHECK"]
                and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "MethodCheck"):
            try:
                fields = {k.arg: ast.literal_eval(k.value) for k in node.value.keywords}
            except ValueError as e:
                raise CheckDeclarationError(f"{path.name}: CHECK's keywords must be literals ({e})") from None
            check = MethodCheck(**fields)
            if check.name != path.stem:
                raise CheckDeclarationError(f"{path.name}: CHECK's name is {check.name!r}, not its module's")
            return check
    return None


@functools.cache
def method_checks(folder: Path = HERE) -> dict[str, MethodCheck]:
    """Every method check: each module of this folder that declares CHECK, by name."""
    found = (declaration(p) for p in sorted(folder.glob("*.py")))
    return {c.name: c for c in found if c is not None}


def report_keys() -> dict[str, str]:
    """A method check's name (config `checks`) -> its key in the report's `checks`."""
    return {c.name: c.key for c in method_checks().values()}


def unknown(names: list[str]) -> list[str]:
    """The names config `checks` gives that no module of this folder declares."""
    return [n for n in names if n not in method_checks()]


def config_problems(config: dict) -> list[Problem]:
    """Config `checks` naming a check no module declares, for every device (the plan's and the estimate's check,
    before any job)."""
    known = ", ".join(method_checks())
    return [Problem(f"checks.{device}: no method check {name!r} (measure/checks/ declares {known})", ("checks", device))
            for device, names in (config.get("checks") or {}).items() for name in unknown(names or [])]
