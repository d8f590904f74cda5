"""A cold compile's record: one JSON file per cold compile of a configuration, made by the compile phase (rule
cold_compile, measure/cold.py) and read by the summary (each configuration's cold compile with its interval); a
portable start (rule portable_start: an empty cache fed the first cold compile's artifacts) has the same record.

    results/cuda/compiles/static/bf16/default/module/bs32/c0.json       (core/layout.py COMPILE)
    results/cuda/compiles/static/bf16/default/module/bs32/p0.json       (core/layout.py PORTABLE)

It has the run record's shape (record.SHAPE, so that one check finds it damaged; its config's `repeat` is the
compile's index) with `kind: "cold_compile"` and a `compile` block saying how it ran (COMPILE). Torch-free.
"""

from __future__ import annotations

import os
from dataclasses import asdict

import pandas as pd

from compile_study.core import compile_stages, record

KIND = "cold_compile"
COMPILE = {
    "index": "which of the configuration's cold compiles (0 fills the cache the timed runs start from)",
    "at_once": "how many compiles the host ran at once at most while this one ran (1: alone)",
    "slots": "compiles the host may run at once (k: its cores over cores_per_compile)",
    "cores": "the CPU cores this compile was pinned to",
    "threads": "torch's threads in it: the timed runs' count (Inductor's CPU kernels are made for a thread count)",
    "alone": "whether it ran with the whole host to itself (a GEMM search benchmarks on the GPU)",
    "inductor_cache": "the cache it started from (vocab.CACHE_STATES): cold, or cold but for a shared GEMM search",
    "inference": "whether it compiled its configuration's inference graph too, after the training compile it "
                 "measures (a first cold compile where the timed runs time inference: none of them compiles)",
    "trace": "a configuration's first cold compile only: its structured trace (TORCH_TRACE; measure/trace.py): path, "
             "trace_bytes, trace_truncated, tlparse (its report's folder) or tlparse_skipped (why none), and "
             "overhead_s, what writing it cost the compile by torch's own count",
    "start": "how it reached the compiled step (vocab.COLD_STARTS): cold, or portable (the first cold compile's "
             "artifacts loaded into its empty cache); records made before portable starts are cold",
}
METRICS = ("cold_compile_s", "first_step_s", "epoch1_s", "epoch2_s", "epoch_steps", "graphs_compiled", "recompiles",
           "generated_kernels", "gemm_searches", "fx_cache_hits", "fx_cache_misses", "cudagraph_recordings",
           "compile_events_s", "recompile_limit_hit", "aot_cache_hits", "aot_cache_misses",
           "artifacts_bytes", "artifacts_load_s", "peak_memory_bytes",
           # a first cold compile's seconds compiling its configuration's inference graph into the cache, after the
           # training compile (compile.inference; its FX graph cache counts as core/metrics.py's inference_fx_cache_*)
           "inference_prime_s",
           # where the cold compile's seconds went (core/compile_stages.py): their sum and the latency's rest; each
           # stage is a column stage_<name>_s of the table (None where the record predates them: not measured)
           "compile_stages_s", "compile_rest_s")
# what the portable artifacts held (saved by a first cold compile) or gave (loaded by a portable start), per kind of
# cache entry (torch.compiler's CacheInfo: inductor, aot_autograd, autotune, pgo, ...): {kind: entries}
ARTIFACTS = "artifacts"


def new(cfg: record.RunConfig, model: dict, env: dict, compile: dict) -> dict:
    return {"schema_version": record.SCHEMA_VERSION, "kind": KIND, "config": asdict(cfg) | {"model": model},
            "compile": compile, "env": env, "status": "ok", "error": None, "metrics": {}}


def read(path) -> dict:
    """A compile record (RecordError naming the file if it is damaged or of another kind)."""
    rec = record.read(path)
    if rec.get("kind") != KIND:
        raise record.RecordError(f"{path}: not a cold compile's record (kind {rec.get('kind')!r})")
    return rec


def held(rec: dict) -> list[float] | None:
    """[start, end] (seconds since the epoch) a compile held its compile slot: its job's window less the wait for
    the slot at its start (booked gpu_wait_s); None where the record keeps no window."""
    m = rec.get("metrics") or {}
    window = m.get("job_window_unix")
    if not window or window[1] is None:
        return None
    return [window[0] + ((m.get("overhead_s") or {}).get("gpu_wait_s") or 0.0), window[1]]


def table(paths) -> pd.DataFrame:
    """One row per cold compile: the configuration (record.CONFIGURATION_KEYS), how it ran, its metrics, status,
    the window it held its compile slot (`held`: [start, end], or None) and the folder its record is in."""
    rows = []
    for path in paths:
        rec = read(path)
        cfg, m = rec["config"], rec["metrics"]
        row = {k: cfg[k] for k in record.CONFIGURATION_KEYS} | {"device_type": rec["env"].get("device_type")}
        row |= {k: rec["compile"].get(k) for k in COMPILE} | {k: m.get(k) for k in METRICS}
        row |= compile_stages.columns(m.get("compile_stages"))
        row["start"] = row["start"] or "cold"
        row |= {"status": rec["status"], "error": rec.get("error"),
                "total_s": (m.get("overhead_s") or {}).get("total_s"), "held": held(rec),
                "record_dir": os.path.dirname(str(path))}  # what the study keeps beside the record
        rows.append(row)
    columns = [*record.CONFIGURATION_KEYS, "device_type", *COMPILE, *METRICS, *compile_stages.columns(None), "status",
               "error", "total_s", "held", "record_dir"]
    return pd.DataFrame(rows, columns=columns)
