"""One measured training run: one configuration, one process, one JSON record.

Snakemake's `train_run` rule runs `run_job` in a process of its own (measure/jobs.py, measure/process/launch.py):

    snakemake --cores all results/cpu/runs/static/fp32/default/module/bs32/r0.json

Order inside a run (protocol.py says how each part is timed, compile.py what each scope compiles):
1. epochs 1 and 2 of the measured model (the "subject"); a compiled run compiles in epoch 1's first steps;
2. the steady-state block: the subject interleaved with an eager reference of the same model (graph-break:
   the same nonzero pooling; fused-adamw and step-graph: fused AdamW) trained on the same batches in the
   same process; a non-static regime adds that reference on static batches, a yardstick common to all;
3. evidence, once per configuration (`RunConfig.evidence`, set for repeat 0): the forward/backward/optimizer
   split, a profiler pass and (static, module scope) the inference block. A failure there is noted in the
   record and the timings are kept; without evidence these metrics are absent;
4. eval accuracy with the subject's weights.
Epoch 1's warm-up steps end the load phase: where the job has a gate, the process waits there for the host
and moves to its timed cores (`ready`, handover.py). Each timed block (the epochs after the warm-up, the
steady-state block, the inference block) is read at its two ends for what else ran on the host (`host_load`,
hostwatch.py); measure/jobs.py judges the steady-state block's readings.
A failure becomes the record's status; every record says where its wall time went (`overhead_s`).
"""

from __future__ import annotations

import statistics
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from compile_study.core import compile_stages, record
from compile_study.core.calls import env as env_mod
from compile_study.core.calls.clock import Clock
from compile_study.core.dataset.batches import (
    Batch,
    evaluation_batches,
    make_batches,
    mark_dynamic_lengths,
    padding_fraction,
)
from compile_study.core.dataset.data import load_split
from compile_study.core.dataset.packing import make_packed_batches, real_lengths
from compile_study.core.io import write_empty_trace
from compile_study.core.models.flops import step_flops
from compile_study.core.models.model import ModelConfig, model_config_for
from compile_study.core.models.plug import describe, model_class, n_params
from compile_study.core.record import RunConfig
from compile_study.core.vocab import Regime
from compile_study.measure.compile import (
    autotune_search,
    build_step,
    check_applicable,
    make_step,
    new_model,
    packed_attention,
    scope_model_config,
    subject_model,
)
from compile_study.measure.compile_stats import CompileWatch
from compile_study.measure.process import handover
from compile_study.measure.process.hostwatch import HostWatch, gpu_uuid
from compile_study.measure.profiling import profile_steps
from compile_study.measure.protocol import (
    check_finite,
    eval_accuracy,
    inference_block,
    interleaved_block,
    peak_memory_bytes,
    phase_split,
    run_epochs,
    warm_up,
)
from compile_study.measure.steps import NotApplicable, make_batch_step, reset_compiler, set_precision
from compile_study.measure.timing import synchronize


@dataclass
class Side:
    """A model in training, its optimizer and its step function: the subject or the eager reference."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    step: Callable


def load_batches(cfg: RunConfig, data_dir, device: torch.device, regime: str) -> list[Batch]:
    """The epoch's batches; packed ones hold whole sequences in rows of max_len tokens (packing.py)."""
    ids, lengths, labels = load_split(data_dir, "train")
    if Regime.parse(regime).kind == "packed":
        return make_packed_batches(ids, lengths, labels, cfg.batch_size, cfg.seed, device, cfg.max_epoch_steps)
    return make_batches(ids, lengths, labels, cfg.batch_size, regime, cfg.seed, device, cfg.max_epoch_steps)


def prepare_compiler(cfg: RunConfig) -> None:
    set_precision(cfg.precision)
    reset_compiler()
    torch._dynamo.config.recompile_limit = cfg.recompile_limit


def reference_side(model_cfg: ModelConfig, cfg: RunConfig, device: torch.device, batches: list[Batch]) -> Side:
    """The eager reference: the subject's model, uncompiled, with AdamW as torch picks it (foreach), for every
    scope: one yardstick, so that eager with fused AdamW, reduce-overhead with it and the whole-step graph
    separate what fusing the optimizer, compiling and removing the host each give. Its first steps untimed."""
    model, optimizer = new_model(scope_model_config(model_cfg, cfg.compile_scope), cfg, device)
    if cfg.regime.kind == "packed":
        step = make_batch_step(model, optimizer, cfg.precision, device, packed_attention(device, compiled=False))
    else:
        step = make_step(model, optimizer, cfg.precision, device)
    for b in batches[: cfg.warmup_steps]:
        step(b)
    return Side(model, optimizer, step)


