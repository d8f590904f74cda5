"""Does compiling a model slow down eager code in the same process? (a benchmark to run on the device)

    snakemake --cores all results/cuda/checks/reference_drift.json    (config `checks`; rule method_check)

Every run of the study times its eager reference inside the process that compiled the subject. If
compilation made later eager steps slower (a larger Python heap for the garbage collector to walk,
Inductor's compile workers still alive, allocator state), the in-process speedup would flatter the
compiled model. Each case runs in a fresh subprocess and times the same eager model A:

1. `before`: before anything is compiled (what an eager-only process sees);
2. `after_compile`: after a second model B was compiled and warmed up (B idle);
3. `interleaved`: alternating with B in chunks, as the study's timed block does;
4. `workers_shut`: after Inductor's compile worker pool was shut down;
5. `gc_frozen`: after `gc.freeze()` (the objects made so far are moved out of the collector's reach).

Each phase is `rounds` blocks of `steps` steps, timed like the study (CUDA events per step); its
median is reported with the collector's counts, so a slowdown can be traced to its cause.
"""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from compile_study.core.dataset.batches import make_batches
from compile_study.core.dataset.data import load_split
from compile_study.core.io import write_json_atomic
from compile_study.core.models.model import model_config_for
from compile_study.core.record import RunConfig
from compile_study.measure.checks.spec import MethodCheck
from compile_study.measure.compile import compile_model, make_step, new_model
from compile_study.measure.steps import set_precision
from compile_study.measure.timing import time_steps

CHECK = MethodCheck(
    name="reference_drift", key="drift", prior_s=60,
    says="Whether compiling a model slows later eager steps in the same process.",
)


def _median_ms(step, batch, steps: int, rounds: int, device) -> float:
    return statistics.median(statistics.median(time_steps(lambda i: step(batch), steps, device)[0]) for _ in range(rounds))


def _gc_state() -> dict:
    return {"tracked_objects": len(gc.get_objects()), "collections": [s["collections"] for s in gc.get_stats()]}


def one_case(data_dir: str, model: dict, mode: str, batch_size: int, precision: str, steps: int, rounds: int) -> dict:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    set_precision(precision)
    cfg = model_config_for(data_dir, model)
    run = RunConfig("eager", batch_size, "static", precision, 0)
    batch = make_batches(*load_split(data_dir, "train"), batch_size, "static", 0, device, max_batches=1)[0]
    model_a, opt_a = new_model(cfg, run, device)
    eager = make_step(model_a, opt_a, precision, device)
    for _ in range(20):
        eager(batch)
    out = {"compile_mode": mode, "batch_size": batch_size, "precision": precision, "steps": steps, "rounds": rounds}
    out["gc_before"] = _gc_state()
    out["before_ms"] = _median_ms(eager, batch, steps, rounds, device)

    model_b, opt_b = new_model(cfg, run, device)
    compiled = make_step(compile_model(model_b, mode), opt_b, precision, device)
    for _ in range(20):  # compilation and warm-up
        compiled(batch)
    out["gc_after_compile"] = _gc_state()
    out["after_compile_ms"] = _median_ms(eager, batch, steps, rounds, device)

    a, b = [], []
    for _ in range(rounds):
        a.append(statistics.median(time_steps(lambda i: eager(batch), steps, device)[0]))
        b.append(statistics.median(time_steps(lambda i: compiled(batch), steps, device)[0]))
    out["interleaved_ms"], out["interleaved_compiled_ms"] = statistics.median(a), statistics.median(b)

    from torch._inductor.async_compile import shutdown_compile_workers

    shutdown_compile_workers()
    out["workers_shut_ms"] = _median_ms(eager, batch, steps, rounds, device)
    gc.collect()
    gc.freeze()
    out["gc_frozen_ms"] = _median_ms(eager, batch, steps, rounds, device)
    out["gc_frozen_compiled_ms"] = _median_ms(compiled, batch, steps, rounds, device)
    out["slowdown_after_compile"] = out["after_compile_ms"] / out["before_ms"]
    out["slowdown_interleaved"] = out["interleaved_ms"] / out["before_ms"]
    out["in_process_speedup"] = out["interleaved_ms"] / out["interleaved_compiled_ms"]
    out["speedup_vs_before"] = out["before_ms"] / out["interleaved_compiled_ms"]
    return out


def main(data_dir: str, out_path: str, model: dict) -> None:
    """The check's cases for the device found, the study's model (config `model`), JSON to out_path."""
    cuda = torch.cuda.is_available()
    cases = [("default", 32), ("reduce-overhead", 32)] if cuda else [("default", 8)]
    precision, steps, rounds = ("bf16", 50, 5) if cuda else ("fp32", 10, 3)
    results = []
    for mode, bs in cases:  # one fresh process per case: "before" must see nothing compiled
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "case.json"
            subprocess.run([sys.executable, "-m", "compile_study.measure.checks.reference_drift", "--case", data_dir, json.dumps(model),
                            mode, str(bs), precision, str(steps), str(rounds), str(out)], check=True)
            results.append(json.loads(out.read_text()))
    write_json_atomic(out_path, {"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
                                 "results": results})
    print(f"{'mode':16} {'batch':>5} {'before':>8} {'+compile':>8} {'interl.':>8} {'no wrk':>8} {'gc frz':>8} "
          f"{'compiled':>8} {'in-proc':>7} {'vs bef.':>7}")
    for r in results:
        print(f"{r['compile_mode']:16} {r['batch_size']:5d} {r['before_ms']:8.3f} {r['after_compile_ms']:8.3f} "
              f"{r['interleaved_ms']:8.3f} {r['workers_shut_ms']:8.3f} {r['gc_frozen_ms']:8.3f} "
              f"{r['interleaved_compiled_ms']:8.3f} {r['in_process_speedup']:7.3f} {r['speedup_vs_before']:7.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "--case":
        data_dir, model, mode, bs, precision, steps, rounds, out = sys.argv[2:10]
        result = one_case(data_dir, json.loads(model), mode, int(bs), precision, int(steps), int(rounds))
        Path(out).write_text(json.dumps(result))
    else:
        main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
