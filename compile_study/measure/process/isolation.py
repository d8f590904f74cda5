"""Per-job process settings, decided by the launcher before the job's process starts (this module never imports torch).

- CPU threads, Inductor's compile workers included, are bounded to the job's `threads`, so that
  one job's compilation cannot slow another job's timed block.
- On a host with several GPUs each timed job holds one GPU's lane (`Host`, `lanes`) and runs on its own
  disjoint share of the CPU cores (Inductor's compile workers included), so that two timed runs on two
  GPUs do not compete for the host that most of their steps wait on. Where a run's load may overlap the
  lane's timed work, the share is split in two: the load phase on one half, the timed part on the other
  (`lane_cores`).
- The Inductor/Triton cache is per configuration: the compile phase's first cold compile starts from an
  empty cache (as a first-time user pays it) and leaves it filled; every timed run finds it populated (a warm
  compile); the other cold compiles use caches of their own, emptied first. Where a sub-grid shares one GEMM
  search between its max-autotune modes, a later mode's first cold compile starts from the first mode's search
  results alone (prepare_cache `search_from`).
- Compiles and timed work never share the host; two timed parts never share a lane; a load shares a lane only
  with a run's timed part, on other cores (`Host`, `HOST`).
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

from compile_study.core import vocab


def thread_env(threads: int) -> dict[str, str]:
    """What torch, MKL and Inductor's compile workers read for their thread counts when they start."""
    return {var: str(threads) for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS")}


def bound_threads(threads: int) -> None:
    os.environ.update(thread_env(threads))


# The temporary directory a job's process gets, under its cache directory: Inductor keeps the C++ precompiled
# header its CPU kernels include (~150 MB, built by a first compile on a machine) not in its cache directory but in
# the system's temporary directory (torch/_inductor/codecache.py _HEADER_DIR: default_cache_dir(), global on
# purpose), so without this a "cold" compile would find the header that any earlier compile on the host built and
# be as cold as the host's history. With it, a cold compile and a portable start (an empty cache, as on a fresh
# machine) build it; a warm run finds the one its configuration's cold compile left.
TEMP = "tmp"

# Where Inductor keeps the benchmarked timings of kernel choices (max-autotune's search) under its cache
# directory: one JSON file per system (torch/_inductor/codecache.py CacheBase.get_local_cache_path). A search
# whose every choice is found there is neither precompiled nor benchmarked again.
SEARCH_RESULTS = "cache"


def prepare_cache(cache_dir: str | os.PathLike, fresh: bool,
                  search_from: str | os.PathLike | None = None) -> tuple[dict[str, str], str]:
    """Empty cache_dir first if fresh -> (the environment pointing Inductor, Triton and the temporary directory
    (TEMP) at it, its state:
    vocab.CACHE_STATES). `search_from`: another configuration's cache whose search results (SEARCH_RESULTS, not
    its graphs or kernels) a fresh cache starts with, where it has any: "cold, GEMM search shared"."""
    cache = Path(cache_dir).resolve()
    if fresh:
        shutil.rmtree(cache, ignore_errors=True)
    state = "warm" if cache.is_dir() and any(p.name != TEMP for p in cache.iterdir()) else "cold"
    cache.mkdir(parents=True, exist_ok=True)
    searched = Path(search_from).resolve() / SEARCH_RESULTS if search_from is not None else None
    if fresh and searched is not None and searched.is_dir() and any(searched.iterdir()):
        shutil.copytree(searched, cache / SEARCH_RESULTS)
        state = vocab.SEARCH_SHARED
    (cache / TEMP).mkdir(exist_ok=True)
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton"),
            "TMPDIR": str(cache / TEMP)}, state


