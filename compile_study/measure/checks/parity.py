"""Does the compiled model train like the eager one? Losses and final accuracy, dropout off.

    snakemake --cores all results/cuda/parity/bf16/default.json

Dropout off and the same seed make eager and compiled runs see the same initial weights and the
same batches; what remains is floating-point reordering by the compiler, which grows with the
number of steps and with lower precision. Tolerances (relative loss difference over the first
`loss_steps` steps) are per precision, below; the final eval accuracy after the same training must
agree within ±1 point.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from compile_study.core.dataset.batches import evaluation_batches, make_batches
from compile_study.core.dataset.data import load_split
from compile_study.core.models.model import ModelConfig, model_config_for
from compile_study.core.record import RunConfig
from compile_study.measure.compile import compile_model, make_step, new_model
from compile_study.measure.protocol import eval_accuracy
from compile_study.measure.steps import reset_compiler, set_precision

# Max |compiled - eager| / |eager| loss over the first steps, per precision.
LOSS_RTOL = {"fp32": 1e-3, "tf32": 1e-2, "bf16": 5e-2}
ACCURACY_POINTS = 1.0


def train_losses(model_cfg, run: RunConfig, batches, eval_batches, device, train_steps: int) -> tuple[list[float], float]:
    reset_compiler()
    set_precision(run.precision)
    model, optimizer = new_model(model_cfg, run, device)
    step = make_step(compile_model(model, run.compile_mode), optimizer, run.precision, device)
    losses = [step(batches[i % len(batches)]) for i in range(train_steps)]
    return [float(x) for x in torch.stack(losses).cpu()], eval_accuracy(model, eval_batches, run.precision, device)


def check(model_cfg: ModelConfig, compile_mode: str, precision: str, data_dir: str | Path, device: torch.device,
          batch_size: int, loss_steps: int, train_steps: int | None) -> dict:
    model_cfg = dataclasses.replace(model_cfg, dropout=0.0)
    ids, lengths, labels = load_split(data_dir, "train")
    batches = make_batches(ids, lengths, labels, batch_size, "static", 0, device)
    e = load_split(data_dir, "eval")
    eval_batches = evaluation_batches(*e, 256, device)
    n = train_steps or len(batches)  # default: one epoch
    runs = {}
    for mode in ("eager", compile_mode):
        cfg = RunConfig(mode, batch_size, "static", precision, 0)
        runs[mode] = train_losses(model_cfg, cfg, batches, eval_batches, device, max(n, loss_steps))
    (eager_losses, eager_acc), (comp_losses, comp_acc) = runs["eager"], runs[compile_mode]
    k = loss_steps
    rel = max(abs(c - e) / max(abs(e), 1e-12) for c, e in zip(comp_losses[:k], eager_losses[:k]))
    delta_points = 100 * (comp_acc - eager_acc)
    return {
        "compile_mode": compile_mode, "precision": precision, "batch_size": batch_size,
        "loss_steps": k, "train_steps": max(n, loss_steps),
        "max_rel_loss_diff": rel, "loss_rtol": LOSS_RTOL[precision], "loss_ok": rel <= LOSS_RTOL[precision],
        "eager_accuracy": eager_acc, "compiled_accuracy": comp_acc, "accuracy_delta_points": delta_points,
        "accuracy_ok": abs(delta_points) <= ACCURACY_POINTS,
        "eager_losses": eager_losses[:k], "compiled_losses": comp_losses[:k],
    }


def job(data_dir: str, model: dict, compile_mode: str, precision: str, device: str, settings: dict) -> dict:
    """Rule parity's process (measure/jobs.py): the check with the study's model, on its data."""
    result = check(model_config_for(data_dir, model), compile_mode, precision, data_dir, torch.device(device),
                   **settings)
    print({k: v for k, v in result.items() if not k.endswith("_losses")})
    return result
