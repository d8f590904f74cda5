"""The packed regime: placement, shapes, positions, and the packed model against the padded one (CPU, fp32)."""

import copy
import warnings

import numpy as np
import pytest
import torch

from compile_study.core.dataset.batches import Batch
from compile_study.core.dataset.packing import best_fit_rows, make_packed_batches, real_lengths
from compile_study.core.models.model import ModelConfig, TextClassifier, real_train_flops, train_flops
from compile_study.measure.compile_stats import unique_graphs
from compile_study.measure.steps import forward_loss, packed_loss

from .conftest import TINY_MODEL

CPU = torch.device("cpu")
MODEL = ModelConfig(vocab_size=100, **TINY_MODEL)
L = TINY_MODEL["max_len"]
# eager FlexAttention on the CPU runs its reference implementation and says so once per process
warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")


def split(n: int = 200, seed: int = 0):
    """A split in `load_split`'s layout with news-like spread: lengths 1..L, most near 0.4 L."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(0.4 * L), 0.5, n).astype(np.int64), 1, L)
    lengths[:3] = (1, L, L - 1)  # the extremes
    ids = np.zeros((n, L), np.int32)
    for i, n_tok in enumerate(lengths):
        ids[i, :n_tok] = rng.integers(2, 100, n_tok)
    return ids, lengths, rng.integers(0, 4, n)


def padded_twin(batch, ids: np.ndarray, labels: np.ndarray) -> tuple[Batch, np.ndarray]:
    """The padded batch of exactly the packed batch's sequences -> (batch, their split rows)."""
    rows = batch.sources[batch.sources >= 0]
    x = torch.from_numpy(ids[rows].astype(np.int64))
    return Batch(x, torch.from_numpy(labels[rows]), int((x != 0).sum()), len(rows)), rows


@pytest.mark.unit
def test_every_sequence_is_placed_once_whole_and_in_order():
    ids, lengths, labels = split()
    batches = make_packed_batches(ids, lengths, labels, 8, seed=1, device=CPU, drop_last=False)
    placed = np.concatenate([b.sources[b.sources >= 0] for b in batches])
    assert sorted(placed) == list(range(len(lengths)))
    for b in batches:
        assert b.ids.shape == b.doc.shape == b.pos.shape == b.labels.shape == (8, L)  # one shape: no recompiles
        for r in range(8):
            for k in np.flatnonzero(b.sources[r] >= 0):
                src = b.sources[r, k]
                tokens = (b.doc[r] == int(k)).nonzero().flatten()
                assert len(tokens) == lengths[src] and (tokens.diff() == 1).all()  # contiguous
                assert (b.ids[r, tokens].numpy() == ids[src, : lengths[src]]).all()
                assert (b.pos[r, tokens] == torch.arange(len(tokens))).all()  # positions restart
                assert b.labels[r, k] == labels[src]
            assert (b.ids[r][b.doc[r] < 0] == 0).all() and (b.labels[r][b.sources[r] < 0] == -100).all()
        assert b.real_tokens == int((b.doc >= 0).sum()) and b.real_rows == len(b.seq_lengths)


@pytest.mark.unit
def test_packing_is_seeded_and_dense():
    ids, lengths, labels = split()
    a, b = (make_packed_batches(ids, lengths, labels, 4, seed=3, device=CPU) for _ in range(2))
    assert all(torch.equal(x.ids, y.ids) for x, y in zip(a, b))
    c = make_packed_batches(ids, lengths, labels, 4, seed=4, device=CPU)
    assert not all(torch.equal(x.ids, y.ids) for x, y in zip(a, c))
    # best fit leaves little room: at least 90% of the packed rows' tokens are real
    row, start, _ = best_fit_rows(lengths, L, np.arange(len(lengths)))
    assert lengths.sum() / ((row.max() + 1) * L) > 0.9
    assert (start + lengths <= L).all()  # no row exceeds max_len


