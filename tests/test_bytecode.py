"""Bytecode where the installed packages have none: kept once under a cache folder, read by later processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from compile_study.core.calls import bytecode

pytestmark = pytest.mark.unit


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package installed as source only, in a process that writes no bytecode (as on such an image)."""
    site = tmp_path / "site"
    (site / "srconly").mkdir(parents=True)
    (site / "srconly" / "__init__.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "")  # records its value, so that what keep() sets is undone after
    monkeypatch.delenv("PYTHONPYCACHEPREFIX")
    monkeypatch.setattr(sys, "pycache_prefix", None)  # restored after the test, as is dont_write_bytecode
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    return site


def imports_srconly() -> None:
    res = subprocess.run([sys.executable, "-c", "import srconly; assert srconly.VALUE == 42"], env=os.environ.copy(),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def test_a_package_without_bytecode_gets_it_once_under_the_cache_and_later_processes_read_it(package, tmp_path):
    cache = tmp_path / "pycache"
    assert bytecode.missing("srconly")
    imports_srconly()  # as the image does it: nothing written, the next process compiles again
    assert not list(package.rglob("*.pyc")) and bytecode.missing("srconly")

    assert bytecode.keep(cache, "srconly")
    assert os.environ["PYTHONPYCACHEPREFIX"] == str(cache.resolve()) and "PYTHONDONTWRITEBYTECODE" not in os.environ
    imports_srconly()  # a process started now writes the bytecode under the cache, never beside the source
    written = {p.relative_to(cache).as_posix() for p in cache.rglob("*.pyc")}
    assert f"{package.resolve().as_posix().lstrip('/')}/srconly/__init__.{sys.implementation.cache_tag}.pyc" in written
    assert not list(package.rglob("*.pyc"))
    assert not bytecode.missing("srconly")  # this process reads it there too
    assert not bytecode.keep(cache, "srconly")  # and a second call changes nothing


def test_a_package_with_bytecode_or_none_installed_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert not bytecode.missing("pytest")  # installed by pip, which writes bytecode
    assert not bytecode.keep(tmp_path / "pycache", "pytest") and "PYTHONPYCACHEPREFIX" not in os.environ
    assert not bytecode.missing("no_such_package_here") and not bytecode.missing("sys")  # absent; built in
