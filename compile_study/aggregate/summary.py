"""Run records -> one row per configuration: speedups with intervals, A/A verdicts, compile cost, memory, MFU.

    snakemake --cores all results/cpu/summary.csv        (rule summarize calls `write`)

Speedup: every run times its subject (eager or compiled) interleaved with an eager reference in the same
process; the run's ratio, reference over subject, is its speedup, and for an eager subject it is the A/A control.
Across the configuration's processes (repeats) stats.py gives the interval (method and n beside it), the
cell's A/A band and the verdict. Everything else is the median over the successful repeats.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from compile_study.aggregate import variance
from compile_study.aggregate.columns import columns
from compile_study.core import compile_record, digits, record, stats, vocab
from compile_study.core.data import steps_per_epoch
from compile_study.core.io import write_text_atomic

# A cell: a configuration apart from compile mode and scope; regimes that differ only in how they are
# compiled (dynamic-*) share the eager runs of `dynamic`.
CELL = ["device_type", "reference_regime", "precision", "batch_size"]
CONFIG = ["device_type", "shape_regime", "precision", "batch_size", "compile_mode", "compile_scope"]
NUMERIC = (list(record.SCALARS) + [f"{side}_{k}" for side in record.PROFILE_SIDES for k in record.PROFILE]
           + [f"overhead_{k}" for k in record.OVERHEAD])
TEXT = ("profile_top_kernels", "reference_profile_top_kernels", "kernel_kind", "graph_break_reasons", "model_class",
        "model_plug")
PARITY_COLUMNS = [
    "compile_mode", "precision", "batch_size", "loss_steps", "train_steps", "max_rel_loss_diff", "loss_rtol",
    "loss_ok", "eager_accuracy", "compiled_accuracy", "accuracy_delta_points", "accuracy_ok",
]


def _status(g: pd.DataFrame) -> tuple[str, str | None]:
    failed = g[g.status != "ok"]
    if failed.empty:
        return "ok", None
    return ("partial" if len(failed) < len(g) else failed.status.iloc[0]), failed.error.iloc[0]


def _interval_columns(prefix: str, values) -> dict:
    """The interval across processes (stats.speedup_interval) and its point, the geometric mean."""
    return columns(prefix, stats.speedup_interval(pd.to_numeric(pd.Series(values), errors="coerce").dropna()))


def _config_row(key: tuple, g: pd.DataFrame, medians: dict, cold: list[float] | None = None) -> dict:
    """Medians over the configuration's successful repeats, plus status, spread and compile overheads; `cold`:
    its cold compiles (cold_compiles), counted as cold_n."""
    ok = g[g.status == "ok"]
    status, error = _status(g)
    row = dict(zip(CONFIG, key)) | {"reference_regime": g.reference_regime.iloc[0], "n": len(g), "n_ok": len(ok),
                                    "status": status, "error": error}
    row |= medians.get(key, dict.fromkeys(NUMERIC, np.nan))  # NaN where none measured it
    first = ok.iloc[0] if len(ok) else None  # text fields: the first successful repeat's
    row |= {m: (first[m] if first is not None else None) for m in TEXT}
    row["evidence_errors"] = "; ".join(sorted({e for e in g.evidence_errors if isinstance(e, str)})) or None
    row["recompile_limit_hit"] = bool(ok.recompile_limit_hit.fillna(0).astype(bool).any())
    row["step_cv_within_run"] = ok.step_cv.median() if len(ok) else np.nan
    row["step_cv_across_repeats"] = ok.steady_step_ms.std() / ok.steady_step_ms.mean() if len(ok) > 1 else np.nan
    row |= _interval_columns("inference", ok.inference_speedup)
    row |= _interval_columns("step", ok.steady_step_ms)  # step times compared across configurations (stats.compare)
    row["dirty_n"] = int((g.git_dirty.astype(str) == "True").sum())  # records made from a tree with changes
    for phase in ("forward", "backward", "optimizer"):  # per phase, eager reference / subject, same process
        row[f"{phase}_speedup"] = row[f"reference_{phase}_ms"] / row[f"{phase}_ms"]
    for state in ("cold", "warm"):  # as each run found its Inductor cache directory (the record's env)
        sel = ok[ok.inductor_cache == state]
        if state == "warm":  # the cold compiles are counted with their interval (cold_n: cold_compiles)
            row["warm_n"] = len(sel)
        row[f"{state}_epoch1_s"] = sel.epoch1_s.median() if len(sel) else np.nan
        # epoch 1 - epoch 2: compilation, recompilations, CUDA-graph recording
        row[f"{state}_epoch1_overhead_s"] = (sel.epoch1_s - sel.epoch2_s).median() if len(sel) else np.nan
    # rows an epoch of the runs drew: epochs stop at max_epoch_steps; a packed row holds several sequences
    named = dict(zip(CONFIG, key))
    row["epoch_rows"] = row["epoch_steps"] * named["batch_size"] if named["shape_regime"] != "packed" else np.nan
    row["search_shared_n"] = int((ok.inductor_cache == vocab.SEARCH_SHARED).sum())  # not cold: no cold compile
    return row


def _gains(summary: pd.DataFrame, records: pd.DataFrame) -> pd.DataFrame:
    """Every configuration's gain: its real (non-pad) tokens/s over eager's on static batches of the same batch size
    and precision (eager, module, static: the yardstick), each side across its own processes, with the interval
    of stats.ratio_interval (both sides' variance). One definition for every regime and mode. Not against the
    static reference inside the run: its steps alternate with another shape's, and its first step after each
    switch is slow (allocator), which on the GPU inflated the gain of packed batches by a third. Where the
    cell has no eager static runs there is no gain; the yardstick's own row has none either."""
    ok = records[records.status == "ok"]
    static = ok[(ok.shape_regime == "static") & (ok.compile_mode == "eager") & (ok.compile_scope == "module")]
    yard = {k: pd.to_numeric(g.real_tokens_per_s, errors="coerce").dropna()
            for k, g in static.groupby(["device_type", "precision", "batch_size"])}
    by_config = {k: pd.to_numeric(g.real_tokens_per_s, errors="coerce").dropna() for k, g in ok.groupby(CONFIG)}
    rows = []
    for _, row in summary.iterrows():
        key = (row.device_type, row.precision, row.batch_size)
        itself = row.shape_regime == "static" and row.compile_mode == "eager" and row.compile_scope == "module"
        runs = by_config.get(tuple(row[c] for c in CONFIG), pd.Series(dtype=float))
        iv = (stats.ratio_interval(runs, yard[key]) if key in yard and not itself else
              stats.Interval(np.nan, np.nan, np.nan, "the yardstick" if itself else "no eager static runs", 0, np.nan))
        rows.append(columns("gain", iv))
    return summary.drop(columns=[c for c in rows[0] if c in summary], errors="ignore").join(
        pd.DataFrame(rows, index=summary.index)) if rows else summary


def summarize(records: pd.DataFrame, train_rows: int, compiles: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per configuration: repeats, status, medians, speedup interval and verdict, compile cost, memory.

    train_rows: the training rows the runs used (facts.json's splits.train.rows): epochs are counted in them.
    compiles: the compile phase's cold compiles (core/compile_record.py table); a configuration's cold compile
    comes from them where it has any, else (a study made before the compile phase) from its cold runs."""
    records = compact(records.astype({m: float for m in NUMERIC if records[m].dtype == object}))
    ok = records[records.status == "ok"]
    medians = {k: v for k, v in ok.groupby(CONFIG)[NUMERIC].median().to_dict("index").items()}
    colds = cold_compiles(records, compiles)
    summary = pd.DataFrame([_config_row(key, g, medians, colds.get(key)) for key, g in
                            records.groupby(CONFIG, sort=True)])
    summary = _gains(summary, records)
    speedups = stats.speedup_table(records, CONFIG, CELL).rename(
        columns={"aa_band_low": "aa_low", "aa_band_high": "aa_high"})
    summary = summary.merge(speedups, on=CONFIG, how="left")
    summary = withhold_disturbed(summary, records)
    return compact(add_host_ratio(_against_eager(summary, records, train_rows, colds)))


def compact(df: pd.DataFrame) -> pd.DataFrame:
    """Text as plain objects and one block per dtype: tables and claims select rows of the summary hundreds of
    times, and each selection copies every block (pandas' text columns are a block each)."""
    text = [c for c in df.columns if isinstance(df[c].dtype, pd.StringDtype)]
    if not text:
        return df.copy()
    objects = pd.DataFrame(np.array([df[c].to_numpy(dtype=object) for c in text], dtype=object).T, columns=text,
                           index=df.index, dtype=object)  # one block (astype would make a column at a time)
    return pd.concat([df.drop(columns=text), objects], axis=1)[list(df.columns)].copy()


def withhold_disturbed(summary: pd.DataFrame, records: pd.DataFrame) -> pd.DataFrame:
    """A configuration with a run that stayed disturbed after its redos (core/disturbance.py), or whose cell's
    eager runs (its A/A control) have one, gets no verdict: "disturbed". Its numbers stay. Beside it, how many
    of its runs were redone (`redone_n`) and how many stayed disturbed (`disturbed_n`)."""
    by = records.assign(was_redone=records.redone > 0).groupby(CONFIG)
    counts = pd.DataFrame({"disturbed_n": by.disturbed.sum(), "redone_n": by.was_redone.sum()}).astype(int)
    summary = summary.merge(counts.reset_index(), on=CONFIG, how="left")
    eager = records[(records.compile_mode == "eager") & (records.compile_scope == "module") & records.disturbed]
    control = summary[CELL].apply(tuple, axis=1).isin(set(eager[CELL].apply(tuple, axis=1)))
    summary.loc[((summary.disturbed_n > 0) | control) & (summary.verdict != "aa"), "verdict"] = "disturbed"
    return summary


def _eager_of_cell(records: pd.DataFrame) -> dict:
    """The eager `module` runs (AdamW foreach) of each cell: every comparison's baseline."""
    eager = records[(records.compile_mode == "eager") & (records.compile_scope == "module") & (records.status == "ok")]
    return {k: g for k, g in eager.groupby(CELL)}


def cold_compiles(records: pd.DataFrame, compiles: pd.DataFrame | None = None,
                  start: str = "cold") -> dict[tuple, list[float]]:
    """Each compiled configuration's cold compiles in seconds, keyed by its CONFIG values: the one source of
    cold-compile times; the interval, the break-even, the claims and the paper all read this list.

    A cold compile is epoch 1 minus epoch 2 (compilation, recompilations, CUDA-graph recording) of a process that
    found its Inductor cache empty, less the same for eager in the cell (the median over its eager runs: the
    first epoch's costs that are not compilation). Such processes are the compile phase's (`compiles`: the
    compile records' table, rule cold_compile); a study made before the compile phase has them as its runs whose
    record says "cold" (repeat 0). A configuration in a cell without eager runs, or with no cold process (one that
    started from another mode's GEMM search, before the compile phase), has none.

    start="portable": the portable starts instead (rule portable_start: an empty cache fed the first cold
    compile's artifacts), each its artifacts' load plus the same epoch difference less eager's."""
    eager = {k: (g.epoch1_s - g.epoch2_s).median() for k, g in _eager_of_cell(records).items()}
    phase = None if compiles is None or compiles.empty else compiles[
        (compiles.status == "ok") & (compiles.compile_mode != "eager") & (compiles.start == start)].assign(
        reference_regime=lambda d: [vocab.Regime.parse(r).reference for r in d.shape_regime])
    runs = records[(records.status == "ok") & (records.compile_mode != "eager") & (records.inductor_cache == "cold")]
    out = {}
    for source in ((runs, phase) if start == "cold" else (phase,)):  # the phase's replace the cold runs'
        if source is None:
            continue
        for key, g in source.groupby(CONFIG):
            cell = tuple(g[c].iloc[0] for c in CELL)
            load = pd.to_numeric(g.artifacts_load_s).fillna(0.0) if "artifacts_load_s" in g else 0.0
            if cell in eager:
                out[key] = [float(v) for v in pd.to_numeric(g.epoch1_s - g.epoch2_s) + load - eager[cell]]
    return out


# what the paper advises for each compiled configuration (`payback`), by its verdict against eager
PAYBACK = {"faster": "pays-after", "slower": "never", "within-noise": "never", "indistinct": "not-shown-faster",
           "few-runs": "few-runs", "no-control": "no-control"}


def payback(row, cold_n: int) -> str | None:
    """When compiling pays, for one configuration: after its break-even ("pays-after", the verdict is faster),
    "never" (slower, within noise, or a speedup not above 1), "not-shown-faster" (not distinguishable from
    eager), "few-runs" or "no-control" (no verdict), "no-cold-compile"; None for eager."""
    if row.compile_mode == "eager":
        return None
    if cold_n == 0:
        return "no-cold-compile"
    code = PAYBACK.get(row.verdict, "few-runs")
    return "never" if code != "few-runs" and not row.speedup > 1 else code


def _against_eager(summary: pd.DataFrame, records: pd.DataFrame, train_rows: int,
                   colds: dict[tuple, list[float]]) -> pd.DataFrame:
    """Cross-process speedup, cold compile (with its interval) and warm-cache load net of eager's warm-up,
    break-even (with its interval) and what it advises, memory ratio."""
    eager = _eager_of_cell(records)
    ok = records[records.status == "ok"]
    speedups = {k: g.in_process_speedup for k, g in ok.groupby(CONFIG)}
    out = []
    for _, row in summary.iterrows():
        config, e = tuple(row[c] for c in CONFIG), eager.get(tuple(row[c] for c in CELL))
        if e is None:
            out.append({})
            continue
        compiled = row.compile_mode != "eager"
        cold = colds.get(config, [])
        steps = stats.break_even(cold, speedups.get(config, []), row.reference_step_ms) if compiled else None
        code = payback(row, len(cold))
        if code == "never":  # the compiled step is not faster: it never pays back, whatever the arithmetic says
            steps = stats.Interval(np.inf, np.nan, np.nan, steps.method, steps.n, steps.level)
        epoch = steps_per_epoch(row.batch_size, train_rows)
        cells = {"eager_step_ms": e.steady_step_ms.median(), "aa_ratio": e.in_process_speedup.median(),
                 "cross_process_speedup": e.steady_step_ms.median() / row.steady_step_ms,
                 "memory_ratio": e.peak_memory_bytes.median() / row.peak_memory_bytes, "payback": code}
        if compiled:
            eager_overhead = (e.epoch1_s - e.epoch2_s).median()
            cells |= columns("cold", stats.speedup_interval(cold, of="seconds")) | columns("break_even", steps) | {
                "warm_compile_s": row.warm_epoch1_overhead_s - eager_overhead, "full_epoch_steps": epoch,
                "break_even_epochs": steps.point / epoch, "break_even_epochs_low": steps.low / epoch,
                "break_even_epochs_high": steps.high / epoch}
        out.append(cells)
    # a study without a compiled configuration still has the compiled columns (empty): every reader selects them
    none = stats.Interval(np.nan, np.nan, np.nan, "", 0, np.nan)
    compiled = [*columns("cold", none), *columns("break_even", none), "warm_compile_s", "full_epoch_steps",
                "break_even_epochs", "break_even_epochs_low", "break_even_epochs_high"]
    return summary.join(pd.DataFrame(out, index=summary.index)).reindex(
        columns=[*summary.columns, *dict.fromkeys([*(c for d in out for c in d), *compiled])])


HOST_BOUND = 1.25  # timed step / device-busy time above which the host, not the device, sets the pace


def add_host_ratio(summary: pd.DataFrame) -> pd.DataFrame:
    """The timed step over the device-busy time per step the profiler measured (one process's window): how far
    the step is from the device's own work; above HOST_BOUND the host sets the pace (`host_bound`)."""
    summary["host_ratio"] = summary.steady_step_ms / pd.to_numeric(summary.profile_device_busy_ms_per_step,
                                                                   errors="coerce")
    summary["host_bound"] = summary.host_ratio > HOST_BOUND
    return summary


def add_mfu(summary: pd.DataFrame, peaks: dict) -> pd.DataFrame:
    """MFU = achieved TFLOP/s / the measured peak of the run's precision (peak.json); real_mfu counts real tokens."""
    peak = summary.precision.map(lambda p: peaks.get(p, {}).get("tflops", np.nan))
    summary["peak_tflops"] = peak
    summary["mfu"] = summary.achieved_tflops / peak
    summary["real_mfu"] = pd.to_numeric(summary.real_tflops, errors="coerce") / peak
    return summary


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
    compiles succeeded, and how many compiled timed runs (`records`) found their cache filled (warm) or not. Empty for a
    study made before the compile phase (its cold compiles are its first runs')."""
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
            "timed_cache": _timed_cache(records), "portable": portable_counts(portable)}


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


def parity_table(parity_paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per parity check; an eager-only study has none (the table keeps its header)."""
    rows = [json.loads(Path(p).read_text()) for p in parity_paths]
    return pd.DataFrame([{k: r[k] for k in PARITY_COLUMNS} for r in rows], columns=PARITY_COLUMNS)


def _json_or(path, default):
    return json.loads(Path(path).read_text()) if path and Path(path).is_file() else default


def write(record_paths, parity_paths, facts_path, out: dict, peak_path=None, mlp_path=None,
          check_paths: dict | None = None, compile_paths=()) -> pd.DataFrame:
    """Records -> out["summary"] (csv), out["parity"] (csv), out["environment"] (json), out["claims"] (csv),
    out["decisions"] (json: aggregate/decide.py).

    The peak and MLP results, the method checks ({name: path}) and the cold compiles' records are optional (a
    stored study from before they existed has none)."""
    from compile_study.aggregate.claims import claims_table
    from compile_study.aggregate.decide import decide, to_json

    records = record.table(record_paths)
    compiles = compile_record.table(compile_paths)
    peaks = _json_or(peak_path, {"peaks": {}})["peaks"]
    facts = json.loads(Path(facts_path).read_text())
    summary = add_mfu(summarize(records, facts["splits"]["train"]["rows"], compiles), peaks)
    write_text_atomic(out["summary"], digits.csv_text(summary))
    write_text_atomic(out["parity"], digits.csv_text(parity_table(parity_paths)))
    claims = claims_table(summary, _json_or(mlp_path, None), facts)
    write_text_atomic(out["claims"], digits.csv_text(claims))
    checks = {name: _json_or(path, {}) for name, path in (check_paths or {}).items()}
    write_text_atomic(out["decisions"], to_json(decide(summary, checks)))
    write_text_atomic(out["environment"], digits.dumps(environment(records) | {
        "peak_tflops": {p: v["tflops"] for p, v in peaks.items()}, "compile_phase": compile_phase(compiles, records)},
        indent=2) + "\n")
    return summary
