"""The `packed` shape regime: whole sequences placed into rows of exactly max_len tokens.

A packed batch has the static batch's token budget, `batch_size` rows of `max_len` tokens, so it has
one fixed shape [B, max_len] and never recompiles; what changes from batch to batch is data:
- `doc`: each token's sequence slot within its row (0, 1, ... in placement order; -1 for the padding
  left at a row's end when no remaining sequence fits);
- `pos`: each token's position within its own sequence (restarting at 0);
- `labels`: [B, max_len], the label of slot k's sequence at [:, k], -100 (ignored) for empty slots.
The model's packed path (`TextClassifier.forward_packed`) restricts attention to each sequence, pools
each sequence on its own and gives logits per slot; the loss is per sequence, as in the padded path.
A packed batch holds more sequences than a static one of the same budget (about 1/(1 - padding)).

Rows are filled by best fit: sequences in a seeded random order, each into the open row whose free
space is the smallest that still holds it (a new row when none does); the rows are then shuffled and
cut into batches. Deterministic for a seed; every sequence is placed exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from compile_study.core.dataset.batches import IGNORE_LABEL


@dataclass
class PackedBatch:
    ids: torch.Tensor  # [B, L] int64, sequences back to back, 0 = padding at a row's end
    doc: torch.Tensor  # [B, L] int64, the token's sequence slot within its row, -1 for padding
    pos: torch.Tensor  # [B, L] int64, position within its own sequence
    labels: torch.Tensor  # [B, L] int64, label of slot k's sequence at [:, k], IGNORE_LABEL for empty slots
    real_tokens: int  # tokens of real sequences (all non-pad tokens)
    real_rows: int  # sequences in the batch (the padded path's rows)
    sources: np.ndarray  # [B, L] the split row of slot k's sequence, -1 for empty slots (host side)
    seq_lengths: np.ndarray  # [real_rows] lengths of the batch's sequences (for real FLOPs)


def best_fit_rows(lengths: np.ndarray, max_len: int, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Place sequences (visited in `order`) into rows of max_len tokens by best fit.

    -> row [N], start [N] (offset in the row), slot [N] (the sequence's index within its row).
    """
    if lengths.min() < 1 or lengths.max() > max_len:
        raise ValueError(f"sequence lengths must lie in [1, {max_len}], got [{lengths.min()}, {lengths.max()}]")
    n = len(lengths)
    row, start, slot = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    by_space: list[list[int]] = [[] for _ in range(max_len + 1)]  # free space -> open rows with it
    used: list[int] = []  # tokens used per row
    count: list[int] = []  # sequences per row
    for i in order:
        need = int(lengths[i])
        space = next((s for s in range(need, max_len) if by_space[s]), None)
        if space is None:  # no open row holds it: open a new one
            r = len(used)
            used.append(0)
            count.append(0)
        else:
            r = by_space[space].pop()
        row[i], start[i], slot[i] = r, used[r], count[r]
        used[r] += need
        count[r] += 1
        by_space[max_len - used[r]].append(r)
    return row, start, slot


def pack_rows(ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray, rng) -> dict[str, np.ndarray]:
    """All sequences of a split packed into rows -> arrays over rows: ids, doc, pos, labels, sources [R, L]."""
    max_len = ids.shape[1]
    row, start, slot = best_fit_rows(lengths, max_len, rng.permutation(len(lengths)))
    n_rows = int(row.max()) + 1
    out = {
        "ids": np.zeros((n_rows, max_len), np.int64),
        "doc": np.full((n_rows, max_len), -1, np.int64),
        "pos": np.zeros((n_rows, max_len), np.int64),
        "labels": np.full((n_rows, max_len), IGNORE_LABEL, np.int64),
        "sources": np.full((n_rows, max_len), -1, np.int64),
    }
    seq = np.repeat(np.arange(len(lengths)), lengths)  # [T] the sequence of every token
    within = np.arange(len(seq)) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # [T] position in it
    r, c = row[seq], start[seq] + within
    out["ids"][r, c] = ids[seq, within]
    out["doc"][r, c] = slot[seq]
    out["pos"][r, c] = within
    out["labels"][row, slot] = labels
    out["sources"][row, slot] = np.arange(len(lengths))
    return out


def make_packed_batches(
    ids: np.ndarray,  # [N, max_len] int32, 0-padded
    lengths: np.ndarray,  # [N]
    labels: np.ndarray,  # [N]
    batch_size: int,  # rows of max_len tokens: the static batch's token budget
    seed: int,
    device: torch.device,
    max_batches: int | None = None,
    drop_last: bool = True,
) -> list[PackedBatch]:
    """-> the epoch's packed batches (seeded), on `device`; a kept last partial batch is filled with empty rows."""
    rng = np.random.default_rng(seed)
    rows = pack_rows(ids, lengths.astype(np.int64), labels, rng)
    order = rng.permutation(len(rows["ids"]))
    n = len(order) // batch_size if drop_last else -(-len(order) // batch_size)
    if max_batches is not None:
        n = min(n, max_batches)
    if n == 0:
        raise ValueError(f"batch_size {batch_size} is more rows than packing made ({len(order)})")
    batches = []
    for b in range(n):
        take = order[b * batch_size : (b + 1) * batch_size]
        part = {k: v[take] for k, v in rows.items()}
        if len(take) < batch_size:  # empty rows: all padding, no sequence, so no loss
            fill = {"ids": 0, "doc": -1, "pos": 0, "labels": IGNORE_LABEL, "sources": -1}
            empty = batch_size - len(take)
            part = {k: np.concatenate([v, np.full((empty, v.shape[1]), fill[k])]) for k, v in part.items()}
        src = part["sources"][part["sources"] >= 0]
        t = {k: torch.from_numpy(part[k]).to(device) for k in ("ids", "doc", "pos", "labels")}
        batches.append(PackedBatch(t["ids"], t["doc"], t["pos"], t["labels"], int(lengths[src].sum()), len(src),
                                   part["sources"], lengths[src].astype(np.int64)))
    return batches


def real_lengths(batch) -> np.ndarray:
    """Lengths of a batch's real sequences (padded `Batch`: one device sync; call it outside timing)."""
    if isinstance(batch, PackedBatch):
        return batch.seq_lengths
    real = (batch.labels != IGNORE_LABEL).cpu().numpy()
    return (batch.ids != 0).sum(1).cpu().numpy()[real]
