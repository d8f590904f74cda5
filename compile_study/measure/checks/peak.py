"""The device's measured matmul peak per precision, the denominator of MFU (measured once per study).

    snakemake --cores all results/cuda/peak.json
"""

from __future__ import annotations

import torch

from compile_study.core.calls.env import collect
from compile_study.measure.timing import time_steps


def matmul_tflops(n: int, dtype: torch.dtype, device: torch.device, reps: int = 10) -> float:
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):  # warm-up: library initialisation, clocks ramping up
        a @ b
    _, wall = time_steps(lambda i: a @ b, reps, device)
    return 2 * n**3 * reps / wall / 1e12


DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}  # tf32: float32, TF32 matmuls


def measure_peak(device: torch.device, precisions=tuple(DTYPES)) -> dict:
    """{precision: {"tflops", "n", "dtype"}} for square matmuls in each of `precisions` (fp32 with TF32 off, tf32,
    bf16): the study asks for those its grid runs (a CPU without bf16 instructions takes half a minute for bf16's)."""
    n = 8192 if device.type == "cuda" else 1024
    out = {}
    for precision in precisions:
        dtype = DTYPES[precision]
        torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
        out[precision] = {"tflops": matmul_tflops(n, dtype, device), "n": n, "dtype": str(dtype)}
    torch.set_float32_matmul_precision("highest")
    return out


def job(device: str, host: dict, precisions: list[str] | None = None) -> dict:
    """Rule measure_peak's process (measure/jobs.py): the peaks of the grid's precisions (all three where none
    are given) and the environment they were measured in."""
    dev = torch.device(device)
    peak = {"peaks": measure_peak(dev, precisions or tuple(DTYPES)), "env": collect(dev, host)}
    print(peak["peaks"])
    return peak
