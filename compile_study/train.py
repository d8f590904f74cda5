"""One measured training run: one configuration, one process, one JSON record.

Snakemake's `train_run` rule calls `run_and_record` (see workflow/scripts/train_run.py):

    snakemake --cores all results/cpu/runs/static/fp32/default/module/bs32/r0.json

Eager is the reference path; compilation is one switch (`compile_mode`) on the same code.
Order inside a run:
1. epoch 1 of the measured model (the "subject", eager or compiled): its first `warmup_steps`
   steps are timed one by one (compilation happens there), the rest as a block;
2. epoch 2 (same batches; no compilation left unless shapes are new);
3. the steady-state block: `timed_steps` steps of the subject interleaved, in chunks, with as
   many steps of an eager reference model trained on the same batches in the same process.
   The in-process ratio reference/subject is the run's speedup; for an eager subject it is the
   A/A control. Interleaving keeps host drift (clocks, load) from favouring either side;
4. evidence outside the timed block: the forward/backward/optimizer split of a step (timed per
   phase, subject and reference), and a torch.profiler pass over a few steps (profiling.py);
5. inference (static shapes, module scope): eval mode without grad, the subject's weights compiled
   afresh in the same mode, interleaved with the eager reference like the training block;
6. eval accuracy with the subject's weights, run by the uncompiled module (no eval recompile).

What is compiled (`compile_scope`):
- `module`: `torch.compile(model)`: the forward and, through AOTAutograd, its backward; the loss,
  `backward()` call and optimizer step stay eager Python. fullgraph=True.
- `forward` / `backward`: the same AOTAutograd graph pair, but Inductor compiles only one side; the
  other side's graph runs its aten ops one by one, eagerly. This is what "compile only the forward"
  can mean in training: a compiled forward always has an AOTAutograd backward graph (the autograd
  engine cannot differentiate through a fused kernel), so leaving the backward "uncompiled" means
  running that traced graph without Inductor, not running the original eager backward.
- `step`: the whole step compiled as one function: forward, loss, `backward()` (captured by compiled
  autograd) and the optimizer step (compiled optimizer; the learning rate is a tensor so that it
  never forces a recompile); Dynamo breaks the graph where it must, and the breaks are counted.
- `graph-break`: `module`, on a model whose pooling goes through `torch.nonzero` (data-dependent
  shape), compiled with fullgraph=False: what one graph break costs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import resource
import statistics
import time
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
from compile_study.profiling import profile_steps
from compile_study.timing import synchronize, time_call, time_steps

COMPILE_MODES = ("eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
COMPILE_SCOPES = ("module", "forward", "backward", "step", "graph-break")
ONE_SIDE_SCOPES = ("forward", "backward")  # a custom Inductor backend: default mode only
PRECISIONS = ("fp32", "tf32", "bf16")
RECORD_SCHEMA_VERSION = 3
INFERENCE_WARMUP = 3  # eval-mode calls before the inference block (compilation happens there)


@dataclass(frozen=True)
class RunConfig:
    compile_mode: str  # eager | default | reduce-overhead | max-autotune[-no-cudagraphs]
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
    compile_scope: str = "module"  # module | forward | backward | step | graph-break (module docstring)
    phase_steps: int = 20  # steps per model in the forward/backward/optimizer split
    profile_steps: int = 3  # steps under torch.profiler (after as many unprofiled ones)

    def __post_init__(self) -> None:
        if self.compile_mode not in COMPILE_MODES:
            raise ValueError(f"compile_mode {self.compile_mode!r} is not one of {COMPILE_MODES}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r} is not one of {PRECISIONS}")
        if self.compile_scope not in COMPILE_SCOPES:
            raise ValueError(f"compile_scope {self.compile_scope!r} is not one of {COMPILE_SCOPES}")
        if self.compile_scope in ONE_SIDE_SCOPES and self.compile_mode not in ("eager", "default"):
            raise ValueError(f"compile_scope {self.compile_scope!r} runs with compile_mode default only")


def set_precision(precision: str) -> None:
    """Global matmul precision: TF32 only for `tf32` (bf16 is autocast, see `autocast`)."""
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    torch.backends.cudnn.allow_tf32 = precision == "tf32"


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _mode(compile_mode: str) -> str | None:
    return None if compile_mode == "default" else compile_mode


def inductor_one_side(side: str):
    """A torch.compile backend: Inductor compiles only the `side` ("forward" or "backward") of AOTAutograd's
    graph pair; the other graph runs its aten ops one by one, uncompiled."""
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    def inner_compile(gm, example_inputs, **kwargs):
        if kwargs.get("is_backward", False) != (side == "backward"):
            return make_boxed_func(gm.forward)  # left uncompiled
        return compile_fx_inner(gm, example_inputs, **kwargs)

    return functools.partial(compile_fx, inner_compile=inner_compile)


def compile_model(model: torch.nn.Module, compile_mode: str, scope: str = "module", **kwargs) -> torch.nn.Module:
    """The one switch: eager, or the module compiled (how much of it: `scope`, see the module docstring)."""
    if compile_mode == "eager":
        return model
    if scope in ONE_SIDE_SCOPES:
        # AOTAutograd's cache does not key on the inner compiler: with it on, a cache filled by a `module`
        # compile of the same graph hands back both sides compiled (seen on torch 2.13)
        torch._functorch.config.enable_autograd_cache = False
        return torch.compile(model, backend=inductor_one_side(scope), fullgraph=True, **kwargs)
    # fullgraph=True: a graph break fails loudly instead of silently running part of it eagerly;
    # the graph-break variant is the one place where breaks are allowed (and counted)
    return torch.compile(model, mode=_mode(compile_mode), fullgraph=scope != "graph-break", **kwargs)


def forward_loss(model, batch_ids: torch.Tensor, labels: torch.Tensor, precision: str, device: torch.device):
    """Logits under the run's precision, cross-entropy in fp32 (filler rows, label -100, are ignored)."""
    with autocast(precision, device):
        logits = model(batch_ids)  # [B, n_classes]
    return F.cross_entropy(logits.float(), labels)


