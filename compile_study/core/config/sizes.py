"""Sizes checked before any job: a model, batch or data set that cannot fit the machine is named with its
parameter count and the memory it needs, instead of climbing memory for minutes and dying in a job.

The needs are lower bounds (what must fit, not all that a run uses): a study that passes may still run out
of memory in a job (recorded as `oom`), but one that fails here could never have run. Torch-free: the
parameter count is the formula of core/models/model.py's TextClassifier (tests/test_sizes.py holds them equal).
"""

from __future__ import annotations

import os
import subprocess

import yaml

from compile_study.core.config import grid
from compile_study.core.dataset.corpus import DataError
from compile_study.core.dataset.sources import split_labels
from compile_study.core.dataset.splits import split_rows
from compile_study.core.io import human

FP32 = 4  # bytes: weights, gradients, AdamW's moments and activations are fp32 (bf16 autocasts matmuls only)
TRAIN_BYTES = 4 * FP32  # a parameter in training: weights, gradients and AdamW's two moments
ID_BYTES = 4  # token ids are prepared as int32 arrays (core/dataset/data.py)
MODEL_KEYS = ("n_layers", "d_model", "d_ff", "max_len")  # vocab_size is left out: the tokenizer may give fewer


def n_params(model: dict, vocab_size: int = 0) -> int:
    """Parameters of the classifier: embeddings, positions, n_layers encoder layers, final norm and head."""
    d, ff = model["d_model"], model["d_ff"]
    layer = (3 * d * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d) + 2 * (2 * d)  # qkv, proj, ff, 2 norms
    return vocab_size * d + model["max_len"] * d + model["n_layers"] * layer + 2 * d + (d * 4 + 4)


def train_bytes(model: dict, batch_size: int) -> int:
    """At least: the training state of every parameter and one [batch, max_len, d_model] activation a layer."""
    activations = batch_size * model["max_len"] * model["d_model"] * model["n_layers"] * FP32
    return n_params(model) * TRAIN_BYTES + activations


