"""Does the warm launcher change what a run measures? The same cell run both ways, alternating.

    snakemake --cores all results/cuda/checks/launcher.json     (config `checks`; rule method_check)

Every run of the study is a process forked by the launcher's server, which imported torch and the package
once (measure/process/launch.py); before the launcher each was a fresh Python process. This check runs one cell of the
grid (CELLS, the study's own step settings) both ways in `rounds` rounds, the launcher's child first in even
rounds and the fresh process first in odd ones, so that drift of the host favours neither, each process
measuring the cell as a later repeat of the study does (measure/run.py `run_job`, evidence off, on the cell's
Inductor cache after the study's runs of it, or one of the check's that an untimed first process fills: every
compile is warm). A round's ratio is the child's
in-process speedup over the fresh process's; across rounds, its geometric mean with a 95% Student-t interval
on the log ratios (stats.speedup_interval). The paper's appendix reads it against the cell's A/A band. Both
ways' fixed cost per run (everything but compile, the timed protocol and the evidence) is kept beside it.

It runs in Snakemake's own process (it launches processes; it measures none itself), hence torch-free.
"""

from __future__ import annotations

from compile_study.core import record
from compile_study.core.calls import env
from compile_study.core.calls.clock import Clock
from compile_study.core.io import write_json_atomic
from compile_study.core.stats import speedup_interval
from compile_study.measure import jobs, targets
from compile_study.measure.checks.spec import MethodCheck
from compile_study.measure.process import launch

CHECK = MethodCheck(
    name="launcher", key="launcher", prior_s=60, whole=True, in_process=True,
    says="Whether a run forked by the warm launcher measures the same speedup as a fresh Python process.",
)

# The cell checked on each device: the host-bound headline cell on a GPU (CUDA graphs, where a process's state
# would matter most), the CPU grid's compiled cell on the CPU.
CELLS = {"cuda": ("reduce-overhead", 32, "bf16"), "cpu": ("default", 8, "fp32")}
CACHE = "resources/inductor_cache/{device}/launcher-check-{mode}-bs{batch}"


def one(way: str, run: dict, ctx: dict) -> dict:
    """One process of the cell, started `way` -> its record."""
    clock = Clock()
    with jobs.job_setup(ctx["log"], ctx["threads"], ctx["device"], clock, ctx["cache"]) as (setup, _):
        kwargs = {"model": ctx["model"], "run": run, "data_dir": ctx["data_dir"], "device": ctx["device"],
                  "threads": setup.threads, "trace_path": ctx["trace"], "host": ctx["host"]}
        outcome = launch.run(targets.run_job, kwargs, setup, clock, way)
    if not outcome.answered:
        raise RuntimeError(f"launcher check, {way} process: {outcome.crash}")
    rec = outcome.value
    rec["metrics"]["overhead_s"] = outcome.clock.breakdown(record.OVERHEAD)
    if rec["status"] != "ok":
        raise RuntimeError(f"launcher check, {way} process: {rec['status']}: {rec['error']}")
    return rec


def run_check(data_dir: str, model: dict, device: str, settings: dict, log: str, threads: int,
              rounds: int = 3, cell: tuple | None = None, cache: str | None = None) -> dict:
    """The protocol of the module docstring -> the check's JSON. `cache`: the cell's own Inductor cache, warm
    after the study's runs of it (rule method_check waits for them); else one of the check's, filled first."""
    mode, batch, precision = cell or CELLS[device]
    run = {"compile_mode": mode, "batch_size": batch, "shape_regime": "static", "precision": precision,
           "repeat": 1, "compile_scope": "module"} | settings | {"evidence": False}
    ctx = {"log": log, "threads": threads, "device": device, "model": dict(model), "data_dir": data_dir,
           "host": env.host_facts(device), "trace": f"{log}.trace.json.gz",
           "cache": cache or CACHE.format(device=device, mode=mode, batch=batch)}
    if cache is None:
        one("warm", run, ctx)  # fills the check's cache: every timed process below compiles warm
    results, device_name = [], None
    for i in range(rounds):
        order = ("warm", "fresh") if i % 2 == 0 else ("fresh", "warm")
        got = {way: one(way, run, ctx) for way in order}
        device_name = got["warm"]["env"].get("device_name")  # the host's facts name the CPU: the runs know the GPU
        speedup = {way: got[way]["metrics"]["in_process_speedup"] for way in order}
        results.append({"round": i, "order": f"{order[0]} first", "speedup": speedup,
                        "ratio": speedup["warm"] / speedup["fresh"],
                        "step_ms": {way: got[way]["metrics"]["steady_step_ms"] for way in order},
                        "fixed_cost_s": {way: record.fixed_cost_s(got[way]["metrics"]["overhead_s"]) for way in order},
                        "overhead_s": {way: got[way]["metrics"]["overhead_s"] for way in order}})
    iv = speedup_interval(r["ratio"] for r in results)
    return {"applicable": True, "device": device, "compile_mode": mode, "compile_scope": "module",
            "shape_regime": "static", "precision": precision, "batch_size": batch, "rounds": rounds,
            "settings": settings, "results": results, "env": ctx["host"] | {"device_name": device_name},
            "summary": {"ratio": iv.point, "low": iv.low, "high": iv.high, "method": iv.method, "n": iv.n,
                        "level": iv.level}}


def main(data_dir: str, out_path: str, model: dict, device: str, settings: dict, log: str, threads: int,
         cache: str | None = None) -> None:
    """The check on the study's device, its cell's step settings from the grid, JSON to out_path."""
    out = run_check(data_dir, model, device, settings, log, threads, cache=cache)
    write_json_atomic(out_path, out)
    s = out["summary"]
    print(f"launcher / fresh speedup: {s['ratio']:.3f} [{s['low']:.3f}, {s['high']:.3f}] ({s['method']})")
