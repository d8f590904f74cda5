"""The study's model: the built-in classifier, or a model the user plugs in (config `model`).

    python -m compile_study model config.yaml configs/hf-bert.yaml    # check a plug, print its class, size, FLOPs

- neither `model.factory` nor `model.hf_config`: the built-in `TextClassifier` (core/models/model.py), sized by the
  other `model` keys; it is used as it is, unwrapped, so its compiled graphs are those of the study without plugs.
- `model.factory: package.module:function`: called as `function(vocab_size=V, n_classes=C, max_len=L)`; returns
  an `nn.Module` whose `forward(ids, attention_mask)` gives logits [B, C] (ids [B, L] int64 with 0 for padding;
  attention_mask [B, L] int64, 1 for tokens and 0 for padding, as in transformers).
- `model.hf_config: {model_type: bert, ...}`: `AutoModelForSequenceClassification.from_config` of transformers
  (an optional dependency) with that config and the study's vocabulary size, classes and padding id: random
  weights, nothing downloaded.

`build_model` returns every model as the study calls it, `model(ids) -> logits [B, C]`: a plugged model is
wrapped in `Plugged`, which makes the mask from the padding id inside the call, as the built-in model does, so
that the mask is part of every compiled graph. A bad plug raises `PlugError`, naming the config key, before any
timed step (`check_plug` runs every check; rule `check_model` runs it before the study's first run).
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable

import torch
from torch import nn

from compile_study.core.models.model import PAD_ID, ModelConfig, TextClassifier
from compile_study.core.vocab import HF_SET_BY_STUDY

BYTES_PER_PARAM = 16  # fp32 weight, gradient and AdamW's two moments: what training holds before activations
CHECK_ROWS = 2  # rows of the batch a plug is tried on


class PlugError(ValueError):
    """A model plug that cannot be used; the message starts with the config key."""


def plug_key(cfg: ModelConfig) -> str | None:
    """The config key that plugs a model in ("model.factory" or "model.hf_config"); None for the built-in one."""
    if cfg.factory is not None:
        return "model.factory"
    return "model.hf_config" if cfg.hf_config is not None else None


def describe(cfg: ModelConfig) -> str:
    """The plug in a few words, for records and the paper."""
    if cfg.factory is not None:
        return f"factory {cfg.factory}"
    if cfg.hf_config is not None:
        return f"transformers {cfg.hf_config.get('model_type')} (AutoModelForSequenceClassification.from_config)"
    return "built-in TextClassifier"


class Plugged(nn.Module):
    """A plugged model called as the study calls every model: `model(ids) -> logits [B, n_classes]`."""

    def __init__(self, inner: nn.Module, keywords: bool):
        super().__init__()
        self.inner = inner
        self.keywords = keywords  # transformers models take input_ids= and attention_mask= by name

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = (ids != PAD_ID).long()  # [B, L]; 1 = token (made here, so it is part of the compiled graph)
        out = self.inner(input_ids=ids, attention_mask=mask) if self.keywords else self.inner(ids, mask)
        return getattr(out, "logits", out)  # transformers return an output object holding the logits


def load_factory(spec: str) -> Callable:
    """`package.module:function` -> the function, or PlugError naming model.factory."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr.isidentifier():
        raise PlugError(f"model.factory: {spec!r} is not an import path of the form package.module:function")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module raising while it is imported
        raise PlugError(f"model.factory: cannot import {module_name!r} ({type(exc).__name__}: {exc}); "
                        "is it installed, or on PYTHONPATH?") from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise PlugError(f"model.factory: module {module_name!r} has no function {attr!r}")
    try:
        inspect.signature(fn).bind(vocab_size=1, n_classes=1, max_len=1)
    except TypeError as exc:
        raise PlugError(f"model.factory: {spec} takes {inspect.signature(fn)}, but the study calls it as "
                        f"{attr}(vocab_size=..., n_classes=..., max_len=...) ({exc})") from exc
    except ValueError:  # a builtin without a signature: find out when it is called
        pass
    return fn


