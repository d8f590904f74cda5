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

from compile_study.aggregate import payback, stages
from compile_study.aggregate.columns import columns
from compile_study.aggregate.environment import compile_phase, environment
from compile_study.core import compile_record, digits, record, stats, vocab
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
# beside each check's own columns: chance (the eval split's most frequent class), the eval rows, whether both
# accuracies are measurably above chance (stats.above_chance), and the accuracy's verdict (parity_table)
CHANCE_COLUMNS = ["chance_accuracy", "eval_rows", "above_chance", "accuracy_verdict"]


def _status(g: pd.DataFrame) -> tuple[str, str | None]:
    failed = g[g.status != "ok"]
    if failed.empty:
        return "ok", None
    return ("partial" if len(failed) < len(g) else failed.status.iloc[0]), failed.error.iloc[0]


def _interval_columns(prefix: str, values) -> dict:
    """The interval across processes (stats.speedup_interval) and its point, the geometric mean."""
    return columns(prefix, stats.speedup_interval(pd.to_numeric(pd.Series(values), errors="coerce").dropna()))


def _config_row(key: tuple, g: pd.DataFrame, medians: dict) -> dict:
    """Medians over the configuration's successful repeats, plus status, spread and compile overheads."""
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
        if state == "warm":  # the cold compiles are counted with their interval (cold_n: payback.cold_compiles)
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


def summarize(records: pd.DataFrame, train_rows: int, compiles: pd.DataFrame | None = None,
              checks: dict | None = None) -> pd.DataFrame:
    """Per configuration: repeats, status, medians, speedup interval and verdict, compile cost, memory.

    train_rows: the training rows the runs used (facts.json's splits.train.rows): epochs are counted in them.
    compiles: the compile phase's cold compiles (core/compile_record.py table); a configuration's cold compile
    comes from them where it has any, else (a study made before the compile phase) from its cold runs.
    checks: the method checks by name; the compile-concurrency check's factor is divided out of compiles that
    ran k at once (aggregate/payback.py)."""
    records = compact(records.astype({m: float for m in NUMERIC if records[m].dtype == object}))
    ok = records[records.status == "ok"]
    medians = {k: v for k, v in ok.groupby(CONFIG)[NUMERIC].median().to_dict("index").items()}
    summary = pd.DataFrame([_config_row(key, g, medians) for key, g in records.groupby(CONFIG, sort=True)])
    summary = _gains(summary, records)
    speedups = stats.speedup_table(records, CONFIG, CELL).rename(
        columns={"aa_band_low": "aa_low", "aa_band_high": "aa_high"})
    summary = summary.merge(speedups, on=CONFIG, how="left")
    summary = withhold_disturbed(summary, records)
    return compact(add_host_ratio(_against_eager(summary, records, train_rows, compiles, checks)))


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


def _against_eager(summary: pd.DataFrame, records: pd.DataFrame, train_rows: int, compiles: pd.DataFrame | None,
                   checks: dict | None) -> pd.DataFrame:
    """Cross-process speedup, memory ratio, the cold compiles as timed (with their interval) and the warm-cache
    load's median net of eager's warm-up; per way of reaching the compiled step its cost and break-even, and what
    it advises (aggregate/payback.py)."""
    eager = payback.eager_of_cell(records)
    ok = records[records.status == "ok"]
    speedups = {k: g.in_process_speedup for k, g in ok.groupby(CONFIG)}
    colds, costs = payback.cold_compiles(records, compiles), payback.starts(records, compiles, checks)
    out = []
    for _, row in summary.iterrows():
        config, e = tuple(row[c] for c in CONFIG), eager.get(tuple(row[c] for c in CELL))
        if e is None:
            out.append({})
            continue
        cells = {"eager_step_ms": e.steady_step_ms.median(), "aa_ratio": e.in_process_speedup.median(),
                 "cross_process_speedup": e.steady_step_ms.median() / row.steady_step_ms,
                 "memory_ratio": e.peak_memory_bytes.median() / row.peak_memory_bytes}
        if row.compile_mode != "eager":
            cells |= columns("cold", stats.speedup_interval(colds.get(config, []), of="seconds")) | {
                "warm_compile_s": row.warm_epoch1_overhead_s - (e.epoch1_s - e.epoch2_s).median()}
            cells |= payback.payback_cells(row, costs, speedups.get(config, []), train_rows)
        out.append(cells)
    none = stats.Interval(np.nan, np.nan, np.nan, "", 0, np.nan)
    compiled = [*columns("cold", none), "warm_compile_s", *payback.empty_columns()]
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


