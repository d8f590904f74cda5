"""The timing protocol: which steps are timed, in what order, against what.

    python -m pytest tests/test_train.py -q

- `run_epochs`: epoch 1 of the measured model (the "subject"), its first steps timed one by one
  (`warm_up`: compilation happens there), the rest as a block; then epoch 2 over the same batches.
- `interleaved_block`: the steady state. The subject and an eager reference trained on the same batches
  in the same process alternate in chunks, and which of them opens a chunk alternates too (subject in
  even chunks, reference in odd), so neither host drift (clocks, load) nor the slot right after a
  switch favours one side. The in-process ratio, reference over subject, is the run's speedup; for an eager
  subject it is the A/A control.
- `phase_split` and `inference_block`: evidence outside the timed block (forward/backward/optimizer
  split; eval mode without grad).
- `eval_accuracy`: the subject's weights, run by the uncompiled module (no eval recompile).

On CUDA steps are timed with one event pair each and one synchronisation per block (timing.py).
"""

from __future__ import annotations

import resource
import statistics
import time

import torch

from compile_study.core.dataset.batches import Batch
from compile_study.core.record import RunConfig
from compile_study.measure.compile import compile_model
from compile_study.measure.compile_stats import CompileWatch, fx_cache
from compile_study.measure.steps import autocast, mark_step_begin
from compile_study.measure.timing import synchronize, time_call, time_steps

INFERENCE_WARMUP = 3  # eval-mode calls before the inference block (compilation happens there)
PHASES = ("forward_ms", "backward_ms", "optimizer_ms")


def _counted(step, batches: list[Batch], watch: CompileWatch, losses: list):
    def run(i: int) -> None:
        losses.append(step(batches[i]))
        watch.after_step(i)

    return run


def warm_up(step, batches: list[Batch], warmup: int, device, watch: CompileWatch, losses: list) -> list[float]:
    """Epoch 1's first `warmup` steps, timed one by one (a compiled run compiles, or loads its warm cache, here)."""
    run = _counted(step, batches, watch, losses)
    return [time_call(lambda i=i: run(i), device) for i in range(warmup)]


def run_epochs(step, batches: list[Batch], warmup: int, device, watch: CompileWatch, losses: list,
               warmup_step_s: list[float] | None = None) -> dict:
    """Epoch 1 (its warm-up steps, unless `warmup_step_s` says they ran already, then the rest as a block) and
    epoch 2."""
    if warmup_step_s is None:
        warmup_step_s = warm_up(step, batches, warmup, device, watch, losses)
    run = _counted(step, batches, watch, losses)
    rest_ms, rest_wall = time_steps(lambda i: run(warmup + i), len(batches) - warmup, device)
    _, epoch2_s = time_steps(lambda i: losses.append(step(batches[i])), len(batches), device)
    return {
        "warmup_step_s": warmup_step_s,
        "first_step_s": warmup_step_s[0],
        "epoch1_s": sum(warmup_step_s) + rest_wall,
        "epoch2_s": epoch2_s,
        "epoch1_step_ms": [1e3 * s for s in warmup_step_s] + rest_ms,
    }


def chunk_order(names: list[str], chunk: int) -> list[str]:
    """The participants' order in one chunk: as given in even chunks, the first two swapped in odd ones."""
    order = list(names)
    if chunk % 2 and len(order) > 1:
        order[0], order[1] = order[1], order[0]
    return order


def interleaved_block(steps: dict, batches: list[Batch] | dict, n: int, chunk: int, device, losses: dict) -> dict:
    """n steps of each named step function, alternating in chunks, over the same batches (or, given a dict,
    each name over its own batches) -> per-step ms and block wall seconds per name, and each chunk's opener."""
    times = {name: [] for name in steps}
    walls = dict.fromkeys(steps, 0.0)
    chunk_first = []
    for index, start in enumerate(range(0, n, chunk)):
        k = min(chunk, n - start)
        order = chunk_order(list(steps), index)
        chunk_first.append(order[0])
        for name in order:
            own = batches[name] if isinstance(batches, dict) else batches
            step = steps[name]
            ms, wall = time_steps(lambda i: losses[name].append(step(own[(start + i) % len(own)])), k, device)
            times[name] += ms
            walls[name] += wall
    return {"times": times, "walls": walls, "chunk_first": chunk_first}


