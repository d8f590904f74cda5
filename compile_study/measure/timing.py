"""Device-synchronised timers.

On CUDA a timed block records one event pair per step and synchronises once at the end, so the
host keeps queueing work ahead of the device exactly as in real training (a per-step
`synchronize()` would hide launch overhead, the very thing compilation removes). On the CPU
every op is synchronous and `perf_counter` suffices.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], device: torch.device) -> float:
    """Wall seconds of one call, the device drained before and after."""
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - t0


def time_steps(step: Callable[[int], object], n: int, device: torch.device) -> tuple[list[float], float]:
    """Run step(0..n-1) back to back -> (per-step ms, wall seconds of the whole block)."""
    synchronize(device)
    t0 = time.perf_counter()
    if device.type == "cuda":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        events[0].record()
        for i in range(n):
            step(i)
            events[i + 1].record()
        torch.cuda.synchronize(device)
        wall = time.perf_counter() - t0
        return [events[i].elapsed_time(events[i + 1]) for i in range(n)], wall
    stamps = [t0]
    for i in range(n):
        step(i)
        stamps.append(time.perf_counter())
    return [1e3 * (b - a) for a, b in zip(stamps, stamps[1:])], stamps[-1] - t0
