"""One cold compile of a configuration: the compile phase's work (rule cold_compile), untimed, beside others.

    snakemake --cores all results/cuda/compiles/static/bf16/default/module/bs32/c0.json

A fresh process from an empty Inductor and Triton cache builds the configuration's model and compiled step and
trains it for two epochs, as a timed run's first two epochs do (measure/run.py `train_subject`); its cold compile
is epoch 1 less epoch 2 (the compile, its recompiles and CUDA-graph recordings; the summary takes eager's own
epoch-1 excess off it). Nothing here is timed against another process: several compiles run at once on
disjoint cores (core/compile_record.py says how the record tells it), and no timed job runs meanwhile. The first
compile (index 0) fills the configuration's cache, which every timed run then starts from, warm, and saves the
portable artifacts of what it compiled (torch.compiler.save_cache_artifacts); then, where the configuration's
first timed run times inference (its evidence), it compiles that inference graph into the cache as well, so that
the run loads it warm instead of compiling it while it holds the device (record field `compile.inference`).

A portable start (rule portable_start, `compile.start: portable`) is the same process on an empty cache of its
own that first loads those artifacts (torch.compiler.load_cache_artifacts): what a training job shipped with
them pays to reach its compiled step (the load, then epoch 1 less epoch 2). Its record says what the artifacts
held and what its compile then found in its caches (AOTAutograd's and Inductor's FX graph cache hits and misses).
On the CPU the artifacts hold the graphs' C++ source, not the compiled kernels, which are compiled again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import torch

from compile_study.core import compile_record, compile_stages
from compile_study.core.calls import env as env_mod
from compile_study.core.calls.clock import Clock
from compile_study.core.dataset.batches import mark_dynamic_lengths
from compile_study.core.io import write_bytes_atomic
from compile_study.core.models.model import ModelConfig, model_config_for
from compile_study.core.record import OVERHEAD, RunConfig
from compile_study.measure.compile import autotune_search, check_applicable, scope_model_config
from compile_study.measure.process.hostwatch import HostWatch, gpu_uuid
from compile_study.measure.protocol import check_finite, inference_subject, warm_inference
from compile_study.measure.run import (
    compiler_settings,
    failure,
    init_device,
    load_batches,
    prepare_compiler,
    train_subject,
)
from compile_study.measure.trace import structured_trace


def measure(model_cfg: ModelConfig, cfg: RunConfig, data_dir: str | Path, device: torch.device,
            clock: Clock) -> tuple[dict, Callable[[], dict]]:
    """Compile the configuration cold and train it two epochs -> the compile's metrics (raises on failure), and
    what compiles its inference graph next (prime_inference), on the trained model."""
    check_applicable(model_cfg, cfg)
    with clock.part("data_load_s"):
        batches = load_batches(cfg, data_dir, device, cfg.shape_regime)
        if cfg.regime.marks_dynamic:
            mark_dynamic_lengths(batches)
    with clock.part("compile_s"):
        prepare_compiler(cfg)
    with clock.part("watch_s"):  # what else ran on the host while it compiled (the other compiles of its batch)
        host_watch = HostWatch(gpu_uuid(device))
    losses: list[torch.Tensor] = []
    subject, epochs, watch = train_subject(model_cfg, cfg, batches, device, clock, losses, host_watch)
    check_finite(losses, "compiled model")
    cold = epochs["epoch1_s"] - epochs["epoch2_s"]
    clock.move("timed_s", "compile_s", max(cold, 0.0))  # the epochs' compile share; the rest trained
    keep = {k: epochs[k] for k in ("first_step_s", "epoch1_s", "epoch2_s", "peak_memory_bytes", "epoch1_step_ms")}
    compiled = watch.report()
    metrics = keep | compiled | {"cold_compile_s": cold, "epoch_steps": len(batches),
                                 "host_load": host_watch.windows}
    metrics |= compile_stages.measured(compiled["compile_stages"], cold)  # the stages against the cold compile
    return metrics, lambda: prime_inference(subject.model, cfg, batches, device, clock)


def prime_inference(model, cfg: RunConfig, batches: list, device: torch.device, clock: Clock) -> dict:
    """A first cold compile's last act where its configuration's runs time inference: the inference graph compiled
    as the timed run's inference block compiles it (measure/protocol.py), into the cache that run starts from, so
    that no compile happens on the timed path -> its seconds and FX graph cache misses (booked as inference)."""
    with clock.part("inference_s"):
        primed = warm_inference(inference_subject(model, cfg, device), model, batches, device)
    model.train()
    return {"inference_prime_s": primed.pop("inference_warmup_s")} | primed


def load_artifacts(path: str | Path, clock: Clock) -> dict:
    """A portable start's first act: the artifacts a first cold compile saved, loaded into this process's empty
    caches (torch.compiler.load_cache_artifacts, timed as compile) -> what they held, per kind of cache entry."""
    data = Path(path).read_bytes()  # FileNotFoundError where the first cold compile saved none: this start's error
    with clock.part("compile_s"):
        started = clock.elapsed()
        info = torch.compiler.load_cache_artifacts(data)
        load_s = clock.elapsed() - started
    return {"artifacts_bytes": len(data), "artifacts_load_s": load_s, compile_record.ARTIFACTS: kinds(info)}


def save_artifacts(path: str | Path) -> dict:
    """A first cold compile's last act: what this process compiled, as the portable artifacts a training job would
    ship (torch.compiler.save_cache_artifacts), written to `path` -> their size and what they hold."""
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return {"artifacts_bytes": 0, compile_record.ARTIFACTS: {}}
    data, info = saved
    write_bytes_atomic(path, data)
    return {"artifacts_bytes": len(data), compile_record.ARTIFACTS: kinds(info)}


def kinds(info) -> dict[str, int]:
    """torch.compiler's CacheInfo as {kind of cache entry: entries} (inductor, aot_autograd, autotune, pgo, ...)."""
    return {str(kind): len(keys) for kind, keys in sorted((info.artifacts if info else {}).items())}


