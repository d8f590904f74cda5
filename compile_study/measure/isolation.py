"""Per-job process settings that must be made before torch is imported (this module never imports it).

- CPU threads, Inductor's compile workers included, are bounded to the job's `threads`, so that
  one job's compilation cannot slow another job's timed block.
- On a host with several GPUs each timed job holds one GPU's lock (`claim_gpu`) and runs on its own
  disjoint share of the CPU cores (Inductor's compile workers included), so that two timed runs on two
  GPUs do not compete for the host that most of their steps wait on.
- The Inductor/Triton cache is per configuration: repeat 0 starts from an empty cache (a cold
  compile, as a first-time user pays it); later repeats find it populated (a warm compile).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from filelock import FileLock, Timeout  # a dependency of torch


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


def count_gpus() -> int:
    """GPUs on the host, from nvidia-smi (torch is not imported yet; 0 without NVIDIA tools)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def claim_gpu(lock_dir: str | os.PathLike) -> FileLock | None:
    """On a host with several GPUs, hold one GPU's lock for this process and make it the only visible one.

    Snakemake's `timed_run` resource bounds how many timed jobs run at once (one per GPU) but does
    not say which GPU a job gets; the locks do, so two timed runs never share a device.
    """
    n = count_gpus()
    if n <= 1 or "CUDA_VISIBLE_DEVICES" in os.environ:
        return None
    Path(lock_dir).mkdir(parents=True, exist_ok=True)
    while True:
        for i in range(n):
            lock = FileLock(Path(lock_dir) / f"gpu{i}.lock")
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue
            os.environ["CUDA_VISIBLE_DEVICES"] = str(i)
            pin_cores(i, n)
            return lock
        time.sleep(1.0)  # all busy: more timed jobs than GPUs were allowed to start


def pin_cores(slot: int, slots: int) -> list[int]:
    """Pin this process to the slot-th of `slots` disjoint, equal shares of its allowed cores; threads follow."""
    cores = sorted(os.sched_getaffinity(0))
    share = max(1, len(cores) // slots)
    mine = cores[slot * share:(slot + 1) * share] or cores[-share:]
    os.sched_setaffinity(0, mine)
    bound_threads(len(mine))
    return mine


def job_threads(requested: int) -> int:
    """Threads for torch: the job's request, but never more than the cores it is pinned to."""
    return max(1, min(requested, len(os.sched_getaffinity(0))))
