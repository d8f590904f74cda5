"""One measured training run: one configuration, one process, one JSON record.

Snakemake's `train_run` rule calls `run_and_record` (see workflow/scripts/train_run.py):

    snakemake --cores all results/cpu/runs/static/fp32/default/bs32/r0.json

Eager is the reference path; compilation is one switch (`compile_mode`) on the same code.
Order inside a run:
1. epoch 1 of the measured model (the "subject", eager or compiled): its first `warmup_steps`
   steps are timed one by one (compilation happens there), the rest as a block;
2. epoch 2 (same batches; no compilation left unless shapes are new);
3. the steady-state block: `timed_steps` steps of the subject interleaved, in chunks, with as
   many steps of an eager reference model trained on the same batches in the same process.
   The in-process ratio reference/subject is the run's speedup; for an eager subject it is the
   A/A control. Interleaving keeps host drift (clocks, load) from favouring either side;
4. eval accuracy with the subject's weights, run by the uncompiled module (no eval recompile).
"""

from __future__ import annotations

import contextlib
import json
import resource
import statistics
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch._dynamo.exc import FailOnRecompileLimitHit
from torch.nn import functional as F

from compile_study import env as env_mod
from compile_study.batches import Batch, compile_kwargs, make_batches, mark_dynamic_lengths, padding_fraction
from compile_study.compile_stats import CompileWatch
from compile_study.data import load_split
from compile_study.model import ModelConfig, TextClassifier, train_flops
from compile_study.timing import time_call, time_steps

COMPILE_MODES = ("eager", "default", "reduce-overhead", "max-autotune")
PRECISIONS = ("fp32", "tf32", "bf16")
RECORD_SCHEMA_VERSION = 2


@dataclass(frozen=True)
class RunConfig:
    compile_mode: str  # eager | default | reduce-overhead | max-autotune
    batch_size: int
    shape_regime: str  # static | dynamic[-true|-false|-marked] | bucketed-<edges> (see batches.py)
    precision: str  # fp32 (TF32 off) | tf32 | bf16 (autocast)
    repeat: int  # independent process index; seeds do not change with it
    warmup_steps: int = 5  # timed one by one; the compiled run's compilation happens here
    timed_steps: int = 50  # steady-state steps of the subject (and as many of the reference)
    interleave_chunk: int = 10  # subject and reference alternate in chunks of this many steps
    max_epoch_steps: int | None = None  # cap an epoch (CPU smoke runs); None = the whole split
    lr: float = 3e-4
    seed: int = 0
    recompile_limit: int = 8  # torch._dynamo.config.recompile_limit (8 is torch's default)

    def __post_init__(self) -> None:
        if self.compile_mode not in COMPILE_MODES:
            raise ValueError(f"compile_mode {self.compile_mode!r} is not one of {COMPILE_MODES}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r} is not one of {PRECISIONS}")


def set_precision(precision: str) -> None:
    """Global matmul precision: TF32 only for `tf32` (bf16 is autocast, see `autocast`)."""
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    torch.backends.cudnn.allow_tf32 = precision == "tf32"


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def compile_model(model: torch.nn.Module, compile_mode: str, **kwargs) -> torch.nn.Module:
    """The one switch: the module (forward and, through AOTAutograd, its backward) compiled whole."""
    if compile_mode == "eager":
        return model
    # fullgraph=True: a graph break fails loudly instead of silently running part of it eagerly
    return torch.compile(model, mode=None if compile_mode == "default" else compile_mode, fullgraph=True, **kwargs)


def make_step(model, optimizer, precision: str, device: torch.device, eager_model=None, watch: CompileWatch | None = None):
    """One training step on a batch; returns the detached loss (no host sync)."""

    def forward(ids: torch.Tensor) -> torch.Tensor:
        try:
            return model(ids)  # [B, n_classes]
        except FailOnRecompileLimitHit:
            if eager_model is None:
                raise
            # Past the recompile limit Dynamo runs the frame eagerly; fullgraph=True makes that an
            # error instead, so do what Dynamo would have done, and count it.
            watch.fallback_steps += 1
            return eager_model(ids)

    def step(batch: Batch) -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()  # CUDA graphs (reduce-overhead) need it; a no-op otherwise
        with autocast(precision, device):
            logits = forward(batch.ids)
        loss = F.cross_entropy(logits.float(), batch.labels)  # filler rows (label -100) are ignored
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


