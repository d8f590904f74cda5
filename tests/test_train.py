import json
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from compile_study.core import record
from compile_study.core.calls.clock import Clock
from compile_study.core.dataset.batches import make_batches
from compile_study.core.dataset.data import load_split
from compile_study.core.models.model import ModelConfig, TextClassifier
from compile_study.core.record import RunConfig
from compile_study.measure import run
from compile_study.measure.compile import compile_model, make_step
from compile_study.measure.protocol import interleaved_block
from compile_study.measure.run import run_and_record

from .conftest import REPO, TINY_MODEL

CPU = torch.device("cpu")


def tiny_model_cfg(data_dir) -> ModelConfig:
    vocab = json.loads((data_dir / "facts.json").read_text())["vocab_size"]
    return ModelConfig(vocab_size=vocab, **TINY_MODEL)


def tiny_run(**kw) -> RunConfig:
    return RunConfig(**({"compile_mode": "eager", "batch_size": 8, "shape_regime": "static", "precision": "fp32",
                         "repeat": 0, "warmup_steps": 2, "timed_steps": 5, "interleave_chunk": 2,
                         "max_epoch_steps": 4} | kw))


@pytest.mark.compile  # it trains a model on the CPU, end to end
def test_record_schema_of_an_eager_run(synthetic_data):
    rec = run_and_record(tiny_model_cfg(synthetic_data), tiny_run(), synthetic_data, "cpu")
    assert rec["status"] == "ok" and rec["error"] is None
    assert rec["config"]["compile_mode"] == "eager" and rec["config"]["model"]["n_layers"] == 2
    for key in ("device_type", "device_name", "torch", "python", "cpu_model", "cpu_cores", "git_commit"):
        assert key in rec["env"]
    m = rec["metrics"]
    assert len(m["step_times_ms"]) == 5 and m["steady_step_ms"] == pytest.approx(np.median(m["step_times_ms"]))
    assert len(m["reference_step_times_ms"]) == 5  # the interleaved eager reference (here: an A/A control)
    assert m["in_process_speedup"] == pytest.approx(m["reference_step_ms"] / m["steady_step_ms"])
    assert len(m["warmup_step_s"]) == 2 and m["epoch_steps"] == 4 and len(m["epoch1_step_ms"]) == 4
    assert m["epoch1_s"] > 0 and m["epoch2_s"] > 0 and 0 <= m["eval_accuracy"] <= 1
    assert m["graphs_compiled"] == 0 and m["peak_memory_bytes"] > 0 and m["achieved_tflops"] > 0
    assert rec["env"]["dynamo_recompile_limit"] == 8 and rec["env"]["float32_matmul_precision"] == "highest"
    assert rec["env"]["autotune_search"] is None  # kept only by the max-autotune modes' records
    assert rec["schema_version"] == record.SCHEMA_VERSION and rec["config"]["evidence"] is True
    assert m["chunk_first"] == ["subject", "reference", "subject"]  # 5 steps in chunks of 2: three chunks
    assert set(m["profile"]) >= set(record.PROFILE) and m["forward_ms"] > 0 and m["evidence_errors"] == {}
    assert m["inference_step_ms"] > 0  # static, module scope: the inference block ran
    assert set(m) - {"overhead_s"} <= set(record.SCALARS) | set(record.SERIES) | set(record.TEXTS)  # all declared
    json.dumps(rec)  # serialisable as it stands


@pytest.mark.compile  # it trains a model on the CPU, end to end
def test_without_evidence_the_phase_split_profiler_inference_and_accuracy_are_absent(synthetic_data):
    rec = run_and_record(tiny_model_cfg(synthetic_data), tiny_run(repeat=1, evidence=False), synthetic_data, "cpu")
    m = rec["metrics"]
    assert rec["status"] == "ok" and m["steady_step_ms"] > 0
    evidence = {"forward_ms", "reference_forward_ms", "profile", "reference_profile", "inference_step_ms",
                "inference_speedup", "evidence_errors", "eval_accuracy"}
    assert not evidence & set(m)  # absent, not None-filled
    o = m["overhead_s"]
    assert o["phase_split_s"] == o["profiler_s"] == o["inference_s"] == o["accuracy_s"] == 0


