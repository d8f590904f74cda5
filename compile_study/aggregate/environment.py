"""environment.json: the hardware and versions behind a study's records, and how its runs went (torch-free).

    from compile_study.aggregate.environment import environment, compile_phase
    environment(records) | {"compile_phase": compile_phase(compiles, records)}   # aggregate/summary.py writes it

Every distinct value of the records' environment (record.ENV_KEYS), where their wall time went, their statuses
and provenance (records per commit, uncommitted changes), the disturbance the host watch saw and the redos, how
much of the step's spread the host's recorded state explains (aggregate/variance.py), and what the Setup says of
the compile phase: its cold compiles, portable starts and the cache each timed run found. Counts are ordered by
frequency, then by value: the same whatever order the records came in.
"""

from __future__ import annotations

import pandas as pd

from compile_study.aggregate import variance
from compile_study.core import record, vocab

CONFIG = ["device_type", "shape_regime", "precision", "batch_size", "compile_mode", "compile_scope"]


def environment(records: pd.DataFrame) -> dict:
    """The hardware and versions behind the records; every distinct value is listed."""
    env = {}
    for k in record.ENV_KEYS:
        values = sorted({str(v) for v in records[k] if v is not None and v == v})
        env[k] = values[0] if len(values) == 1 else values
    env["n_records"] = len(records)
    # where the runs' wall time went, summed over every record that carries the breakdown (record.OVERHEAD)
    env["overhead_s"] = {k: float(pd.to_numeric(records[f"overhead_{k}"], errors="coerce").sum())
                         for k in record.OVERHEAD if records[f"overhead_{k}"].notna().any()}
    env["statuses"] = counts(records.status)
    return env | provenance(records) | {"disturbance": disturbance_counts(records),
                                        "step_variance": variance.explained(records, CONFIG)}


def compile_phase(compiles: pd.DataFrame, records: pd.DataFrame | None = None) -> dict:
    """What the Setup says of the compile phase (rule cold_compile; core/compile_record.py), from its records:
    how many cold compiles of how many configurations, how many each, how many went at once at most on how many
    cores each, the modes whose compiles ran alone (a GEMM search benchmarks on the device) and those that started
    from another mode's GEMM search (gemm_search: shared; once per configuration); the configurations none of whose
    compiles succeeded, how many compiled timed runs (`records`) found their cache filled (warm) or not, and how many
    compiles filled it with an inference graph too. Empty for a study made before the compile phase (its cold
    compiles are its first runs')."""
    if compiles is None or compiles.empty:
        return {}
    portable = compiles[compiles.start == "portable"]
    compiles = compiles[compiles.start == "cold"]
    ok = compiles[compiles.status == "ok"]
    keys = [c for c in CONFIG if c != "device_type"]
    per = compiles.groupby(keys).size()
    shared = compiles[~compiles.alone.astype(bool)]
    alone = compiles[compiles.alone.astype(bool)]
    return {"compiles": len(compiles), "failed": len(compiles) - len(ok), "configurations": len(per),
            "per_configuration": [int(per.min()), int(per.max())],
            "at_once": int(pd.to_numeric(shared.at_once, errors="coerce").max()) if len(shared) else 1,
            "slots": int(pd.to_numeric(compiles.slots, errors="coerce").max()),
            "cores_per_compile": sorted({len(c) for c in shared.cores if isinstance(c, list)}),
            "alone_modes": sorted(set(alone.compile_mode), key=vocab.COMPILE_MODES.index), "alone": len(alone),
            "search_shared_modes": sorted(set(compiles[compiles.inductor_cache == vocab.SEARCH_SHARED].compile_mode),
                                          key=vocab.COMPILE_MODES.index),
            "host_cores": sorted({len(c) for c in alone.cores if isinstance(c, list)}),
            "failed_configurations": len(per) - (ok.groupby(keys).ngroups if len(ok) else 0),
            "timed_cache": _timed_cache(records), "portable": portable_counts(portable)} | inference_primed(ok)


