"""What the compiler did during a run: graphs, recompilations and their reasons, graph breaks, generated
kernels, CUDA-graph recordings.

`counters["recompiles"]` is never incremented by Dynamo, so it is not used. Graphs come from
`counters["stats"]["unique_graphs"]`; reasons from `get_compilation_metrics()`; compile events
(Dynamo frames, lazily compiled backwards, CUDA-graph recordings) from Dynamo's compile callbacks,
which also time them. Graph breaks from `counters["graph_break"]` (reason -> count); kernels Inductor
generated from `torch._inductor.metrics.generated_kernel_count`. Compiled autograd's captures and compiles from
`counters["compiled_autograd"]`. GEMM searches (max-autotune benchmarking one GEMM's kernel choices; none where
every choice's timing was in the autotune cache) from `counters["inductor"]["select_algorithm_autotune"]`. A graph
loaded from Inductor's cache replays the counters of the compile that made it: on the H200 (torch 2.11) a warm
max-autotune run reported its cold run's 852 kernels and 15 searches in 3.4 s of compile. Where the compile's
seconds went, by stage (core/compile_stages.py), from the same compilation metrics and the seconds of the
dynamo_timed events that have no column of their own (compile_times' record, read before and after).
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import torch
from torch._dynamo import utils as dynamo_utils
from torch._dynamo.callback import CallbackArgs, CallbackTrigger, callback_handler
from torch._dynamo.utils import counters, get_compilation_metrics

from compile_study.core import compile_stages

METRICS_LIMIT = 4096  # entries kept (torch keeps 64): a dynamic-shape run's recompiles and runtime entries all count


def unique_graphs() -> int:
    return int(counters["stats"]["unique_graphs"])


def gemm_searches() -> int:
    return int(counters["inductor"]["select_algorithm_autotune"])


def fx_cache() -> tuple[int, int]:
    """Inductor's FX graph cache: (hits, misses) so far in this process."""
    return int(counters["inductor"]["fxgraph_cache_hit"]), int(counters["inductor"]["fxgraph_cache_miss"])


def aot_cache() -> tuple[int, int]:
    """AOTAutograd's cache (the graph pair, before Inductor): (hits, misses) so far in this process."""
    return int(counters["aot_autograd"]["autograd_cache_hit"]), int(counters["aot_autograd"]["autograd_cache_miss"])


class OwnThread(list):
    """A dynamo_timed event's list of seconds (compile_times' record) that also keeps those of one thread: with
    compile_threads > 1 Inductor compiles C++ kernels in worker threads at once, whose seconds overlap each other and
    the parent's wait for them (counted as triton_compile_time_us); only the thread that compiles may be added."""

    def __init__(self, seen=(), thread: int | None = None) -> None:
        super().__init__(seen)
        self.thread = threading.get_ident() if thread is None else thread
        self.own: list[float] = []

    def append(self, seconds: float) -> None:
        super().append(seconds)
        if threading.get_ident() == self.thread:
            self.own.append(seconds)


def event_seconds() -> dict[str, float]:
    """Seconds so far of the dynamo_timed events compile_stages.KEYS names, run by this thread (where watched)."""
    times = dynamo_utils.compilation_time_metrics
    return {name: sum(getattr(times.get(key), "own", times.get(key, ()))) for name, key in compile_stages.KEYS.items()}


def watch_own_thread() -> None:
    """From now on keep apart the KEYS events this thread runs (OwnThread); torch._dynamo.reset() drops them."""
    times = dynamo_utils.compilation_time_metrics
    for key in compile_stages.KEYS.values():
        if not isinstance(times.get(key), OwnThread):
            times[key] = OwnThread(times.get(key, ()))


def stage_entries(metrics) -> list[dict]:
    """The compilation metrics' stage columns, entry by entry (only the fields this torch has)."""
    return [{c: getattr(m, c) for c in compile_stages.COLUMNS if hasattr(m, c)} for m in metrics]


def stages(metrics, events0: dict[str, float]) -> dict | None:
    """Where the compiles since `events0` spent their seconds (compile_stages.split), or None if not measured."""
    events = {k: v - events0.get(k, 0.0) for k, v in event_seconds().items()}
    return compile_stages.split(stage_entries(metrics), events)


