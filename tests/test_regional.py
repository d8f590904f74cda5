"""Scope `regional`: each repeated block compiled in place, the rest eager. The block finder (the built-in model's
layers, a BERT's, none in a model without a repeated block), what it cannot run and why, one compiled region for
four identical layers, and training like eager on padded and packed rows (CPU, tiny model, dropout off)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from compile_study.core import vocab
from compile_study.core.dataset.packing import make_packed_batches
from compile_study.core.models.model import EncoderLayer, ModelConfig, TextClassifier
from compile_study.core.models.plug import build_model, repeated_blocks
from compile_study.core.record import RunConfig
from compile_study.measure.compile import build_step, check_applicable, compile_model, make_step, subject_model
from compile_study.measure.compile_stats import CompileWatch
from compile_study.measure.steps import NotApplicable

from .conftest import TINY_MODEL
from .plug_models import TINY_BERT
from .test_packing import split
from .test_shapes import batch

CPU = torch.device("cpu")
MODEL = ModelConfig(vocab_size=100, **(TINY_MODEL | {"n_layers": 4}))  # the study's depth: four identical layers


# ---------------------------------------------------------------- the block finder and what regional cannot run


@pytest.mark.unit
def test_the_block_finder_finds_the_built_in_models_layers_and_a_berts():
    model = TextClassifier(MODEL)
    assert repeated_blocks(model) is model.layers and len(model.layers) == 4
    bert = build_model(ModelConfig(vocab_size=50, **(TINY_MODEL | {"hf_config": TINY_BERT})))
    blocks = repeated_blocks(bert)
    assert blocks is bert.inner.bert.encoder.layer
    assert len(blocks) == TINY_BERT["num_hidden_layers"] and type(blocks[0]).__name__ == "BertLayer"


class Towers(nn.Module):
    """Two small heads, two larger blocks, a list of mixed classes and a list of one: the blocks are the repeat."""

    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(4, 2) for _ in range(3))
        self.blocks = nn.ModuleList(nn.Linear(16, 16) for _ in range(2))
        self.mixed = nn.ModuleList([nn.Linear(64, 64), nn.Conv1d(64, 64, 3)])
        self.single = nn.ModuleList([nn.Linear(128, 128)])


@pytest.mark.unit
def test_the_repeated_block_is_the_list_of_one_class_holding_the_most_parameters():
    towers = Towers()
    assert repeated_blocks(towers) is towers.blocks  # more parameters than the heads; mixed and single lists skipped
    assert repeated_blocks(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))) is None  # a list, not a Sequential


@pytest.mark.unit
def test_a_model_without_a_repeated_block_is_not_applicable_and_says_why():
    model = build_model(ModelConfig(vocab_size=50, **(TINY_MODEL | {"factory": "tests.plug_models:good"})))
    assert repeated_blocks(model) is None
    with pytest.raises(NotApplicable, match=r"^no repeated block: tests\.plug_models\.MeanClassifier holds no "
                                            r"nn\.ModuleList of two or more modules of one class"):
        compile_model(model, "default", "regional")
    assert vocab.plug_not_applicable("regional", "static") is None  # a plug with blocks runs it


@pytest.mark.unit
def test_a_plugged_model_without_a_repeated_block_is_recorded_not_applicable(synthetic_data):
    from compile_study.core.models.model import model_config_for
    from compile_study.measure.run import run_and_record

    cfg = model_config_for(synthetic_data, TINY_MODEL | {"factory": "tests.plug_models:good"})
    rec = run_and_record(cfg, RunConfig("default", 8, "static", "fp32", 0, compile_scope="regional"),
                         synthetic_data, "cpu")
    assert rec["status"] == "not_applicable" and rec["error"].startswith("no repeated block: ")
    assert "steady_step_ms" not in rec["metrics"] and rec["metrics"]["overhead_s"]["timed_s"] == 0


@pytest.mark.unit
def test_regional_on_marked_lengths_is_not_applicable_with_the_reason():
    """The mark is on the model's input ids; the compiled blocks take the embeddings' output, which carries none
    (on torch 2.13 the layers compiled a second graph at the second length, as unmarked `dynamic` does)."""
    marked = RunConfig("default", 8, "dynamic-marked", "fp32", 0, compile_scope="regional")
    with pytest.raises(NotApplicable, match="dynamic-marked marks the length of the model's input ids"):
        check_applicable(MODEL, marked)
    for scope, regime in (("module", "dynamic-marked"), ("regional", "dynamic"), ("regional", "packed")):
        check_applicable(MODEL, RunConfig("default", 8, regime, "fp32", 0, compile_scope=scope))  # applies
    assert vocab.runs_with("default", "regional", "packed") and not vocab.runs_with("eager", "regional", "static")


# ---------------------------------------------------------------- what regional compiles, and how it trains


def train(mode: str, regime: str, batches: list) -> dict:
    """Steps of scope `regional` (eager: the plain model) on `batches` -> losses, compile report, compiled frames."""
    torch._dynamo.reset()
    run = RunConfig(mode, len(batches[0].ids), regime, "fp32", 0, lr=1e-3,
                    compile_scope="module" if mode == "eager" else "regional")
    model, opt = subject_model(MODEL, run, CPU)
    watch = CompileWatch().start()
    step = build_step(model, opt, run, CPU, watch)
    losses = torch.stack([step(b) for b in batches])
    report = watch.report()
    frames = {(m.co_name, m.co_filename, m.co_firstlineno)  # Dynamo's frames (a lazy backward's entry names none)
              for m in torch._dynamo.utils.get_compilation_metrics() if m.co_name}
    return {"losses": losses, "report": report, "model": model, "frames": frames}


LAYER_FORWARD = EncoderLayer.forward.__code__
LAYER_FRAME = {("forward", LAYER_FORWARD.co_filename, LAYER_FORWARD.co_firstlineno)}


@pytest.mark.compile
def test_the_four_identical_layers_compile_as_one_region_and_train_like_eager():
    """On torch 2.13: one Dynamo frame and graph for the four layers (layers 2-4 reuse layer 1's code), its backward
    compiled once; the embeddings, pooling and head stay uncompiled; the losses are eager's."""
    batches = [batch(MODEL.max_len) for _ in range(4)]
    eager, regional = train("eager", "static", batches), train("default", "static", batches)
    torch.testing.assert_close(regional["losses"], eager["losses"], rtol=1e-4, atol=1e-5)
    r = regional["report"]
    assert (r["graphs_compiled"], r["dynamo_frames_compiled"], r["graph_breaks"], r["recompiles"]) == (1, 1, 0, 0)
    assert r["lazy_backward_compiles"] <= 1  # one on an empty cache; none where AOTAutograd's cache holds it
    assert regional["frames"] == LAYER_FRAME  # the one frame Dynamo compiled: an encoder layer's forward
    model = regional["model"]
    assert type(model) is TextClassifier  # compiled in place: no wrapper, the same state_dict keys
    assert all(layer._compiled_call_impl is not None for layer in model.layers)
    assert [name for name, m in model.named_modules() if m._compiled_call_impl is not None] == \
        [f"layers.{i}" for i in range(4)]


@pytest.mark.compile
def test_packed_rows_go_through_the_same_compiled_layers_and_train_like_eager():
    """The packed path calls the same layers (on the CPU with a dense [B, 1, L, L] document mask): one region."""
    ids, lengths, labels = split()
    batches = make_packed_batches(ids, lengths, labels, 4, seed=0, device=CPU, max_batches=3)
    eager, regional = train("eager", "packed", batches), train("default", "packed", batches)
    torch.testing.assert_close(regional["losses"], eager["losses"], rtol=1e-4, atol=1e-5)
    r = regional["report"]
    assert (r["graphs_compiled"], r["dynamo_frames_compiled"], r["graph_breaks"]) == (1, 1, 0)
    assert regional["frames"] == LAYER_FRAME


@pytest.fixture
def dynamo_only(monkeypatch):
    """compile_blocks with Dynamo's eager backend: which frames Dynamo compiles, in a second, without Inductor."""
    monkeypatch.setattr("compile_study.measure.compile.mode_kwargs", lambda mode: {"backend": "eager"})


@pytest.mark.compile
def test_a_berts_layers_compile_as_one_region_too(dynamo_only):
    bert = build_model(ModelConfig(vocab_size=50, **(TINY_MODEL | {"hf_config": TINY_BERT})))
    ids = batch(TINY_MODEL["max_len"]).ids % 50
    ids[:, 20:] = 0  # padding: the attention mask is the blocks' input too
    torch._dynamo.reset()
    watch = CompileWatch().start()
    compile_model(bert, "default", "regional")(ids).sum().backward()
    r = watch.report()
    forward = type(repeated_blocks(bert)[0]).forward.__code__
    frames = {(m.co_name, m.co_filename, m.co_firstlineno) for m in torch._dynamo.utils.get_compilation_metrics()}
    assert (r["graphs_compiled"], r["dynamo_frames_compiled"], r["graph_breaks"]) == (1, 1, 0)  # fullgraph held
    assert frames == {("forward", forward.co_filename, forward.co_firstlineno)}  # BertLayer.forward, once


@pytest.mark.compile
def test_past_the_recompile_limit_the_compiled_layers_run_eagerly_and_are_counted(dynamo_only):
    """make_step's fallback: regional compiled the blocks of the very model it falls back to, so the fallback
    runs them under the force_eager stance."""
    torch._dynamo.reset()
    torch._dynamo.config.recompile_limit = 1
    try:
        torch.manual_seed(0)
        model = TextClassifier(MODEL)
        compiled = compile_model(model, "default", "regional", dynamic=False)
        watch = CompileWatch().start()
        step = make_step(compiled, torch.optim.AdamW(model.parameters()), "fp32", CPU, eager_model=model, watch=watch)
        losses = [step(batch(w)) for w in (8, 12, 16)]  # a new length each step, one graph allowed
        report = watch.report()
    finally:
        torch._dynamo.config.recompile_limit = 8
    assert all(torch.isfinite(loss) for loss in losses)
    assert report["graphs_compiled"] == 1 and report["eager_fallback_steps"] == 2
