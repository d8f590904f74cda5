"""Is the configured model usable, and what is it? Run before a study's first timed run (rule check_model).

    python -m compile_study model config.yaml configs/hf-bert.yaml [--device cuda] [--data resources/data]

`check_plug` builds the model where it costs nothing (meta or fake tensors) to count its parameters and see
whether training it fits the device, then on the device itself, seeded, where one forward and backward on
two rows (one of them half padding) must give logits [2, n_classes]; then it counts the model's FLOPs
(core/models/flops.py). Every failure is a `PlugError` whose message starts with the config key that set the model.
The facts it returns (class, parameters, FLOPs per token, the plug) go into the study's `model.json`, and the
same facts into every run record (measure/run.py).

The study sizes the model's embedding to the vocabulary its tokenizer learned from the data (facts.json), which
a small corpus leaves well below config `data.vocab_size` (the tokenizer's limit): a plugged BERT on the
synthetic data has 271 tokens and 3.3 M parameters, not 8,192 and 5.4 M. The `model` command therefore counts
with the prepared data's vocabulary where it finds it (`study_vocab`), and says which vocabulary it used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

from compile_study.core.errors import count
from compile_study.core.models.flops import step_flops
from compile_study.core.models.model import PAD_ID, ModelConfig, for_device, model_config_for
from compile_study.core.models.plug import (
    BYTES_PER_PARAM,
    CHECK_ROWS,
    PlugError,
    build_model,
    describe,
    model_class,
    n_params,
    plug_key,
)


def key_of(cfg: ModelConfig) -> str:
    """The key a problem with this model is reported under: the plug's, or `model` for the built-in one."""
    return plug_key(cfg) or "model"


def capacity_bytes(device: torch.device) -> tuple[int, str]:
    """Memory of the device a run trains on, and its name: the GPU's, or the host's RAM for the CPU."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return int(props.total_memory), props.name
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this host's memory"


def check_fits(cfg: ModelConfig, params: int, capacity: int, where: str) -> None:
    """Weights, gradients and AdamW's state alone (BYTES_PER_PARAM a parameter) must fit, before any activation."""
    need = BYTES_PER_PARAM * params
    if need > capacity:
        raise PlugError(f"{key_of(cfg)}: the model has {params / 1e6:,.1f} M parameters; training holds about "
                        f"{need / 2**30:,.1f} GiB for them before any activation (fp32 weights, gradients and "
                        f"AdamW's two moments, {BYTES_PER_PARAM} bytes a parameter), more than the "
                        f"{capacity / 2**30:,.1f} GiB of {where}")


