"""Does a cold compile take longer among the compile phase's others than alone? One configuration both ways.

    snakemake --cores all results/cuda/checks/compile_concurrency.json     (config `checks`; rule method_check)

The compile phase (rule cold_compile) runs k cold compiles at once, each pinned to its own c cores (k: the
host's cores over config compile_phase.cores_per_compile). This check runs one configuration's cold compile
(CELLS, the study's step settings; measure/cold.py, each a fresh process from an empty cache) in `rounds` rounds,
each round once alone with the whole host and once inside a batch of k compiles of it at once on c cores each, the
alone one first in even rounds and the batch first in odd ones, so that drift of the host favours neither. A
round's ratio is the batch's median cold compile over the alone one's; across rounds, its geometric mean with a
95% Student-t interval on the log ratios (stats.speedup_interval). The paper states the compile phase's condition
(k at once, c cores each) with this factor.

It runs in Snakemake's own process (it launches processes; it measures none itself), holding the whole host like
a timed job (no compile of the phase runs meanwhile), hence torch-free.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from concurrent.futures import ThreadPoolExecutor

from compile_study.core import env
from compile_study.core.clock import Clock
from compile_study.core.io import write_json_atomic
from compile_study.core.stats import speedup_interval
from compile_study.measure import isolation, launch, targets

# The configuration compiled on each device: the GPU grid's cheapest headline compile (default, the host-bound
# batch), the CPU grid's compiled cell.
CELLS = {"cuda": ("default", 32, "bf16"), "cpu": ("default", 8, "fp32")}


def compile_once(ctx: dict, cores: list[int], tag: str) -> dict:
    """One cold compile of the cell in a fresh process pinned to `cores`, from an empty cache of its own -> its
    record (raises where it did not compile)."""
    cache = tempfile.mkdtemp(prefix=f"compile-concurrency-{tag}-", dir=ctx["scratch"])
    setup = launch.Setup(log=f"{ctx['log']}.{tag}", threads=len(cores), cores=cores)
    setup.env |= isolation.thread_env(len(cores)) | isolation.prepare_cache(cache, True)[0]
    block = {"index": 0, "alone": len(cores) == len(ctx["cores"]), "slots": ctx["k"], "cores": cores,
             "inductor_cache": "cold"}
    kwargs = {"model": ctx["model"], "run": ctx["run"], "data_dir": ctx["data_dir"], "device": ctx["device"],
              "threads": len(cores), "host": ctx["host"], "compile": block}
    try:
        outcome = launch.run(targets.compile_job, kwargs, setup, Clock())
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    rec = outcome.value if outcome.answered else None
    if rec is None or rec["status"] != "ok":
        raise RuntimeError(f"compile concurrency check, {tag}: {outcome.crash or rec['status'] + ': ' + str(rec['error'])}")
    return rec


def batch(ctx: dict) -> list[dict]:
    """k compiles at once, the i-th on the i-th c cores."""
    c, cores = ctx["cores_per_compile"], ctx["cores"]
    shares = [cores[i * c:(i + 1) * c] for i in range(ctx["k"])]
    with ThreadPoolExecutor(ctx["k"]) as pool:
        return list(pool.map(lambda i: compile_once(ctx, shares[i], f"batch{i}"), range(ctx["k"])))


def run_check(data_dir: str, model: dict, device: str, settings: dict, log: str, cores_per_compile: int,
              rounds: int = 3, cell: tuple | None = None) -> dict:
    """The protocol of the module docstring -> the check's JSON."""
    mode, batch_size, precision = cell or CELLS[device]
    cores = sorted(os.sched_getaffinity(0))
    k = max(1, len(cores) // cores_per_compile)
    run = {"compile_mode": mode, "batch_size": batch_size, "shape_regime": "static", "precision": precision,
           "repeat": 0, "compile_scope": "module"} | settings | {"evidence": False}
    scratch = tempfile.mkdtemp(prefix="compile-concurrency-", dir=os.environ.get("TMPDIR"))
    ctx = {"log": log, "device": device, "model": dict(model), "data_dir": data_dir, "run": run, "cores": cores,
           "k": k, "cores_per_compile": cores_per_compile, "host": env.host_facts(device), "scratch": scratch}
    results = []
    try:
        for i in range(rounds):
            order = ("alone", "batch") if i % 2 == 0 else ("batch", "alone")
            got = {way: ([compile_once(ctx, cores, "alone")] if way == "alone" else batch(ctx)) for way in order}
            alone = got["alone"][0]["metrics"]["cold_compile_s"]
            inside = [r["metrics"]["cold_compile_s"] for r in got["batch"]]
            results.append({"round": i, "order": f"{order[0]} first", "alone_s": alone, "batch_s": inside,
                            "ratio": statistics.median(inside) / alone})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    iv = speedup_interval(r["ratio"] for r in results)
    return {"applicable": k > 1, "device": device, "compile_mode": mode, "compile_scope": "module",
            "shape_regime": "static", "precision": precision, "batch_size": batch_size, "rounds": rounds,
            "k": k, "cores_per_compile": cores_per_compile, "host_cores": len(cores), "settings": settings,
            "results": results, "env": ctx["host"],
            "summary": {"ratio": iv.point, "low": iv.low, "high": iv.high, "method": iv.method, "n": iv.n,
                        "level": iv.level}}


def main(data_dir: str, out_path: str, model: dict, device: str, settings: dict, log: str,
         cores_per_compile: int) -> None:
    """The check on the study's device, its cell's step settings from the grid, JSON to out_path."""
    out = run_check(data_dir, model, device, settings, log, cores_per_compile)
    write_json_atomic(out_path, out)
    s = out["summary"]
    print(f"cold compile among {out['k']} at once / alone: {s['ratio']:.3f} [{s['low']:.3f}, {s['high']:.3f}] "
          f"({s['method']})")