@pytest.mark.compile  # it trains a model on the CPU, end to end
def test_overhead_parts_are_non_negative_and_add_up_to_the_total(synthetic_data):
    # A run resets Dynamo where its process compiled before (steps.reset_compiler): a run's process never has, but
    # this test's may, and on a CUDA host the first reset imports Inductor's CUDA graph trees (1.7 s on an H200
    # host): paid here, outside the run whose booking is checked.
    torch._dynamo.reset()
    rec = run_and_record(tiny_model_cfg(synthetic_data), tiny_run(timed_steps=20), synthetic_data, "cpu")
    parts = rec["metrics"]["overhead_s"]
    assert list(parts) == list(record.OVERHEAD) and all(v >= 0 for v in parts.values())
    named = sum(v for k, v in parts.items() if k != "total_s")
    assert named <= parts["total_s"] and named == pytest.approx(parts["total_s"], rel=0.05), parts
    assert parts["timed_s"] > 0 and parts["profiler_s"] > 0 and parts["accuracy_s"] > 0 and parts["data_load_s"] > 0
    # compile: building the model and its compile switch (milliseconds for the tiny model), then the epochs' time
    # beyond the steady state: the warm-up's excess, or epoch 1 over epoch 2 where a later step recompiled
    m = rec["metrics"]
    assert 0 <= parts["compile_s"] - max(m["warmup_excess_s"], m["epoch1_s"] - m["epoch2_s"]) < 0.5


@pytest.mark.unit
def test_interleaved_chunks_alternate_which_side_runs_first():
    calls = []
    steps = {name: (lambda b, name=name: calls.append(name) or torch.zeros(())) for name in ("subject", "reference")}
    block = interleaved_block(steps, [None], 7, 2, CPU, {"subject": [], "reference": []})
    assert block["chunk_first"] == ["subject", "reference", "subject", "reference"]
    s, r = "subject", "reference"
    assert calls == [s, s, r, r] + [r, r, s, s] + [s, s, r, r] + [r, s]  # chunks of 2, the last of 1


@pytest.mark.unit
def test_step_graph_on_the_cpu_is_recorded_as_not_applicable(synthetic_data):
    cfg = tiny_run(compile_mode="default", compile_scope="step-graph")
    rec = run_and_record(tiny_model_cfg(synthetic_data), cfg, synthetic_data, "cpu")
    assert rec["status"] == "not_applicable" and "CUDA graph" in rec["error"] and "\n" not in rec["error"]
    assert "traceback" not in rec and set(rec["metrics"]) == {"overhead_s"}


@pytest.mark.unit
def test_the_eager_step_graph_on_the_cpu_is_recorded_as_not_applicable(synthetic_data):
    rec = run_and_record(tiny_model_cfg(synthetic_data), tiny_run(compile_scope="eager-step-graph"), synthetic_data,
                         "cpu")
    assert rec["status"] == "not_applicable" and rec["error"] == ("eager-step-graph captures the whole step as a CUDA "
                                                                  "graph; there are none on cpu")
    assert "traceback" not in rec and set(rec["metrics"]) == {"overhead_s"}


@pytest.mark.gpu
def test_an_eager_step_graph_run_is_timed_against_eager_and_recorded(synthetic_data):
    """The control's run on CUDA: the record of an eager run (nothing compiled), its timed block interleaved with
    the eager reference in the same process (the speedup and its steps), its evidence taken without phases (the
    graph replays the whole step)."""
    cfg = tiny_run(compile_scope="eager-step-graph")
    rec = run_and_record(tiny_model_cfg(synthetic_data), cfg, synthetic_data, "cuda")
    assert rec["status"] == "ok", rec["error"]
    assert (rec["config"]["compile_mode"], rec["config"]["compile_scope"]) == ("eager", "eager-step-graph")
    m = rec["metrics"]
    assert len(m["step_times_ms"]) == len(m["reference_step_times_ms"]) == cfg.timed_steps
    assert m["in_process_speedup"] == pytest.approx(m["reference_step_ms"] / m["steady_step_ms"])
    assert m["graphs_compiled"] == 0 and np.isfinite(m["final_loss"])
    assert m.get("forward_ms") is None  # a graphed step has no phases to mark


