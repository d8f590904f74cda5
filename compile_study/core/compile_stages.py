"""Where a compile's seconds go: the compiler's stages, from PyTorch's own accounting. Torch-free: measure/
compile_stats.py hands over the numbers (one mapping of COLUMNS per CompilationMetrics entry of
torch._dynamo.utils.get_compilation_metrics(), and the seconds of the dynamo_timed events in KEYS); `split` turns
them into the study's stages, which the records keep as metric `compile_stages` (absent: not measured, never 0).

How torch nests its times (torch 2.11-2.13, `dynamo_timed`; an entry's `duration_us` sums its outermost events):
  a frame's entry:   dynamo_cumulative  ⊃ aot_autograd_cumulative ⊃ pre-grad and joint-graph passes, the AOTAutograd
                     cache's loads (event AOTAutogradCache.inductor_load) and inductor_cumulative (the forward)
  a lazy backward:   backward_cumulative ⊃ inductor_cumulative (the backward), its own entry
  inductor_cumulative ⊃ compile_time_autotune (a GEMM search while lowering), triton_compile (compiling kernels, or
                     waiting for the compile workers: Triton on CUDA, C++ on the CPU where compile_threads > 1)
                     and the C++ compiles this process ran itself (event compile_file, no column of its own)
  a runtime entry:   runtime_cudagraphify (recording CUDA graphs) and runtime_triton_autotune (a kernel's first call)
So each stage is its column less the stages inside it, and their sum is the frames' and backwards' outer times plus
the runtime entries': nothing is counted twice. Compiling kernels (the compile workers' wait, and the C++ compiles
this thread ran) lies inside Inductor's code generation in a compile from scratch, and inside a cache load where
the cache held only C++ source (a portable start on the CPU: the AOTAutograd cache's load compiles its kernels);
the totals cannot say which, so it is taken from Inductor up to Inductor's own remaining time first, the rest from
the cache loads (and what exceeds them from AOTAutograd, which holds both).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

STAGES = {
    "dynamo": "Dynamo: tracing the Python frame into graphs, guards and bytecode",
    "aot_autograd": "AOTAutograd: the joint forward and backward graph and its partition",
    "inductor": "Inductor: graph passes, lowering, scheduling and code generation",
    "kernel_compile": "kernel compilation: Triton on CUDA, C++ on the CPU",
    "autotune": "autotuning: kernel choices benchmarked while compiling and at a kernel's first call",
    "cudagraph": "CUDA-graph recording",
    "cache_load": "cache loads: compiled graphs loaded from AOTAutograd's cache",
}
# CompilationMetrics fields read (microseconds; a field torch lacks or left None counts 0)
COLUMNS = ("duration_us", "is_runtime", "dynamo_cumulative_compile_time_us", "aot_autograd_cumulative_compile_time_us",
           "backward_cumulative_compile_time_us", "inductor_cumulative_compile_time_us",
           "inductor_code_gen_cumulative_compile_time_us", "triton_compile_time_us", "compile_time_autotune_time_us",
           "pre_grad_pass_time_us", "joint_graph_pass_time_us", "runtime_cudagraphify_time_us",
           "runtime_triton_autotune_time_us")
# dynamo_timed events without a column, read as process-wide seconds (compile_times' compilation_time_metrics)
KEYS = {"cpp_compile": "compile_file", "cache_load": "AOTAutogradCache.inductor_load"}


def _sum(entries: list[Mapping], column: str, runtime: bool = False) -> float:
    """Seconds of `column` over the frame entries (runtime=False) or the runtime entries."""
    return sum((e.get(column) or 0) / 1e6 for e in entries if bool(e.get("is_runtime")) == runtime)


def split(entries: Iterable[Mapping], keys: Mapping[str, float]) -> dict | None:
    """The study's stages, seconds each (STAGES), from the compilation metrics' entries and the events' seconds
    (KEYS' names -> seconds) -> {"stages", "accounted_s": the entries' own total, "entries"}; None where torch kept
    no stage columns at all (not measured)."""
    entries = list(entries)
    if entries and not any("dynamo_cumulative_compile_time_us" in e for e in entries):
        return None
    col = {c: _sum(entries, c) for c in COLUMNS[2:11]}
    passes = col["pre_grad_pass_time_us"] + col["joint_graph_pass_time_us"]
    inductor, tune = col["inductor_cumulative_compile_time_us"], col["compile_time_autotune_time_us"]
    kernels = col["triton_compile_time_us"] + keys.get("cpp_compile", 0.0)
    loads = keys.get("cache_load", 0.0)
    in_inductor = min(kernels, max(inductor - tune, 0.0))  # the rest of the kernels compiled inside cache loads
    in_loads = kernels - in_inductor
    runtime_tune = _sum(entries, "runtime_triton_autotune_time_us", runtime=True)
    runtime_total = _sum(entries, "duration_us", runtime=True)  # outer events: recording may hold a first-call tune
    recording = _sum(entries, "runtime_cudagraphify_time_us", runtime=True)
    stages = {
        "dynamo": col["dynamo_cumulative_compile_time_us"] - col["aot_autograd_cumulative_compile_time_us"],
        "aot_autograd": (col["aot_autograd_cumulative_compile_time_us"] + col["backward_cumulative_compile_time_us"]
                         - inductor - passes - loads - max(in_loads - loads, 0.0)),
        "inductor": inductor + passes - tune - in_inductor,
        "kernel_compile": kernels,
        "autotune": tune + runtime_tune,
        "cudagraph": min(recording, runtime_total - runtime_tune) if runtime_total else recording,
        "cache_load": max(loads - in_loads, 0.0),
    }
    return {"stages": {k: float(max(v, 0.0)) for k, v in stages.items()},
            "accounted_s": sum((e.get("duration_us") or 0) / 1e6 for e in entries), "entries": len(entries)}


def measured(split_: dict | None, latency_s: float | None) -> dict:
    """A record's scalars beside its `compile_stages`: the stages' sum and the measured latency's rest."""
    stages = None if split_ is None else split_["stages"]
    return {"compile_stages_s": total(stages), "compile_rest_s": rest(latency_s, stages)}


def columns(split_: dict | None) -> dict:
    """A record's stages as table columns, stage_<name>_s (None each where not measured)."""
    stages = (split_ or {}).get("stages") or {}
    return {f"stage_{name}_s": stages.get(name) for name in STAGES}


def total(stages: Mapping[str, float] | None) -> float | None:
    """The stages' sum (None where they were not measured)."""
    return None if stages is None else sum(stages.values())


def rest(latency_s: float | None, stages: Mapping[str, float] | None) -> float | None:
    """What the measured latency holds beyond the stages (the compiled code's first runs, guards, Python, the
    one-off work eager does too): stated, never hidden; None where either is unknown."""
    if latency_s is None or stages is None:
        return None
    return latency_s - total(stages)
