"""The compile switch and the training steps it applies to: one code path, compilation a setting of it.

    python -m pytest tests/test_scopes.py -q    # every scope on the CPU, tiny model

Eager is the reference path; `compile_mode` switches compilation on, `compile_scope` says how much is
compiled (paper/templates/sections/terms.j2 says it in one line each):
- `module`: `torch.compile(model)`: the forward and, through AOTAutograd, its backward; the loss, the
  `backward()` call and the optimizer step stay eager Python. fullgraph=True, so a graph break fails loudly.
- `fused-adamw`: `module` with `AdamW(fused=True)` (in eager mode too: what fusing the optimizer alone gives).
- `regional`: each repeated block compiled in place (`block.compile()`, `core/models/plug.py` `repeated_blocks`: the
  built-in model's encoder layers, a BERT's); embeddings, pooling, head, loss and optimizer stay eager. The
  identical blocks share one compiled region: on torch 2.13 (CPU, the tiny 4-layer model) one Dynamo frame and
  graph for the 4 layers (23 captured calls; the whole module's one graph has 112), one lazily compiled backward,
  2 FX-graph compiles (forward, backward): Dynamo inlines nn modules, their parameters are the graph's inputs,
  so layer 1's guards hold for layers 2-4 and they reuse its code (tests/test_regional.py). Packed rows go
  through the same layers; a model without such a block, and the dynamic-marked regime (its mark is on the ids,
  not on what the blocks take), are `NotApplicable`.
- `forward` / `backward`: the same AOTAutograd graph pair, Inductor compiling one side only; the other
  side's graph runs its aten ops one by one. A compiled forward always has an AOTAutograd backward graph
  (autograd cannot differentiate through a fused kernel), so an "uncompiled" side means that traced graph
  replayed without Inductor, not the original eager code: read these scopes against `aot-eager`.
- `aot-eager`: the graph pair with no Inductor on either side (backend "aot_eager"): graph replay alone.
- `step`: forward, loss, `backward()` (compiled autograd) and the optimizer step compiled as one function
  (compiled optimizer; the learning rate a tensor so that it never forces a recompile).
- `step-graph`: the compiled model, loss, backward and fused capturable AdamW captured as one CUDA graph
  (compile_study.measure.step_graph); on any other device the run is `NotApplicable`.
- `eager-step-graph` (compile mode eager only): step-graph's control, the same capture and protocol with the
  eager model (nothing compiled), so that step-graph's speedup splits into the graph's and the compiler's.
- `graph-break`: `module` on a model whose pooling goes through `torch.nonzero` (a data-dependent shape),
  compiled with fullgraph=False: what one graph break costs. Its eager reference pools the same way.
"""

from __future__ import annotations

import dataclasses
import functools

import torch
from torch._dynamo.exc import FailOnRecompileLimitHit

from compile_study.core.dataset.batches import Batch
from compile_study.core.models.model import ModelConfig
from compile_study.core.models.plug import build_model, model_class, plug_key, repeated_blocks
from compile_study.core.record import RunConfig
from compile_study.core.vocab import AUTOTUNE_MODES, GRAPH_SCOPES, plug_not_applicable, scope_not_applicable
from compile_study.measure.compile_stats import CompileWatch
from compile_study.measure.step_graph import make_graphed_step
from compile_study.measure.steps import NotApplicable, forward_loss, make_batch_step, mark_step_begin, step_of

ONE_SIDE_SCOPES = ("forward", "backward")  # Inductor on one side of the graph pair (a custom backend)


# max-autotune's search, bounded to what the study asks of it, the GEMMs' kernels: Triton templates against cuBLAS,
# benchmarked per shape (`max_autotune_gemm` in place of the mode's `max_autotune`, which also searches every
# pointwise and reduction kernel's launch configs), with no coordinate-descent tuning and no benchmarking of each
# template's epilogue fusions. On H200s (torch 2.11, batch 512, bf16; their hosts compile up to 40% apart) a cold
# compile took over 280 s unbounded, 195 s without coordinate descent and epilogue benchmarking, and 145-148 s with
# the GEMMs alone (both modes; turning decompose-K off as well took 168 s on a third host; 208 s on the slower host
# of reference/h200-full-2026-12-02, 150 s of it benchmarking 15 GEMMs); the step of the GEMM-only search was
# 7.96 ms with CUDA graphs, where the earlier bound's had been 8.28 ms on another host. Every record of these modes
# keeps the bound (env `autotune_search`). The two modes search the same GEMMs: a sub-grid can pay one search for
# both (config `gemm_search: shared`, core/config/grid.py).
AUTOTUNE_BOUND = {"max_autotune": False, "max_autotune_gemm": True, "coordinate_descent_tuning": False,
                  "benchmark_epilogue_fusion": False}