def warmup_excess_s(epochs: dict, steady_ms: float) -> float:
    """The warm-up steps' time beyond as many steady-state steps: compilation (compiled runs) plus one-off
    CUDA/cuBLAS initialisation (every run); the summary subtracts eager's."""
    return max(0.0, sum(epochs["warmup_step_s"]) - len(epochs["warmup_step_s"]) * steady_ms / 1e3)


def block_metrics(block: dict, cfg: RunConfig, model_cfg: ModelConfig, own_batches: dict) -> dict:
    """Step times, speedup, throughput and FLOP rates of the steady-state block."""
    step_ms, ref_ms = block["times"]["subject"], block["times"]["reference"]
    wall, n = block["walls"]["subject"], cfg.timed_steps
    timed = [own_batches["subject"][i % len(own_batches["subject"])] for i in range(n)]
    static = "static_reference" if "static_reference" in own_batches else "reference"
    static_timed = [own_batches[static][i % len(own_batches[static])] for i in range(n)]
    static_tokens_per_s = sum(b.real_tokens for b in static_timed) / block["walls"][static]
    counted = step_flops(model_cfg)  # counted before the run trained (measure); cached per model and shape
    flops = sum(counted.padded(*b.ids.shape) for b in timed)
    # FLOPs had every real sequence been computed at its own length (no padding, no filler)
    real_flops = sum(counted.real(real_lengths(b)) for b in timed)
    q = statistics.quantiles(step_ms, n=10)
    steady_ms, reference_ms = statistics.median(step_ms), statistics.median(ref_ms)
    return {
        "steady_step_ms": steady_ms, "step_ms_p10": q[0], "step_ms_p90": q[-1],
        "block_mean_step_ms": 1e3 * wall / n,
        "reference_step_ms": reference_ms, "in_process_speedup": reference_ms / steady_ms,
        "samples_per_s": sum(b.real_rows for b in timed) / wall,
        "real_tokens_per_s": sum(b.real_tokens for b in timed) / wall,
        "padded_tokens_per_s": sum(b.ids.numel() for b in timed) / wall,
        # the regime's gain from padding and compilation together, on one yardstick for every regime
        "eager_static_real_tokens_per_s": static_tokens_per_s,
        "gain_over_eager_static": sum(b.real_tokens for b in timed) / wall / static_tokens_per_s,
        "train_flops_per_step": flops / n, "real_train_flops_per_step": real_flops / n,
        "train_flops_per_token": counted.per_token(),
        "achieved_tflops": flops / wall / 1e12, "real_tflops": real_flops / wall / 1e12,
        "step_times_ms": step_ms, "reference_step_times_ms": ref_ms, "chunk_first": block["chunk_first"],
    } | ({"static_reference_step_times_ms": block["times"]["static_reference"]} if static != "reference" else {})


def evidence(subject: Side, reference: Side, cfg: RunConfig, batches: list[Batch], device: torch.device,
             trace_path, clock: Clock, host_watch: HostWatch) -> dict:
    """Phase split, profiler pass and inference block; a failure is noted under `evidence_errors`."""
    errors: dict[str, str] = {}
    steps = {"subject": subject.step, "reference": reference.step}
    with clock.part("phase_split_s"):
        phases = guarded("phases", errors, lambda: phase_split(steps, batches, cfg.phase_steps, device)) or {}
    with clock.part("profiler_s"):
        profile = {name: guarded(f"{name}_profile", errors, lambda s=s, t=t: profile_steps(
                       lambda i: s(batches[i % len(batches)]), cfg.profile_steps, device, t))
                   for name, s, t in (("subject", subject.step, trace_path), ("reference", reference.step, None))}
    inference = {}
    if cfg.times_inference:
        with host_watch.window("inference", clock), clock.part("inference_s"):
            inference = guarded("inference", errors, lambda: inference_block(
                subject.model, reference.model, cfg, batches, device)) or {}
    reference_phases = {f"reference_{k}": v for k, v in phases.get("reference", {}).items()}
    return {**inference, **phases.get("subject", {}), **reference_phases,
            "profile": profile["subject"], "reference_profile": profile["reference"], "evidence_errors": errors}


