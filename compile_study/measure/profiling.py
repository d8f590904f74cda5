"""torch.profiler evidence over a few steady-state training steps.

`profile_steps` runs the steps once unprofiled (so first-call effects, such as lazy compiles, cuDNN/cuBLAS
heuristics and allocator growth, stay out of it), then again under the profiler. It is called after the timed
block, never inside it: the profiler adds host overhead to every operator and would distort the timings.

The numbers, all per step (the profiled block divided by `n_steps`):
- `wall_ms_per_step`: the block's wall time, device synchronised at both ends; includes profiler overhead.
- `cpu_ms_per_step`: self CPU time summed over all CPU events: host time spent inside operators.
- `kernels_per_step`: CUDA kernels launched (memcpy/memset counted apart, in `memcpy_memset_per_step`); on
  the CPU, top-level `aten::` calls (those with no `aten::` ancestor), the CPU's analogue of a kernel launch.
  `kernel_kind` says which.
- `device_busy_ms_per_step` (CUDA only): the union of the kernel intervals, so kernels that overlap on
  concurrent streams count once; `idle_fraction` = 1 - busy / wall: the share of the step the GPU waits on
  the host (launch overhead, Python, synchronisation).
- `top_kernels`: the 5 names with the most device time (CPU: self CPU time of aten ops); `share` is of the
  total over the same population (all kernels; CPU: all aten ops).
- `distinct_kernels`, `triton_kernels_distinct`: distinct kernel (CPU: aten op) names; those made by Inductor
  start with `triton_`.

FunctionEvent attributes used (present in torch 2.5 through 2.13): `name`, `device_type`, `time_range.start`,
`time_range.end`, `self_cpu_time_total`, `cpu_parent`, `is_async`, and `is_user_annotation` via getattr.
Device time is taken from `time_range` rather than `self_device_time_total` (older releases named it
`self_cuda_time_total`, now deprecated).
"""

from __future__ import annotations

import gzip
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from compile_study.core.io import _atomic, disk_full_named, temporary

TOP_N = 5
CUDA_LABEL = "CUDA kernels"
CPU_LABEL = "top-level aten ops (CPU)"


def busy_time_us(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of [start, end] intervals: overlapping intervals are counted once."""
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return float(total)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _is_aten(evt) -> bool:
    return evt.device_type == DeviceType.CPU and evt.name.startswith("aten::")


def _top_level_aten(evt) -> bool:
    if not _is_aten(evt):
        return False
    parent = evt.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return False
        parent = parent.cpu_parent
    return True


def _top(times_us: Counter, calls: Counter, n: int) -> list[dict]:
    total = sum(times_us.values()) or 1.0
    return [
        {"name": name[:120], "calls_per_step": calls[name] / n, "ms_per_step": t / 1e3 / n, "share": t / total}
        for name, t in times_us.most_common(TOP_N)
    ]


def summarize(events, n: int, wall_s: float, cuda: bool) -> dict:
    """Per-step numbers from a profiled block's FunctionEvents (see the module docstring)."""
    cpu_us = sum(e.self_cpu_time_total for e in events if e.device_type == DeviceType.CPU)
    out = {
        "profiled_steps": n,
        "wall_ms_per_step": wall_s * 1e3 / n,  # includes profiler overhead
        "cpu_ms_per_step": cpu_us / 1e3 / n,
        "kernel_kind": CUDA_LABEL if cuda else CPU_LABEL,
        "memcpy_memset_per_step": None,
        "device_busy_ms_per_step": None,
        "idle_fraction": None,
    }
    times, calls = Counter(), Counter()
    if cuda:
        device = [e for e in events if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)]
        copies = [e for e in device if e.name.startswith(("Memcpy", "Memset"))]
        kernels = [e for e in device if not e.name.startswith(("Memcpy", "Memset"))]
        for e in kernels:
            times[e.name] += e.time_range.end - e.time_range.start
            calls[e.name] += 1
        busy_ms = busy_time_us((e.time_range.start, e.time_range.end) for e in kernels) / 1e3 / n
        out["memcpy_memset_per_step"] = len(copies) / n
        out["device_busy_ms_per_step"] = busy_ms
        out["idle_fraction"] = min(1.0, max(0.0, 1.0 - busy_ms / out["wall_ms_per_step"]))
        out["kernels_per_step"] = len(kernels) / n
    else:
        aten = [e for e in events if _is_aten(e) and not e.is_async]
        for e in aten:
            times[e.name] += e.self_cpu_time_total
            calls[e.name] += 1
        out["kernels_per_step"] = sum(_top_level_aten(e) for e in aten) / n
    out["top_kernels"] = _top(times, calls, n)
    out["distinct_kernels"] = len(calls)
    out["triton_kernels_distinct"] = sum(name.startswith("triton_") for name in calls) if cuda else 0
    return out


def _write_gzip(src: Path, trace_path: str | Path) -> None:
    def write(tmp: Path) -> None:
        with open(src, "rb") as f, gzip.open(tmp, "wb") as g:
            shutil.copyfileobj(f, g)

    _atomic(trace_path, write)


def profile_steps(
    step: Callable[[int], object], n_steps: int, device: torch.device, trace_path: str | Path | None = None
) -> dict:
    """Warm up `step(0..n_steps-1)` once, profile a second pass, return per-step numbers (JSON-serialisable)."""
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    cuda = device.type == "cuda"
    for i in range(n_steps):  # unprofiled warm-up: the profiler sees no first-call effects
        step(i)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        _sync(device)
        t0 = time.perf_counter()
        for i in range(n_steps):
            step(i)
        _sync(device)
        wall_s = time.perf_counter() - t0
    result = summarize(prof.events(), n_steps, wall_s, cuda)
    if trace_path is not None:
        write_trace(prof, trace_path)
    return result


def write_trace(prof, trace_path: str | Path) -> None:
    """The profiler's Chrome trace, gzipped, written atomically; its uncompressed copy is a temporary that the
    next write of this trace removes if this process is killed, and a full disk is a DiskFullError."""
    Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
    raw = temporary(trace_path, ".raw")
    try:
        with disk_full_named(trace_path):
            prof.export_chrome_trace(str(raw))
            _write_gzip(raw, trace_path)
    finally:  # the profiler's own temporary beside it too (kineto writes <raw>.tmp, then renames it)
        for left in raw.parent.glob(f"{raw.name}*"):
            left.unlink(missing_ok=True)

