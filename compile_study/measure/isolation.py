"""Per-job process settings, decided by the launcher before the job's process starts (this module never imports torch).

- CPU threads, Inductor's compile workers included, are bounded to the job's `threads`, so that
  one job's compilation cannot slow another job's timed block.
- On a host with several GPUs each timed job holds one GPU's lock (`take_gpu`) and runs on its own
  disjoint share of the CPU cores (Inductor's compile workers included), so that two timed runs on two
  GPUs do not compete for the host that most of their steps wait on.
- The Inductor/Triton cache is per configuration: the compile phase's first cold compile starts from an
  empty cache (as a first-time user pays it) and leaves it filled; every timed run finds it populated (a warm
  compile); the other cold compiles use caches of their own, emptied first. Where a sub-grid shares one GEMM
  search between its max-autotune modes, a later mode's first cold compile starts from the first mode's search
  results alone (prepare_cache `search_from`).
- Compiles and timed work never share the host (`Host`, `HOST`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from filelock import FileLock, Timeout  # a dependency of torch

from compile_study.core import vocab


def thread_env(threads: int) -> dict[str, str]:
    """What torch, MKL and Inductor's compile workers read for their thread counts when they start."""
    return {var: str(threads) for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS")}


def bound_threads(threads: int) -> None:
    os.environ.update(thread_env(threads))


# Where Inductor keeps the benchmarked timings of kernel choices (max-autotune's search) under its cache
# directory: one JSON file per system (torch/_inductor/codecache.py CacheBase.get_local_cache_path). A search
# whose every choice is found there is neither precompiled nor benchmarked again.
SEARCH_RESULTS = "cache"


def prepare_cache(cache_dir: str | os.PathLike, fresh: bool,
                  search_from: str | os.PathLike | None = None) -> tuple[dict[str, str], str]:
    """Empty cache_dir first if fresh -> (the environment pointing Inductor and Triton at it, its state:
    vocab.CACHE_STATES). `search_from`: another configuration's cache whose search results (SEARCH_RESULTS, not
    its graphs or kernels) a fresh cache starts with, where it has any: "cold, GEMM search shared"."""
    cache = Path(cache_dir).resolve()
    if fresh:
        shutil.rmtree(cache, ignore_errors=True)
    state = "warm" if cache.is_dir() and any(cache.iterdir()) else "cold"
    cache.mkdir(parents=True, exist_ok=True)
    searched = Path(search_from).resolve() / SEARCH_RESULTS if search_from is not None else None
    if fresh and searched is not None and searched.is_dir() and any(searched.iterdir()):
        shutil.copytree(searched, cache / SEARCH_RESULTS)
        state = vocab.SEARCH_SHARED
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton")}, state


def use_inductor_cache(cache_dir: str | os.PathLike, fresh: bool) -> str:
    """prepare_cache, applied to this process -> "cold" or "warm"."""
    env, state = prepare_cache(cache_dir, fresh)
    os.environ.update(env)
    return state


@functools.cache
def count_gpus() -> int:
    """GPUs on the host, from nvidia-smi (torch is not imported; 0 without NVIDIA tools). Asked once a process."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def take_gpu(lock_dir: str | os.PathLike) -> tuple[FileLock, int, int] | None:
    """On a host with several GPUs, wait for one GPU's lock -> (lock, its index, GPUs on the host), or None.

    Snakemake's `timed_run` resource bounds how many timed jobs run at once (one per GPU) but does
    not say which GPU a job gets; the locks do, so two timed runs never share a device. Where
    CUDA_VISIBLE_DEVICES is set already (a cluster's job gets its GPU that way), there is nothing to take.
    """
    n = count_gpus()
    if n <= 1 or "CUDA_VISIBLE_DEVICES" in os.environ:
        return None
    Path(lock_dir).mkdir(parents=True, exist_ok=True)
    while True:
        for i in range(n):
            lock = FileLock(Path(lock_dir) / f"gpu{i}.lock", thread_local=False)
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue
            return lock, i, n
        time.sleep(0.2)  # all busy: more timed jobs than GPUs were allowed to start


def core_share(slot: int, slots: int) -> list[int]:
    """The slot-th of `slots` disjoint, equal shares of this process's allowed cores."""
    cores = sorted(os.sched_getaffinity(0))
    share = max(1, len(cores) // slots)
    return cores[slot * share:(slot + 1) * share] or cores[-share:]


def pin_cores(slot: int, slots: int) -> list[int]:
    """Pin this process to its core share (core_share); threads follow."""
    mine = core_share(slot, slots)
    os.sched_setaffinity(0, mine)
    bound_threads(len(mine))
    return mine


def job_threads(requested: int, cores: list[int] | None = None) -> int:
    """Threads for torch: the job's request, but never more than the cores it is pinned to."""
    return max(1, min(requested, len(cores) if cores else len(os.sched_getaffinity(0))))


class Host:
    """Who uses the host: the compile phase's compiles, several at once on disjoint cores, or timed work (a timed
    run, a check, an evidence pass), which never runs beside a compile. Every job of a local study runs in a
    thread of Snakemake's own process (profiles/default: force-use-threads), so one lock in that process sees them
    all; Snakemake's threads already keep a timed job (all of a GPU's cores) from sharing the host on a one-GPU
    host, and this lock holds where several GPUs' timed jobs and compiles could meet. A cluster's job is alone on
    its allocation."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._timed = 0
        self._compiles: dict[int, dict] = {}  # slot -> {"at_once": most compiles seen at once while it ran}

    @contextlib.contextmanager
    def timed(self):
        """Hold the host for timed work: wait while any compile runs."""
        with self._cond:
            self._cond.wait_for(lambda: not self._compiles)
            self._timed += 1
        try:
            yield
        finally:
            with self._cond:
                self._timed -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def compiling(self, cores_per_compile: int, alone: bool = False, slots: int | None = None):
        """Hold a compile slot -> {"cores", "slots", "at_once"} (at_once final when the block ends): wait while timed
        work runs (alone: while anything runs); the slot's cores are disjoint from every other slot's. `slots`: the
        invocation's (Snakemake's cores over each compile's: `--cores 2` on a 16-core host gives 2), never more than
        this process's cores hold."""
        cores = sorted(os.sched_getaffinity(0))
        fit = max(1, len(cores) // cores_per_compile)
        slots = 1 if alone else min(fit, slots) if slots else fit
        with self._cond:
            self._cond.wait_for(lambda: not self._timed and not (alone and self._compiles)
                                and len(self._compiles) < slots and not any(c["alone"] for c in self._compiles.values()))
            slot = min(set(range(slots)) - set(self._compiles))
            share = cores if alone else cores[slot * cores_per_compile:(slot + 1) * cores_per_compile]
            mine = {"index": slot, "cores": share, "slots": slots, "at_once": 0, "alone": alone}
            self._compiles[slot] = mine
            for c in self._compiles.values():
                c["at_once"] = max(c["at_once"], len(self._compiles))
        try:
            yield mine
        finally:
            with self._cond:
                del self._compiles[slot]
                self._cond.notify_all()


HOST = Host()  # this process's (Snakemake's): measure/jobs.py takes it for every job
