"""The whole training step in one CUDA graph, and the optimizer variants it is compared with.

`make_graphed_step` captures forward (the model eager, as scope eager-step-graph, step-graph's control, has it, or
compiled without CUDA graphs of its own: default or max-autotune-no-cudagraphs), loss, `backward()` and a fused capturable AdamW step (its
learning rate a device tensor) with `torch.cuda.graph`, as in PyTorch's whole-network capture recipe:
a few warm-up steps on a side stream (where compilation and the optimizer's lazy state creation
happen), then the capture; each step copies the batch into the graph's static inputs and replays it.
The host launches one graph per step instead of hundreds of kernels, and runs no Python of the
model, autograd or optimizer at all.

- One graph per distinct batch shape (bucketed batches: one per bucket width), captured the first time
  that shape is seen (or ahead, with `prepare`); the graphs share one memory pool, which is safe
  because they replay one at a time on one stream and each writes every intermediate it reads.
- Warm-up steps train on the batch; the parameters and optimizer state are restored afterwards, so
  the graphed step follows the same trajectory as an eager step from the same start (parity test).
- The returned loss is a copy of the graph's static loss (one small kernel): the next replay
  overwrites the static one. `.grad` after a step belongs to the graph; do not read it.
- A graphed step cannot be split into phases: it ignores `mark`.
- Not on the CPU (there are no CUDA graphs): `NotApplicable`, which a record writer records as
  status "not_applicable" rather than a failure.
"""

from __future__ import annotations

import contextlib
from dataclasses import fields, replace

import torch

from compile_study.core.vocab import SCOPE_MODES
from compile_study.measure.steps import NotApplicable, batch_loss

GRAPH_COMPILE_MODES = ("eager", *SCOPE_MODES["step-graph"])  # modes that do not capture graphs themselves
WARMUP_STEPS = 3  # the recipe's side-stream warm-up (compilation happens in the first)


def make_optimizer(model: torch.nn.Module, lr: float, device: torch.device, fused: bool = False,
                   capturable: bool = False) -> torch.optim.AdamW:
    """AdamW as the study builds it (fused=False: torch's choice, foreach on CUDA), or fused (one kernel
    for all parameters); capturable keeps its step count and learning rate on the device, so a CUDA graph
    can replay it (the learning rate is then a device tensor: changing it needs no recapture)."""
    if capturable and not fused:
        raise ValueError("a capturable optimizer here is the fused one")
    lr_value = torch.tensor(lr, device=device) if capturable else lr
    return torch.optim.AdamW(model.parameters(), lr=lr_value, fused=fused or None, capturable=capturable)


def tensor_fields(batch) -> dict[str, torch.Tensor]:
    """The batch's device tensors: the graph's inputs (the rest of a batch is host-side bookkeeping)."""
    return {f.name: getattr(batch, f.name) for f in fields(batch) if isinstance(getattr(batch, f.name), torch.Tensor)}


@contextlib.contextmanager
def training_state_kept(model: torch.nn.Module, optimizer: torch.optim.Optimizer):
    """Undo whatever the body does to parameters and optimizer state (in place: addresses stay the same,
    which a CUDA graph captured later relies on). State first created inside is reset to zeros, Adam's
    initial state (step 0, zero moments)."""
    params = [p.detach().clone() for p in model.parameters()]
    state = {p: {k: v.clone() for k, v in s.items() if torch.is_tensor(v)} for p, s in optimizer.state.items()}
    yield
    with torch.no_grad():
        for p, saved in zip(model.parameters(), params):
            p.copy_(saved)
        for p, s in optimizer.state.items():
            for k, v in s.items():
                if torch.is_tensor(v) and p in state:
                    v.copy_(state[p][k])
                elif torch.is_tensor(v):
                    v.zero_()


class GraphedStep:
    """`step(batch, mark=None) -> loss`: the whole training step replayed from a CUDA graph (module docstring)."""

    def __init__(self, model, optimizer, precision: str, device: torch.device, attention: str = "flex",
                 warmup_steps: int = WARMUP_STEPS):
        if device.type != "cuda":
            raise NotApplicable(f"the whole-step CUDA graph needs a CUDA device, not {device.type}")
        if not all(g.get("capturable") for g in optimizer.param_groups):
            raise ValueError("the whole-step graph needs a capturable optimizer (make_optimizer(..., capturable=True))")
        self.model, self.optimizer, self.device = model, optimizer, device
        self.loss = lambda m, b: batch_loss(m, b, precision, device, attention)
        self.warmup_steps = warmup_steps
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs: dict[tuple, tuple] = {}  # input shapes -> (graph, static batch, static loss)

    @staticmethod
    def key(batch) -> tuple:
        return tuple((name, tuple(t.shape), t.dtype) for name, t in tensor_fields(batch).items())

    def _train_once(self, batch) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(self.model, batch)
        loss.backward()
        self.optimizer.step()
        return loss

    def capture(self, batch) -> tuple:
        """Warm up on a side stream (state restored after), then capture one step on `batch`'s shapes."""
        static = replace(batch, **{k: v.clone() for k, v in tensor_fields(batch).items()})
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with training_state_kept(self.model, self.optimizer):
            with torch.cuda.stream(side):
                for _ in range(self.warmup_steps):
                    self._train_once(static)
            torch.cuda.current_stream(self.device).wait_stream(side)
        # grads set to None: the captured backward allocates them in the graph's pool and overwrites
        # them on every replay (nothing accumulates across steps)
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            static_loss = self._train_once(static).detach()
        self.graphs[self.key(batch)] = entry = (graph, static, static_loss)
        return entry

    def prepare(self, batches) -> int:
        """Capture a graph for every distinct shape among `batches` ahead of time -> graphs held."""
        for b in batches:
            if self.key(b) not in self.graphs:
                self.capture(b)
        return len(self.graphs)

    def __call__(self, batch, mark=None) -> torch.Tensor:
        graph, static, static_loss = self.graphs.get(self.key(batch)) or self.capture(batch)
        for name, t in tensor_fields(batch).items():
            getattr(static, name).copy_(t, non_blocking=True)
        graph.replay()
        return static_loss.clone()


def make_graphed_step(model, optimizer, precision: str, device: torch.device, batches=(), attention: str = "flex",
                      warmup_steps: int = WARMUP_STEPS) -> GraphedStep:
    """The whole-step graph for `model` (eager or compiled in a mode of GRAPH_COMPILE_MODES) and a capturable
    optimizer; graphs for the shapes among `batches` are captured now, any other shape on first sight."""
    step = GraphedStep(model, optimizer, precision, device, attention, warmup_steps)
    step.prepare(batches)
    return step