def train_subject(model_cfg, cfg: RunConfig, batches: list[Batch], device, clock: Clock, losses: list,
                  host_watch: HostWatch, ready: Callable[[], dict] | None = None):
    """Build the subject, train it for two epochs -> (its Side, the epochs' metrics, its compile watch). `ready`:
    the handover (measure/process/handover.py) after the warm-up steps, which end the load phase (a warm cache loads in the
    first); the epochs' metrics keep its record, the host window watches the timed cores it moved to."""
    watch = CompileWatch().start()
    with clock.part("compile_s"):  # the model and its compile switch (a first compile's imports); the compiling
        model, optimizer = subject_model(model_cfg, cfg, device)  # itself is the warm-up's excess (measure)
        subject = Side(model, optimizer, build_step(model, optimizer, cfg, device, watch))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    warmup, warmed, handed = min(cfg.warmup_steps, len(batches)), None, {}
    if ready is not None:
        with clock.part("timed_s"):
            warmed = warm_up(subject.step, batches, warmup, device, watch, losses)
        handed = ready()
        host_watch.cores = handed["timed_part"]["cores"]
    with host_watch.window("epochs", clock), clock.part("timed_s"):
        epochs = run_epochs(subject.step, batches, warmup, device, watch, losses, warmed)
    epochs["peak_memory_bytes"] = peak_memory_bytes(device)  # the subject alone: no reference model yet
    return subject, epochs | handed, watch


def measure(model_cfg: ModelConfig, cfg: RunConfig, data_dir: str | Path, device: torch.device,
            trace_path: str | Path | None = None, clock: Clock | None = None,
            ready: Callable[[], dict] | None = None) -> dict:
    """Train one configuration -> its metrics (raises on failure); the profiler trace goes to trace_path. `ready`:
    the handover from the load phase to the timed part (train_subject)."""
    clock = clock or Clock()
    check_applicable(model_cfg, cfg)  # before anything is loaded or timed
    with clock.part("data_load_s"):
        batches = load_batches(cfg, data_dir, device, cfg.shape_regime)
        if cfg.regime.marks_dynamic:
            mark_dynamic_lengths(batches)
        eval_batches = evaluation_batches(*load_split(data_dir, "eval"), 256, device)
    with clock.part("flop_count_s"):  # the model's FLOPs, counted before anything is timed (core/models/flops.py)
        step_flops(model_cfg, data_dir)  # counted once per study (kept beside the data), read by later runs
    with clock.part("compile_s"):  # the compiler's settings (and, where this process compiled before, its reset)
        prepare_compiler(cfg)
    with clock.part("watch_s"):  # what else runs on the host, read at each timed block's ends (hostwatch.py)
        host_watch = HostWatch(gpu_uuid(device))
    losses: dict[str, list[torch.Tensor]] = {"subject": [], "reference": []}
    subject, epochs, watch = train_subject(model_cfg, cfg, batches, device, clock, losses["subject"], host_watch, ready)
    with clock.part("timed_s"):  # the timing protocol's own overhead: the reference's untimed first steps
        reference = reference_side(model_cfg, cfg, device, batches)
    steps, own = {"subject": subject.step, "reference": reference.step}, {"subject": batches, "reference": batches}
    if cfg.shape_regime != "static":  # the eager reference on statically padded batches, same process
        with clock.part("data_load_s"):
            own["static_reference"] = load_batches(cfg, data_dir, device, "static")
        steps["static_reference"], losses["static_reference"] = reference.step, []
    with host_watch.window("block", clock), clock.part("timed_s"):
        block = interleaved_block(steps, own, cfg.timed_steps, cfg.interleave_chunk, device, losses)
    metrics = block_metrics(block, cfg, model_cfg, own) | epochs | watch.report()  # eager fallbacks in the block count
    metrics["warmup_excess_s"] = warmup_excess_s(epochs, metrics["steady_step_ms"])
    # the compiler's share of the epochs: the warm-up's excess, or epoch 1 over epoch 2 where a shape first seen
    # after the warm-up recompiled (dynamic lengths) -- booked as compile, not as the timed protocol
    compiling = max(metrics["warmup_excess_s"], epochs["epoch1_s"] - epochs["epoch2_s"])
    clock.move("timed_s", "compile_s", compiling)
    metrics |= compile_stages.measured(metrics["compile_stages"], compiling)  # a warm load's stages against it
    if "load_phase" in metrics:  # the warm-up steps ran in the load phase: their compile is booked there too
        handover.move(metrics["load_phase"]["parts"], "timed_s", "compile_s", compiling)
    if cfg.evidence:
        metrics |= evidence(subject, reference, cfg, batches, device, trace_path, clock, host_watch)
    loss_values = check_finite(losses["subject"], "measured model")
    check_finite(losses["reference"], "eager reference")
    if cfg.evidence:  # like the rest of the evidence, once per configuration (the repeats train alike)
        with clock.part("accuracy_s"):
            metrics["eval_accuracy"] = eval_accuracy(subject.model, eval_batches, cfg.precision, device)
    return metrics | {
        "padding_fraction": padding_fraction(batches), "distinct_shapes": len({tuple(b.ids.shape) for b in batches}),
        "epoch_steps": len(batches), "subject_steps": 2 * len(batches) + cfg.timed_steps,
        "final_loss": float(loss_values[-1]),
        "model_class": model_class(subject.model), "model_params": n_params(subject.model),
        "model_plug": describe(model_cfg), "host_load": host_watch.windows,
    }


