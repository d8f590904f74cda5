"""CUDA-only paths of the study: CUDA-graph trees, the GPU timer, GPU memory and a whole run on the device.

    python -m pytest -m gpu          # on a host with a CUDA GPU; every test here skips elsewhere

The whole-step CUDA graph's parity tests live in tests/test_step_graph.py, FlexAttention compiled on packed
rows in tests/test_packing.py; both carry the same `gpu` marker.
"""

from __future__ import annotations

import statistics

import pytest
import torch

from compile_study.core.dataset.batches import Batch
from compile_study.core.models.model import ModelConfig, TextClassifier
from compile_study.measure.compile import compile_model, make_step
from compile_study.measure.compile_stats import CompileWatch
from compile_study.measure.run import run_and_record
from compile_study.measure.timing import time_steps

from .conftest import TINY_MODEL
from .test_train import tiny_model_cfg, tiny_run

pytestmark = pytest.mark.gpu

CUDA = torch.device("cuda")
MODEL = ModelConfig(vocab_size=100, **TINY_MODEL)  # dropout 0: eager and compiled draw no random numbers


def batch(width: int, rows: int = 8, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, 100, (rows, width), generator=g)
    ids[:, width // 2:] *= torch.rand(rows, 1, generator=g) < 0.5  # padding at the end of half the rows
    return Batch(ids.to(CUDA), torch.randint(0, 4, (rows,), generator=g).to(CUDA), int((ids != 0).sum()), rows)


def fresh():
    torch.manual_seed(0)
    model = TextClassifier(MODEL).to(CUDA)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def test_reduce_overhead_records_one_cuda_graph_per_shape_and_trains_like_eager():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch._dynamo.reset()
    data = [batch(w, seed=i) for i, w in enumerate([16, 16, 32, 16, 32, 32])]
    (model, opt), (ref, ref_opt) = fresh(), fresh()
    watch = CompileWatch().start()
    step = make_step(compile_model(model, "reduce-overhead"), opt, "fp32", CUDA, eager_model=model, watch=watch)
    eager = make_step(ref, ref_opt, "fp32", CUDA)
    got, want = [], []
    for i, b in enumerate(data):
        got.append(step(b))
        watch.after_step(i)
        want.append(eager(b))
    report = watch.report()
    assert report["cudagraph_recordings"] >= 2  # one recording per distinct shape (16 and 32 wide)
    assert report["graphs_compiled"] >= 2 and report["eager_fallback_steps"] == 0
    torch.testing.assert_close(torch.stack(got), torch.stack(want), rtol=1e-4, atol=1e-5)


def test_the_step_timer_measures_device_time_not_launch_time():
    """A step that only queues a kernel spinning 4e6 cycles (about 2 ms at 2 GHz): CUDA events see the kernel's
    time (a host timer around the launch alone would see microseconds), and the block's wall time covers them."""
    cycles = 4_000_000
    torch.cuda._sleep(cycles)  # warm-up: the first launch loads the kernel
    ms, wall = time_steps(lambda i: torch.cuda._sleep(cycles), 10, CUDA)
    assert 0.5 < statistics.median(ms) < 50 and max(ms) / min(ms) < 3
    assert wall * 1e3 >= 0.95 * sum(ms)


def test_a_run_on_the_gpu_records_device_memory_kernels_and_cuda_graphs(synthetic_data):
    cfg = tiny_model_cfg(synthetic_data)
    eager = run_and_record(cfg, tiny_run(), synthetic_data, "cuda")
    ro = run_and_record(cfg, tiny_run(compile_mode="reduce-overhead"), synthetic_data, "cuda")
    for rec in (eager, ro):
        m = rec["metrics"]
        assert rec["status"] == "ok" and rec["env"]["device_type"] == "cuda", rec["error"]
        assert 0 < m["peak_memory_bytes"] < torch.cuda.get_device_properties(CUDA).total_memory
        assert m["profile"]["kernels_per_step"] > 0 and 0 <= m["profile"]["idle_fraction"] <= 1
        assert m["overhead_s"]["cuda_init_s"] > 0
    assert eager["metrics"]["cudagraph_recordings"] == 0 and ro["metrics"]["cudagraph_recordings"] >= 1
    assert ro["env"]["cuda_matmul_allow_tf32"] is False  # fp32 runs with TF32 off
