"""Does a cold compile take longer among the compile phase's others than alone? One configuration both ways.

    snakemake --cores all results/cuda/checks/compile_concurrency.json     (config `checks`; rule method_check)

The compile phase (rule cold_compile) runs k cold compiles at once, each pinned to its own c cores (k: the
host's cores over config compile_phase.cores_per_compile). Its own records of one configuration (CELLS, the
study's step settings: n_cold compiles, each noting how many ran at once) are the "among others" side; this check
adds the other: the same configuration's cold compile `n_alone` times, one after another, each a fresh process
from an empty cache with the whole host to itself (measure/cold.py). The factor is the ratio of the two sides'
geometric means with Welch's t interval on the log ratio (stats.ratio_interval), which the paper divides out of
the phase's compiles to give what a user compiling alone pays. No k compiles are run again here: the phase ran
them.

It runs in Snakemake's own process (it launches processes; it measures none itself), holding the whole host like
a timed job (no compile of the phase runs meanwhile), hence torch-free.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from compile_study.core import compile_record
from compile_study.core.calls import env
from compile_study.core.calls.clock import Clock
from compile_study.core.io import write_json_atomic
from compile_study.core.stats import ratio_interval
from compile_study.measure import targets
from compile_study.measure.checks.spec import MethodCheck
from compile_study.measure.process import isolation, launch

CHECK = MethodCheck(
    name="compile_concurrency", key="compile_concurrency", prior_s=150, whole=True, in_process=True,
    says="Whether a cold compile among the k the compile phase runs at once takes as long as one alone.",
)

# The configuration compiled on each device: the GPU grid's cheapest headline compile (default, the host-bound
# batch), the CPU grid's compiled cell.
CELLS = {"cuda": ("default", 32, "bf16"), "cpu": ("default", 8, "fp32")}
N_ALONE = 3  # compiles alone: an interval's minimum (stats.MIN_N)


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


def run_check(data_dir: str, model: dict, device: str, settings: dict, log: str, cores_per_compile: int,
              phase: list[dict], n_alone: int = N_ALONE, cell: tuple | None = None) -> dict:
    """The protocol of the module docstring -> the check's JSON. `phase`: the compile phase's records of the cell."""
    mode, batch_size, precision = cell or CELLS[device]
    cores = sorted(os.sched_getaffinity(0))
    k = max(1, len(cores) // cores_per_compile)
    run = {"compile_mode": mode, "batch_size": batch_size, "shape_regime": "static", "precision": precision,
           "repeat": 0, "compile_scope": "module"} | settings | {"evidence": False}
    among = [{"cold_compile_s": r["metrics"]["cold_compile_s"], "at_once": r["compile"]["at_once"]}
             for r in phase if r["status"] == "ok" and r["compile"].get("at_once", 1) > 1]
    applicable = k > 1 and bool(among)
    scratch = tempfile.mkdtemp(prefix="compile-concurrency-", dir=os.environ.get("TMPDIR"))
    ctx = {"log": log, "device": device, "model": dict(model), "data_dir": data_dir, "run": run, "cores": cores,
           "k": k, "cores_per_compile": cores_per_compile, "host": env.host_facts(device), "scratch": scratch}
    alone = []
    try:
        for i in range(n_alone if applicable else 0):
            m = compile_once(ctx, cores, f"alone{i}")["metrics"]
            alone.append({"cold_compile_s": m["cold_compile_s"], "first_step_s": m["first_step_s"]})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    iv = ratio_interval([a["cold_compile_s"] for a in among], [a["cold_compile_s"] for a in alone])
    return {"applicable": applicable, "device": device, "compile_mode": mode, "compile_scope": "module",
            "shape_regime": "static", "precision": precision, "batch_size": batch_size, "k": k,
            "cores_per_compile": cores_per_compile, "host_cores": len(cores), "settings": settings,
            "alone": alone, "phase": among, "env": ctx["host"],
            "summary": {"ratio": iv.point, "low": iv.low, "high": iv.high, "method": iv.method, "n": iv.n,
                        "level": iv.level}}


def main(data_dir: str, out_path: str, model: dict, device: str, settings: dict, log: str,
         cores_per_compile: int, phase_paths: list[str] = ()) -> None:
    """The check on the study's device, its cell's step settings from the grid and the phase's records of it
    (`phase_paths`; none: the check does not apply), JSON to out_path."""
    phase = [compile_record.read(p) for p in phase_paths]
    out = run_check(data_dir, model, device, settings, log, cores_per_compile, phase)
    write_json_atomic(out_path, out)