@pytest.mark.unit
def test_static_batches_have_one_shape_and_count_real_tokens(synthetic_data):
    ids, lengths, labels = load_split(synthetic_data, "train")
    batches = make_batches(ids, lengths, labels, 16, "static", 0, CPU)
    assert len(batches) == len(labels) // 16
    assert {tuple(b.ids.shape) for b in batches} == {(16, TINY_MODEL["max_len"])}
    assert all(b.real_tokens == int((b.ids != 0).sum()) and b.real_rows == 16 for b in batches)


@pytest.mark.parametrize(
    "exc, status",
    [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), "oom"),
        (FloatingPointError("non-finite loss at step 3"), "nan"),
        (RuntimeError("something else"), "error"),
        (__import__("torch.fx.experimental.symbolic_shapes", fromlist=["x"]).ConstraintViolationError(
            "Constraints violated (L['ids'].size()[1])!"), "compile_error"),
    ],
)
@pytest.mark.unit
def test_a_failure_becomes_the_record_status(synthetic_data, monkeypatch, exc, status):
    def boom(*a, **k):
        raise exc

    monkeypatch.setattr(run, "measure", boom)
    rec = run_and_record(tiny_model_cfg(synthetic_data), tiny_run(), synthetic_data, "cpu")
    assert rec["status"] == status and str(exc).split(".")[0] in rec["error"]
    assert set(rec["metrics"]) == {"overhead_s"} and rec["metrics"]["overhead_s"]["total_s"] > 0


@pytest.mark.compile
def test_compiled_losses_match_eager(synthetic_data):
    """Dropout off, same seed and batches: the compiled module trains like the eager one (fp32)."""
    ids, lengths, labels = load_split(synthetic_data, "train")
    batches = make_batches(ids, lengths, labels, 8, "static", 0, CPU, max_batches=4)
    cfg = tiny_model_cfg(synthetic_data)
    losses = {}
    torch._dynamo.reset()
    for mode in ("eager", "default"):
        torch.manual_seed(0)
        model = TextClassifier(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        step = make_step(compile_model(model, mode), opt, "fp32", CPU)
        losses[mode] = torch.stack([step(b) for b in batches])
    torch.testing.assert_close(losses["default"], losses["eager"], rtol=1e-4, atol=1e-5)
    assert losses["eager"][-1] < losses["eager"][0]  # it does learn


@pytest.mark.unit
def test_the_clock_goes_on_in_another_process_of_the_host():
    clock = Clock()
    with clock.part("gpu_wait_s"):
        time.sleep(0.05)
    code = ("import json, sys, time; from compile_study.core.calls.clock import Clock; c = Clock.resume(json.loads(sys.argv[1]));"
            " c.lap('process_start_s'); print(json.dumps(c.state()))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(clock.state())], capture_output=True, text=True,
                         check=True, cwd=REPO)
    resumed = Clock.resume(json.loads(out.stdout))
    # the child's lap holds the interpreter's start: perf_counter is one clock for the whole host
    assert 0.0 < resumed.parts["process_start_s"] < resumed.elapsed() and resumed.parts["gpu_wait_s"] >= 0.05
    clock = Clock()
    with clock.part("timed_s"):
        time.sleep(0.05)
    clock.move("timed_s", "compile_s", 1.0)  # never more than the source holds
    assert clock.parts["timed_s"] == 0 and clock.parts["compile_s"] >= 0.05
