"""FLOPs of one training step of any model, counted by `torch.utils.flop_counter.FlopCounterMode`.

    python -m pytest tests/test_flops.py -q

The counter sees every aten op of a forward, a cross-entropy loss and `backward()`, and counts the matrix
products (mm, addmm, bmm, convolutions, and attention kernels by their own formulas). It runs where a model
costs nothing: meta tensors, else fake tensors (transformers' eager code reads the attention mask to decide
whether to skip it, which meta tensors cannot answer and fake tensors let it skip), else the CPU at batch 1 or
2. Attention runs as SDPA's math backend while counting, as plain matrix products: model FLOPs, whatever kernel
the device picks later (the counter's formula for a fused kernel's backward adds the recomputation of Q K^T:
7 products for attention's 6). Embedding lookups, norms, softmax and the optimizer count no FLOPs here, as in
the built-in model's hand count (core/models/model.py `train_flops`), which this count equals exactly
(tests/test_flops.py).

A sequence's FLOPs are a polynomial of degree 2 in its length for a transformer (projections and
feed-forward: linear; attention scores: quadratic; the head: constant), and a batch's are the sum over its
rows. `StepFlops` counts 3 lengths at batch 1 and fits that polynomial exactly (integer counts, rational
arithmetic), then checks it by one count at batch 2 and a 4th length; a model that fails the check (or a
max_len too short to fit) has every shape counted as it is asked for. Counted once per model and shape,
never inside a timed block.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from fractions import Fraction
from pathlib import Path

import torch
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from compile_study.core.io import write_json_atomic
from compile_study.core.models.model import ModelConfig
from compile_study.core.models.plug import build_model

COUNTER = "torch.utils.flop_counter.FlopCounterMode"


def _fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


def count_step(model: torch.nn.Module, batch_size: int, seq_len: int, mode=None) -> int:
    """Counted FLOPs of forward, loss and backward on a [batch_size, seq_len] batch of real tokens."""
    with mode or contextlib.nullcontext():
        ids = torch.ones(batch_size, seq_len, dtype=torch.long)  # no padding: a row of seq_len tokens
        labels = torch.zeros(batch_size, dtype=torch.long)
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            F.cross_entropy(model(ids).float(), labels).backward()
    return int(counter.get_total_flops())


class StepFlops:
    """Training-step FLOPs of a configured model: per sequence length, per padded batch, per set of sequences."""

    def __init__(self, cfg: ModelConfig, stored: dict | None = None):
        """Counts the model, or takes `stored` (to_json of an earlier count of the same model and torch)."""
        self.cfg = cfg
        self.counts: dict[tuple[int, int], int] = {}  # (batch, length) -> counted FLOPs
        self._model = self._mode = None
        if stored is not None:
            self.on = stored["counted_on"]
            self.counts = {tuple(int(x) for x in k.split("x")): int(v) for k, v in stored["counts"].items()}
            self.fit = None if stored["fit"] is None else tuple(Fraction(x) for x in stored["fit"])
            return
        self.on, self._model, self._mode = self._build()
        self.fit = self._fit()  # (a, b, c) of a + b L + c L^2 per sequence, or None: every shape counted

    def to_json(self) -> dict:
        """What a later process needs to skip the count: the counts and the exact fit (fractions as text)."""
        return {"counted_on": self.on, "counts": {f"{b}x{n}": c for (b, n), c in sorted(self.counts.items())},
                "fit": None if self.fit is None else [str(x) for x in self.fit]}

    def _build(self):
        """The model where its first count runs: meta tensors (cheapest), fake tensors (transformers' eager
        mask checks read data, which fake tensors let it skip), else the CPU. The caller's random state is kept."""
        with torch.random.fork_rng(devices=[]):
            for on, mode in (("meta tensors", torch.device("meta")), ("fake tensors", _fake_mode()),
                             ("cpu", torch.device("cpu"))):
                try:
                    with mode:
                        model = build_model(self.cfg)
                    self.counts[(1, self.cfg.max_len)] = count_step(model, 1, self.cfg.max_len, mode)
                    return on, model, mode
                except Exception:  # data-dependent code, or tensors made outside the mode: the next place
                    if on == "cpu":
                        raise
        raise AssertionError("unreachable")

    def count(self, batch_size: int, seq_len: int) -> int:
        key = (int(batch_size), int(seq_len))
        if key not in self.counts and self._model is None:  # taken from an earlier count: build the model now
            self.on, self._model, self._mode = self._build()
        if key not in self.counts:
            self.counts[key] = count_step(self._model, *key, self._mode)
        return self.counts[key]

    def _fit(self) -> tuple[Fraction, ...] | None:
        """Exact a, b, c through lengths 1, max_len/2 and max_len at batch 1, checked at batch 2 and length
        3/4 max_len (one count checks both: a wrong polynomial or rows that interact would not match)."""
        top = self.cfg.max_len
        lengths, check = sorted({1, max(1, top // 2), top}), max(1, (3 * top) // 4)
        if len(lengths) < 3 or check in lengths:
            return None
        xs = [Fraction(x) for x in lengths]
        ys = [Fraction(self.count(1, x)) for x in lengths]
        # Newton's divided differences: the quadratic through the three points
        d1 = [(ys[1] - ys[0]) / (xs[1] - xs[0]), (ys[2] - ys[1]) / (xs[2] - xs[1])]
        c = (d1[1] - d1[0]) / (xs[2] - xs[0])
        b = d1[0] - c * (xs[0] + xs[1])
        a = ys[0] - b * xs[0] - c * xs[0] ** 2
        if 2 * (a + b * check + c * check * check) != self.count(2, check):
            return None
        return a, b, c

    def sequence(self, seq_len: int) -> float:
        """FLOPs of one training step on one sequence of seq_len tokens."""
        if self.fit is None:
            return float(self.count(1, seq_len))
        a, b, c = self.fit
        return float(a + b * seq_len + c * seq_len * seq_len)

    def padded(self, batch_size: int, seq_len: int) -> float:
        """FLOPs of a step on a [batch_size, seq_len] batch, padding computed like tokens."""
        if self.fit is None:
            return float(self.count(batch_size, seq_len))
        return batch_size * self.sequence(seq_len)

    def real(self, lengths) -> float:
        """FLOPs of a step had each sequence been computed at its own length (no padding, no filler rows)."""
        return sum(self.sequence(int(n)) for n in lengths)

    def per_token(self) -> float:
        """Training FLOPs per token of a sequence of max_len tokens (the figure the paper names)."""
        return self.sequence(self.cfg.max_len) / self.cfg.max_len

    def describe(self) -> dict:
        fit = None if self.fit is None else [float(x) for x in self.fit]
        return {"counter": COUNTER, "counted_on": self.on, "per_sequence_fit": fit,
                "counted_shapes": sorted(self.counts), "train_flops_per_token": self.per_token()}


_CACHE: dict[str, StepFlops] = {}


def step_flops(cfg: ModelConfig, cache_dir: str | Path | None = None) -> StepFlops:
    """One StepFlops per model configuration in this process (counting costs a few forward/backward passes on
    meta or fake tensors: about a second on the H200 host). With `cache_dir` (a study's data directory), the
    count is kept there as JSON, keyed by the model's configuration and torch's version, so that the study's
    later runs, each a new process, read it instead of counting again."""
    key = json.dumps(cfg.to_dict(), sort_keys=True)
    if key in _CACHE:
        return _CACHE[key]
    path = None
    if cache_dir is not None:
        digest = hashlib.sha256(f"{key} torch {torch.__version__}".encode()).hexdigest()[:16]
        path = Path(cache_dir) / f"flops-{digest}.json"
        try:
            _CACHE[key] = StepFlops(cfg, json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):  # none yet, or unreadable: count again
            pass
    if key not in _CACHE:
        _CACHE[key] = StepFlops(cfg)
        if path is not None:
            write_json_atomic(path, _CACHE[key].to_json())
    return _CACHE[key]
