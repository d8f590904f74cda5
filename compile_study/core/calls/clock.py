"""Where a job's wall time goes: seconds per named part, from the job's start to its output written.

Torch-free, so that the launcher (measure/process/launch.py), which never imports torch, starts the clock in the
Snakemake job and hands it to the job's child process:

    clock = Clock()                          # the job starts (the launcher, in Snakemake's process)
    with clock.part("gpu_wait_s"): ...       # waiting for a GPU
    state = clock.state()                    # -> the child, with its arguments
    clock = Clock.resume(state)              # the child's first line
    clock.lap("process_start_s")             # the job's set-up and the process's creation
    with clock.part("imports_s"): ...        # run_and_record adds cuda_init_s, data_load_s, timed_s, ...

`time.perf_counter` is CLOCK_MONOTONIC on Linux, one clock for every process of the host, so a child's
reading and its parent's can be subtracted. Parts do not overlap, so they add up to the total;
`timed_s` is the timing protocol's wall time (epochs, the eager reference's untimed first steps, the
interleaved block) less what is booked as `compile_s`, the warm-up steps' excess over steady-state steps.
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager


class Clock:
    """Wall seconds per named part since an origin (a time.perf_counter reading)."""

    def __init__(self, origin: float | None = None, parts: dict[str, float] | None = None) -> None:
        self.origin = time.perf_counter() if origin is None else origin
        self.parts: Counter[str] = Counter(parts or {})

    def state(self) -> dict:
        """What another process of this host needs to go on with this clock (Clock.resume)."""
        return {"origin": self.origin, "parts": dict(self.parts)}

    @classmethod
    def resume(cls, state: dict) -> Clock:
        return cls(state["origin"], state["parts"])

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