def make_compiled_step(model, optimizer, compile_mode: str, precision: str, device: torch.device, **kwargs):
    """Scope `step`: forward, loss, backward (compiled autograd) and optimizer step as one compiled function."""
    torch._dynamo.config.compiled_autograd = True  # applies to backward() calls inside compiled code only

    def train_step(ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss = forward_loss(model, ids, labels, precision, device)
        loss.backward()
        optimizer.step()
        return loss.detach()

    compiled = torch.compile(train_step, mode=_mode(compile_mode), fullgraph=False, **kwargs)

    def step(batch: Batch, mark=None) -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()
        loss = compiled(batch.ids, batch.labels)
        optimizer.zero_grad(set_to_none=True)  # outside: Dynamo does not trace Optimizer.zero_grad
        return loss

    return step


def make_step(model, optimizer, precision: str, device: torch.device, eager_model=None, watch: CompileWatch | None = None):
    """One training step on a batch; returns the detached loss (no host sync).

    `step(batch, mark)` calls `mark()` after the loss and after backward(), for the phase split.
    """

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

    def step(batch: Batch, mark=None) -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()  # CUDA graphs (reduce-overhead) need it; a no-op otherwise
        loss = forward_loss(forward, batch.ids, batch.labels, precision, device)
        if mark:
            mark()
        loss.backward()
        if mark:
            mark()
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


def new_model(cfg: ModelConfig, run: RunConfig, device: torch.device, tensor_lr: bool = False):
    """Model and AdamW; a tensor learning rate (compiled optimizer) never forces a recompile when it changes."""
    torch.manual_seed(run.seed)
    model = TextClassifier(cfg).to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=torch.tensor(run.lr) if tensor_lr else run.lr)


def build_step(model, optimizer, cfg: RunConfig, device: torch.device, watch: CompileWatch):
    """The measured model's step for the run's compile mode and scope."""
    kwargs = compile_kwargs(cfg.shape_regime)
    if cfg.compile_mode != "eager" and cfg.compile_scope == "step":
        return make_compiled_step(model, optimizer, cfg.compile_mode, cfg.precision, device, **kwargs)
    compiled = compile_model(model, cfg.compile_mode, cfg.compile_scope, **kwargs)
    return make_step(compiled, optimizer, cfg.precision, device, eager_model=model, watch=watch)


