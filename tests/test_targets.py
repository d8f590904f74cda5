"""Every launcher target resolves to the function its job runs (measure/targets.py, measure/checks/targets.py)."""

from __future__ import annotations

import inspect

import pytest

from compile_study.measure.checks import targets as check_targets
from compile_study.core.layout import CHECKS
from compile_study.measure.process import launch
from compile_study.measure import targets as run_targets

pytestmark = pytest.mark.unit

TARGETS = [fn for module in (run_targets, check_targets) for name, fn in vars(module).items()
           if inspect.isfunction(fn) and fn.__module__ == module.__name__]


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: launch.name_of(t))
def test_each_target_imports_the_function_it_names(target):
    fn = target()
    assert callable(fn) and fn.__name__ in ("job", "main", target.__name__)
    # the function lives where the target's own import says (grep from the rule reaches it)
    assert f"from {fn.__module__} import {fn.__name__}" in inspect.getsource(target)


def test_every_method_check_but_those_driven_from_snakemake_has_a_target():
    # the launcher and compile_concurrency checks drive processes from Snakemake's own (plan/study.py method_check)
    driven = ("launcher", "compile_concurrency")
    assert sorted(check_targets.METHOD_CHECKS) == sorted(c for c in CHECKS if c not in driven)
    assert all(check_targets.METHOD_CHECKS[c]().__module__ == f"compile_study.measure.checks.{c}" for c in check_targets.METHOD_CHECKS)