def inference_primed(ok: pd.DataFrame) -> dict:
    """{"inference": how many successful cold compiles compiled their configuration's inference graph too
    (measure/cold.py), so that no timed run's evidence compiled it}, or {} where none did (a study made before)."""
    primed = int(ok.inference.eq(True).sum()) if "inference" in ok else 0
    return {"inference": primed} if primed else {}


def portable_counts(portable: pd.DataFrame) -> dict:
    """What the Setup says of the portable starts: how many, of how many configurations, how many failed, the
    artifacts' sizes (bytes, min and max) and the caches their compiles missed (FX graph and AOTAutograd)."""
    if portable.empty:
        return {}
    ok = portable[portable.status == "ok"]
    size = pd.to_numeric(ok.artifacts_bytes, errors="coerce").dropna()
    return {"starts": len(portable), "failed": int((portable.status != "ok").sum()),
            "configurations": int(portable.groupby([c for c in CONFIG if c != "device_type"]).ngroups),
            "artifacts_bytes": [int(size.min()), int(size.max())] if len(size) else [],
            "fx_cache_misses": int(pd.to_numeric(ok.fx_cache_misses, errors="coerce").fillna(0).sum()),
            "aot_cache_misses": int(pd.to_numeric(ok.aot_cache_misses, errors="coerce").fillna(0).sum())}


def _timed_cache(records: pd.DataFrame | None) -> dict[str, int]:
    """The successful compiled timed runs by the state they found their Inductor cache in (vocab.CACHE_STATES)."""
    if records is None or records.empty:
        return {}
    ok = records[(records.status == "ok") & (records.compile_mode != "eager")]
    return counts(ok.inductor_cache)


def counts(values: pd.Series) -> dict[str, int]:
    """How often each value occurs, most frequent first and ties by value: the same whatever order the records came in."""
    return {str(v): int(k) for v, k in sorted(values.value_counts().items(), key=lambda vk: (-vk[1], str(vk[0])))}


def disturbance_counts(records: pd.DataFrame) -> dict:
    """What the Setup says of other work on the host: of the successful runs' records, those that carry its
    readings (a failed run may have none); the runs redone (by the first reason of their first disturbed attempt),
    the attempts kept aside, the runs that stayed disturbed."""
    ok = records[records.status == "ok"]
    redone = records[records.redone > 0]
    first = redone.redone_reasons.str.split(",").str[0]
    return {"recorded": int(ok.host_outside_cores.notna().sum()), "records": len(ok),
            "redone_runs": len(redone), "attempts_set_aside": int(records.redone.sum()),
            "redone_by": counts(first),
            "stayed_disturbed": int(records.disturbed.sum())}


def provenance(records: pd.DataFrame) -> dict:
    """What the Setup paragraph needs beyond distinct values: records per commit, records from a tree with
    uncommitted changes and the configurations that pool them with clean ones, each cache state's runs, and
    the float32 matmul setting of each precision's runs."""
    dirty = records.git_dirty.astype(str) == "True"
    per_config = dirty.groupby([records[k] for k in CONFIG]).agg(["any", "all"])
    compiled = records[(records.compile_mode != "eager") & (records.status == "ok")]
    matmul = {p: sorted({str(v) for v in g.float32_matmul_precision.dropna()})
              for p, g in records.groupby("precision")}
    return {"records_per_commit": counts(records.git_commit.astype(str)),
            "dirty_records": int(dirty.sum()),
            "mixed_configurations": int((per_config["any"] & ~per_config["all"]).sum()),
            "compiled_cache_states": counts(compiled.inductor_cache),
            "search_shared_modes": sorted(set(compiled[compiled.inductor_cache == vocab.SEARCH_SHARED].compile_mode)),
            "float32_matmul_precision": {p: v for p, v in matmul.items() if v}}