def trace_overhead_s() -> float:
    """Seconds torch spent writing the structured trace during the compiles (structured_logging_overhead_us)."""
    return sum((getattr(m, "structured_logging_overhead_us", None) or 0) / 1e6
               for m in torch._dynamo.utils.get_compilation_metrics())


def compile_job(model: dict, run: dict, data_dir: str, device: str, threads: int, host: dict, clock: Clock,
                compile: dict, artifacts: dict | None = None, trace: dict | None = None) -> dict:
    """A cold compile's (or portable start's) process (measure/jobs.py compile_run starts it) -> its record; a
    failure is its status. `artifacts`: {"save": path} for a first cold compile whose configuration has portable
    starts, {"load": path} for a portable start. `trace`: {trace_path, report_dir} for a configuration's first
    cold compile, whose structured trace is kept there (measure/trace.py)."""
    dev = torch.device(device)
    torch.set_num_threads(threads)
    with clock.part("cuda_init_s"):
        init_device(dev)
    model_cfg = model_config_for(data_dir, model)
    cfg = RunConfig(**run)
    with clock.part("env_s"):
        rec = compile_record.new(cfg, scope_model_config(model_cfg, cfg.compile_scope).to_dict(),
                                 env_mod.collect(dev, host), compile)
    artifacts = artifacts or {}
    try:
        loaded = load_artifacts(artifacts["load"], clock) if "load" in artifacts else {}
        with structured_trace(**trace) if trace else contextlib.nullcontext({}) as traced:
            metrics, prime = measure(model_cfg, cfg, data_dir, dev, clock)
        rec["metrics"] = metrics | loaded
        if trace:  # what the trace cost the compile, by torch's own count, and where it and its report are
            rec["compile"]["trace"] = traced | {"path": trace["trace_path"], "overhead_s": trace_overhead_s()}
        if "save" in artifacts:
            with clock.part("record_s"):  # an output of this job, as its record is
                rec["metrics"] |= save_artifacts(artifacts["save"])
        if compile.get("inference"):  # after the artifacts: they hold what a training job ships, its training step
            rec["metrics"] |= prime()
    except Exception as exc:  # recorded as this configuration's outcome; the study goes on
        failure(rec, exc)
    with clock.part("env_s"):
        rec["env"] |= compiler_settings(dev) | {"autotune_search": autotune_search(cfg.compile_mode)}
    rec["metrics"]["overhead_s"] = clock.breakdown(OVERHEAD)
    print(rec["status"], rec["error"] or "", rec["metrics"].get("cold_compile_s"))
    return rec