def _factory_model(cfg: ModelConfig) -> nn.Module:
    model = load_factory(cfg.factory)(vocab_size=cfg.vocab_size, n_classes=cfg.n_classes, max_len=cfg.max_len)
    if not isinstance(model, nn.Module):
        raise PlugError(f"model.factory: {cfg.factory} returned a {type(model).__name__}, not a torch.nn.Module")
    return Plugged(model, keywords=False)


def _hf_model(cfg: ModelConfig) -> nn.Module:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # from_config reads nothing from the hub; make sure nothing tries
    try:
        import transformers
        from transformers import CONFIG_MAPPING, AutoConfig, AutoModelForSequenceClassification
    except ImportError as exc:
        raise PlugError("model.hf_config: needs transformers, an optional dependency (pinned in requirements.txt: "
                        f"pip install -r requirements.txt) ({exc})") from exc
    settings = dict(cfg.hf_config)
    model_type = settings.pop("model_type", None)
    for key, what in HF_SET_BY_STUDY.items():
        if key in settings:
            raise PlugError(f"model.hf_config.{key}: set by the study ({what}); remove it")
    if model_type not in CONFIG_MAPPING:
        known = len(list(CONFIG_MAPPING))
        raise PlugError(f"model.hf_config.model_type: {model_type!r} is not one of the {known} model types of "
                        f"transformers {transformers.__version__} (e.g. bert, roberta, distilbert)")
    try:
        config = AutoConfig.for_model(model_type, **settings, vocab_size=cfg.vocab_size, num_labels=cfg.n_classes,
                                      pad_token_id=PAD_ID)
    except (ValueError, TypeError) as exc:
        raise PlugError(f"model.hf_config: transformers' {model_type} config refuses it "
                        f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from exc
    try:
        model = AutoModelForSequenceClassification.from_config(config)
    except ValueError as exc:
        first = str(exc).splitlines()[0][:200]
        if "Unrecognized configuration class" in first:  # a model type without a sequence-classification head
            raise PlugError(f"model.hf_config.model_type: {model_type!r} has no sequence-classification model "
                            "in transformers") from exc
        raise PlugError(f"model.hf_config: transformers cannot build {model_type} from it ({first})") from exc
    return Plugged(model.train(), keywords=True)  # train mode, as the built-in model starts


def build_model(cfg: ModelConfig) -> nn.Module:
    """The configured model, called as `model(ids) -> logits`; built on the current default device.

    A plugged model keeps its own dropout, except with `model.dropout` 0 (the parity check's setting): then its
    `nn.Dropout` modules are set to p = 0 (transformers' attention dropout reads that p too)."""
    if cfg.factory is None and cfg.hf_config is None:
        return TextClassifier(cfg)
    model = _factory_model(cfg) if cfg.factory is not None else _hf_model(cfg)
    return without_dropout(model) if cfg.dropout == 0 else model


def without_dropout(model: nn.Module) -> nn.Module:
    """The model with its `nn.Dropout` modules at p = 0 (dropout written as a function call is not reached)."""
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model


def repeated_blocks(model: nn.Module) -> nn.ModuleList | None:
    """The model's repeated block, what scope `regional` compiles: of its `nn.ModuleList`s of two or more modules of
    one class, the one holding the most parameters (the built-in model's `layers`, a BERT's `encoder.layer`); None
    where it has none."""
    lists = [m for m in model.modules()
             if isinstance(m, nn.ModuleList) and len(m) >= 2 and len({type(block) for block in m}) == 1]
    return max(lists, key=n_params, default=None)  # a tie: the first in the model's order


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def model_class(model: nn.Module) -> str:
    """The model's class as module.Class (a plugged model's own, not the adapter's)."""
    inner = model.inner if isinstance(model, Plugged) else model
    return f"{type(inner).__module__}.{type(inner).__qualname__}"
