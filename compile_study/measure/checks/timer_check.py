"""Independent check of the study's step timer (a benchmark to run on the device, not a test).

    snakemake --cores all results/cuda/checks/timer_check.json        (config `checks`; rule method_check)

Times the same training step three ways: the study's harness (`compile_study.measure.timing.time_steps`:
one CUDA event pair per step, one synchronisation per block), `torch.utils.benchmark.Timer`
(blocked_autorange, synchronised, with the harness's thread count), and on CUDA
`triton.testing.do_bench` (median of event-timed calls; it also clears the L2 cache before each
call). Harness and Timer alternate for `rounds` rounds, so that drift of the host (clocks, load)
does not favour either; the harness passes when the median of its rounds is within 3% of Timer's.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
from torch.utils.benchmark import Timer

from compile_study.core.dataset.batches import make_batches
from compile_study.core.dataset.data import load_split
from compile_study.core.io import write_json_atomic
from compile_study.core.models.model import model_config_for
from compile_study.core.record import RunConfig
from compile_study.measure.checks.spec import MethodCheck
from compile_study.measure.compile import compile_model, make_step, new_model
from compile_study.measure.steps import reset_compiler, set_precision
from compile_study.measure.timing import time_steps

CHECK = MethodCheck(
    name="timer_check", key="timer", prior_s=30,
    says="The study's step timer against torch.utils.benchmark's Timer and Triton's do_bench, on the same step.",
    # per device, the (compile mode, batch size) cases it times: a host-bound and a device-bound batch, each
    # compiled mode beside eager at its batch, so that a correction of a speedup has both of its sides timed; the
    # plan gives it the caches the compile phase filled for these cases (plan/checks.py timer_cells)
    cases={"cuda": (("eager", 32), ("reduce-overhead", 32), ("eager", 512), ("default", 512)),
           "cpu": (("eager", 16), ("default", 16))},
)


def check(data_dir: str, model: dict, mode: str, batch_size: int, precision: str, device: torch.device,
          steps: int = 200, min_run_time: float = 3.0, rounds: int = 3) -> dict:
    reset_compiler()
    set_precision(precision)
    cfg = model_config_for(data_dir, model)
    run = RunConfig(mode, batch_size, "static", precision, 0)
    model, optimizer = new_model(cfg, run, device)
    step = make_step(compile_model(model, mode), optimizer, precision, device)
    batch = make_batches(*load_split(data_dir, "train"), batch_size, "static", 0, device, max_batches=1)[0]
    for _ in range(20):  # warm-up, compilation included
        step(batch)
    # Timer runs single-threaded unless told otherwise; give it the harness's thread count
    timer = Timer("step(batch)", globals={"step": step, "batch": batch}, num_threads=torch.get_num_threads())
    harness, block, timed = [], [], []
    for _ in range(rounds):
        ms, wall = time_steps(lambda i: step(batch), steps, device)
        harness.append(statistics.median(ms))
        block.append(1e3 * wall / steps)
        timed.append(1e3 * timer.blocked_autorange(min_run_time=min_run_time).median)
    out = {"compile_mode": mode, "batch_size": batch_size, "precision": precision, "rounds": rounds,
           "harness_median_ms": statistics.median(harness), "harness_block_mean_ms": statistics.median(block),
           "timer_median_ms": statistics.median(timed), "harness_rounds_ms": harness, "timer_rounds_ms": timed}
    if device.type == "cuda":
        import triton.testing

        out["do_bench_median_ms"] = triton.testing.do_bench(lambda: step(batch), warmup=25, rep=200, return_mode="median")
    out["harness_vs_timer"] = out["harness_median_ms"] / out["timer_median_ms"]
    out["within_3pct"] = abs(out["harness_vs_timer"] - 1) <= 0.03
    return out


def main(data_dir: str, out_path: str, model: dict) -> None:
    """The check's cases for the device found, the study's model (config `model`), JSON to out_path."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cases = CHECK.cases[device.type]  # on the caches the study's compile phase filled, where its grid has them
    settings = {"steps": 100, "min_run_time": 1.0}  # ~10 s a case from a warm cache
    if device.type == "cpu":  # ~0.4 s a step on 2 cores: fewer steps per round
        settings = {"steps": 20, "min_run_time": 8.0}
    precision = "bf16" if device.type == "cuda" else "fp32"
    results = [check(data_dir, model, mode, bs, precision, device, **settings) for mode, bs in cases]
    write_json_atomic(out_path, {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
                                 "torch": torch.__version__, "results": results})
    print(f"{'mode':16} {'batch':>5} {'harness':>9} {'block':>9} {'Timer':>9} {'do_bench':>9} {'ratio':>7}")
    for r in results:
        print(f"{r['compile_mode']:16} {r['batch_size']:5d} {r['harness_median_ms']:9.3f} {r['harness_block_mean_ms']:9.3f} "
              f"{r['timer_median_ms']:9.3f} {r.get('do_bench_median_ms', float('nan')):9.3f} {r['harness_vs_timer']:7.3f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