def mode_kwargs(compile_mode: str) -> dict:
    """torch.compile's mode= for a compile mode; the max-autotune modes as their options with the search bounded."""
    if compile_mode == "default":
        return {}
    if compile_mode in AUTOTUNE_MODES:
        return {"options": torch._inductor.list_mode_options(compile_mode) | AUTOTUNE_BOUND}
    return {"mode": compile_mode}


def autotune_search(compile_mode: str) -> str | None:
    """The bound on a max-autotune mode's search as its record keeps it (None for the other modes)."""
    if compile_mode not in AUTOTUNE_MODES:
        return None
    return " ".join(f"{k}={v}" for k, v in sorted(AUTOTUNE_BOUND.items()))


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
    """The one switch: eager, or the module compiled as `scope` says (the module docstring); kwargs: `dynamic`."""
    if compile_mode == "eager":
        return model
    if scope == "step":
        raise ValueError("scope 'step' compiles the whole step, not the module: use make_compiled_step")
    if scope in ONE_SIDE_SCOPES:
        # AOTAutograd's cache does not key on the inner compiler: with it on, a cache filled by a `module`
        # compile of the same graph hands back both sides compiled (seen on torch 2.13)
        torch._functorch.config.enable_autograd_cache = False
        return torch.compile(model, backend=inductor_one_side(scope), fullgraph=True, **kwargs)
    if scope == "aot-eager":
        return torch.compile(model, backend="aot_eager", fullgraph=True, **kwargs)
    if scope == "regional":
        return compile_blocks(model, compile_mode, **kwargs)
    # fullgraph=True: a graph break fails loudly instead of silently running part of it eagerly;
    # the graph-break variant is the one place where breaks are allowed (and counted)
    return torch.compile(model, fullgraph=scope != "graph-break", **mode_kwargs(compile_mode), **kwargs)


def compile_blocks(model: torch.nn.Module, compile_mode: str, **kwargs) -> torch.nn.Module:
    """Scope `regional`: the model, each of its repeated blocks compiled in place (the rest of it eager)."""
    blocks = repeated_blocks(model)
    if blocks is None:
        raise NotApplicable(f"no repeated block: {model_class(model)} holds no nn.ModuleList of two or more "
                            "modules of one class to compile one by one")
    for block in blocks:  # one torch.compile each; the identical blocks share its cache entry (module docstring)
        block.compile(fullgraph=True, **mode_kwargs(compile_mode), **kwargs)
    return model


def make_step(model, optimizer, precision: str, device: torch.device, eager_model=None,
              watch: CompileWatch | None = None):
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
            # error instead, so do what Dynamo would have done, and count it. The stance runs compiled code
            # eagerly: regional compiles the blocks of `eager_model` itself.
            watch.fallback_steps += 1
            with torch.compiler.set_stance("force_eager"):
                return eager_model(ids)

    return step_of(lambda batch: forward_loss(forward, batch.ids, batch.labels, precision, device), optimizer)


