"""Bytecode where the installed packages have none.

An image whose site-packages were installed without `.pyc` files and that never writes them (read-only, or
PYTHONDONTWRITEBYTECODE set) makes every new Python process compile torch's modules from source again,
several times the cost of importing them with bytecode. A study starts a process for each script job, and
the tests start hundreds of them.

    bytecode.keep(".snakemake/pycache")   # the Snakefile; tests/conftest.py keeps .pytest_cache/pycache

Where torch has bytecode (any `pip install`, the project's container, CI), nothing changes. Where it has
none, this process and the processes it starts write bytecode once under that folder and read it from
there (Python's PYTHONPYCACHEPREFIX): the first process pays, the later ones do not. Torch-free.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def missing(package: str = "torch") -> bool:
    """Whether `package` is installed as source with no bytecode that this interpreter would read."""
    spec = importlib.util.find_spec(package)  # finds the package without importing it
    if spec is None or not (spec.origin or "").endswith(".py"):
        return False
    return not os.path.exists(importlib.util.cache_from_source(spec.origin))  # honours sys.pycache_prefix


def keep(cache_dir: str | Path, package: str = "torch") -> bool:
    """Where `package` has no bytecode, keep it under cache_dir for this process and the ones it starts."""
    if not missing(package):
        return False
    cache = str(Path(cache_dir).resolve())
    os.environ["PYTHONPYCACHEPREFIX"] = cache
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.pycache_prefix = cache
    sys.dont_write_bytecode = False
    return True
