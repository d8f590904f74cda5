"""The loss and the training step every run shares: eager is this code; compilation wraps parts of it.

    python -m pytest tests/test_train.py -q

- `forward_loss` / `packed_loss` / `batch_loss`: logits under the run's precision (bf16 autocast), the
  cross-entropy in fp32, for padded batches, packed batches, or either.
- `step_of`: one optimizer step around any loss function; `make_batch_step` is it for padded or packed
  batches (measure/compile.py builds the compiled variants, measure/step_graph.py the CUDA-graph one).
- `NotApplicable`: a configuration that cannot run on this device (recorded, not failed).
"""

from __future__ import annotations

import contextlib
import sys

import torch
from torch.nn import functional as F

from compile_study.core.dataset.packing import PackedBatch


class NotApplicable(RuntimeError):
    """The configuration cannot run on this device; recorded as status `not_applicable`, not as a failure."""


def set_precision(precision: str) -> None:
    """Global matmul precision: TF32 only for `tf32` (bf16 is autocast, see `autocast`)."""
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    torch.backends.cudnn.allow_tf32 = precision == "tf32"


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def forward_loss(model, batch_ids: torch.Tensor, labels: torch.Tensor, precision: str, device: torch.device):
    """Logits under the run's precision, cross-entropy in fp32 (filler rows, label -100, are ignored)."""
    with autocast(precision, device):
        logits = model(batch_ids)  # [B, n_classes]
    return F.cross_entropy(logits.float(), labels)


def packed_loss(model, batch: PackedBatch, precision: str, device: torch.device, attention: str = "flex"):
    """Logits per sequence slot under the run's precision, cross-entropy in fp32 over real sequences."""
    with autocast(precision, device):
        logits = model(batch.ids, batch.doc, batch.pos, attention)  # [B, L, n_classes]
    return F.cross_entropy(logits.float().flatten(0, 1), batch.labels.flatten())


def batch_loss(model, batch, precision: str, device: torch.device, attention: str = "flex") -> torch.Tensor:
    """The study's loss for a padded `Batch` (`forward_loss`) or a `PackedBatch` (`packed_loss`)."""
    if isinstance(batch, PackedBatch):
        return packed_loss(model, batch, precision, device, attention)
    return forward_loss(model, batch.ids, batch.labels, precision, device)


def make_batch_step(model, optimizer, precision: str, device: torch.device, attention: str = "flex"):
    """An ordinary (eager or compiled-module) step for padded or packed batches, like `measure.compile.make_step`:
    `step(batch, mark)` calls `mark()` after the loss and after backward()."""

    return step_of(lambda batch: batch_loss(model, batch, precision, device, attention), optimizer)


def step_of(loss_of, optimizer):
    """`step(batch, mark=None) -> loss`: loss_of(batch), backward(), the optimizer step; the detached loss (no
    host sync). `mark()` is called after the loss and after backward(), for the phase split."""

    def step(batch, mark=None) -> torch.Tensor:
        mark_step_begin()
        loss = loss_of(batch)
        if mark:
            mark()
        loss.backward()
        if mark:
            mark()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def mark_step_begin() -> None:
    """torch.compiler.cudagraph_mark_step_begin() where CUDA graph trees exist in this process, else nothing.

    CUDA graphs (reduce-overhead) need the mark before each step. Elsewhere it does nothing but import
    torch._inductor on its first call: seconds in a new process (more where the installed packages carry no
    bytecode cache, as on the study's H200 image), which would land in an eager run's first step and be read
    as eager's warm-up excess, the very amount compile latency subtracts.
    """
    if "torch._inductor.cudagraph_trees" in sys.modules:
        torch.compiler.cudagraph_mark_step_begin()


def reset_compiler() -> None:
    """torch._dynamo.reset() where this process has compiled something (in-process callers such as the tests stay
    independent of each other). A new process has nothing to reset, and on a CUDA host the call imports Inductor's
    CUDA graph trees: about 3 s of a run's process on the H200 image, outside every part the run books."""
    if torch._dynamo.utils.counters:
        torch._dynamo.reset()