@pytest.mark.unit
def test_a_sequence_longer_than_a_row_is_refused():
    with pytest.raises(ValueError, match="lengths must lie in"):
        best_fit_rows(np.array([3, L + 1]), L, np.arange(2))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TextClassifier(MODEL).eval()  # dropout off


@pytest.mark.unit
@pytest.mark.parametrize("attention", ["flex", "sdpa"])
def test_packed_logits_and_loss_equal_the_padded_models(model, attention):
    ids, lengths, labels = split()
    batch = make_packed_batches(ids, lengths, labels, 4, seed=0, device=CPU)[0]
    padded, rows = padded_twin(batch, ids, labels)
    with torch.no_grad():  # FlexAttention has no CPU backward
        packed_logits = model(batch.ids, batch.doc, batch.pos, attention)  # [B, L, C]
        padded_logits = model(padded.ids)  # [S, C]
        slots = batch.sources >= 0
        # slot order of `sources[sources >= 0]` is the padded twin's row order
        torch.testing.assert_close(packed_logits[torch.from_numpy(slots)], padded_logits, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(packed_loss(model, batch, "fp32", CPU, attention),
                                   forward_loss(model, padded.ids, padded.labels, "fp32", CPU), rtol=1e-5, atol=1e-6)


@pytest.mark.unit
def test_packed_training_gradients_equal_the_padded_models(model):
    ids, lengths, labels = split()
    batch = make_packed_batches(ids, lengths, labels, 4, seed=2, device=CPU)[0]
    padded, _ = padded_twin(batch, ids, labels)
    grads = []
    for loss_of in (lambda: packed_loss(model, batch, "fp32", CPU, "sdpa"),
                    lambda: forward_loss(model, padded.ids, padded.labels, "fp32", CPU)):
        model.zero_grad()
        loss_of().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for packed_grad, padded_grad in zip(*grads):
        torch.testing.assert_close(packed_grad, padded_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.unit
def test_real_flops_count_only_the_sequences():
    assert real_train_flops(MODEL, [L] * 6) == train_flops(MODEL, 6, L)
    ids, lengths, labels = split()
    batch = make_packed_batches(ids, lengths, labels, 4, seed=0, device=CPU)[0]
    padded, _ = padded_twin(batch, ids, labels)
    assert (np.sort(real_lengths(batch)) == np.sort(real_lengths(padded))).all()
    # attention is quadratic in length: packed rows compute more than their sequences need, padded rows far more
    real = real_train_flops(MODEL, real_lengths(batch))
    assert real < train_flops(MODEL, 4, L) < train_flops(MODEL, *padded.ids.shape)


@pytest.mark.parametrize("device", [
    # the study compiles FlexAttention on CUDA only (measure/compile.py packed_attention); on the CPU it is
    # checked where torch can compile it for the CPU at all
    pytest.param("cpu", marks=[pytest.mark.compile, pytest.mark.skipif(
        tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 13),
        reason="torch < 2.13 cannot compile FlexAttention for the CPU")]),
    pytest.param("cuda", marks=pytest.mark.gpu),
])
def test_the_block_mask_is_data_a_compiled_packed_model_compiles_once(model, device):
    device = torch.device(device)
    model = copy.deepcopy(model).to(device)
    ids, lengths, labels = split()
    batches = make_packed_batches(ids, lengths, labels, 4, seed=0, device=device, max_batches=4)
    with torch.no_grad():
        # eager first: eager FlexAttention runs through a small Dynamo frame of its own, counted as a graph
        expected = [model(b.ids, b.doc, b.pos) for b in batches]
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True)
        before = unique_graphs()
        got = [compiled(batches[0].ids, batches[0].doc, batches[0].pos)]
        after_first = unique_graphs()
        got += [compiled(b.ids, b.doc, b.pos) for b in batches[1:]]
    assert after_first - before == 1 and unique_graphs() == after_first  # a new mask every batch, no recompilation
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)
