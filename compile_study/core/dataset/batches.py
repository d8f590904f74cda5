"""Turning encoded splits into device-resident batches (built once, before any timing).

Shape regimes (`vocab.Regime`; paper/templates/sections/terms.j2 says each in a line):
- `static`: every batch padded to max_len: one shape.
- `dynamic`, `dynamic-true`, `dynamic-false`, `dynamic-marked`: random batches, each padded only to
  its own longest sequence; the suffix says how it is compiled (`Regime.compile_kwargs`).
- `bucketed-<e1>-<e2>-...`: sequences grouped by the smallest bucket edge >= their length, each
  batch padded to its edge, batches shuffled across buckets, every example seen once per epoch
  (a bucket's last partial batch is filled with one-token rows whose label is ignored).
- `packed`: built by compile_study.core.dataset.packing, not here.

Random and static batches drop the split's last partial batch, which would be another shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from compile_study.core.vocab import Regime

IGNORE_LABEL = -100  # F.cross_entropy's default ignore_index: filler rows add no loss
FILLER_TOKEN = 1  # [UNK]; a filler row is never all padding (that would make attention NaN)


@dataclass
class Batch:
    ids: torch.Tensor  # [B, L] int64, 0 = padding
    labels: torch.Tensor  # [B] int64, IGNORE_LABEL for filler rows
    real_tokens: int  # non-pad tokens of real rows
    real_rows: int


def _to_batch(ids, labels, rows, width, device) -> Batch:
    x = torch.from_numpy(np.ascontiguousarray(ids[rows, :width]).astype(np.int64)).to(device)
    y = torch.from_numpy(labels[rows].astype(np.int64)).to(device)
    return Batch(x, y, int((x != 0).sum()), len(rows))


def bucket_batches(lengths: np.ndarray, edges: list[int], batch_size: int, rng) -> list[tuple[np.ndarray, int]]:
    """The bucketing sampler: -> [(row indices, padded width)], every row exactly once."""
    which = np.searchsorted(edges, lengths)  # smallest edge >= length
    plan = []
    for b, edge in enumerate(edges):
        rows = rng.permutation(np.flatnonzero(which == b))
        plan += [(rows[i : i + batch_size], edge) for i in range(0, len(rows), batch_size)]
    return [plan[i] for i in rng.permutation(len(plan))]


def _fill(b: Batch, batch_size: int, width: int, device) -> Batch:
    """A bucket's last, partial batch filled to the batch size with ignored rows: one shape per bucket."""
    n = batch_size - b.real_rows
    filler_ids = torch.zeros(n, width, dtype=torch.int64, device=device)
    filler_ids[:, 0] = FILLER_TOKEN
    filler_labels = torch.full((n,), IGNORE_LABEL, dtype=torch.int64, device=device)
    return Batch(torch.cat([b.ids, filler_ids]), torch.cat([b.labels, filler_labels]), b.real_tokens, b.real_rows)


def make_batches(
    ids: np.ndarray,  # [N, max_len] int32, 0-padded
    lengths: np.ndarray,  # [N] real tokens per row
    labels: np.ndarray,  # [N]
    batch_size: int,
    shape_regime: str | Regime,
    seed: int | None,
    device: torch.device,
    max_batches: int | None = None,
    drop_last: bool = True,
) -> list[Batch]:
    """-> the epoch's batches in order (seeded), already on `device`."""
    regime = Regime.parse(shape_regime) if isinstance(shape_regime, str) else shape_regime
    max_len = ids.shape[1]
    regime.check(max_len)
    if regime.kind == "packed":
        raise ValueError("packed batches are built by compile_study.core.dataset.packing, not by make_batches")
    rng = np.random.default_rng(seed)
    batches = []
    if regime.kind == "bucketed":
        for rows, edge in bucket_batches(lengths, list(regime.edges), batch_size, rng):
            b = _to_batch(ids, labels, rows, edge, device)
            batches.append(_fill(b, batch_size, edge, device) if len(rows) < batch_size else b)
    else:
        order = rng.permutation(len(labels)) if seed is not None else np.arange(len(labels))
        n = len(order) // batch_size if drop_last else -(-len(order) // batch_size)
        for b in range(n):
            rows = order[b * batch_size : (b + 1) * batch_size]
            width = max_len if regime.kind == "static" else int(lengths[rows].max())
            batches.append(_to_batch(ids, labels, rows, width, device))
    if max_batches is not None:
        batches = batches[:max_batches]
    if not batches:
        raise ValueError(f"batch_size {batch_size} is larger than the split ({len(labels)} rows)")
    return batches


def evaluation_batches(ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray, batch_size: int,
                         device: torch.device) -> list[Batch]:
    """Every row of a split once, for evaluation: rows in order of length, each batch padded only to its own
    longest row. Padding is masked, so the logits are a padded batch's (up to rounding); the forward pass does
    about half the work of batches padded to max_len (AG News is ~58% padding)."""
    order = np.argsort(lengths, kind="stable")
    return [_to_batch(ids, labels, rows, max(1, int(lengths[rows].max())), device)
            for rows in (order[start : start + batch_size] for start in range(0, len(order), batch_size))]


def padding_fraction(batches: list[Batch]) -> float:
    """Share of the computed token positions that are padding (filler rows included)."""
    computed = sum(b.ids.numel() for b in batches)
    return 1 - sum(b.real_tokens for b in batches) / computed


def mark_dynamic_lengths(batches: list[Batch]) -> None:
    """For `dynamic-marked`: declare the sequence dim dynamic with the data's own min/max."""
    widths = [b.ids.shape[1] for b in batches]
    lo, hi = max(2, min(widths)), max(widths)  # Dynamo specialises sizes 0 and 1
    if lo >= hi:
        return  # one width only: nothing to mark
    for b in batches:
        torch._dynamo.mark_dynamic(b.ids, 1, min=lo, max=hi)
