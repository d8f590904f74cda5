"""Compile scopes: one side of the graph pair, its no-Inductor baseline, the whole step, the fused optimizer,
a deliberate graph break and its like-for-like reference (CPU, tiny model)."""

import dataclasses

import pytest
import torch

from compile_study.core.models.model import ModelConfig, TextClassifier
from compile_study.core.record import RunConfig
from compile_study.core.vocab import AUTOTUNE_MODES
from compile_study.measure.compile import autotune_search, build_step, mode_kwargs, subject_model
from compile_study.measure.compile_stats import CompileWatch
from compile_study.measure.profiling import profile_steps
from compile_study.measure.protocol import phase_split
from compile_study.measure.run import reference_side

from .conftest import TINY_MODEL
from .test_shapes import batch

pytestmark = pytest.mark.compile

CPU = torch.device("cpu")
BATCHES = [batch(16) for _ in range(4)]
MODEL = ModelConfig(vocab_size=100, **TINY_MODEL)


def train(scope: str, mode: str = "default", model_cfg: ModelConfig = MODEL) -> dict:
    """Four steps of `scope` -> losses, the compile report and a CPU profile of two more steps."""
    torch._dynamo.reset()
    run = RunConfig(mode, 4, "static", "fp32", 0, compile_scope=scope, lr=1e-3)
    model, opt = subject_model(model_cfg, run, CPU)
    watch = CompileWatch().start()
    step = build_step(model, opt, run, CPU, watch)
    losses = torch.stack([step(b) for b in BATCHES])
    report = watch.report()
    profile = profile_steps(lambda i: step(BATCHES[i]), 2, CPU)
    return {"losses": losses, "report": report, "profile": profile, "step": step, "model": model, "opt": opt}


@pytest.fixture(scope="module")
def eager():
    return train("module", "eager")


@pytest.mark.parametrize("scope", ["forward", "backward"])
def test_one_side_compiles_only_that_side_and_trains_like_eager(scope, eager):
    module = train("module")
    one_side = train(scope)
    torch.testing.assert_close(one_side["losses"], eager["losses"], rtol=1e-4, atol=1e-5)
    assert one_side["report"]["graphs_compiled"] == 1 and one_side["report"]["graph_breaks"] == 0
    # the uncompiled side runs its aten ops one by one: more operators per step than the whole module compiled,
    # fewer than eager only where Inductor fused something (the compiled side)
    assert one_side["profile"]["kernels_per_step"] > module["profile"]["kernels_per_step"]


def test_the_uncompiled_side_is_not_served_from_a_module_compile_in_the_cache():
    """AOTAutograd's cache does not key on the inner compiler; a `module` compile of the same graph must not
    hand its compiled backward to the `forward` scope (compile_model switches that cache off)."""
    module, forward = train("module"), train("forward")
    assert forward["profile"]["kernels_per_step"] > module["profile"]["kernels_per_step"]


def test_whole_step_compiles_forward_backward_and_optimizer(eager):
    step = train("step")
    torch.testing.assert_close(step["losses"], eager["losses"], rtol=1e-4, atol=1e-5)
    r = step["report"]
    assert r["graph_breaks"] >= 1 and any("backward" in reason for reason in r["graph_break_reasons"])
    assert r["graphs_compiled"] >= 2  # forward+loss, then the optimizer step after the break
    # the optimizer's per-parameter ops are fused too: far fewer operators than eager
    assert step["profile"]["kernels_per_step"] < eager["profile"]["kernels_per_step"] / 2
    phases = phase_split({"s": step["step"]}, BATCHES, 2, CPU)["s"]
    assert phases == {"forward_ms": None, "backward_ms": None, "optimizer_ms": None}  # one compiled call: no phases


