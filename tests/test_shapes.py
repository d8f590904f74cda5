"""Shape regimes: graph counts per `dynamic` setting, the recompile-limit fallback, the bucketing sampler."""

import numpy as np
import pytest
import torch

from compile_study.core.dataset.batches import (
    Batch,
    bucket_batches,
    evaluation_batches,
    make_batches,
    padding_fraction,
)
from compile_study.core.models.model import ModelConfig, TextClassifier
from compile_study.core.vocab import Regime
from compile_study.measure.compile import compile_model, make_step
from compile_study.measure.compile_stats import CompileWatch

from .conftest import TINY_MODEL

CPU = torch.device("cpu")
WIDTHS = [8, 12, 16, 20, 24]  # five distinct sequence lengths


def batch(width: int, rows: int = 4) -> Batch:
    g = torch.Generator().manual_seed(width)
    ids = torch.randint(2, 100, (rows, width), generator=g)
    return Batch(ids, torch.randint(0, 4, (rows,), generator=g), ids.numel(), rows)


def compiled_training(shape_regime: str, batches: list[Batch], recompile_limit: int = 8) -> dict:
    torch._dynamo.reset()
    torch._dynamo.config.recompile_limit = recompile_limit
    torch.manual_seed(0)
    model = TextClassifier(ModelConfig(vocab_size=100, **TINY_MODEL))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    watch = CompileWatch().start()
    step = make_step(compile_model(model, "default", **Regime.parse(shape_regime).compile_kwargs()), opt, "fp32", CPU, model, watch)
    for i, b in enumerate(batches):
        assert torch.isfinite(step(b))
        watch.after_step(i)
    try:
        return watch.report()
    finally:
        torch._dynamo.config.recompile_limit = 8


@pytest.mark.compile
@pytest.mark.parametrize("shape_regime, graphs", [("dynamic-false", 5), ("dynamic", 2), ("dynamic-true", 1)])
def test_graphs_per_dynamic_setting(shape_regime, graphs):
    rep = compiled_training(shape_regime, [batch(w) for w in WIDTHS])
    assert rep["graphs_compiled"] == graphs and rep["recompiles"] == graphs - 1
    assert rep["graph_steps"] == list(range(graphs)) and not rep["recompile_limit_hit"]
    if graphs > 1:
        assert any("size mismatch" in r for r in rep["recompile_reasons"])


@pytest.mark.compile
def test_recompile_limit_fallback_to_eager_is_detected():
    rep = compiled_training("dynamic-false", [batch(w) for w in WIDTHS], recompile_limit=2)
    assert rep["graphs_compiled"] == 2 and rep["recompile_limit"] == 2
    assert rep["recompile_limit_hit"] and rep["eager_fallback_steps"] == 3


@pytest.mark.compile
def test_bucketed_batches_compile_one_graph_per_bucket_hit():
    lengths = np.array([w for w in WIDTHS for _ in range(8)])  # 40 rows
    ids = np.zeros((40, 32), dtype=np.int32)
    for r, n in enumerate(lengths):
        ids[r, :n] = 5
    batches = make_batches(ids, lengths, np.arange(40) % 4, 4, "bucketed-16-32", 0, CPU)
    assert {b.ids.shape[1] for b in batches} == {16, 32}
    rep = compiled_training("bucketed-16-32", batches[:6] + batches[-2:])
    assert rep["graphs_compiled"] == len({b.ids.shape for b in batches[:6] + batches[-2:]})


@pytest.mark.unit
def test_bucketing_sampler_sees_every_row_once_and_respects_edges():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 129, 1000)
    edges = [32, 64, 96, 128]
    plan = bucket_batches(lengths, edges, 16, rng)
    seen = np.concatenate([rows for rows, _ in plan])
    assert sorted(seen.tolist()) == list(range(1000))  # every index exactly once
    for rows, edge in plan:
        lower = edges[edges.index(edge) - 1] if edge != edges[0] else 0
        assert len(rows) <= 16 and (lengths[rows] <= edge).all() and (lengths[rows] > lower).all()
    assert [e for _, e in plan] != sorted(e for _, e in plan)  # batches shuffled across buckets


@pytest.mark.unit
def test_bucket_filler_rows_keep_one_shape_and_count_as_padding():
    lengths = np.array([3] * 5)  # 5 rows, batch size 4: one full batch + one filled batch
    ids = np.zeros((5, 8), dtype=np.int32)
    ids[:, :3] = 7
    batches = make_batches(ids, lengths, np.zeros(5), 4, "bucketed-4-8", 0, CPU)
    assert [tuple(b.ids.shape) for b in batches] == [(4, 4), (4, 4)]
    assert sum(b.real_rows for b in batches) == 5 and sum(b.real_tokens for b in batches) == 15
    assert sorted((b.labels == -100).sum().item() for b in batches) == [0, 3]
    assert padding_fraction(batches) == pytest.approx(1 - 15 / 32)


@pytest.mark.unit
def test_dynamic_batches_pad_to_their_own_longest_row():
    lengths = np.array([2, 9, 4, 30, 5, 6, 7, 8])
    ids = np.zeros((8, 32), dtype=np.int32)
    for r, n in enumerate(lengths):
        ids[r, :n] = 3
    for b in make_batches(ids, lengths, np.zeros(8), 4, "dynamic", 1, CPU):
        assert b.ids.shape[1] == int((b.ids != 0).sum(1).max())


@pytest.mark.unit
def test_evaluation_sees_every_row_once_padded_to_its_batch_and_predicts_as_on_full_padding():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 33, size=37)
    ids = np.zeros((37, 32), dtype=np.int32)
    for r, n in enumerate(lengths):
        ids[r, :n] = rng.integers(2, 100, size=n)
    labels = np.arange(37) % 4
    batches = evaluation_batches(ids, lengths, labels, 8, CPU)
    assert [b.labels.numel() for b in batches] == [8, 8, 8, 8, 5]  # 37 rows, the last batch partial
    assert sorted(int(y) for b in batches for y in b.labels) == sorted(labels.tolist())
    assert [b.ids.shape[1] for b in batches] == [int((b.ids != 0).sum(1).max()) for b in batches]
    assert padding_fraction(batches) < padding_fraction(make_batches(ids, lengths, labels, 8, "static", None, CPU,
                                                                     drop_last=False)) / 2
    torch.manual_seed(0)
    model = TextClassifier(ModelConfig(vocab_size=100, **TINY_MODEL)).eval()
    full = torch.from_numpy(ids.astype(np.int64))
    with torch.no_grad():  # the rows in order of length, as the batches hold them
        padded = model(full)[torch.from_numpy(np.argsort(lengths, kind="stable"))]  # every row padded to max_len
        trimmed = torch.cat([model(b.ids) for b in batches])
    torch.testing.assert_close(trimmed, padded, rtol=1e-4, atol=1e-5)
    assert torch.equal(trimmed.argmax(-1), padded.argmax(-1))


@pytest.mark.unit
def test_packed_batches_are_left_to_the_packing_module():
    ids, lengths = np.ones((8, 32), dtype=np.int32), np.full(8, 32)
    with pytest.raises(ValueError, match="packed batches are built by compile_study.core.dataset.packing"):
        make_batches(ids, lengths, np.zeros(8), 4, "packed", 0, CPU)
