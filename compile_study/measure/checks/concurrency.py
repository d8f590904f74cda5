"""Do two timed runs on two GPUs of one host, each on its own share of the cores, step as fast as one alone?
(a benchmark to run on the device)

    snakemake --cores all --resources timed_run=N results/cuda/checks/concurrency.json   (config `checks`; rule method_check)

On a host with N GPUs the study runs N timed jobs at once, each on its own GPU and its own 1/N of the CPU
cores (isolation.Host's lanes). Most configurations wait on the host, so this must be shown, as an A/A
comparison: the same eager model (static padding, bf16; fp32 on the CPU) in fresh processes, each round

(a) two processes at once, process i on GPU i and core share i of N (isolation.pin_cores, before torch is
    imported), both released at one start signal after their warm-up so that their timed blocks overlap;
(b) one process alone on GPU 0 with core share 0;

(a) first in even rounds and (b) first in odd ones, so that drift of the host favours neither. Each process
times `steps` steps like the study (timing.time_steps: CUDA events per step). The ratio of a round is the
concurrent GPU-0 median step over the solo one; across rounds its geometric mean with a 95% Student-t
interval on the log ratios (stats.speedup_interval). With fewer than two GPUs the check does not apply.
On the CPU (`run_check(..., device="cpu")`, the tests) the processes get disjoint core shares and no GPU.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from compile_study.core.dataset.batches import make_batches
from compile_study.core.dataset.data import load_split
from compile_study.core.io import write_json_atomic
from compile_study.core.models.model import model_config_for
from compile_study.core.record import RunConfig
from compile_study.core.stats import speedup_interval
from compile_study.measure.checks.spec import MethodCheck
from compile_study.measure.compile import make_step, new_model
from compile_study.measure.process.isolation import count_gpus
from compile_study.measure.steps import set_precision
from compile_study.measure.timing import synchronize, time_steps

CHECK = MethodCheck(
    name="concurrency", key="concurrency", prior_s=60, whole=True, shares=2, every_gpu=True,
    says="Whether two timed runs on two GPUs of one host, each on its own share of the cores, step as fast as one alone.",
)

PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])  # the children import the code the parent runs
# A child pins itself to its core share before torch is imported, then trains and prints one JSON line.
CHILD = ("import json, sys; from compile_study.measure.process.isolation import pin_cores; pin_cores(int(sys.argv[1]), int(sys.argv[2]));"
         " from compile_study.measure.checks.concurrency import child; print(json.dumps(child(*sys.argv[3:])))")


def child(data_dir: str, model: str, device: str, batch_size: str, steps: str, warmup: str, ready: str,
          start: str) -> dict:
    """One process's timed block: warm up, say `ready`, wait for `start`, time `steps` eager steps."""
    dev, precision = torch.device(device), "bf16" if device == "cuda" else "fp32"
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    set_precision(precision)
    run = RunConfig("eager", int(batch_size), "static", precision, 0)
    batch = make_batches(*load_split(data_dir, "train"), run.batch_size, "static", 0, dev, max_batches=1)[0]
    net, optimizer = new_model(model_config_for(data_dir, json.loads(model)), run, dev)
    step = make_step(net, optimizer, precision, dev)
    for _ in range(int(warmup)):
        step(batch)
    synchronize(dev)
    Path(ready).touch()
    while not Path(start).exists():
        time.sleep(0.001)
    began = time.time()
    ms, _ = time_steps(lambda i: step(batch), int(steps), dev)
    return {"median_ms": statistics.median(ms), "start": began, "end": time.time(),
            "cores": sorted(os.sched_getaffinity(0)), "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"}


def child_env(slot: int, device: str) -> dict:
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))}
    return env | {"CUDA_VISIBLE_DEVICES": str(slot)} if device == "cuda" else env