@functools.cache
def count_gpus() -> int:
    """GPUs on the host, from nvidia-smi (torch is not imported; 0 without NVIDIA tools). Asked once a process."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def lanes(device: str) -> int:
    """How many lanes the study's timed work has on this host (Host): one per GPU on a host with several, where
    no cluster gave the job its GPU (CUDA_VISIBLE_DEVICES); one on a host with one GPU or on the CPU."""
    if device != "cuda" or "CUDA_VISIBLE_DEVICES" in os.environ:
        return 1
    return max(1, count_gpus())


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


# The share of the cores a lane (a GPU) needs before its runs' loads overlap its timed run by default (config
# overlap_loads: auto): halves of 4 or more. Measured on one H200 host: a run timed on 4 cores beside a loop of
# warm-cache loads on 8 others showed no systematic effect (paired step ratios 0.83-1.08, within the spread between
# processes), where compiles beside it slowed an eager step by 12-14%.
MIN_OVERLAP_CORES = 8


def overlaps(setting, device: str, lane_cores: int) -> bool:
    """Whether a run's load (its process, data, model, warm-cache load and warm-up steps) may run beside its lane's
    timed run, on the lane's other cores (config `overlap_loads`: "auto", true or false): auto, on a GPU whose
    share of the cores is MIN_OVERLAP_CORES or more, never on the CPU (whose timed steps are the cores' own work);
    true, wherever the share has two cores; false, never."""
    if setting == "auto":
        return device == "cuda" and lane_cores >= MIN_OVERLAP_CORES
    return bool(setting) and lane_cores >= 2


def lane_cores(lane: int, lanes: int, overlap: bool) -> tuple[list[int] | None, list[int] | None]:
    """-> (the cores a run's load phase runs on, those its timed part runs on) on `lane`: the lane's share of the
    cores (all of them on a host with one lane: None, no pinning), split in two disjoint halves where loads overlap
    timed work, the timed part on the first (the larger, where the count is odd)."""
    share = core_share(lane, lanes) if lanes > 1 else None
    if not overlap:
        return share, share
    share = share or sorted(os.sched_getaffinity(0))
    half = (len(share) + 1) // 2
    return share[half:], share[:half]


class Host:
    """Who uses the host, lane by lane (a lane: a GPU and its share of the cores; a host with one GPU, or the CPU,
    has one). Every job of a local study runs in a thread of Snakemake's own process (profiles/default:
    force-use-threads), so this one object, in that process, sees them all (a cluster's job is alone on its
    allocation):

    - compiles of the compile phase, several at once on disjoint cores (`compiling`), never beside timed work or a
      load;
    - exclusive timed work (a method check, the matmul peak, the MLP claim, the model check: `timed`), alone on its
      lane (every lane: `every`), with nothing beside it, not even a load;
    - a timed run (`run_turn`): where loads overlap timed work, it first holds its lane's load slot (one a lane: the
      lane's next run), whose load phase may run beside the lane's timed part on the lane's other cores, then
      (Turn.take_timed) the lane's timed hold, which lets the next run load beside it; else it holds the lane as
      exclusive work does. On each lane one timed holder at a time.

    While exclusive work waits, no new load starts, so that a stream of runs cannot starve it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._compiles: dict[int, dict] = {}  # slot -> {"at_once": most compiles seen at once while it ran}
        self._timed: dict[int, bool] = {}  # lane -> whether its holder lets the lane's next run load beside it
        self._loading: set[int] = set()  # lanes whose load slot is held
        self._until: dict[int, float] = {}  # lane -> when its timed holder expects to end (under a time limit)
        self._queued = 0  # exclusive holders waiting

    def _free(self, lane: int) -> bool:
        return lane not in self._timed and lane not in self._loading

    @contextlib.contextmanager
    def timed(self, lanes: int = 1, every: bool = False):
        """Hold a lane (`every`: all `lanes`) for exclusive timed work -> its index: wait while a compile runs or
        until a lane has no holder and no load."""
        with self._cond:
            self._queued += 1
            ready = (lambda: all(map(self._free, range(lanes)))) if every else (
                lambda: any(map(self._free, range(lanes))))
            self._cond.wait_for(lambda: not self._compiles and ready())
            self._queued -= 1
            held = list(range(lanes)) if every else [min(filter(self._free, range(lanes)))]
            self._timed.update(dict.fromkeys(held, False))
        try:
            yield held[0]
        finally:
            with self._cond:
                for lane in held:
                    del self._timed[lane]
                    self._until.pop(lane, None)
                self._cond.notify_all()

    @contextlib.contextmanager
    def run_turn(self, lanes: int = 1, overlap: bool = False):
        """A timed run's turn -> Turn: with `overlap`, its lane's load slot now (a lane whose load slot is free and
        whose holder, if any, is a run: one without a holder first), its timed hold at Turn.take_timed(); without,
        the lane's exclusive hold now. Released when the block ends."""
        if not overlap:
            with self.timed(lanes) as lane:
                yield Turn(self, lane, timed=True)
            return
        with self._cond:
            def open_lanes():
                return [lane for lane in range(lanes) if lane not in self._loading and self._timed.get(lane, True)]
            self._cond.wait_for(lambda: not self._compiles and not self._queued and open_lanes())
            lane = min(open_lanes(), key=lambda i: (i in self._timed, i))
            self._loading.add(lane)
        turn = Turn(self, lane, timed=False)
        try:
            yield turn
        finally:
            with self._cond:
                if turn.holds_timed:
                    del self._timed[lane]
                    self._until.pop(lane, None)
                else:
                    self._loading.discard(lane)
                self._cond.notify_all()

    def _switch(self, lane: int) -> None:
        """A loaded run's load slot -> its lane's timed hold, once the lane's holder has let it go."""
        with self._cond:
            self._cond.wait_for(lambda: not self._compiles and lane not in self._timed)
            self._loading.discard(lane)
            self._timed[lane] = True
            self._cond.notify_all()

    @contextlib.contextmanager
    def compiling(self, cores_per_compile: int, alone: bool = False, slots: int | None = None):
        """Hold a compile slot -> {"cores", "slots", "at_once"} (at_once final when the block ends): wait while timed
        work or a load runs (alone: while anything runs); the slot's cores are disjoint from every other slot's.
        `slots`: the invocation's (Snakemake's cores over each compile's: `--cores 2` on a 16-core host gives 2),
        never more than this process's cores hold."""
        cores = sorted(os.sched_getaffinity(0))
        fit = max(1, len(cores) // cores_per_compile)
        slots = 1 if alone else min(fit, slots) if slots else fit
        with self._cond:
            self._cond.wait_for(lambda: not self._timed and not self._loading and not (alone and self._compiles)
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


class Turn:
    """A timed run's hold on its lane (Host.run_turn): its load slot until take_timed, its timed hold after."""

    def __init__(self, host: Host, lane: int, timed: bool) -> None:
        self.host, self.lane, self.holds_timed = host, lane, timed

    def take_timed(self) -> None:
        """Wait for the lane's timed hold (at once where it is held already)."""
        if not self.holds_timed:
            self.host._switch(self.lane)
            self.holds_timed = True

    def expect_end(self, unix: float) -> None:
        """Say when this run's timed part should end (under a call's time limit), for the lane's next run."""
        with self.host._cond:
            self.host._until[self.lane] = unix

    def ahead_s(self) -> float:
        """Seconds until the lane's timed holder (another run) expects to end: 0 where none holds it or none said."""
        with self.host._cond:
            ahead = self.host._until.get(self.lane) if not self.holds_timed and self.lane in self.host._timed else None
        return max(0.0, ahead - time.time()) if ahead is not None else 0.0


HOST = Host()  # this process's (Snakemake's): measure/jobs.py takes it for every job
