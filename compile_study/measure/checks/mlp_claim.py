"""Checking a repeated claim: "the classic two-layer MLP example is 1.2-1.5x faster compiled".

The example: `nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))`, batch 64,
`SGD(lr=0.01)`, `MSELoss()`, the module wrapped in `torch.compile(model)` (default mode), and
`timeit.timeit(train_step, number=100)` for eager and for compiled, with no device synchronisation.

Why that timing misleads on a GPU: CUDA kernel launches are asynchronous. `train_step` returns as
soon as the host has queued its kernels, so `timeit` measures how fast the host *queues* work, not
how fast the device *does* it. Whatever is still queued when the 100th call returns (as much as
the launch queue holds: about a thousand kernels, tens of steps here) is never counted, or is
charged to whatever is timed next (the compiled `timeit` starts behind the eager one's backlog).
And unless the compiled model was called once beforehand, its number includes compilation (seconds),
which swamps 100 steps of a small model. On the CPU every op runs to completion before
the call returns, so only the compilation part applies there.

`run` reports, per batch size, in one process:
- "as published, cold": fresh models, `timeit` with no warm-up and no sync (compilation inside the
  compiled number). The compile runs under an empty Inductor cache, so "cold" means the same on every
  run; the first batch size also pays the process's one-off compiler start-up, as a first script would;
- "as published, warm": the same models after one untimed call each, `timeit`, still no sync (on a
  GPU: how fast the host queues the steps);
- "measured properly": the same models, warm-up steps, then `repeats` rounds of one eager and
  one compiled block of `steps` steps each, the order swapped every round so host drift favours
  neither, each block timed between device synchronisations; per-step ms, medians over rounds;
- the compile time on its own: the synchronised first call of a fresh compiled model (empty cache).
Between the phases (never inside one) the device is drained, so one phase's queued work does not
spill into the next; `*_tail_s` is how long that drain took: device work the `timeit` never saw.
Ratios are eager time / compiled time (> 1: compiled faster). fp32 with TF32 off throughout.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
import timeit
from collections.abc import Callable
from functools import partial

import torch
from torch import nn

from compile_study.core.calls.env import collect
from compile_study.measure.timing import synchronize, time_call

CLAIM = "the classic two-layer MLP example is 1.2-1.5x faster compiled (timeit, 100 steps, no device sync)"
IN_FEATURES, HIDDEN = 1024, 4096
LR = 0.01
WARMUP_STEPS = 10


class Trainer:
    """One model (eager or compiled), its optimizer and loss; `step()` is the example's train step."""

    def __init__(self, device: torch.device, seed: int, compiled: bool) -> None:
        torch.manual_seed(seed)
        self.model = nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, IN_FEATURES)).to(device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=LR)
        self.loss_fn = nn.MSELoss()
        if compiled:
            torch._dynamo.reset()
        self.forward = torch.compile(self.model) if compiled else self.model

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.opt.zero_grad()
        loss = self.loss_fn(self.forward(x), y)
        loss.backward()
        self.opt.step()
        return loss  # never .item(): that would synchronise


def fresh_inductor_cache() -> contextlib.AbstractContextManager:
    """An empty, temporary Inductor/Triton cache for the duration (named fresh_inductor_cache before torch 2.8)."""
    from torch._inductor import utils

    return (getattr(utils, "fresh_cache", None) or utils.fresh_inductor_cache)()