def parity_table(parity_paths: Iterable[str | Path], facts: dict | None = None) -> pd.DataFrame:
    """One row per parity check; an eager-only study has none (the table keeps its header). Its accuracy verdict
    is judged against chance too: "pass" only where both accuracies are measurably above the eval split's most
    frequent class and within the check's points of each other, "fail" where they differ by more, "at-chance"
    where one is not above chance (both models at chance agree by construction: nothing is shown)."""
    rows = [json.loads(Path(p).read_text()) for p in parity_paths]
    return judge_parity(pd.DataFrame([{k: r[k] for k in PARITY_COLUMNS} for r in rows], columns=PARITY_COLUMNS), facts)


def judge_parity(parity: pd.DataFrame, facts: dict | None) -> pd.DataFrame:
    """parity_table's chance columns on its check columns (facts: facts.json, its eval split's class counts)."""
    split = ((facts or {}).get("splits") or {}).get("eval") or {}
    counts = list((split.get("class_counts") or {}).values())
    chance, rows = (max(counts) / sum(counts) if counts else np.nan), int(split.get("rows") or 0)
    above = [stats.above_chance(e, rows, chance) and stats.above_chance(c, rows, chance)
             for e, c in zip(parity.eager_accuracy, parity.compiled_accuracy)]
    verdict = ["fail" if not ok else "pass" if a else "at-chance" for ok, a in zip(parity.accuracy_ok.astype(bool), above)]
    return parity.assign(chance_accuracy=chance, eval_rows=rows, above_chance=above, accuracy_verdict=verdict)[
        PARITY_COLUMNS + CHANCE_COLUMNS]


def _json_or(path, default):
    return json.loads(Path(path).read_text()) if path and Path(path).is_file() else default


def _phase(compiles: pd.DataFrame, records: pd.DataFrame, checks: dict) -> dict:
    """environment.json's compile_phase, with the factor its compiles among others were divided by (payback.py)."""
    phase = compile_phase(compiles, records)
    device = records.device_type.iloc[0] if len(records) else None
    return phase | {"factor": payback.factor_facts(checks.get("compile_concurrency"), device)} if phase else phase


def write(record_paths, parity_paths, facts_path, out: dict, peak_path=None, mlp_path=None,
          check_paths: dict | None = None, compile_paths=()) -> pd.DataFrame:
    """Records -> out["summary"] (csv), out["parity"] (csv), out["environment"] (json), out["claims"] (csv),
    out["decisions"] (json: aggregate/decide.py, with the paper's claims as records: aggregate/paper_claims.py).

    The peak and MLP results, the method checks ({name: path}) and the cold compiles' records are optional (a
    stored study from before they existed has none)."""
    from compile_study.aggregate.claims import claims_table
    from compile_study.aggregate.decide import decide, to_json

    records = record.table(record_paths)
    compiles = compile_record.table(compile_paths)
    peaks = _json_or(peak_path, {"peaks": {}})["peaks"]
    facts = json.loads(Path(facts_path).read_text())
    checks = {name: _json_or(path, {}) for name, path in (check_paths or {}).items()}
    summary = add_mfu(summarize(records, facts["splits"]["train"]["rows"], compiles, checks), peaks)
    write_text_atomic(out["summary"], digits.csv_text(summary))
    write_text_atomic(out["parity"], digits.csv_text(parity_table(parity_paths, facts)))
    claims = claims_table(summary, _json_or(mlp_path, None), facts)
    write_text_atomic(out["claims"], digits.csv_text(claims))
    write_text_atomic(out["decisions"], to_json(decide(summary, checks, claims)))
    write_text_atomic(out["environment"], digits.dumps(environment(records) | {
        "peak_tflops": {p: v["tflops"] for p, v in peaks.items()}, "compile_phase": _phase(compiles, records, checks),
        "compile_stages": stages.summary(compiles, records)},
        indent=2) + "\n")
    return summary
