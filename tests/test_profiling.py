from __future__ import annotations

import gzip
import json

import pytest
import torch
from torch import nn

from compile_study.core.io import write_empty_trace
from compile_study.measure.profiling import CPU_LABEL, busy_time_us, profile_steps

pytestmark = pytest.mark.unit

CPU = torch.device("cpu")


def tiny_step():
    torch.manual_seed(0)
    model = nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 16)

    def step(i: int) -> float:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def test_busy_time_merges_overlaps():
    assert busy_time_us([]) == 0.0
    assert busy_time_us([(0, 10), (20, 25)]) == 15.0  # disjoint
    assert busy_time_us([(0, 10), (5, 15)]) == 15.0  # overlapping
    assert busy_time_us([(5, 15), (0, 10), (2, 3), (15, 16), (30, 31)]) == 17.0  # unsorted, nested, touching


def test_profile_steps_on_cpu(tmp_path):
    trace = tmp_path / "sub" / "trace.json.gz"
    r = profile_steps(tiny_step(), 3, CPU, trace_path=trace)
    json.dumps(r)  # plain JSON types only
    assert r["profiled_steps"] == 3 and r["kernel_kind"] == CPU_LABEL
    assert r["kernels_per_step"] > 0 and r["kernels_per_step"] == pytest.approx(round(r["kernels_per_step"]))
    assert r["cpu_ms_per_step"] > 0 and r["wall_ms_per_step"] > 0
    assert r["idle_fraction"] is None and r["device_busy_ms_per_step"] is None
    assert r["distinct_kernels"] > 0 and r["triton_kernels_distinct"] == 0
    top = r["top_kernels"]
    assert 0 < len(top) <= 5 and all(t["name"].startswith("aten::") for t in top)
    shares = [t["share"] for t in top]
    assert sum(shares) <= 1 + 1e-9 and shares == sorted(shares, reverse=True)

    with gzip.open(trace, "rt") as f:
        assert json.load(f)["traceEvents"]
    assert [p.name for p in trace.parent.iterdir()] == [trace.name]  # no temp files left behind

    # normalised per step: twice the steps, the same count per step
    assert profile_steps(tiny_step(), 6, CPU)["kernels_per_step"] == r["kernels_per_step"]


def test_write_empty_trace(tmp_path):
    trace = tmp_path / "failed.json.gz"
    write_empty_trace(trace, "OOM before profiling")
    with gzip.open(trace, "rt") as f:
        data = json.load(f)
    assert data == {"traceEvents": [], "otherData": {"note": "OOM before profiling"}}