@torch.no_grad()
def eval_accuracy(model, batches: list[Batch], precision: str, device: torch.device) -> float:
    model.eval()
    correct = total = 0
    for b in batches:
        with autocast(precision, device):
            pred = model(b.ids).argmax(-1)
        correct += int((pred == b.labels).sum())
        total += b.labels.numel()
    model.train()
    return correct / total


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def new_model(cfg: ModelConfig, run: RunConfig, device: torch.device):
    torch.manual_seed(run.seed)
    model = TextClassifier(cfg).to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=run.lr)


def run_epochs(step, batches: list[Batch], warmup: int, device, watch: CompileWatch, losses: list) -> dict:
    """Epoch 1 (warm-up steps timed one by one, then a block) and epoch 2."""

    def run(i: int) -> None:
        losses.append(step(batches[i]))
        watch.after_step(i)

    warmup_step_s = [time_call(lambda i=i: run(i), device) for i in range(warmup)]
    rest_ms, rest_wall = time_steps(lambda i: run(warmup + i), len(batches) - warmup, device)
    _, epoch2_s = time_steps(lambda i: losses.append(step(batches[i])), len(batches), device)
    return {
        "warmup_step_s": warmup_step_s,
        "first_step_s": warmup_step_s[0],
        "epoch1_s": sum(warmup_step_s) + rest_wall,
        "epoch2_s": epoch2_s,
        "epoch1_step_ms": [1e3 * s for s in warmup_step_s] + rest_ms,
    }


def interleaved_block(steps: dict, batches: list[Batch], n: int, chunk: int, device, losses: dict) -> dict:
    """n steps of each named step function, alternating in chunks over the same batches."""
    times = {name: [] for name in steps}
    walls = dict.fromkeys(steps, 0.0)
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        for name, step in steps.items():
            ms, wall = time_steps(lambda i: losses[name].append(step(batches[(start + i) % len(batches)])), k, device)
            times[name] += ms
            walls[name] += wall
    return {"times": times, "walls": walls}


def check_finite(losses: list[torch.Tensor], who: str) -> torch.Tensor:
    values = torch.stack(losses).float().cpu()
    if not torch.isfinite(values).all():
        raise FloatingPointError(f"non-finite loss of the {who} at step {int((~torch.isfinite(values)).nonzero()[0])}")
    return values