def generated_kernels() -> int:
    from torch._inductor import metrics

    return int(metrics.generated_kernel_count)


class CompileWatch:
    """Counts compile events between `start()` and `report()`; `graph_steps` marks steps that compiled."""

    def __init__(self) -> None:
        self.events: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self._open: dict[str, float] = {}
        self.graph_steps: list[int] = []
        self.fallback_steps = 0  # steps that ran eagerly because the recompile limit was hit

    def _on_start(self, args: CallbackArgs) -> None:
        self._open[args.callback_trigger.name] = time.perf_counter()

    def _on_end(self, args: CallbackArgs) -> None:
        name = args.callback_trigger.name
        self.events[name] += 1
        self.seconds[name] += time.perf_counter() - self._open.pop(name, time.perf_counter())

    def start(self) -> "CompileWatch":
        if hasattr(dynamo_utils, "set_compilation_metrics_limit"):  # where torch lacks it, its own limit stands
            dynamo_utils.set_compilation_metrics_limit(METRICS_LIMIT)
        dynamo_utils.clear_compilation_metrics()
        watch_own_thread()
        self._events0 = event_seconds()
        self._graphs0 = unique_graphs()
        self._breaks0 = Counter(counters["graph_break"])
        self._kernels0 = generated_kernels()
        self._autograd0 = Counter(counters["compiled_autograd"])
        self._searches0 = gemm_searches()
        self._fx0 = fx_cache()
        self._aot0 = aot_cache()
        self._last = self._graphs0
        callback_handler.register_start_callback(self._on_start)
        callback_handler.register_end_callback(self._on_end)
        return self

    def after_step(self, step_index: int) -> None:
        """Cheap (a dict lookup, no device sync): notes the step if it produced a new graph."""
        now = unique_graphs()
        if now != self._last:
            self.graph_steps.append(step_index)
            self._last = now

    def report(self) -> dict:
        callback_handler.remove_start_callback(self._on_start)
        callback_handler.remove_end_callback(self._on_end)
        metrics = list(get_compilation_metrics())
        reasons = Counter(m.recompile_reason.split(": ", 1)[-1] for m in metrics if m.recompile_reason)
        graphs = unique_graphs() - self._graphs0
        breaks = Counter(counters["graph_break"]) - self._breaks0
        autograd = Counter(counters["compiled_autograd"]) - self._autograd0
        return {
            "compile_stages": stages(metrics, self._events0),
            "graphs_compiled": graphs,
            "recompiles": max(0, graphs - 1),
            "recompile_reasons": [f"{n}× {r}" for r, n in reasons.most_common(5)],
            "recompile_limit": torch._dynamo.config.recompile_limit,
            "recompile_limit_hit": self.fallback_steps > 0,
            "eager_fallback_steps": self.fallback_steps,
            "graph_steps": self.graph_steps,
            "dynamo_frames_compiled": self.events[CallbackTrigger.DYNAMO.name],
            "lazy_backward_compiles": self.events[CallbackTrigger.LAZY_BACKWARD.name],
            "cudagraph_recordings": self.events[CallbackTrigger.CUDAGRAPH_RECORDING.name],
            "compile_events_s": sum(self.seconds.values()),
            "graph_breaks": sum(breaks.values()),
            "graph_break_reasons": [f"{n}× {r.splitlines()[0]}" for r, n in breaks.most_common(5)],
            "generated_kernels": generated_kernels() - self._kernels0,
            "gemm_searches": gemm_searches() - self._searches0,
            "fx_cache_hits": fx_cache()[0] - self._fx0[0], "fx_cache_misses": fx_cache()[1] - self._fx0[1],
            "aot_cache_hits": aot_cache()[0] - self._aot0[0], "aot_cache_misses": aot_cache()[1] - self._aot0[1],
            # compiled autograd (scope `step`): a capture traces the backward graph in Python, a compile makes it
            # a new graph; either one in a steady state means backward() is traced again at every step
            "compiled_autograd_captures": autograd["captures"],
            "compiled_autograd_compiles": autograd["compiles"],
        }