def phase_split(steps: dict, batches: list[Batch], n: int, device: torch.device) -> dict:
    """Median ms of forward+loss, backward and optimizer step, per named step function (n steps each).

    On CUDA the phases are spans between events on the device timeline; on the CPU, host wall time.
    """
    out = {}
    for name, step in steps.items():
        spans = []
        for i in range(n):
            if device.type == "cuda":
                marks = [torch.cuda.Event(enable_timing=True)]
                marks[0].record()

                def mark(marks=marks) -> None:
                    marks.append(torch.cuda.Event(enable_timing=True))
                    marks[-1].record()

                step(batches[i % len(batches)], mark)
                mark()
                spans.append(marks)
            else:
                stamps = [time.perf_counter()]
                step(batches[i % len(batches)], lambda: stamps.append(time.perf_counter()))
                stamps.append(time.perf_counter())
                spans.append(stamps)
        synchronize(device)
        if device.type == "cuda":
            ms = [[a.elapsed_time(b) for a, b in zip(m, m[1:])] for m in spans]
        else:
            ms = [[1e3 * (b - a) for a, b in zip(m, m[1:])] for m in spans]
        ms = [m for m in ms if len(m) == 3]  # a step compiled whole calls no `mark`: no phases
        out[name] = {
            phase: (statistics.median(m[k] for m in ms) if ms else None)
            for k, phase in enumerate(("forward_ms", "backward_ms", "optimizer_ms"))
        }
    return out


def inference_block(model, ref_model, cfg: RunConfig, batches: list[Batch], device: torch.device) -> dict:
    """Eval mode, no grad: the subject's weights compiled afresh in the run's mode vs the eager reference.

    Run after the training compile report, so its compilation is not counted with training's.
    """
    subject = compile_model(model, cfg.compile_mode)
    model.eval()
    ref_model.eval()

    def infer(m):
        def call(batch: Batch) -> torch.Tensor:
            torch.compiler.cudagraph_mark_step_begin()
            with torch.no_grad(), autocast(cfg.precision, device):
                return m(batch.ids)

        return call

    warmup_s = [time_call(lambda i=i: infer(subject)(batches[i % len(batches)]), device) for i in range(INFERENCE_WARMUP)]
    for i in range(INFERENCE_WARMUP):
        infer(ref_model)(batches[i % len(batches)])
    outputs = {"subject": [], "reference": []}
    block = interleaved_block({"subject": infer(subject), "reference": infer(ref_model)}, batches, cfg.timed_steps,
                              cfg.interleave_chunk, device, outputs)
    model.train()
    ref_model.train()
    subject_ms, ref_ms = statistics.median(block["times"]["subject"]), statistics.median(block["times"]["reference"])
    return {
        "inference_step_ms": subject_ms,
        "inference_reference_step_ms": ref_ms,
        "inference_speedup": ref_ms / subject_ms,
        "inference_warmup_s": sum(warmup_s),
    }


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


def interleaved_block(steps: dict, batches: list[Batch] | dict, n: int, chunk: int, device, losses: dict) -> dict:
    """n steps of each named step function, alternating in chunks, over the same batches (or, given a dict,
    each name over its own batches)."""
    times = {name: [] for name in steps}
    walls = dict.fromkeys(steps, 0.0)
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        for name, step in steps.items():
            own = batches[name] if isinstance(batches, dict) else batches
            ms, wall = time_steps(lambda i: losses[name].append(step(own[(start + i) % len(own)])), k, device)
            times[name] += ms
            walls[name] += wall
    return {"times": times, "walls": walls}


def check_finite(losses: list[torch.Tensor], who: str) -> torch.Tensor:
    values = torch.stack(losses).float().cpu()
    if not torch.isfinite(values).all():
        raise FloatingPointError(f"non-finite loss of the {who} at step {int((~torch.isfinite(values)).nonzero()[0])}")
    return values