def measure(model_cfg: ModelConfig, cfg: RunConfig, data_dir: str | Path, device: torch.device) -> dict:
    """Train one configuration and return its metrics (raises on failure)."""
    ids, lengths, labels = load_split(data_dir, "train")
    batches = make_batches(ids, lengths, labels, cfg.batch_size, cfg.shape_regime, cfg.seed, device, cfg.max_epoch_steps)
    if cfg.shape_regime == "dynamic-marked":
        mark_dynamic_lengths(batches)
    e_ids, e_lengths, e_labels = load_split(data_dir, "eval")
    eval_batches = make_batches(e_ids, e_lengths, e_labels, 256, "static", None, device, drop_last=False)

    set_precision(cfg.precision)
    torch._dynamo.reset()  # a no-op in a fresh process; keeps in-process callers (tests) independent
    torch._dynamo.config.recompile_limit = cfg.recompile_limit
    model, optimizer = new_model(model_cfg, cfg, device)
    watch = CompileWatch().start()
    compiled = compile_model(model, cfg.compile_mode, **compile_kwargs(cfg.shape_regime))
    step = make_step(compiled, optimizer, cfg.precision, device, eager_model=model, watch=watch)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    losses: dict[str, list[torch.Tensor]] = {"subject": [], "reference": []}
    epochs = run_epochs(step, batches, min(cfg.warmup_steps, len(batches)), device, watch, losses["subject"])
    peak = peak_memory_bytes(device)  # the subject alone: the reference model does not exist yet

    ref_model, ref_optimizer = new_model(model_cfg, cfg, device)
    ref_step = make_step(ref_model, ref_optimizer, cfg.precision, device)
    for b in batches[: cfg.warmup_steps]:  # untimed: the reference's own first steps
        ref_step(b)
    block = interleaved_block({"subject": step, "reference": ref_step}, batches, cfg.timed_steps,
                              cfg.interleave_chunk, device, losses)
    compile_report = watch.report()  # after the block: eager fallbacks there count too

    loss_values = check_finite(losses["subject"], "measured model")
    check_finite(losses["reference"], "eager reference")
    step_ms, ref_ms = block["times"]["subject"], block["times"]["reference"]
    wall = block["walls"]["subject"]
    timed = [batches[i % len(batches)] for i in range(cfg.timed_steps)]
    flops = sum(train_flops(model_cfg, *b.ids.shape) for b in timed)
    q = statistics.quantiles(step_ms, n=10)
    steady_ms, reference_ms = statistics.median(step_ms), statistics.median(ref_ms)
    return {
        "steady_step_ms": steady_ms,
        "step_ms_p10": q[0],
        "step_ms_p90": q[-1],
        "block_mean_step_ms": 1e3 * wall / cfg.timed_steps,
        "reference_step_ms": reference_ms,
        "in_process_speedup": reference_ms / steady_ms,
        "samples_per_s": sum(b.real_rows for b in timed) / wall,
        "real_tokens_per_s": sum(b.real_tokens for b in timed) / wall,
        "padded_tokens_per_s": sum(b.ids.numel() for b in timed) / wall,
        "padding_fraction": padding_fraction(batches),
        "distinct_shapes": len({tuple(b.ids.shape) for b in batches}),
        "train_flops_per_step": flops / cfg.timed_steps,
        "achieved_tflops": flops / wall / 1e12,
        # the warm-up steps' excess over as many steady-state steps: compilation (compiled runs)
        # plus one-off CUDA/cuBLAS initialisation (every run); the summary subtracts eager's
        "warmup_excess_s": max(0.0, sum(epochs["warmup_step_s"]) - len(epochs["warmup_step_s"]) * steady_ms / 1e3),
        **epochs,
        "epoch_steps": len(batches),
        "subject_steps": 2 * len(batches) + cfg.timed_steps,
        "final_loss": float(loss_values[-1]),
        "eval_accuracy": eval_accuracy(model, eval_batches, cfg.precision, device),
        "peak_memory_bytes": peak,
        **compile_report,
        "step_times_ms": step_ms,
        "reference_step_times_ms": ref_ms,
    }


def classify_failure(exc: BaseException) -> str:
    """Map an exception to the record's status."""
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower():
        return "oom"
    if isinstance(exc, FloatingPointError):
        return "nan"
    module = type(exc).__module__
    # Dynamo, Inductor, and the symbolic-shape machinery (e.g. ConstraintViolationError from mark_dynamic)
    if module.startswith(("torch._dynamo", "torch._inductor", "torch.fx.experimental")):
        return "compile_error"
    return "error"


def model_config_for(data_dir: str | Path, model_params: dict) -> ModelConfig:
    """The configured model sized to the vocabulary the tokenizer actually learned."""
    facts = json.loads((Path(data_dir) / "facts.json").read_text())
    return ModelConfig(vocab_size=facts["vocab_size"], **model_params)


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


def run_and_record(
    model_cfg: ModelConfig, cfg: RunConfig, data_dir: str | Path, device: str | None = None, threads: int | None = None
) -> dict:
    """Measure one configuration; a failure becomes the record's status, never an exception."""
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if threads:
        torch.set_num_threads(threads)
    record = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "config": asdict(cfg) | {"model": model_cfg.to_dict()},
        "env": env_mod.collect(dev),
        "status": "ok",
        "error": None,
        "metrics": {},
    }
    try:
        record["metrics"] = measure(model_cfg, cfg, data_dir, dev)
    except Exception as exc:  # recorded as this configuration's outcome; the study goes on
        record["status"] = classify_failure(exc)
        # the first lines carry the cause (a violated guard, an OOM size); the rest is advice
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()][:3]
        record["error"] = f"{type(exc).__name__}: {' / '.join(lines)}"[:600]
        record["traceback"] = traceback.format_exc(limit=8)
    record["env"] |= compiler_settings(dev)
    return record