def launch(slots: list[int], shares: int, device: str, args: list[str]) -> list[dict]:
    """Start one child per slot, release them together once all are warm -> their results, in slot order."""
    with tempfile.TemporaryDirectory() as tmp:
        ready, start = [Path(tmp) / f"ready{s}" for s in slots], Path(tmp) / "start"
        procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(s), str(shares), *args, str(r), str(start)],
                                  stdout=subprocess.PIPE, text=True, env=child_env(s, device))
                 for s, r in zip(slots, ready)]
        while not all(r.exists() for r in ready):
            if any(p.poll() is not None for p in procs):
                break  # a child died before its warm-up ended: its error is raised below
            time.sleep(0.01)
        start.touch()
        outs = [p.communicate()[0] for p in procs]
    for p in procs:
        if p.returncode:
            raise subprocess.CalledProcessError(p.returncode, p.args)
    return [json.loads(out.strip().splitlines()[-1]) for out in outs]


def overlap(windows: list[dict]) -> float:
    """The share of the timed windows' span during which all of them were timing (1 = the same instant)."""
    start, end = max(w["start"] for w in windows), min(w["end"] for w in windows)
    span = max(w["end"] for w in windows) - min(w["start"] for w in windows)
    return max(0.0, end - start) / span


def one_round(i: int, shares: int, device: str, args: list[str]) -> dict:
    """(a) two children at once and (b) one alone, (a) first in even rounds -> the round's medians and ratio."""
    parts = {"concurrent": lambda: launch([0, 1], shares, device, args), "solo": lambda: launch([0], shares, device, args)}
    order = ["concurrent", "solo"] if i % 2 == 0 else ["solo", "concurrent"]
    got = {part: parts[part]() for part in order}
    pair, (solo,) = got["concurrent"], got["solo"]
    return {"round": i, "order": f"{order[0]} first", "concurrent_ms": [c["median_ms"] for c in pair],
            "solo_ms": solo["median_ms"], "ratio": pair[0]["median_ms"] / solo["median_ms"], "overlap": overlap(pair),
            "concurrent_cores": [c["cores"] for c in pair], "solo_cores": solo["cores"],
            "devices": [c["device"] for c in pair]}


def run_check(data_dir: str, model: dict, device: str = "cuda", shares: int = 2, rounds: int = 3, steps: int = 100,
              warmup: int = 20, batch_size: int = 32) -> dict:
    """The protocol of the module docstring on `device`, with the cores cut in `shares` shares -> the check's JSON."""
    args = [str(data_dir), json.dumps(model), device, str(batch_size), str(steps), str(warmup)]
    results = [one_round(i, shares, device, args) for i in range(rounds)]
    iv = speedup_interval(r["ratio"] for r in results)
    return {"applicable": True, "device": device, "gpus": results[0]["devices"], "torch": torch.__version__,
            "compile_mode": "eager", "shape_regime": "static", "precision": "bf16" if device == "cuda" else "fp32",
            "batch_size": batch_size, "steps": steps, "warmup": warmup, "rounds": rounds, "shares": shares,
            "cores": results[0]["concurrent_cores"], "results": results,
            "summary": {"ratio": iv.point, "low": iv.low, "high": iv.high, "method": iv.method, "n": iv.n,
                        "level": iv.level, "overlaps": [r["overlap"] for r in results]}}


def main(data_dir: str, out_path: str, model: dict) -> None:
    """The check on this host's first two GPUs, each process on 1/N of the cores (N GPUs), JSON to out_path."""
    gpus = count_gpus()
    if gpus < 2:
        out = {"applicable": False, "reason": f"{gpus} GPU(s) on this host; two timed runs at once need two"}
    else:
        out = run_check(data_dir, model, "cuda", shares=gpus)
    write_json_atomic(out_path, out)
    if out["applicable"]:
        s = out["summary"]
        print(f"concurrent / solo: {s['ratio']:.3f} [{s['low']:.3f}, {s['high']:.3f}] ({s['method']}); "
              f"overlap {min(s['overlaps']):.2f}-{max(s['overlaps']):.2f}")
    else:
        print(out["reason"])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
