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
max-autotune run reported its cold run's 852 kernels and 15 searches in 3.4 s of compile.
"""

from __future__ import annotations

import time
from collections import Counter

import torch
from torch._dynamo.callback import CallbackArgs, CallbackTrigger, callback_handler
from torch._dynamo.utils import counters, get_compilation_metrics


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
        torch._dynamo.utils.clear_compilation_metrics()
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