def test_nonzero_pooling_breaks_the_graph_once_and_computes_the_same_model(eager):
    nonzero = dataclasses.replace(MODEL, pooling="nonzero")
    torch.manual_seed(0)
    a, b = TextClassifier(MODEL).eval(), TextClassifier(nonzero).eval()
    b.load_state_dict(a.state_dict())
    ids = BATCHES[0].ids.clone()
    ids[:, 10:] = 0  # padding: the pooling must skip it either way
    torch.testing.assert_close(a(ids), b(ids))
    broken = train("graph-break")  # the scope itself switches the subject's pooling
    assert broken["model"].cfg.pooling == "nonzero"
    r = broken["report"]
    assert r["graph_breaks"] == 1 and r["graphs_compiled"] == 2
    torch.testing.assert_close(broken["losses"], eager["losses"], rtol=1e-4, atol=1e-5)


def test_the_graph_break_reference_pools_like_its_subject():
    """Like for like: the eager reference of a graph-break run is the same nonzero-pooling model, uncompiled."""
    run = RunConfig("default", 4, "static", "fp32", 0, compile_scope="graph-break", lr=1e-3, warmup_steps=0)
    reference = reference_side(MODEL, run, CPU, BATCHES)
    assert reference.model.cfg.pooling == "nonzero"
    subject = train("graph-break")
    torch.testing.assert_close(torch.stack([reference.step(b) for b in BATCHES]), subject["losses"],
                               rtol=1e-4, atol=1e-5)


def test_aot_eager_replays_the_graph_pair_without_inductor_and_trains_like_eager(eager):
    """The baseline the one-side scopes are read against: AOTAutograd's graphs, no Inductor on either side."""
    aot = train("aot-eager")
    torch.testing.assert_close(aot["losses"], eager["losses"], rtol=1e-4, atol=1e-5)
    assert aot["report"]["graphs_compiled"] == 1 and aot["report"]["generated_kernels"] == 0
    forward = train("forward")  # Inductor on one side fuses there: fewer operators than no Inductor at all
    assert forward["profile"]["kernels_per_step"] < aot["profile"]["kernels_per_step"]


@pytest.mark.parametrize("mode", ["eager", "default"])
def test_fused_adamw_trains_like_foreach_adamw(mode, eager):
    fused = train("fused-adamw", mode)
    assert all(group["fused"] for group in fused["opt"].param_groups)
    torch.testing.assert_close(fused["losses"], eager["losses"], rtol=1e-4, atol=1e-5)
    run = RunConfig(mode, 4, "static", "fp32", 0, compile_scope="fused-adamw", warmup_steps=0)
    reference = reference_side(MODEL, run, CPU, BATCHES)  # one yardstick: eager with AdamW as torch picks it
    assert not any(group["fused"] for group in reference.optimizer.param_groups)


def test_phase_split_times_forward_backward_and_optimizer(eager):
    phases = phase_split({"eager": eager["step"]}, BATCHES, 3, CPU)["eager"]
    assert set(phases) == {"forward_ms", "backward_ms", "optimizer_ms"} and all(v > 0 for v in phases.values())


def test_one_side_scopes_refuse_other_modes():
    with pytest.raises(ValueError, match="does not run with compile_mode 'reduce-overhead'"):
        RunConfig("reduce-overhead", 4, "static", "fp32", 0, compile_scope="forward")


@pytest.mark.unit
def test_the_max_autotune_modes_search_the_gemms_alone_and_say_so():
    for mode in AUTOTUNE_MODES:
        options = mode_kwargs(mode)["options"]
        assert options["max_autotune_gemm"] and not options["max_autotune"]  # no pointwise/reduction config search
        assert not options["coordinate_descent_tuning"] and not options["benchmark_epilogue_fusion"]
        assert options.get("triton.cudagraphs", False) == (mode == "max-autotune")  # the modes' one difference
        assert set(options) <= set(torch._inductor.config._config)  # every option one Inductor knows
        assert autotune_search(mode) == "benchmark_epilogue_fusion=False coordinate_descent_tuning=False " \
                                        "max_autotune=False max_autotune_gemm=True"
    assert mode_kwargs("default") == {} and mode_kwargs("reduce-overhead") == {"mode": "reduce-overhead"}
    assert autotune_search("default") is autotune_search("eager") is None