def guarded(name: str, errors: dict, fn):
    """fn() or, if it raises, None with the error noted under `name` (for measurements after the timed block)."""
    try:
        return fn()
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        errors[name] = f"{classify_failure(exc)}: {type(exc).__name__}: {first}"
        return None


def classify_failure(exc: BaseException) -> str:
    """Map an exception to the record's status (vocab.STATUSES)."""
    if isinstance(exc, NotApplicable):
        return "not_applicable"
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower():
        return "oom"
    if isinstance(exc, FloatingPointError):
        return "nan"
    module = type(exc).__module__
    # Dynamo, Inductor, and the symbolic-shape machinery (e.g. ConstraintViolationError from mark_dynamic)
    if module.startswith(("torch._dynamo", "torch._inductor", "torch.fx.experimental")):
        return "compile_error"
    return "error"


def compiler_settings(device: torch.device) -> dict:
    """The Dynamo/Inductor and precision settings a record's numbers depend on."""
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32 if device.type == "cuda" else None,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32 if device.type == "cuda" else None,
        "dynamo_recompile_limit": torch._dynamo.config.recompile_limit,
        "inductor_compile_threads": torch._inductor.config.compile_threads,
        "inductor_fx_graph_cache": torch._inductor.config.fx_graph_cache,
    }


def init_device(device: torch.device) -> None:
    """CUDA's context and first allocation, paid here rather than inside the first measured part."""
    if device.type == "cuda":
        torch.cuda.init()
        torch.empty(1, device=device)
        synchronize(device)


def failure(rec: dict, exc: Exception) -> None:
    """A failure as the record's outcome: status, a short error (its first lines carry the cause), traceback."""
    rec["status"] = classify_failure(exc)
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()][:3]
    if rec["status"] == "not_applicable":  # a one-line reason: nothing went wrong
        rec["error"] = lines[0] if lines else type(exc).__name__
        return
    rec["error"] = f"{type(exc).__name__}: {' / '.join(lines)}"[:600]
    rec["traceback"] = traceback.format_exc(limit=8)


def run_and_record(model_cfg: ModelConfig, cfg: RunConfig, data_dir: str | Path, device: str | None = None,
                   threads: int | None = None, trace_path: str | Path | None = None,
                   clock: Clock | None = None, host: dict | None = None,
                   ready: Callable[[], dict] | None = None) -> dict:
    """Measure one configuration; a failure becomes the record's status, never an exception. `clock`: the
    launcher's, started when the job began (else one starts here, and the parts before this call stay 0); `host`:
    env.host_facts, asked once by the launcher; `ready`: the handover (train_subject)."""
    clock = clock or Clock()
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if threads:
        torch.set_num_threads(threads)
    with clock.part("cuda_init_s"):
        init_device(dev)
    with clock.part("env_s"):
        rec = record.new(cfg, scope_model_config(model_cfg, cfg.compile_scope).to_dict(), env_mod.collect(dev, host))
    handed: dict = {}  # the handover's record, kept where the run fails after it

    def hand_over() -> dict:
        handed.update(ready())
        return handed

    try:
        rec["metrics"] = measure(model_cfg, cfg, data_dir, dev, trace_path, clock, hand_over if ready else None)
    except Exception as exc:  # recorded as this configuration's outcome; the study goes on
        failure(rec, exc)
        rec["metrics"] |= handed
    with clock.part("env_s"):
        rec["env"] |= compiler_settings(dev) | {"autotune_search": autotune_search(cfg.compile_mode)}
    rec["metrics"]["overhead_s"] = clock.breakdown(record.OVERHEAD)
    return rec


def run_job(model: dict, run: dict, data_dir: str, device: str, threads: int, trace_path: str, host: dict,
            clock: Clock, ready: Callable[[], dict] | None = None) -> dict:
    """A timed job's process (measure/jobs.py starts it): the configuration's record, its profiler trace written
    (an empty, openable one where no profiler pass ran, saying why). `ready`: the handover (measure/process/child.py)."""
    rec = run_and_record(model_config_for(data_dir, model), RunConfig(**run), data_dir, device, threads, trace_path,
                         clock, host, ready)
    print(rec["status"], rec["error"] or "", rec["metrics"].get("steady_step_ms"))
    if not Path(trace_path).exists():
        with clock.part("record_s"):
            ok = rec["status"] == "ok"
            write_empty_trace(trace_path, "evidence is taken by another repeat" if ok else f"{rec['status']}: {rec['error']}")
    return rec