def host_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def gpu_memory() -> int | None:
    """The smallest GPU's memory, from nvidia-smi (no CUDA context in the Snakemake process); None if unknown."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        return min(int(float(x)) for x in out.split()) * 2**20
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _culprit(need, values: dict, defaults: dict) -> str:
    """The key whose default lowers the need most: the one to name and to fix."""
    return min(values, key=lambda k: need(values | {k: defaults[k]}))


def model_problems(model: dict, defaults: dict, host: int) -> list[tuple[str, str]]:
    """(key, message) where the model's weights alone exceed the host's memory, in which the model is built."""
    weights = n_params(model) * FP32
    if weights <= host:
        return []
    key = _culprit(lambda m: n_params(m) * FP32, {k: model[k] for k in MODEL_KEYS}, defaults)
    return [(key, f"model.{key}: {model[key]:,} gives the model at least {n_params(model):,} parameters: "
                  f"{human(weights)} of fp32 weights, more than this host's {human(host)} of memory, where the "
                  f"model is built; use a smaller model.{key} (default {defaults[key]:,})")]


def batch_problems(model: dict, batch_size: int, defaults: dict, memory: int, where: str
                   ) -> list[tuple[str, str]]:
    """(key, message) where a training step at `batch_size` cannot fit `memory` (the device's, named by `where`);
    the key is `batch_size` or the model key whose default lowers the need most."""
    need = train_bytes(model, batch_size)
    if need <= memory:
        return []
    values = {k: model[k] for k in MODEL_KEYS} | {"batch_size": batch_size}
    key = _culprit(lambda v: train_bytes(v, v["batch_size"]), values, defaults)
    named = "batch size" if key == "batch_size" else f"model.{key}"
    step = "a training step" if key == "batch_size" else f"a training step at batch {batch_size:,}"
    return [(key, f"{named} {values[key]:,}: {step} needs at least {human(need)} "
                  f"({n_params(model):,} parameters at {TRAIN_BYTES} bytes each for weights, gradients and AdamW's "
                  f"moments, and a batch x max_len x d_model activation a layer), more than {where}'s "
                  f"{human(memory)}; use a smaller {named} (default {defaults[key]:,})")]


def data_problem(rows: int, max_len: int, what: str, host: int) -> str | None:
    """The token ids of `rows` rows padded to max_len, an array data preparation builds in host memory."""
    need = rows * max_len * ID_BYTES
    if need <= host:
        return None
    return (f"model.max_len: {max_len:,} makes the token ids of {what} ({rows:,} rows x {max_len:,} x {ID_BYTES} "
            f"bytes) {human(need)}, more than this host's {human(host)} of memory; use a smaller model.max_len")


def problems(config: dict, devices: list[str] | None = None) -> list[tuple[tuple, str]]:
    """(config key path, message) for a model, batch or data set that cannot fit the machine; devices: the
    grids to check (default all)."""
    model, host, defaults = config["model"], host_memory(), _defaults()
    out = [] if plugged(model) else [(("model", key), text) for key, text in model_problems(model, defaults, host)]
    if out:  # the batches' and the data's needs would only repeat it
        return out
    rows, what = _train_rows_at_least(config["data"])
    text = data_problem(rows, model["max_len"], what, host)
    out += [(("model", "max_len"), text)] if text else []
    for device, grids in {} if plugged(model) else config["grids"].items():
        if devices is not None and device not in devices:
            continue
        memory, where = (host, "this host") if device == "cpu" else (gpu_memory(), "this host's smallest GPU")
        if memory is None:  # a GPU grid planned on a host without one: its jobs find out
            continue
        i, bs = max(((i, b) for i, g in enumerate(grids) for b in g["batch_size"]), key=lambda ib: ib[1])
        for key, text in batch_problems(model, bs, defaults, memory, where):
            path = ("grids", device, i, "batch_size") if key == "batch_size" else ("model", key)
            out.append((path, f"grids.{device}[{i}]: {text}"))
    return out


def plugged(model: dict) -> bool:
    """A model the study did not build (model.factory or model.hf_config, where the schema has them): the
    parameter count above is the built-in model's, so only the data's size (model.max_len) is checked."""
    return model.get("factory") is not None or model.get("hf_config") is not None


def _defaults() -> dict:
    """The schema's defaults of the model's sizes and of a sub-grid's batch size (what a fix goes back to)."""
    schema = yaml.safe_load(grid.SCHEMA.read_text())
    model = {k: v["default"] for k, v in schema["properties"]["model"]["properties"].items() if "default" in v}
    return model | {"batch_size": max(schema["definitions"]["grid"]["properties"]["batch_size"]["default"])}


def train_rows(data: dict) -> tuple[int | None, str]:
    """The train split's rows where they are known before preparation (the synthetic corpus, test.csv alone to be
    split), before data.max_train_rows, and what they are; None where the hub or train.csv decides."""
    try:
        found = split_labels(data)
    except DataError:  # config_check.data_errors names it
        found = None
    if found is None:
        return None, "the train split"
    labels, what = found
    return split_rows(labels, data["eval_fraction"])[0], f"the train split of {what}"


def _train_rows_at_least(data: dict) -> tuple[int, str]:
    """A lower bound on the train split's rows used (1 where the hub or train.csv decides)."""
    rows, what = train_rows(data)
    if rows is None:
        return 1, "one train row"
    return min(rows, data.get("max_train_rows") or rows), what


def train_rows_at_most(data: dict) -> tuple[int | None, str]:
    """An upper bound on the train split's rows used, and what it is (None: unknown before preparation)."""
    rows, what = train_rows(data)
    cap = data.get("max_train_rows")
    if cap and (rows is None or cap < rows):
        return cap, "the train split (data.max_train_rows)"
    return rows, what


def _cells(runs, batch_size: int) -> str:
    """The configurations of `runs` at one batch size, as the study names them."""
    found = sorted({(k.shape_regime, k.precision, k.compile_mode, k.compile_scope) for k in runs
                    if k.batch_size == batch_size})
    return ", ".join(f"{r} {p} {m}" + ("" if s == "module" else f" ({s})") for r, p, m, s in found)


def fill_problems(config: dict, devices: list[str] | None = None) -> list[tuple[tuple, str]]:
    """(config key path, message) for a batch size the train split can never fill: no batch of such a run could
    be made (static and dynamic batches drop a partial one, bucketed and packed ones would be filler alone), and
    so for the batch of a parity check that has no cell of its own. Evaluation takes every row in batches of its
    own size, so any eval split that is not empty (splits.check_split) is read whole."""
    rows, what = train_rows_at_most(config["data"])
    if rows is None:
        return []
    out = []
    for device, grids in config["grids"].items():
        if devices is not None and device not in devices:
            continue
        for i, g in enumerate(grids):
            runs = grid.expand([g])
            for bs in sorted(b for b in g["batch_size"] if b > rows and _cells(runs, b)):
                out.append((("grids", device, i, "batch_size"),
                            f"grids.{device}[{i}] ({g['name']}): batch_size {bs:,} is more than the {rows:,} rows "
                            f"of {what}: no batch of {_cells(runs, bs)} at batch {bs:,} can be made; use a batch "
                            f"size of at most {rows:,}, or more rows"))
        out += _parity_fill(config, device, grid.expand(grids), rows, what)
    return out


def _parity_fill(config: dict, device: str, runs, rows: int, what: str) -> list[tuple[tuple, str]]:
    """The parity check of a compiled mode without a static module cell runs at parity.<device>.batch_size."""
    bs = (config.get("parity") or {}).get(device, {}).get("batch_size")
    cells = {(k.precision, k.compile_mode) for k in runs if k.compile_scope == "module" and k.shape_regime == "static"}
    alone = [f"{m} {p}" for p, m in grid.parity_pairs(runs) if (p, m) not in cells]
    if bs is None or bs <= rows or not alone:
        return []
    return [(("parity", device, "batch_size"),
             f"parity.{device}.batch_size: {bs:,} is more than the {rows:,} rows of {what}: the parity check of "
             f"{', '.join(alone)} (no static module cell in the grid to run at) could make no batch; use a batch "
             f"size of at most {rows:,}")]
