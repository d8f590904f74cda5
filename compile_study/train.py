"""One measured training run: one configuration, one process, one JSON record.

Snakemake's `train_run` rule calls `run_and_record`; by hand:

    python -c "from compile_study.train import *; ..."   # see workflow/scripts/train_run.py

Eager is the reference path; compilation is one switch (`compile_mode`) on the same code.
Order inside a run: epoch 1 (its first `warmup_steps` steps timed one by one: they hold the
compilation), epoch 2, the timed steady-state block, eval accuracy with the uncompiled module.
"""

from __future__ import annotations

import contextlib
import json
import math
import resource
import statistics
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch.nn import functional as F

from compile_study import env as env_mod
from compile_study.batches import make_batches
from compile_study.data import load_split
from compile_study.model import ModelConfig, TextClassifier
from compile_study.timing import synchronize, time_call, time_steps

COMPILE_MODES = ("eager", "default", "reduce-overhead", "max-autotune")
PRECISIONS = ("fp32", "tf32", "bf16")
RECORD_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RunConfig:
    compile_mode: str  # eager | default | reduce-overhead | max-autotune
    batch_size: int
    shape_regime: str  # static (dynamic and bucketed come with the shape-regime study)
    precision: str  # fp32 (TF32 off) | tf32 | bf16 (autocast)
    repeat: int  # independent process index; seeds do not change with it
    warmup_steps: int = 5  # timed one by one; the compiled run's compilation happens here
    timed_steps: int = 50  # steady-state block, median reported
    max_epoch_steps: int | None = None  # cap an epoch (CPU smoke runs); None = the whole split
    lr: float = 3e-4
    seed: int = 0

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


def compile_model(model: torch.nn.Module, compile_mode: str) -> torch.nn.Module:
    """The one switch: the module (forward and, through AOTAutograd, its backward) compiled whole."""
    if compile_mode == "eager":
        return model
    # fullgraph=True: a graph break fails loudly instead of silently running part of it eagerly
    return torch.compile(model, mode=None if compile_mode == "default" else compile_mode, fullgraph=True)


def make_step(model, optimizer, precision: str, device: torch.device):
    """One training step on a batch; returns the detached loss (no host sync)."""

    def step(batch) -> torch.Tensor:
        ids, labels, _ = batch
        # CUDA graphs (reduce-overhead) need each iteration marked; a no-op otherwise
        torch.compiler.cudagraph_mark_step_begin()
        with autocast(precision, device):
            logits = model(ids)  # [B, n_classes]
        loss = F.cross_entropy(logits.float(), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


@torch.no_grad()
def eval_accuracy(model, batches, precision: str, device: torch.device) -> float:
    model.eval()
    correct = total = 0
    for ids, labels, _ in batches:
        with autocast(precision, device):
            pred = model(ids).argmax(-1)
        correct += int((pred == labels).sum())
        total += labels.numel()
    model.train()
    return correct / total


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def unique_graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def measure(model_cfg: ModelConfig, cfg: RunConfig, data_dir: str | Path, device: torch.device) -> dict:
    """Train one configuration and return its metrics (raises on failure)."""
    ids, lengths, labels = load_split(data_dir, "train")
    train_batches = make_batches(
        ids, lengths, labels, cfg.batch_size, cfg.shape_regime, cfg.seed, device, cfg.max_epoch_steps
    )
    e_ids, e_lengths, e_labels = load_split(data_dir, "eval")
    eval_batches = make_batches(e_ids, e_lengths, e_labels, 256, "static", None, device, drop_last=False)

    set_precision(cfg.precision)
    torch.manual_seed(cfg.seed)
    model = TextClassifier(model_cfg).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    step = make_step(compile_model(model, cfg.compile_mode), optimizer, cfg.precision, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    graphs_before = unique_graphs()

    n_batches = len(train_batches)
    warmup = min(cfg.warmup_steps, n_batches)
    losses: list[torch.Tensor] = []
    synchronize(device)
    warmup_step_s = [time_call(lambda b=b: losses.append(step(b)), device) for b in train_batches[:warmup]]
    rest_ms, rest_wall = time_steps(lambda i: losses.append(step(train_batches[warmup + i])), n_batches - warmup, device)
    epoch1_s = sum(warmup_step_s) + rest_wall
    _, epoch2_s = time_steps(lambda i: losses.append(step(train_batches[i])), n_batches, device)
    step_ms, block_s = time_steps(lambda i: losses.append(step(train_batches[i % n_batches])), cfg.timed_steps, device)

    loss_values = torch.stack(losses).float().cpu()
    if not torch.isfinite(loss_values).all():
        raise FloatingPointError(f"non-finite loss at step {int((~torch.isfinite(loss_values)).nonzero()[0])}")
    steady_ms = statistics.median(step_ms)
    tokens_per_batch = cfg.batch_size * train_batches[0][0].shape[1]
    real_tokens = sum(train_batches[i % n_batches][2] for i in range(cfg.timed_steps))
    q = statistics.quantiles(step_ms, n=10) if len(step_ms) >= 2 else [steady_ms] * 9
    return {
        "steady_step_ms": steady_ms,
        "step_ms_p10": q[0],
        "step_ms_p90": q[-1],
        "block_mean_step_ms": 1e3 * block_s / cfg.timed_steps,
        "samples_per_s": cfg.batch_size * cfg.timed_steps / block_s,
        "padded_tokens_per_s": tokens_per_batch * cfg.timed_steps / block_s,
        "real_tokens_per_s": real_tokens / block_s,
        "warmup_step_s": warmup_step_s,
        # the warm-up steps' excess over as many steady-state steps: compilation (compiled runs)
        # plus one-off CUDA/cuBLAS initialisation (every run); the summary subtracts eager's
        "warmup_excess_s": max(0.0, sum(warmup_step_s) - warmup * steady_ms / 1e3),
        "first_step_s": warmup_step_s[0],
        "epoch_steps": n_batches,
        "epoch1_s": epoch1_s,
        "epoch2_s": epoch2_s,
        "final_loss": float(loss_values[-1]),
        "eval_accuracy": eval_accuracy(model, eval_batches, cfg.precision, device),
        "peak_memory_bytes": peak_memory_bytes(device),
        "graphs_compiled": unique_graphs() - graphs_before,
        "step_times_ms": step_ms,
        "epoch1_rest_step_ms_mean": statistics.fmean(rest_ms) if rest_ms else None,
    }


def classify_failure(exc: BaseException) -> str:
    """Map an exception to the record's status."""
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower():
        return "oom"
    if isinstance(exc, FloatingPointError):
        return "nan"
    try:
        from torch._dynamo.exc import TorchDynamoException

        if isinstance(exc, TorchDynamoException):
            return "compile_error"
    except ImportError:
        pass
    if "inductor" in type(exc).__module__ or "_dynamo" in type(exc).__module__:
        return "compile_error"
    return "error"


def model_config_for(data_dir: str | Path, model_params: dict) -> ModelConfig:
    """The configured model sized to the vocabulary the tokenizer actually learned."""
    facts = json.loads((Path(data_dir) / "facts.json").read_text())
    return ModelConfig(vocab_size=facts["vocab_size"], **model_params)


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
        record["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:500]
        record["traceback"] = traceback.format_exc(limit=8)
    if record["metrics"].get("steady_step_ms") is not None and not math.isfinite(record["metrics"]["steady_step_ms"]):
        record["status"] = "error"
    return record
