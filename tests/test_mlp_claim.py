"""The MLP-claim check on the CPU: one small run (one batch size compiled) shared by the tests."""

from __future__ import annotations

import json
import statistics

import pytest
import torch

from compile_study.measure.checks import mlp_claim

pytestmark = [pytest.mark.compile, pytest.mark.xdist_group("mlp_claim")]  # its fixture runs the claim once

STEPS, REPEATS = 5, 2
ROW_KEYS = {
    "batch_size", "status", "cold_eager_s", "cold_compiled_s", "cold_ratio", "warm_eager_s", "warm_compiled_s",
    "warm_ratio", "proper_eager_ms", "proper_compiled_ms", "proper_speedup", "proper_rounds", "compile_s",
}


@pytest.fixture(scope="module")
def result() -> dict:
    """Batch sizes -1 (a real error: negative dimension), 4 (an injected OOM) and 8 (measured)."""
    real_inputs = mlp_claim.make_inputs

    def inputs(batch_size, device, seed):
        if batch_size == 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB\nmore advice")
        return real_inputs(batch_size, device, seed)

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # the caller's setting: run() uses "highest", then restores it
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(mlp_claim, "make_inputs", inputs)
            out = mlp_claim.run([-1, 4, 8], torch.device("cpu"), steps=STEPS, repeats=REPEATS, seed=0)
        out["precision_after"] = torch.get_float32_matmul_precision()
    finally:
        torch.set_float32_matmul_precision(before)
    return out


def test_measured_row_is_complete_and_consistent(result):
    assert json.loads(json.dumps(result)) == result  # JSON-serialisable as is
    assert {"claim", "setup", "device", "torch", "rows"} <= result.keys() and "1.2-1.5x" in result["claim"]
    assert result["device"] == "cpu" and result["torch"] == torch.__version__
    setup = result["setup"]
    assert setup["steps"] == STEPS and setup["repeats"] == REPEATS
    assert setup["precision"]["float32_matmul_precision"] == "highest"
    row = next(r for r in result["rows"] if r["batch_size"] == 8)
    assert row["status"] == "ok" and ROW_KEYS <= row.keys()
    for phase in ("cold", "warm"):
        eager, compiled = row[f"{phase}_eager_s"], row[f"{phase}_compiled_s"]
        assert eager > 0 and compiled > 0
        assert row[f"{phase}_ratio"] == pytest.approx(eager / compiled)
    assert row["proper_speedup"] == pytest.approx(row["proper_eager_ms"] / row["proper_compiled_ms"])
    rounds = row["proper_rounds"]
    assert len(rounds["eager_ms"]) == len(rounds["compiled_ms"]) == len(rounds["order"]) == REPEATS
    assert rounds["order"] == ["eager-compiled", "compiled-eager"]  # alternated every round
    assert all(ms > 0 for ms in rounds["eager_ms"] + rounds["compiled_ms"])
    assert row["proper_eager_ms"] == statistics.median(rounds["eager_ms"])
    assert row["proper_compiled_ms"] == statistics.median(rounds["compiled_ms"])
    # compilation (seconds, against steps of a few ms) is inside the cold number and not the warm one
    assert row["compile_s"] > 10 * row["proper_compiled_ms"] / 1e3
    assert row["cold_compiled_s"] > row["warm_compiled_s"]
    assert row["cold_compiled_s"] - row["warm_compiled_s"] > 0.5 * row["compile_s"]


def test_failures_are_rows_and_do_not_stop_the_others(result):
    rows = {r["batch_size"]: r for r in result["rows"]}
    assert list(rows) == [-1, 4, 8]
    assert rows[-1]["status"] == "error" and "negative" in rows[-1]["error"]
    oom = "OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB"  # the first line only
    assert rows[4] == {"batch_size": 4, "status": "oom", "error": oom}
    assert rows[8]["status"] == "ok" and rows[8]["proper_speedup"] > 0


def test_matmul_precision_is_restored(result):
    assert result["setup"]["precision"]["float32_matmul_precision"] == "highest"
    assert result["precision_after"] == "high"
