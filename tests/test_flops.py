"""FLOPs of any model from torch.utils.flop_counter, against the built-in model's hand count (exact).

Both count the same things for the built-in model: the hand count (core/models/model.py train_flops) takes every
matrix product of forward and backward (projections, feed-forward, Q K^T and A V, the head; backward twice the
forward) and nothing else; the counter, run with SDPA's math backend on meta tensors, sees exactly those
products as mm/addmm/bmm. So the tolerance is zero.
"""

from __future__ import annotations

import pytest

from compile_study.core.models.flops import StepFlops, count_step
from compile_study.core.models.model import ModelConfig, real_train_flops, train_flops
from compile_study.core.models.plug import build_model

from .conftest import TINY_MODEL
from .plug_models import TINY_BERT

pytestmark = pytest.mark.unit


def test_the_count_equals_the_hand_count_of_the_built_in_model_exactly():
    cfg = ModelConfig(vocab_size=8192)  # the studied size: 4 layers, 4 heads, d_model 256, max_len 128
    counted = StepFlops(cfg)
    assert counted.on == "meta tensors" and counted.fit is not None
    for batch, length in ((1, 1), (32, 128), (512, 128), (256, 77), (64, 13)):
        assert counted.padded(batch, length) == train_flops(cfg, batch, length)
    lengths = [3, 45, 62, 106, 128]
    assert counted.real(lengths) == real_train_flops(cfg, lengths)
    assert counted.per_token() == train_flops(cfg, 1, 128) / 128


def test_the_fitted_count_is_checked_against_shapes_it_was_not_fitted_on():
    counted = StepFlops(ModelConfig(vocab_size=300, **TINY_MODEL))
    fitted = counted.padded(5, 23)
    assert (5, 23) not in counted.counts and fitted == count_step(counted._model, 5, 23, counted._mode)


def test_a_transformers_model_is_counted_on_fake_tensors_and_fits_exactly():
    cfg = ModelConfig(vocab_size=300, **(TINY_MODEL | {"hf_config": TINY_BERT}))
    counted = StepFlops(cfg)
    # meta tensors fail on transformers' eager mask check (it reads the mask); fake tensors let it skip that
    assert counted.on == "fake tensors" and counted.fit is not None
    assert counted.padded(3, 20) == count_step(counted._model, 3, 20, counted._mode)
    assert counted.sequence(32) > counted.sequence(16) > 0


def test_a_model_whose_flops_are_not_quadratic_in_length_has_every_shape_counted():
    counted = StepFlops(ModelConfig(vocab_size=300, **(TINY_MODEL | {"factory": "tests.plug_models:cubic"})))
    assert counted.fit is None  # the check at 3/4 max_len and batch 2 caught it
    assert counted.padded(2, 10) == count_step(build_model(counted.cfg), 2, 10)
    assert counted.real([10, 10]) == 2 * counted.count(1, 10)


def test_a_count_kept_beside_the_data_is_read_by_a_later_process_and_gives_the_same_flops(tmp_path, monkeypatch):
    from compile_study.core.models import flops

    cfg = ModelConfig(vocab_size=300, **TINY_MODEL)
    monkeypatch.setattr(flops, "_CACHE", {})
    first = flops.step_flops(cfg, tmp_path)
    (kept,) = tmp_path.glob("flops-*.json")
    monkeypatch.setattr(flops, "_CACHE", {})  # a new process: nothing counted in it yet
    monkeypatch.setattr(flops, "count_step", lambda *a, **k: pytest.fail("counted again"))
    later = flops.step_flops(cfg, tmp_path)
    assert later is not first and later.fit == first.fit and later.on == first.on
    assert later.per_token() == first.per_token() and later.padded(8, 32) == first.padded(8, 32)
    assert later.real([3, 17, 32]) == first.real([3, 17, 32])
    kept.write_text("{")  # damaged: counted again (here: the guard above fails), never a crash on a bad file
    monkeypatch.setattr(flops, "_CACHE", {})
    with pytest.raises(pytest.fail.Exception, match="counted again"):
        flops.step_flops(cfg, tmp_path)
