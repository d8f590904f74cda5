"""One cold compile of a configuration: the compile phase's work (rule cold_compile), untimed, beside others.

    snakemake --cores all results/cuda/compiles/static/bf16/default/module/bs32/c0.json

A fresh process from an empty Inductor and Triton cache builds the configuration's model and compiled step and
trains it for two epochs, as a timed run's first two epochs do (measure/run.py `train_subject`); its cold compile
is epoch 1 less epoch 2 (the compile, its recompiles and CUDA-graph recordings; the summary takes eager's own
epoch-1 excess off it). Nothing here is timed against another process: several compiles run at once on
disjoint cores (core/compile_record.py says how the record tells it), and no timed job runs meanwhile. The first
compile (index 0) fills the configuration's cache, which every timed run then starts from, warm.
"""

from __future__ import annotations

from pathlib import Path

import torch

from compile_study.core import compile_record
from compile_study.core import env as env_mod
from compile_study.core.batches import mark_dynamic_lengths
from compile_study.core.clock import Clock
from compile_study.core.model import ModelConfig, model_config_for
from compile_study.core.record import OVERHEAD, RunConfig
from compile_study.measure.compile import autotune_search, check_applicable, scope_model_config
from compile_study.measure.hostwatch import HostWatch, gpu_uuid
from compile_study.measure.protocol import check_finite
from compile_study.measure.run import (
    compiler_settings,
    failure,
    init_device,
    load_batches,
    prepare_compiler,
    train_subject,
)


def measure(model_cfg: ModelConfig, cfg: RunConfig, data_dir: str | Path, device: torch.device, clock: Clock) -> dict:
    """Compile the configuration cold and train it two epochs -> the compile's metrics (raises on failure)."""
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
    _, epochs, watch = train_subject(model_cfg, cfg, batches, device, clock, losses, host_watch)
    check_finite(losses, "compiled model")
    cold = epochs["epoch1_s"] - epochs["epoch2_s"]
    clock.move("timed_s", "compile_s", max(cold, 0.0))  # the epochs' compile share; the rest trained
    keep = {k: epochs[k] for k in ("first_step_s", "epoch1_s", "epoch2_s", "peak_memory_bytes", "epoch1_step_ms")}
    return keep | watch.report() | {"cold_compile_s": cold, "epoch_steps": len(batches),
                                    "host_load": host_watch.windows}


def compile_job(model: dict, run: dict, data_dir: str, device: str, threads: int, host: dict, clock: Clock,
                compile: dict) -> dict:
    """A cold compile's process (measure/jobs.py compile_run starts it) -> its record; a failure is its status."""
    dev = torch.device(device)
    torch.set_num_threads(threads)
    with clock.part("cuda_init_s"):
        init_device(dev)
    model_cfg = model_config_for(data_dir, model)
    cfg = RunConfig(**run)
    with clock.part("env_s"):
        rec = compile_record.new(cfg, scope_model_config(model_cfg, cfg.compile_scope).to_dict(),
                                 env_mod.collect(dev, host), compile)
    try:
        rec["metrics"] = measure(model_cfg, cfg, data_dir, dev, clock)
    except Exception as exc:  # recorded as this configuration's outcome; the study goes on
        failure(rec, exc)
    with clock.part("env_s"):
        rec["env"] |= compiler_settings(dev) | {"autotune_search": autotune_search(cfg.compile_mode)}
    rec["metrics"]["overhead_s"] = clock.breakdown(OVERHEAD)
    print(rec["status"], rec["error"] or "", rec["metrics"].get("cold_compile_s"))
    return rec