def check_ids(cfg: ModelConfig, device: torch.device) -> torch.Tensor:
    """CHECK_ROWS rows of max_len tokens, the second half padding in the last row: ids [2, max_len]."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, max(2, cfg.vocab_size), (CHECK_ROWS, cfg.max_len), generator=g)
    ids[-1, max(1, cfg.max_len // 2):] = PAD_ID
    return ids.to(device)


def check_output(cfg: ModelConfig, model: torch.nn.Module, device: torch.device) -> None:
    """One forward and backward on check_ids: logits [CHECK_ROWS, n_classes], floating point, differentiable."""
    key = key_of(cfg)
    try:
        out = model(check_ids(cfg, device))
    except torch.OutOfMemoryError as exc:
        raise PlugError(f"{key}: one forward pass on {CHECK_ROWS} rows runs out of memory on {device} ({exc})")
    except PlugError:
        raise
    except Exception as exc:
        raise PlugError(f"{key}: the model cannot be called as model(ids, attention_mask) on ids "
                        f"[{CHECK_ROWS}, {cfg.max_len}]: {type(exc).__name__}: {str(exc).strip()[:300]}") from exc
    if not torch.is_tensor(out):
        raise PlugError(f"{key}: the model returned a {type(out).__name__}; the study needs logits, a tensor "
                        f"[batch, n_classes] (or an object with .logits)")
    if tuple(out.shape) != (CHECK_ROWS, cfg.n_classes) or not out.is_floating_point():
        raise PlugError(f"{key}: the model returned logits of shape {list(out.shape)} ({out.dtype}) for "
                        f"{CHECK_ROWS} sequences; the study needs floating-point logits [{CHECK_ROWS}, "
                        f"{cfg.n_classes}] (batch, n_classes)")
    if not out.requires_grad:
        raise PlugError(f"{key}: the model's logits do not depend on any trainable parameter")
    out.float().sum().backward()


def _params_free(cfg: ModelConfig) -> int:
    """Parameters counted on the meta device (no memory), or None where the model cannot be built there."""
    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            return n_params(build_model(cfg))
    except PlugError:
        raise
    except Exception:
        return None


def check_plug(cfg: ModelConfig, device: torch.device, flops_dir: str | None = None) -> dict:
    """Every check of the configured model on `device` -> its facts (raises PlugError naming the key); the FLOP
    count is kept in `flops_dir` (the study's data directory), where the study's runs read it (core/models/flops.py)."""
    capacity, where = capacity_bytes(device)
    params = _params_free(cfg)
    if params is not None:
        check_fits(cfg, params, capacity, where)
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(0)
            model = build_model(cfg).to(device)
    except torch.OutOfMemoryError as exc:
        raise PlugError(f"{key_of(cfg)}: the model does not fit {where} ({exc})") from exc
    check_fits(cfg, n_params(model), capacity, where)
    check_output(cfg, model, device)
    return facts(cfg, model, flops_dir)


def facts(cfg: ModelConfig, model: torch.nn.Module, flops_dir: str | None = None) -> dict:
    """What the paper names of a model: class, parameters, training FLOPs per token, the plug."""
    flops = step_flops(cfg, flops_dir)
    return {"plug": describe(cfg), "key": plug_key(cfg), "class": model_class(model), "params": n_params(model),
            "train_flops_per_token": flops.per_token(), "max_len": cfg.max_len, "flops": flops.describe(),
            "config": cfg.to_dict()}


def job(data_dir: str, model: dict, device: str) -> dict:
    """Rule check_model, in the launcher's fresh process: {"facts": ...}, or {"error": the PlugError's message}."""
    cfg = model_config_for(data_dir, model)
    try:
        return {"facts": check_plug(cfg, torch.device(device), data_dir)}
    except PlugError as exc:
        return {"error": str(exc)}


DATA_DIR = "resources/data"  # where the workflow prepares the data (rule prepare_data)
LIMIT = ("config data.vocab_size, the tokenizer's limit: the study trains with the vocabulary its tokenizer learns "
         "from the data, which a small corpus leaves smaller (and the parameters with it); prepare the data "
         f"(snakemake --cores 1 {DATA_DIR}/facts.json) or pass --data for the study's own count")


def other_data(facts: dict, config: dict) -> str | None:
    """Why prepared data (its facts.json) cannot be what this config trains on; None where it can be."""
    data, max_len = config["data"], config["model"].get("max_len", ModelConfig.max_len)
    if facts.get("max_len") != max_len:
        return f"it was prepared for max_len {facts.get('max_len')}, the config's model.max_len is {max_len}"
    if facts["vocab_size"] > data["vocab_size"]:
        return f"its vocabulary of {facts['vocab_size']:,} exceeds the config's data.vocab_size {data['vocab_size']:,}"
    if data.get("source", "auto") != "auto" and facts.get("source") != data["source"]:
        return f"its source is {facts.get('source')}, the config's data.source is {data['source']}"
    return None


def study_vocab(config: dict, places: list[str | Path], explicit: bool = False) -> tuple[int, str]:
    """The vocabulary the study trains with and where it comes from: the facts.json of the first of `places`
    that holds prepared data this config can train on, else config data.vocab_size (LIMIT says what that is).
    With `explicit` (--data), data that is missing or cannot be this config's is an error."""
    for place in places:
        path = Path(place) / "facts.json"
        if not path.is_file():
            if explicit:
                sys.exit(f"--data {place}: no facts.json there (the prepared data: {DATA_DIR}, or a study directory)")
            continue
        facts = json.loads(path.read_text())
        problem = other_data(facts, config)
        if problem is None:
            return facts["vocab_size"], f"{path}: the prepared data ({facts.get('description', 'no description')})"
        if explicit:
            sys.exit(f"--data {place}: {problem}")
    return config["data"]["vocab_size"], LIMIT


def main(argv: list[str] | None = None) -> None:
    from compile_study.core.config.grid import load_config
    from compile_study.core.layout import study_root

    parser = argparse.ArgumentParser(description="Check the configured model and print its facts.")
    parser.add_argument("configs", nargs="+", help="config.yaml, then overlays")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--data", help="the prepared data (a directory with facts.json: resources/data or a study's "
                        "directory); default: the first found beside the first config, in the study's directory for "
                        f"this config and device, in {DATA_DIR}; else config data.vocab_size, said so")
    parser.add_argument("--vocab-size", type=count(2**31 - 1), default=None, help="count with this vocabulary instead")
    args = parser.parse_args(argv)
    config = load_config(args.configs)
    if args.vocab_size:
        vocab, source = args.vocab_size, "--vocab-size"
    else:
        places = [args.data] if args.data else [Path(args.configs[0]).parent,
                                                study_root(args.device, config["model"]), DATA_DIR]
        vocab, source = study_vocab(config, places, explicit=bool(args.data))
    print(f"vocabulary: {vocab:,} tokens, from {source}", file=sys.stderr)
    cfg = ModelConfig(vocab_size=vocab, **for_device(config["model"], args.device))
    try:
        print(json.dumps(check_plug(cfg, torch.device(args.device)) | {"vocab_from": source}, indent=1))
    except PlugError as exc:
        sys.exit(str(exc))


if __name__ == "__main__":
    main()
