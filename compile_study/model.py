"""The studied model: a small transformer encoder text classifier.

Token embeddings + learned positions -> N pre-norm encoder layers -> masked mean
pooling over real (non-pad) tokens -> linear head over the 4 AG News classes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F

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

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"model.d_model={self.d_model} is not divisible by model.n_heads={self.n_heads}")
        if self.pooling not in ("mean", "nonzero"):
            raise ValueError(f"pooling {self.pooling!r} is not 'mean' or 'nonzero'")

    def to_dict(self) -> dict:
        return asdict(self)


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

    def forward(self, x: torch.Tensor, attn_bias: torch.Tensor) -> torch.Tensor:
        # x: [B, L, D]; attn_bias: [B, 1, 1, L] (0 for tokens, -inf for padding)
        B, L, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, L, 3, self.n_heads, D // self.n_heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, L, Dh]
        p = self.dropout if self.training else 0.0
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_bias, dropout_p=p)
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

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # ids: [B, L] int64, PAD_ID marks padding -> logits [B, n_classes]
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

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def train_flops(cfg: ModelConfig, batch_size: int, seq_len: int) -> float:
    """Matmul FLOPs of one training step on a [batch_size, seq_len] batch (padding included).

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