def measure(model_cfg: ModelConfig, cfg: RunConfig, data_dir: str | Path, device: torch.device,
            trace_path: str | Path | None = None) -> dict:
    """Train one configuration and return its metrics (raises on failure); the profiler trace goes to trace_path."""
    ids, lengths, labels = load_split(data_dir, "train")
    batches = make_batches(ids, lengths, labels, cfg.batch_size, cfg.shape_regime, cfg.seed, device, cfg.max_epoch_steps)
    if cfg.shape_regime == "dynamic-marked":
        mark_dynamic_lengths(batches)
    e_ids, e_lengths, e_labels = load_split(data_dir, "eval")
    eval_batches = make_batches(e_ids, e_lengths, e_labels, 256, "static", None, device, drop_last=False)

    set_precision(cfg.precision)
    torch._dynamo.reset()  # a no-op in a fresh process; keeps in-process callers (tests) independent
    torch._dynamo.config.recompile_limit = cfg.recompile_limit
    subject_cfg = dataclasses.replace(model_cfg, pooling="nonzero") if cfg.compile_scope == "graph-break" else model_cfg
    compiled_step = cfg.compile_mode != "eager" and cfg.compile_scope == "step"
    model, optimizer = new_model(subject_cfg, cfg, device, tensor_lr=compiled_step)
    watch = CompileWatch().start()
    step = build_step(model, optimizer, cfg, device, watch)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    losses: dict[str, list[torch.Tensor]] = {"subject": [], "reference": []}
    epochs = run_epochs(step, batches, min(cfg.warmup_steps, len(batches)), device, watch, losses["subject"])
    peak = peak_memory_bytes(device)  # the subject alone: the reference model does not exist yet

    ref_model, ref_optimizer = new_model(model_cfg, cfg, device)
    ref_step = make_step(ref_model, ref_optimizer, cfg.precision, device)
    for b in batches[: cfg.warmup_steps]:  # untimed: the reference's own first steps
        ref_step(b)
    participants, own_batches = {"subject": step, "reference": ref_step}, {"subject": batches, "reference": batches}
    if cfg.shape_regime != "static":
        # a common yardstick for every regime: the eager reference on statically padded batches, same process
        own_batches["static_reference"] = make_batches(ids, lengths, labels, cfg.batch_size, "static", cfg.seed, device,
                                                       cfg.max_epoch_steps)
        participants["static_reference"] = ref_step
        losses["static_reference"] = []
    block = interleaved_block(participants, own_batches, cfg.timed_steps, cfg.interleave_chunk, device, losses)
    compile_report = watch.report()  # after the block: eager fallbacks there count too
    # Evidence after the timing: a failure here is noted in the record, the timings above are kept.
    errors: dict[str, str] = {}
    phases = guarded("phases", errors, lambda: phase_split({"subject": step, "reference": ref_step}, batches,
                                                           cfg.phase_steps, device)) or {"subject": {}, "reference": {}}
    profile = {name: guarded(f"{name}_profile", errors, lambda s=s, t=t: profile_steps(
                   lambda i: s(batches[i % len(batches)]), cfg.profile_steps, device, t))
               for name, s, t in (("subject", step, trace_path), ("reference", ref_step, None))}
    inference = {}
    if cfg.shape_regime == "static" and cfg.compile_scope == "module":
        inference = guarded("inference", errors, lambda: inference_block(model, ref_model, cfg, batches, device)) or {}

    loss_values = check_finite(losses["subject"], "measured model")
    check_finite(losses["reference"], "eager reference")
    static_name = "static_reference" if "static_reference" in block["walls"] else "reference"
    static_timed = [own_batches[static_name][i % len(own_batches[static_name])] for i in range(cfg.timed_steps)]
    static_tokens_per_s = sum(b.real_tokens for b in static_timed) / block["walls"][static_name]
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
        # real tokens/s over the eager reference's on static batches in the same process: the regime's gain
        # from padding and compilation together, on one yardstick for every regime
        "eager_static_real_tokens_per_s": static_tokens_per_s,
        "gain_over_eager_static": sum(b.real_tokens for b in timed) / wall / static_tokens_per_s,
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
        **inference,
        **{f"{k}": v for k, v in phases["subject"].items()},
        **{f"reference_{k}": v for k, v in phases["reference"].items()},
        "evidence_errors": errors,
        "profile": profile["subject"],
        "reference_profile": profile["reference"],
        "step_times_ms": step_ms,
        "reference_step_times_ms": ref_ms,
    }


def guarded(name: str, errors: dict, fn):
    """fn() or, if it raises, None with the error noted under `name` (for measurements after the timed block)."""
    try:
        return fn()
    except Exception as exc:
        errors[name] = f"{classify_failure(exc)}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
        return None


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
    model_cfg: ModelConfig, cfg: RunConfig, data_dir: str | Path, device: str | None = None, threads: int | None = None,
    trace_path: str | Path | None = None,
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
        record["metrics"] = measure(model_cfg, cfg, data_dir, dev, trace_path)
    except Exception as exc:  # recorded as this configuration's outcome; the study goes on
        record["status"] = classify_failure(exc)
        # the first lines carry the cause (a violated guard, an OOM size); the rest is advice
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()][:3]
        record["error"] = f"{type(exc).__name__}: {' / '.join(lines)}"[:600]
        record["traceback"] = traceback.format_exc(limit=8)
    record["env"] |= compiler_settings(dev)
    return record
