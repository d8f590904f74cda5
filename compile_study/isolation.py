"""Per-job process settings that must be made before torch is imported (this module never imports it).

- CPU threads, Inductor's compile workers included, are bounded to the job's `threads`, so that
  one job's compilation cannot slow another job's timed block.
- The Inductor/Triton cache is per configuration: repeat 0 starts from an empty cache (a cold
  compile, as a first-time user pays it); later repeats find it populated (a warm compile).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def bound_threads(threads: int) -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS"):
        os.environ[var] = str(threads)


def use_inductor_cache(cache_dir: str | os.PathLike, fresh: bool) -> str:
    """Point Inductor and Triton at cache_dir (emptied first if fresh) -> "cold" or "warm"."""
    cache = Path(cache_dir).resolve()
    if fresh:
        shutil.rmtree(cache, ignore_errors=True)
    state = "warm" if cache.is_dir() and any(cache.iterdir()) else "cold"
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    os.environ["TRITON_CACHE_DIR"] = str(cache / "triton")
    return state