def _stamped_step(step, batch: Batch, device: torch.device) -> list:
    """Run one step, stamping its start, the end of the loss, the end of backward() and its end."""
    if device.type == "cuda":  # events on the device timeline: no sync inside the step

        def stamp():
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
    else:
        stamp = time.perf_counter
    stamps = [stamp()]
    step(batch, lambda: stamps.append(stamp()))
    stamps.append(stamp())
    return stamps


def _spans_ms(stamps: list, device: torch.device) -> list[float]:
    if device.type == "cuda":
        return [a.elapsed_time(b) for a, b in zip(stamps, stamps[1:])]
    return [1e3 * (b - a) for a, b in zip(stamps, stamps[1:])]


def phase_split(steps: dict, batches: list[Batch], n: int, device: torch.device) -> dict:
    """Median ms of forward+loss, backward and optimizer step, per named step function (n steps each).

    On CUDA the phases are spans between events on the device timeline; on the CPU, host wall time.
    A step compiled whole (scopes step, step-graph) calls no `mark`: its phases are None.
    """
    out = {}
    for name, step in steps.items():
        stamps = [_stamped_step(step, batches[i % len(batches)], device) for i in range(n)]
        synchronize(device)
        spans = [s for s in (_spans_ms(st, device) for st in stamps) if len(s) == len(PHASES)]
        out[name] = {phase: (statistics.median(s[k] for s in spans) if spans else None)
                     for k, phase in enumerate(PHASES)}
    return out


def _infer(model, precision: str, device: torch.device):
    def call(batch: Batch) -> torch.Tensor:
        mark_step_begin()
        with torch.no_grad(), autocast(precision, device):
            return model(batch.ids)

    return call


def inference_subject(model, cfg: RunConfig, device: torch.device):
    """The subject's weights compiled afresh in the run's mode, called in eval mode without grad."""
    return _infer(compile_model(model, cfg.compile_mode), cfg.precision, device)


def warm_inference(subject, model, batches: list[Batch], device: torch.device) -> dict:
    """`model` to eval mode, then INFERENCE_WARMUP calls of `subject` (inference_subject of it; its compile happens
    in the first) -> their seconds and Inductor's FX graph cache hits and misses meanwhile (no miss: the compiled
    graph came from the cache, as the first cold compile left it: measure/cold.py)."""
    model.eval()
    hits, misses = fx_cache()
    warmup_s = [time_call(lambda i=i: subject(batches[i % len(batches)]), device) for i in range(INFERENCE_WARMUP)]
    return {"inference_warmup_s": sum(warmup_s), "inference_fx_cache_hits": fx_cache()[0] - hits,
            "inference_fx_cache_misses": fx_cache()[1] - misses}


def inference_block(model, ref_model, cfg: RunConfig, batches: list[Batch], device: torch.device) -> dict:
    """Eval mode, no grad: the subject's weights compiled afresh in the run's mode vs the eager reference.

    Run after the training compile report, so its compilation is not counted with training's.
    """
    subject = inference_subject(model, cfg, device)
    reference = _infer(ref_model, cfg.precision, device)
    ref_model.eval()
    warm = warm_inference(subject, model, batches, device)
    for i in range(INFERENCE_WARMUP):
        reference(batches[i % len(batches)])
    block = interleaved_block({"subject": subject, "reference": reference}, batches, cfg.timed_steps,
                              cfg.interleave_chunk, device, {"subject": [], "reference": []})
    model.train()
    ref_model.train()
    subject_ms, ref_ms = statistics.median(block["times"]["subject"]), statistics.median(block["times"]["reference"])
    return warm | {
        "inference_step_ms": subject_ms,
        "inference_reference_step_ms": ref_ms,
        "inference_speedup": ref_ms / subject_ms,
    }


@torch.no_grad()
def eval_accuracy(model, batches: list[Batch], precision: str, device: torch.device) -> float:
    model.eval()
    correct = total = 0
    for b in batches:
        with torch.no_grad(), autocast(precision, device):  # no autograd graph: evaluation only
            pred = model(b.ids).argmax(-1)
        correct += int((pred == b.labels).sum())
        total += b.labels.numel()
    model.train()
    return correct / total


def check_finite(losses: list[torch.Tensor], who: str) -> torch.Tensor:
    values = torch.stack(losses).float().cpu()
    if not torch.isfinite(values).all():
        raise FloatingPointError(f"non-finite loss of the {who} at step {int((~torch.isfinite(values)).nonzero()[0])}")
    return values


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB
