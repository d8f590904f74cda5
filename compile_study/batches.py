"""Turning encoded splits into device-resident batches, built once before any timing."""

from __future__ import annotations

import numpy as np
import torch

SHAPE_REGIMES = ("static",)


def make_batches(
    ids: np.ndarray,  # [N, max_len] int32, 0-padded
    lengths: np.ndarray,  # [N] real tokens per row
    labels: np.ndarray,  # [N]
    batch_size: int,
    shape_regime: str,
    seed: int,
    device: torch.device,
    max_batches: int | None = None,
    drop_last: bool = True,
) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """-> [(ids [B, L] int64, labels [B] int64, real_tokens)], shuffled with `seed`.

    static: every batch padded to max_len, so every step has the same shape. The last partial
    batch is dropped for training (it would be a second shape).
    """
    if shape_regime not in SHAPE_REGIMES:
        raise ValueError(f"shape_regime {shape_regime!r} is not one of {SHAPE_REGIMES}")
    order = np.random.default_rng(seed).permutation(len(labels)) if seed is not None else np.arange(len(labels))
    n = len(order) // batch_size if drop_last else -(-len(order) // batch_size)
    if max_batches is not None:
        n = min(n, max_batches)
    if n == 0:
        raise ValueError(f"batch_size {batch_size} is larger than the split ({len(order)} rows)")
    batches = []
    for b in range(n):
        idx = order[b * batch_size : (b + 1) * batch_size]
        x = torch.from_numpy(ids[idx].astype(np.int64)).to(device)
        y = torch.from_numpy(labels[idx].astype(np.int64)).to(device)
        batches.append((x, y, int(lengths[idx].sum())))
    return batches
