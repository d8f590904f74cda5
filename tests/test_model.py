import pytest
import torch

from compile_study.core.models.model import ModelConfig, TextClassifier

from .conftest import TINY_MODEL

pytestmark = pytest.mark.unit


def test_default_is_four_layers_four_heads():
    cfg = ModelConfig()
    assert (cfg.n_layers, cfg.n_heads) == (4, 4)
    assert len(TextClassifier(cfg).layers) == 4


def test_logits_shape_and_padding_invariance():
    torch.manual_seed(0)
    model = TextClassifier(ModelConfig(vocab_size=100, **TINY_MODEL)).eval()
    ids = torch.randint(1, 100, (3, 10))
    ids[1, 6:] = 0  # a shorter row
    logits = model(ids)
    assert logits.shape == (3, 4)
    # padding a batch further must not change any row's logits (masked attention + masked pooling)
    padded = torch.cat([ids, torch.zeros(3, 7, dtype=ids.dtype)], 1)
    torch.testing.assert_close(model(padded), logits, rtol=1e-5, atol=1e-5)


def test_bad_head_count_is_rejected():
    with pytest.raises(ValueError, match="not divisible by model.n_heads"):
        ModelConfig(d_model=30, n_heads=4)
