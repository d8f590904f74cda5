"""The train/eval split of a corpus that comes without one: stratified by class, deterministic by seed, and
refused where data.eval_fraction would leave a side empty."""

from __future__ import annotations

import numpy as np

from compile_study.core.dataset.corpus import CLASSES, DataError


def _n_eval(n_rows: int, eval_fraction: float) -> int:
    return int(round(n_rows * eval_fraction))


def check_split(labels: list[int], what: str, eval_fraction: float) -> None:
    """Refuse an eval_fraction that leaves the train or the eval split of `what` (the rows' source) empty,
    naming the per-class counts."""
    counts = dict(zip(*np.unique(np.asarray(labels, dtype=np.int64), return_counts=True)))
    n_eval = sum(_n_eval(n, eval_fraction) for n in counts.values())
    if 0 < n_eval < len(labels):
        return
    per_class = ", ".join(f"{CLASSES[c]} {n:,}" for c, n in counts.items())
    half_row = 0.5 / max(counts.values())  # round() needs more than half a row in the largest class
    if n_eval == 0:
        side, outcome, fix = "eval", "no class gives eval a row", f"use data.eval_fraction above {half_row:.3g}"
    else:
        side, outcome = "train", "every class gives eval all its rows"
        fix = f"use data.eval_fraction below {1 - half_row:.3g}"
    if len(labels) < 2:
        fix = "one row cannot be split"
    raise DataError(f"data.eval_fraction {eval_fraction} leaves the {side} split empty: of the {len(labels):,} rows "
                    f"of {what} ({per_class}), {outcome} (round(class rows x {eval_fraction})); {fix}, or more rows")


def split_rows(labels: list[int], eval_fraction: float) -> tuple[int, int]:
    """(train rows, eval rows) of the stratified split of `labels` (split_indices), without drawing it."""
    counts = np.unique(np.asarray(labels, dtype=np.int64), return_counts=True)[1]
    n_eval = sum(_n_eval(int(n), eval_fraction) for n in counts)
    return len(labels) - n_eval, n_eval


def split_indices(labels: list[int], eval_fraction: float, seed: int, what: str = "the data"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic stratified split: the same eval_fraction of every class goes to eval (`what` names the rows)."""
    check_split(labels, what, eval_fraction)
    rng = np.random.default_rng(seed)
    labels_arr = np.asarray(labels)
    train_idx, eval_idx = [], []
    for c in np.unique(labels_arr):
        idx = rng.permutation(np.flatnonzero(labels_arr == c))
        n_eval = _n_eval(len(idx), eval_fraction)
        eval_idx.append(idx[:n_eval])
        train_idx.append(idx[n_eval:])
    return np.sort(np.concatenate(train_idx)), np.sort(np.concatenate(eval_idx))