def make_inputs(batch_size: int, device: torch.device, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(batch_size, IN_FEATURES, generator=gen).to(device)
    y = torch.randn(batch_size, IN_FEATURES, generator=gen).to(device)
    synchronize(device)
    return x, y


def drain(device: torch.device) -> float:
    """Seconds until the device has finished what was queued (0 on the CPU)."""
    t0 = time.perf_counter()
    synchronize(device)
    return time.perf_counter() - t0


def published_pair(eager: Callable[[], object], compiled: Callable[[], object], steps: int) -> tuple[float, float]:
    """The example's timing: timeit eager, then timeit compiled, nothing synchronised in between."""
    eager_s = timeit.timeit(eager, number=steps)
    compiled_s = timeit.timeit(compiled, number=steps)
    return eager_s, compiled_s


def block_ms(step: Callable[[], object], steps: int, device: torch.device) -> float:
    """Per-step ms of `steps` back-to-back steps, the device drained before and after the block."""

    def block() -> None:
        for _ in range(steps):
            step()

    return 1e3 * time_call(block, device) / steps


def alternating_rounds(steps_by_name: dict, steps: int, repeats: int, device: torch.device) -> dict:
    """After warm-up, `repeats` rounds of one synchronised block each, the order alternating between rounds."""
    for step in steps_by_name.values():
        for _ in range(WARMUP_STEPS):
            step()
    rounds: dict[str, list] = {"order": [], "eager_ms": [], "compiled_ms": []}
    for r in range(repeats):
        order = ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager")
        for name in order:
            rounds[f"{name}_ms"].append(block_ms(steps_by_name[name], steps, device))
        rounds["order"].append("-".join(order))
    return rounds


def timed_pairs(eager: Trainer, compiled: Trainer, x, y, steps: int, repeats: int, device: torch.device,
                proper_steps: int | None = None):
    """The published timer on the first (cold) and a later (warm) block of `steps` -> their fields, then the
    proper alternating rounds of `proper_steps` (default `steps`) each."""
    e_step, c_step = partial(eager.step, x, y), partial(compiled.step, x, y)
    cold_eager_s, cold_compiled_s = published_pair(e_step, c_step, steps)  # the first compiled block compiles
    cold_tail_s = drain(device)
    e_step()  # one untimed call each (compilation is already done)
    c_step()
    drain(device)
    warm_eager_s, warm_compiled_s = published_pair(e_step, c_step, steps)
    warm_tail_s = drain(device)
    rounds = alternating_rounds({"eager": e_step, "compiled": c_step}, proper_steps or steps, repeats, device)
    published = {
        "cold_eager_s": cold_eager_s,
        "cold_compiled_s": cold_compiled_s,
        "cold_ratio": cold_eager_s / cold_compiled_s,
        "cold_tail_s": cold_tail_s,
        "warm_eager_s": warm_eager_s,
        "warm_compiled_s": warm_compiled_s,
        "warm_ratio": warm_eager_s / warm_compiled_s,
        "warm_tail_s": warm_tail_s,
    }
    return published, rounds


def measure(batch_size: int, device: torch.device, steps: int, repeats: int, seed: int,
            proper_steps: int | None = None) -> dict:
    x, y = make_inputs(batch_size, device, seed)
    eager = Trainer(device, seed, compiled=False)
    synchronize(device)
    with fresh_inductor_cache():  # the compiled model lives (and may load kernels) only while its cache does
        published, rounds = timed_pairs(eager, Trainer(device, seed, compiled=True), x, y, steps, repeats, device,
                                        proper_steps)
    del eager
    proper_eager_ms = statistics.median(rounds["eager_ms"])
    proper_compiled_ms = statistics.median(rounds["compiled_ms"])
    with fresh_inductor_cache():
        compile_s = time_call(partial(Trainer(device, seed, compiled=True).step, x, y), device)

    return {
        "batch_size": batch_size,
        "status": "ok",
        **published,
        "proper_eager_ms": proper_eager_ms,
        "proper_compiled_ms": proper_compiled_ms,
        "proper_speedup": proper_eager_ms / proper_compiled_ms,
        "proper_rounds": rounds,
        "compile_s": compile_s,
    }


def failure_row(batch_size: int, exc: BaseException) -> dict:
    oom = isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()
    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    status = "oom" if oom else "error"
    return {"batch_size": batch_size, "status": status, "error": f"{type(exc).__name__}: {first}"[:300]}


def release(device: torch.device) -> None:
    torch._dynamo.reset()
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def precision_settings(device: torch.device) -> dict:
    return {
        "dtype": "float32",
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32 if device.type == "cuda" else None,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32 if device.type == "cuda" else None,
    }


def run(batch_sizes: list[int], device: torch.device, steps: int = 100, repeats: int = 5, seed: int = 0,
        proper_steps: int | None = None) -> dict:
    """Measure the claim at each batch size -> a JSON-serialisable dict (see the module docstring)."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # fp32, TF32 off
    try:
        setup = {
            "model": f"nn.Sequential(nn.Linear({IN_FEATURES}, {HIDDEN}), nn.ReLU(), "
            f"nn.Linear({HIDDEN}, {IN_FEATURES}))",
            "optimizer": f"torch.optim.SGD(lr={LR})",
            "loss": "nn.MSELoss()",
            "compile": "torch.compile(model) (default mode); the optimizer step is eager in both",
            "inputs": f"x, y = randn(batch_size, {IN_FEATURES}), created once on the device (seeded)",
            "steps": steps,
            "repeats": repeats,
            "proper_steps": proper_steps or steps,
            "warmup_steps": WARMUP_STEPS,
            "seed": seed,
            "precision": precision_settings(device),
            "inductor_cache": "empty (temporary) for the cold phase and for compile_s",
            "published_timer": f"timeit.timeit(train_step, number={steps}), no device synchronisation",
            "proper_timer": "perf_counter around each block of steps, device synchronised before and after",
        }
        rows = []
        for bs in batch_sizes:
            try:
                rows.append(measure(bs, device, steps, repeats, seed, proper_steps))
            except Exception as exc:  # this batch size's outcome; the others still run
                rows.append(failure_row(bs, exc))
            finally:
                release(device)
            print({k: v for k, v in rows[-1].items() if k != "proper_rounds"}, flush=True)
    finally:
        torch.set_float32_matmul_precision(previous)
    return {"claim": CLAIM, "setup": setup, "device": str(device), "torch": torch.__version__, "rows": rows}


def job(batch_sizes: list, device: str, steps: int, repeats: int, seed: int, host: dict,
        proper_steps: int | None = None) -> dict:
    """Rule mlp_claim's process (measure/jobs.py): `run` on the device, with the environment it ran in."""
    dev = torch.device(device)
    result = run([int(bs) for bs in batch_sizes], dev, steps=int(steps), repeats=int(repeats), seed=int(seed),
                 proper_steps=int(proper_steps) if proper_steps else None)
    result["env"] = collect(dev, host)
    print([(row["batch_size"], row["status"], row.get("proper_speedup")) for row in result["rows"]])
    return result
