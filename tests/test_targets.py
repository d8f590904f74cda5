"""Every launcher target resolves to the function its job runs (measure/targets.py, measure/checks/targets.py)."""

from __future__ import annotations

import inspect

import pytest

from compile_study.measure import targets as run_targets
from compile_study.measure.checks import targets as check_targets
from compile_study.measure.checks.spec import method_checks
from compile_study.measure.process import launch

pytestmark = pytest.mark.unit

TARGETS = [fn for module in (run_targets, check_targets) for name, fn in vars(module).items()
           if inspect.isfunction(fn) and fn.__module__ == module.__name__ and fn.__code__.co_argcount == 0]


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: launch.name_of(t))
def test_each_target_imports_the_function_it_names(target):
    fn = target()
    assert callable(fn) and fn.__name__ in ("job", "main", target.__name__)
    # the function lives where the target's own import says (grep from the rule reaches it)
    assert f"from {fn.__module__} import {fn.__name__}" in inspect.getsource(target)


def test_every_method_check_but_those_driven_from_snakemake_has_a_main_its_target_imports():
    # the launcher and compile_concurrency checks drive processes from Snakemake's own (plan/checks.py run)
    checks = method_checks()
    assert sorted(c for c, spec in checks.items() if spec.in_process) == ["compile_concurrency", "launcher"]
    for name, spec in checks.items():
        if not spec.in_process:
            main = check_targets.method_check(spec.module)()
            assert (main.__module__, main.__name__) == (f"compile_study.measure.checks.{name}", "main")
            assert list(main.__code__.co_varnames[:3]) == ["data_dir", "out_path", "model"]