def make_compiled_step(model, optimizer, compile_mode: str, precision: str, device: torch.device, **kwargs):
    """Scope `step`: forward, loss, backward (compiled autograd) and optimizer step as one compiled function."""
    torch._dynamo.config.compiled_autograd = True  # applies to backward() calls inside compiled code only

    def train_step(ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss = forward_loss(model, ids, labels, precision, device)
        loss.backward()
        optimizer.step()
        return loss.detach()

    compiled = torch.compile(train_step, fullgraph=False, **mode_kwargs(compile_mode), **kwargs)

    def step(batch: Batch, mark=None) -> torch.Tensor:  # one compiled call: no phases to mark
        mark_step_begin()
        loss = compiled(batch.ids, batch.labels)
        optimizer.zero_grad(set_to_none=True)  # outside: Dynamo does not trace Optimizer.zero_grad
        return loss

    return step


def make_graph_step(model, optimizer, cfg: RunConfig, device: torch.device):
    """Scopes `step-graph` and `eager-step-graph`: the model's whole training step (compiled in the run's mode;
    eager: not at all) replayed from one CUDA graph per shape.

    Each shape is captured when first seen, inside the timed warm-up steps, so that capture and
    compilation count as the run's compile cost as they do for every other scope."""
    if device.type != "cuda":
        raise NotApplicable(f"{cfg.compile_scope} captures the whole step as a CUDA graph; there are none on "
                            f"{device.type}")
    compiled = compile_model(model, cfg.compile_mode, "step-graph", **cfg.regime.compile_kwargs())
    return make_graphed_step(compiled, optimizer, cfg.precision, device)


def check_applicable(model_cfg: ModelConfig, run: RunConfig) -> None:
    """A scope that cannot measure the run's regime, and the scopes and regimes that need the built-in model's
    own paths on a plugged model, are not applicable (vocab)."""
    why = scope_not_applicable(run.compile_scope, run.shape_regime)
    if why:
        raise NotApplicable(why)
    why = plug_key(model_cfg) and plug_not_applicable(run.compile_scope, run.shape_regime)
    if why:
        raise NotApplicable(f"{why} ({plug_key(model_cfg)})")


def scope_model_config(model_cfg: ModelConfig, scope: str) -> ModelConfig:
    """The model a scope trains, subject and eager reference alike: graph-break pools through torch.nonzero."""
    return dataclasses.replace(model_cfg, pooling="nonzero") if scope == "graph-break" else model_cfg


def new_model(cfg: ModelConfig, run: RunConfig, device: torch.device, fused: bool = False,
              tensor_lr: bool = False, capturable: bool = False):
    """Model (seeded: every side starts from the same weights; built-in or plugged, core/models/plug.py) and AdamW.

    fused: one kernel for all parameters; tensor_lr: the learning rate a tensor, so that a compiled optimizer
    never recompiles when it changes; capturable (with both): state and lr on the device, for a CUDA graph.
    """
    torch.manual_seed(run.seed)
    model = build_model(cfg).to(device)
    lr = torch.tensor(run.lr, device=device if capturable else None) if tensor_lr else run.lr
    return model, torch.optim.AdamW(model.parameters(), lr=lr, fused=fused or None, capturable=capturable)


def subject_model(model_cfg: ModelConfig, run: RunConfig, device: torch.device):
    """The measured model and its optimizer, as the run's scope needs them."""
    compiled = run.compile_mode != "eager"
    scope = run.compile_scope
    graph = scope in GRAPH_SCOPES
    return new_model(scope_model_config(model_cfg, scope), run, device, fused=scope == "fused-adamw" or graph,
                     tensor_lr=(compiled and scope == "step") or graph, capturable=graph)


def build_step(model, optimizer, cfg: RunConfig, device: torch.device, watch: CompileWatch):
    """The measured model's step for the run's compile mode and scope."""
    kwargs = cfg.regime.compile_kwargs()
    if cfg.compile_mode != "eager" and cfg.compile_scope == "step":
        return make_compiled_step(model, optimizer, cfg.compile_mode, cfg.precision, device, **kwargs)
    if cfg.compile_scope in GRAPH_SCOPES:
        return make_graph_step(model, optimizer, cfg, device)
    compiled = compile_model(model, cfg.compile_mode, cfg.compile_scope, **kwargs)
    if cfg.regime.kind == "packed":
        attention = packed_attention(device, compiled=cfg.compile_mode != "eager")
        return make_batch_step(compiled, optimizer, cfg.precision, device, attention)
    return make_step(compiled, optimizer, cfg.precision, device, eager_model=model, watch=watch)


def packed_attention(device: torch.device, compiled: bool) -> str:
    """How packed rows keep their sequences apart: FlexAttention with a document block mask where it is
    compiled on CUDA; elsewhere SDPA with the same mask as a dense [B, 1, L, L] boolean (FlexAttention has no
    CPU backward, and run eagerly it is an unfused reference implementation)."""
    return "flex" if device.type == "cuda" and compiled else "sdpa"
