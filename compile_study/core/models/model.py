"""The studied model: a small transformer encoder text classifier.

Token embeddings + learned positions -> N pre-norm encoder layers -> masked mean
pooling over real (non-pad) tokens -> linear head over the 4 AG News classes.

A second, packed path (packing.py builds its batches) runs rows that hold several whole sequences:
`model(ids, doc, pos)` restricts attention to each sequence, takes positions that restart per
sequence and mean-pools per sequence, giving logits per sequence slot. `model(ids)` is the padded
path, unchanged.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

PAD_ID = 0  # the tokenizer reserves id 0 for padding (see data.SPECIAL_TOKENS)


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 8192  # subword vocabulary trained on the train split
    max_len: int = 128  # positional table size; static batches are padded to this
    d_model: int = 256
    n_layers: int = 4  # the study's fixed architecture: 4 layers ...
    n_heads: int = 4  # ... and 4 attention heads
    d_ff: int = 1024
    dropout: float = 0.1
    n_classes: int = 4
    # "mean": masked mean as arithmetic (no data-dependent shapes: compiles as one graph);
    # "nonzero": the same mean gathered through torch.nonzero, whose output shape depends on the data,
    # so Dynamo breaks the graph there (the study's deliberate graph-break variant)
    pooling: str = "mean"
    # A model the user brings instead (core/models/plug.py): the keys above then size only the data (max_len)
    name: str | None = None  # names the study's results directory (core/layout.py study_root); None: the default
    factory: str | None = None  # "package.module:function" -> nn.Module taking (ids, attention_mask)
    hf_config: dict | None = None  # a transformers config dict ({model_type: bert, ...}) for from_config

    def __post_init__(self) -> None:
        if self.factory is not None and self.hf_config is not None:
            raise ValueError("model.factory and model.hf_config: set one of them, not both")
        if self.d_model % self.n_heads:
            raise ValueError(f"model.d_model={self.d_model} is not divisible by model.n_heads={self.n_heads}")
        if self.pooling not in ("mean", "nonzero"):
            raise ValueError(f"pooling {self.pooling!r} is not 'mean' or 'nonzero'")

    def to_dict(self) -> dict:
        return asdict(self)


PER_DEVICE = ("dropout",)  # model keys a config may give per device ({cpu: ..., cuda: ...})


def for_device(model_params: dict, device: str) -> dict:
    """The model's settings on `device`: a key of PER_DEVICE given per device becomes that device's value."""
    return {k: v[device] if k in PER_DEVICE and isinstance(v, dict) else v for k, v in model_params.items()}


def model_config_for(data_dir: str | Path, model_params: dict) -> ModelConfig:
    """The configured model sized to the vocabulary the tokenizer actually learned (the data's facts.json)."""
    facts = json.loads((Path(data_dir) / "facts.json").read_text())
    return ModelConfig(vocab_size=facts["vocab_size"], **model_params)


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.dropout = cfg.dropout
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.ff1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.ff2 = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: torch.Tensor, attn_bias: torch.Tensor | None,
                block_mask: BlockMask | None = None) -> torch.Tensor:
        # x: [B, L, D]; attn_bias: [B, 1, 1, L] (0 for tokens, -inf for padding) or [B, 1, L, L] (packed rows)
        B, L, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, L, 3, self.n_heads, D // self.n_heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, L, Dh]
        p = self.dropout if self.training else 0.0
        if block_mask is None:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_bias, dropout_p=p)
        else:  # FlexAttention has no dropout on the attention weights: the packed flex path drops none there
            a = flex_attention(q, k, v, block_mask=block_mask)
        x = x + F.dropout(self.proj(a.transpose(1, 2).reshape(B, L, D)), p, self.training)
        h = self.ff2(F.dropout(F.gelu(self.ff1(self.norm2(x))), p, self.training))
        return x + F.dropout(h, p, self.training)


