"""Model factories for the plug tests (config model.factory: tests.plug_models:<name>)."""

from __future__ import annotations

import torch
from torch import nn


class MeanClassifier(nn.Module):
    """Token embeddings, masked mean, a linear head: the smallest model that honours the plug's contract."""

    def __init__(self, vocab_size: int, n_classes: int, width: int = 16, out: int | None = None):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, width)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(width, out or n_classes)
        self.masks: list[torch.Tensor] = []  # what the study passed, for the tests to read

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        self.masks.append(attention_mask)
        w = attention_mask.to(torch.float32)[..., None]  # [B, L, 1]
        pooled = (self.drop(self.tok(ids)) * w).sum(1) / w.sum(1).clamp_min(1.0)
        return self.head(pooled)  # [B, n_classes]


def good(vocab_size: int, n_classes: int, max_len: int) -> nn.Module:
    return MeanClassifier(vocab_size, n_classes)


def wrong_signature(vocab, classes):  # the study calls factories by keyword
    return MeanClassifier(vocab, classes)


def not_a_module(vocab_size: int, n_classes: int, max_len: int):
    return lambda ids, mask: ids


def seven_classes(vocab_size: int, n_classes: int, max_len: int) -> nn.Module:
    return MeanClassifier(vocab_size, n_classes, out=7)  # logits [B, 7], not [B, n_classes]


class IdsOnly(MeanClassifier):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # no attention mask
        return self.head(self.tok(ids).mean(1))


def ids_only(vocab_size: int, n_classes: int, max_len: int) -> nn.Module:
    return IdsOnly(vocab_size, n_classes)


class Tupled(MeanClassifier):
    def forward(self, ids, attention_mask):
        return (super().forward(ids, attention_mask),)


def tupled(vocab_size: int, n_classes: int, max_len: int) -> nn.Module:
    return Tupled(vocab_size, n_classes)


class Cubic(MeanClassifier):
    """Mixes every pair of positions through an [L, L] product per row: FLOPs cubic in the length."""

    def forward(self, ids, attention_mask):
        x = self.tok(ids)  # [B, L, D]
        scores = x @ x.transpose(1, 2)  # [B, L, L]
        mixed = scores @ scores  # [B, L, L]: L^3 multiply-adds per row
        return self.head((mixed @ x).mean(1))


def cubic(vocab_size: int, n_classes: int, max_len: int) -> nn.Module:
    return Cubic(vocab_size, n_classes)


# A BERT small enough for CPU tests (config model.hf_config), over conftest.TINY_MODEL's max_len 32
TINY_BERT = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 32,
             "intermediate_size": 64, "max_position_embeddings": 32}
