"""Where a run's wall time goes: seconds per named part, from the process's creation to its record.

Torch-free, so that the run's shim can start the clock before the heavy imports:

    clock = Clock.since_process_start()   # the shim's first lines
    ...                                   # log, threads, GPU claim, cache
    clock.lap("process_start_s")          # interpreter start and all of the above
    with clock.part("imports_s"):
        from compile_study.measure.run import run_and_record
    run_and_record(..., clock=clock)      # adds cuda_init_s, data_load_s, timed_s, ... (record.OVERHEAD)

Parts do not overlap, so they add up to the total but for the small pieces no part names (building the
models, the environment query). `timed_s` is the timing protocol's wall time (epochs, the eager
reference's untimed first steps, the interleaved block) less what is booked as `compile_s`, the warm-up
steps' excess over steady-state steps.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from contextlib import contextmanager


def process_age_s() -> float | None:
    """Seconds since this process was created, from Linux's /proc (10 ms ticks); None where unreadable."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        with open("/proc/uptime") as f:
            uptime_s = float(f.read().split()[0])
    except (OSError, ValueError):
        return None
    # field 22, starttime, in clock ticks since boot; counted after the parenthesised command name,
    # which may itself hold spaces, the fields from 3 on are split off at its closing parenthesis
    start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
    return max(0.0, uptime_s - start_ticks / os.sysconf("SC_CLK_TCK"))


class Clock:
    """Wall seconds per named part since an origin: the process's creation, or the clock's own start."""

    def __init__(self, age_s: float = 0.0) -> None:
        self.origin = time.perf_counter() - age_s
        self.parts: Counter[str] = Counter()

    @classmethod
    def since_process_start(cls) -> Clock:
        """Origin at the process's creation (where /proc cannot say, at this call)."""
        return cls(process_age_s() or 0.0)

    def elapsed(self) -> float:
        return time.perf_counter() - self.origin

    def lap(self, name: str) -> None:
        """Book all time since the origin not yet in a part under `name`."""
        self.parts[name] += max(0.0, self.elapsed() - sum(self.parts.values()))

    @contextmanager
    def part(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.parts[name] += time.perf_counter() - t0

    def move(self, source: str, target: str, seconds: float) -> None:
        """Rebook up to `seconds` of `source` as `target` (compilation happens inside the timed warm-up)."""
        seconds = min(max(0.0, seconds), self.parts[source])
        self.parts[source] -= seconds
        self.parts[target] += seconds

    def breakdown(self, names: tuple[str, ...]) -> dict[str, float]:
        """Every name's seconds (0.0 for parts never entered); `total_s` is the time since the origin."""
        return {name: (self.elapsed() if name == "total_s" else float(self.parts[name])) for name in names}