class TextClassifier(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=PAD_ID)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.n_classes)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=1 / math.sqrt(cfg.d_model))
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, ids: torch.Tensor, doc: torch.Tensor | None = None, pos: torch.Tensor | None = None,
                attention: str = "flex") -> torch.Tensor:
        # ids: [B, L] int64, PAD_ID marks padding -> logits [B, n_classes]; with doc and pos: packed rows
        if doc is not None:
            return self.forward_packed(ids, doc, pos, attention)
        B, L = ids.shape
        keep = ids != PAD_ID  # [B, L]
        attn_bias = torch.zeros(B, 1, 1, L, device=ids.device, dtype=torch.float32)
        attn_bias = attn_bias.masked_fill(~keep[:, None, None, :], float("-inf"))
        pos = torch.arange(L, device=ids.device)
        x = self.tok(ids) + self.pos(pos)[None]  # [B, L, D]
        attn_bias = attn_bias.to(x.dtype)
        for layer in self.layers:
            x = layer(x, attn_bias)
        x = self.norm(x)
        w = keep.to(x.dtype)[..., None]  # [B, L, 1]
        if self.cfg.pooling == "nonzero":
            rows, cols = keep.nonzero(as_tuple=True)  # data-dependent length: a graph break
            summed = torch.zeros_like(x[:, 0]).index_add_(0, rows, x[rows, cols])  # [B, D]
        else:
            summed = (x * w).sum(1)  # [B, D]; no data-dependent shapes, so fullgraph compiles
        pooled = summed / w.sum(1).clamp_min(1.0)  # masked mean over real tokens
        return self.head(pooled)

    def forward_packed(self, ids: torch.Tensor, doc: torch.Tensor, pos: torch.Tensor, attention: str = "flex"):
        """Rows of whole sequences -> logits [B, L, n_classes]: slot k's sequence at [:, k] (see packing.py).

        doc: [B, L] the token's sequence slot within its row (0, 1, ...), -1 for padding; pos: [B, L]
        position within its own sequence. attention "flex": FlexAttention with a document block mask,
        built here from `doc` so that, compiled, the mask is data (no recompile per batch) and its cost
        is part of the step; "sdpa": the same restriction as a dense [B, 1, L, L] mask (the CPU has no
        FlexAttention backward, so CPU training takes this one).
        """
        if attention not in ("flex", "sdpa"):
            raise ValueError(f"attention {attention!r} is not 'flex' or 'sdpa'")
        x = self.tok(ids) + self.pos(pos)  # [B, L, D]
        bias, block_mask = None, None
        if attention == "flex":
            block_mask = document_block_mask(doc)
        else:
            same = doc[:, None, :, None] == doc[:, None, None, :]  # [B, 1, L, L]
            bias = torch.zeros(same.shape, device=ids.device, dtype=x.dtype).masked_fill(~same, float("-inf"))
        for layer in self.layers:
            x = layer(x, bias, block_mask)
        return self.head(segment_mean(self.norm(x), doc))

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def document_block_mask(doc: torch.Tensor) -> BlockMask:
    """FlexAttention mask: a token attends only to tokens of its own sequence (padding, doc -1, to padding)."""
    B, L = doc.shape

    def same_sequence(b, h, q, kv):
        return doc[b, q] == doc[b, kv]

    return create_block_mask(same_sequence, B, None, L, L, device=doc.device)


def segment_mean(x: torch.Tensor, doc: torch.Tensor) -> torch.Tensor:
    """x: [B, L, D], doc: [B, L] -> [B, L, D]: the mean of slot k's tokens at [:, k] (zeros for empty slots).

    A row of L tokens holds at most L sequences, so L slots per row fit every packing with fixed shapes.
    """
    B, L, D = x.shape
    w = (doc >= 0).to(x.dtype)  # [B, L]; padding contributes nothing
    index = (doc.clamp_min(0) + L * torch.arange(B, device=doc.device)[:, None]).flatten()  # [B*L] flat slot
    sums = x.new_zeros(B * L, D).index_add_(0, index, (x * w[..., None]).flatten(0, 1))
    counts = x.new_zeros(B * L).index_add_(0, index, w.flatten())
    return (sums / counts.clamp_min(1.0)[:, None]).view(B, L, D)


def train_flops(cfg: ModelConfig, batch_size: int, seq_len: int) -> float:
    """Matmul FLOPs of one training step on a [batch_size, seq_len] batch (padding included), counted by hand:
    the reference that core/models/flops.py's count (used for every model's MFU) equals (tests/test_flops.py).

    Per layer and token: qkv (3 d^2) + output projection (d^2) + feed-forward (2 d d_ff)
    multiply-adds; attention adds QK^T and AV, 2 L d multiply-adds per token. The head adds
    d * n_classes per sequence. One multiply-add = 2 FLOPs; backward = 2x forward, so a training
    step = 3x forward. Embedding lookups, norms, softmax and the optimizer are not counted.
    """
    tokens = batch_size * seq_len
    d = cfg.d_model
    per_layer_macs = tokens * (4 * d * d + 2 * d * cfg.d_ff) + tokens * 2 * seq_len * d
    forward = 2 * (cfg.n_layers * per_layer_macs + batch_size * d * cfg.n_classes)
    return 3.0 * forward


def real_train_flops(cfg: ModelConfig, lengths) -> float:
    """Matmul FLOPs one training step needs for these sequences alone: each at its own length, no padding,
    attention over its own tokens only (the counting of `train_flops`; equal to it for B rows of length L)."""
    n = sum(int(x) for x in lengths)
    sq = sum(int(x) ** 2 for x in lengths)
    d = cfg.d_model
    macs = cfg.n_layers * (n * (4 * d * d + 2 * d * cfg.d_ff) + 2 * sq * d) + len(lengths) * d * cfg.n_classes
    return 3.0 * 2 * macs
