"""What a run record's metrics hold: every metric's name and what it is (core/record.py reads records; these
declare what they may hold: tests/test_train.py checks that a run's metrics are all declared here), and where a
run's wall time went (OVERHEAD). Torch-free.
"""

from __future__ import annotations

# --- metrics: name -> what it is (ms per step unless said) ---------------------------------------------------
SCALARS = {
    "steady_step_ms": "median step time of the subject in the interleaved steady-state block",
    "step_ms_p10": "10th percentile step time", "step_ms_p90": "90th percentile step time",
    "block_mean_step_ms": "the subject's block wall time / steps",
    "reference_step_ms": "median step time of the eager reference, same process, same batches",
    "in_process_speedup": "reference_step_ms / steady_step_ms (for an eager subject: the A/A control)",
    "samples_per_s": "real rows per second", "real_tokens_per_s": "non-pad tokens per second",
    "padded_tokens_per_s": "computed token positions per second",
    "eager_static_real_tokens_per_s": "real tokens/s of eager on static batches in the same process",
    "gain_over_eager_static": "real_tokens_per_s / eager_static_real_tokens_per_s",
    "padding_fraction": "share of computed token positions that are padding",
    "distinct_shapes": "distinct batch shapes in an epoch",
    "train_flops_per_step": "FLOPs per step over computed tokens (padding included), counted (core/models/flops.py)",
    "real_train_flops_per_step": "FLOPs per step over real tokens, each sequence at its own length",
    "train_flops_per_token": "training FLOPs per token of a max_len sequence (the model's size in FLOPs)",
    "model_params": "the model's parameters",
    "achieved_tflops": "train_flops_per_step / step time", "real_tflops": "real_train_flops_per_step / step time",
    "warmup_excess_s": "warm-up steps' time beyond as many steady steps (compilation and one-off init)",
    "first_step_s": "the first step's time", "epoch1_s": "epoch 1 wall time", "epoch2_s": "epoch 2 wall time",
    "epoch_steps": "steps per epoch", "subject_steps": "steps the subject trained",
    "final_loss": "the subject's last training loss", "eval_accuracy": "eval accuracy of the subject's weights",
    "peak_memory_bytes": "peak device memory (CUDA) or peak RSS (CPU) of the subject's training",
    "graphs_compiled": "Dynamo graphs compiled", "recompiles": "graphs_compiled - 1",
    "recompile_limit": "torch._dynamo.config.recompile_limit", "recompile_limit_hit": "a frame fell back to eager",
    "eager_fallback_steps": "steps run eagerly past the recompile limit",
    "dynamo_frames_compiled": "Dynamo frames compiled", "lazy_backward_compiles": "backward graphs compiled lazily",
    "cudagraph_recordings": "CUDA graphs recorded", "compile_events_s": "time inside compile events",
    # Inductor's counters: a graph loaded from its cache replays the counts of the compile that made it (torch 2.11:
    # a warm run reports its cold run's kernels and searches), so these say what compiling the graphs took
    "graph_breaks": "graph breaks", "generated_kernels": "kernels Inductor generated for the run's graphs",
    "gemm_searches": "GEMMs whose kernel choices max-autotune benchmarked for the run's graphs (0 where the autotune "
                     "cache had every choice's timing)",
    "fx_cache_hits": "graphs Inductor loaded from its FX graph cache (a timed run after the compile phase: all)",
    "fx_cache_misses": "graphs Inductor compiled because its FX graph cache had none (a timed run: 0 expected)",
    "aot_cache_hits": "graph pairs AOTAutograd loaded from its cache (compiled forward and backward at once)",
    "aot_cache_misses": "graph pairs AOTAutograd traced because its cache had none",
    "compiled_autograd_captures": "backward graphs compiled autograd traced (scope step)",
    "compiled_autograd_compiles": "backward graphs compiled autograd compiled (scope step)",
    "inference_step_ms": "eval-mode step, subject", "inference_reference_step_ms": "eval-mode step, eager",
    "inference_speedup": "inference_reference_step_ms / inference_step_ms",
    "inference_warmup_s": "inference warm-up: its compile, loaded from the cache its first cold compile filled",
    "inference_fx_cache_hits": "graphs the inference warm-up loaded from Inductor's FX graph cache",
    "inference_fx_cache_misses": "graphs the inference warm-up compiled (a timed run: 0 expected)",
    "forward_ms": "forward + loss", "backward_ms": "backward", "optimizer_ms": "optimizer step",
    "reference_forward_ms": "forward + loss, eager reference", "reference_backward_ms": "backward, eager reference",
    "reference_optimizer_ms": "optimizer step, eager reference",
}
SERIES = {
    "step_times_ms": "the subject's steady-state step times, in measurement order",
    "reference_step_times_ms": "the eager reference's, in measurement order",
    "static_reference_step_times_ms": "eager on static batches (non-static regimes), in measurement order",
    "chunk_first": "per chunk, which side ran first (subject or reference): the order alternates",
    "warmup_step_s": "warm-up steps, one by one", "epoch1_step_ms": "every epoch-1 step",
    "graph_steps": "steps after which a new graph existed",
}
TEXTS = {
    "recompile_reasons": "most frequent recompile reasons", "graph_break_reasons": "most frequent graph breaks",
    "evidence_errors": "evidence that failed after the timings were taken (name -> error)",
    "profile": "torch.profiler summary of the subject (PROFILE below)",
    "reference_profile": "the same for the eager reference",
    "overhead_s": "where the run's wall time went (OVERHEAD below), seconds",
    # beside compile_stages, not summarised per configuration (aggregate/stages.py reads them from the records)
    "compile_stages_s": "the compiler's stages' seconds summed (compile_stages below; absent: not measured)",
    "compile_rest_s": "the measured compile latency (a cold compile's cold_compile_s, a run's warm-up excess) less "
                      "compile_stages_s: the compiled code's first runs, guards, Python, one-off work eager does too",
    "compile_stages": "where the compiles' seconds went, by stage (core/compile_stages.py STAGES: {stages: {name: s}, "
                      "accounted_s, entries}), from torch's compilation metrics; absent in records made before it",
    "model_class": "the model's class, module.Class (a plugged model's own)",
    "model_plug": "the model's plug in words (core/models/plug.py describe): built-in, factory or transformers",
    "job_window_unix": "the run's job: [start, end], seconds since the epoch (which call of a study it ran in)",
    "host_load": "per timed block (epochs, block, inference): what else ran on the host during it, the GPU's clocks, "
                 "temperature and power, the CPU's frequency (measure/process/hostwatch.py says what each field is); the "
                 "study's other jobs beside it (`neighbours`) and how they were counted",
    "load_phase": "the run's load phase (measure/process/handover.py: its process's start, CUDA, data, model, compile switch "
                  "and warm-up steps): the cores it ran on, [start, end] in seconds since the epoch, the job's "
                  "overhead_s parts up to its end, and whether the study let loads run beside timed work",
    "timed_part": "the run's timed part (the rest of epoch 1 on): the cores and torch threads it ran with, its "
                  "start (seconds since the epoch), how long it waited for the host after its load (booked in "
                  "overhead_s as gpu_wait_s) and its lane (GPU)",
}
# The steady-state block's host readings (metrics host_load.block) as table columns host_<name>: judged by
# core/disturbance.py, and the covariates of the step's between-process spread (aggregate/variance.py)
HOST = {
    "outside_cores": "CPU seconds per second of the block that processes outside the study took on the run's cores",
    "cpu_mhz": "the run's cores' mean frequency, MHz (mean of the block's two ends)",
    "gpu_sm_clock_mhz": "the GPU's SM clock, MHz (mean of the block's two ends)",
    "gpu_memory_clock_mhz": "the GPU's memory clock, MHz (mean of the block's two ends)",
    "gpu_temperature_c": "the GPU's temperature, degrees C (mean of the block's two ends)",
    "gpu_power_w": "the GPU's mean power over the block, W (its energy counter, else two readings)",
    "gpu_utilization": "the GPU's utilisation read at the block's end, percent",
    "gpu_other_sm_util": "the largest SM share another process had during the block, percent",
}
PROFILE = {
    "kernels_per_step": "device kernels per step (memcpy/memset apart)", "idle_fraction": "device idle share",
    "cpu_ms_per_step": "host CPU time per step", "device_busy_ms_per_step": "union of kernel intervals per step",
    "wall_ms_per_step": "profiled wall time per step", "triton_kernels_distinct": "distinct Triton kernels",
    "distinct_kernels": "distinct kernels",
}
PROFILE_SIDES = ("profile", "reference_profile")  # table columns: profile_<name>, reference_profile_<name>
# Where a run's wall time went, from its job's start to its record written (core/calls/clock.py; measure/process/launch.py), in
# seconds per part (the record's overhead_s; summary.csv's overhead_<part>)
OVERHEAD = {
    "gpu_wait_s": "waiting for the host: a lane's load slot or hold before the process starts, and the wait for the "
                  "timed hold between the run's load and its timed part",
    "redo_s": "earlier attempts of a run redone after a disturbance, from the job's start to the last attempt's",
    "process_start_s": "the job's set-up and its process's creation", "imports_s": "imports",
    "cuda_init_s": "CUDA's context", "env_s": "the environment query", "data_load_s": "loading the data",
    "flop_count_s": "counting the model's FLOPs", "compile_s": "the model and its compile switch, the compiler's settings (the compiling itself is the warm-up's, in timed_s)",
    "timed_s": "the timed protocol: warm-up, epochs, the steady-state block", "watch_s": "the host's readings at the timed blocks' ends",
    "phase_split_s": "the evidence pass that times forward, backward and optimizer apart",
    "profiler_s": "the profiler's evidence pass", "inference_s": "the inference timing",
    "accuracy_s": "eval accuracy", "record_s": "writing the record", "teardown_s": "the process's exit",
    "total_s": "the job's whole wall time, from its start to its record written",
}
WORK = ("redo_s", "compile_s", "timed_s", "watch_s", "phase_split_s", "profiler_s", "inference_s",
        "accuracy_s")  # the rest: fixed cost


def fixed_cost_s(overhead: dict) -> float | None:
    """A run's wall time less its work (WORK): process, imports, CUDA's context, data, record, exit."""
    if not overhead or overhead.get("total_s") is None:
        return None
    return overhead["total_s"] - sum(overhead.get(k) or 0.0 for k in WORK)
