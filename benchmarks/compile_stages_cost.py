"""What the stage accounting and the structured trace cost a cold compile on this host: pairs of cold compiles of
the tiny configuration (tests/conftest.py TINY_MODEL, `default`, static, fp32, batch 8), each in a fresh process
on an empty Inductor cache, one with the trace (measure/trace.py) and one without, in alternating order; each
process also times the stage split itself (measure/compile_stats.py stages) and reads torch's own count of the
trace's writing (structured_logging_overhead_us).

    PYTHONPATH=$PWD python benchmarks/compile_stages_cost.py --pairs 3 --out benchmarks/compile-stages/cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, sys, time
from pathlib import Path
import torch
from compile_study.core.calls.clock import Clock
from compile_study.core.models.model import ModelConfig
from compile_study.core.record import RunConfig
from compile_study.measure import cold, compile_stats
from compile_study.measure.trace import structured_trace
data, traced, out = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
model = ModelConfig(vocab_size=json.loads((data / "facts.json").read_text())["vocab_size"],
                    n_layers=2, n_heads=2, d_model=32, d_ff=64, dropout=0.0, max_len=32)
cfg = RunConfig(compile_mode="default", batch_size=8, shape_regime="static", precision="fp32", repeat=0,
                warmup_steps=2, timed_steps=5, interleave_chunk=2, max_epoch_steps=4)
torch.set_num_threads(1)
trace = structured_trace(f"{out}/c0.torch-trace.log.gz", f"{out}/c0.tlparse") if traced else None
import contextlib
with trace or contextlib.nullcontext({}) as kept:
    m, _ = cold.measure(model, cfg, data, torch.device("cpu"), Clock())
started = time.perf_counter()
compile_stats.stages(torch._dynamo.utils.get_compilation_metrics(), {})
split_s = time.perf_counter() - started
print(json.dumps({"traced": traced, "cold_compile_s": m["cold_compile_s"], "compile_stages_s": m["compile_stages_s"],
                  "compile_rest_s": m["compile_rest_s"], "split_s": split_s, "trace_overhead_s": cold.trace_overhead_s(),
                  "trace": kept if traced else None}))
"""


def one(data: Path, traced: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = os.environ | {"TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor", "TRITON_CACHE_DIR": f"{tmp}/triton"}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CHILD, str(data), "1" if traced else "0", tmp], env=env,
                              capture_output=True, text=True, check=True)
        out = json.loads(done.stdout.strip().splitlines()[-1]) | {"process_s": time.perf_counter() - started}
        if out["trace"]:
            out["trace"] = {k: v for k, v in out["trace"].items() if k in ("trace_bytes", "tlparse_bytes", "tlparse_skipped")}
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    from compile_study.core.dataset.data import prepare

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.conftest import TINY_MODEL, data_cfg

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        prepare(data_cfg(), TINY_MODEL["max_len"], data, data / "hf")
        runs = [one(data, traced) for i in range(args.pairs) for traced in ((i % 2 == 0), (i % 2 == 1))]
    with_, without = ([r["cold_compile_s"] for r in runs if r["traced"] is t] for t in (True, False))
    summary = {"pairs": args.pairs, "cpu_cores": os.cpu_count(), "runs": runs,
               "median_with_s": sorted(with_)[len(with_) // 2], "median_without_s": sorted(without)[len(without) // 2],
               "trace_overhead_s": [r["trace_overhead_s"] for r in runs if r["traced"]],
               "split_s": max(r["split_s"] for r in runs)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    from compile_study.core import digits

    args.out.write_text(digits.dumps(summary, indent=1) + "\n")
    print(digits.dumps({k: v for k, v in summary.items() if k != "runs"}))


if __name__ == "__main__":
    main()
