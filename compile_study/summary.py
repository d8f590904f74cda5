"""Run records -> one row per configuration: speedups with intervals, A/A control, compile cost, memory.

    python -c "from compile_study.summary import *; summarize(load_records(paths))"

Speedup: every run times its subject (eager or compiled) interleaved with an eager reference in
the same process; the run's ratio reference/subject is its speedup, and for an eager subject it is
the A/A control. Per configuration: the median over repeats and a 95% bootstrap interval
(scipy.stats.bootstrap). A speedup whose interval overlaps the A/A spread of its cell is labelled
"no measurable difference".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from compile_study.vocab import Regime

# A cell: a configuration apart from the compile mode; regimes that differ only in how they are
# compiled (dynamic-*) share the eager runs of `dynamic`.
CELL = ["device_type", "reference_regime", "precision", "batch_size"]
CONFIG = ["device_type", "shape_regime", "precision", "batch_size", "compile_mode", "compile_scope"]
SCALAR_METRICS = [
    "steady_step_ms", "block_mean_step_ms", "reference_step_ms", "in_process_speedup", "samples_per_s",
    "real_tokens_per_s", "padding_fraction", "distinct_shapes", "achieved_tflops", "warmup_excess_s",
    "first_step_s", "epoch_steps", "epoch1_s", "epoch2_s", "final_loss", "eval_accuracy", "peak_memory_bytes",
    "graphs_compiled", "recompiles", "eager_fallback_steps", "cudagraph_recordings", "compile_events_s",
    "graph_breaks", "generated_kernels", "inference_step_ms", "inference_reference_step_ms", "inference_speedup",
    "inference_warmup_s", "forward_ms", "backward_ms", "optimizer_ms", "reference_forward_ms", "reference_backward_ms",
    "reference_optimizer_ms", "eager_static_real_tokens_per_s", "gain_over_eager_static",
]
# torch.profiler numbers per step (profiling.py), for the subject (`profile_*`) and the eager reference
PROFILE_METRICS = ["kernels_per_step", "idle_fraction", "cpu_ms_per_step", "device_busy_ms_per_step", "wall_ms_per_step",
                   "triton_kernels_distinct", "distinct_kernels"]
ENV_KEYS = ["device_name", "torch", "triton", "cuda", "driver", "python", "cpu_model", "cpu_cores", "git_commit", "git_dirty"]


def load_records(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per run record: its config, status, error, environment and scalar metrics."""
    rows = []
    for path in paths:
        rec = json.loads(Path(path).read_text())
        cfg, env, metrics = rec["config"], rec["env"], rec.get("metrics") or {}
        row = {k: cfg[k] for k in ("compile_mode", "batch_size", "shape_regime", "precision", "repeat")}
        row["compile_scope"] = cfg.get("compile_scope", "module")  # records before scopes existed: module
        row |= {"device_type": env["device_type"], "status": rec["status"], "error": rec.get("error")}
        row |= {"reference_regime": Regime.parse(cfg["shape_regime"]).reference, "inductor_cache": env.get("inductor_cache")}
        row |= {k: env.get(k) for k in ENV_KEYS}
        row |= {k: metrics.get(k) for k in SCALAR_METRICS}
        for side in ("profile", "reference_profile"):
            prof = metrics.get(side) or {}
            row |= {f"{side}_{k}": prof.get(k) for k in PROFILE_METRICS}
            row[f"{side}_top_kernels"] = json.dumps(prof.get("top_kernels") or [])
        row["kernel_kind"] = (metrics.get("profile") or {}).get("kernel_kind")
        row["evidence_errors"] = "; ".join(f"{k}: {v}" for k, v in (metrics.get("evidence_errors") or {}).items()) or None
        row["graph_break_reasons"] = "; ".join(metrics.get("graph_break_reasons") or []) or None
        row["recompile_limit_hit"] = metrics.get("recompile_limit_hit")
        row["step_cv"] = np.std(metrics["step_times_ms"]) / np.mean(metrics["step_times_ms"]) if metrics.get("step_times_ms") else np.nan
        rows.append(row)
    if not rows:
        raise ValueError("no run records to summarise")
    return pd.DataFrame(rows)


def median_ci(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile-bootstrap interval of the median over independent repeats (NaN if n < 2)."""
    values = np.asarray(values, float)
    if len(values) < 2 or np.ptp(values) == 0:
        return (float(values[0]), float(values[0])) if len(values) >= 2 else (np.nan, np.nan)
    res = stats.bootstrap((values,), np.median, confidence_level=confidence, n_resamples=2000,
                          method="percentile", random_state=0)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def aa_spread(aa_ratios: np.ndarray) -> float:
    """Half-width of the A/A band as a factor: the band is [1/m, m], m >= 1, from the eager ratios and their CI."""
    if len(aa_ratios) == 0:
        return np.nan
    lo, hi = median_ci(aa_ratios)
    candidates = [r for r in [*aa_ratios, lo, hi] if np.isfinite(r) and r > 0]
    return float(max(max(r, 1 / r) for r in candidates)) if candidates else np.nan  # records without the ratio


def verdict(low: float, high: float, point: float, band: float) -> str:
    """faster / slower / no measurable difference, against the A/A band [1/band, band]."""
    if not np.isfinite(point) or not np.isfinite(band):
        return "—"
    low, high = (point, point) if not np.isfinite(low) else (low, high)
    if low > band:
        return "faster"
    if high < 1 / band:
        return "slower"
    return "no measurable difference"


def summarize(records: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: repeats, status, medians, speedup (+CI, A/A verdict), compile cost, memory."""
    out = []
    for key, g in records.groupby(CONFIG, sort=True):
        ok = g[g.status == "ok"]
        row = dict(zip(CONFIG, key)) | {"reference_regime": g.reference_regime.iloc[0], "n": len(g), "n_ok": len(ok)}
        failed = g[g.status != "ok"]
        row["status"] = "ok" if failed.empty else ("partial" if len(ok) else failed.status.iloc[0])
        row["error"] = None if failed.empty else failed.error.iloc[0]
        numeric = SCALAR_METRICS + [f"{side}_{k}" for side in ("profile", "reference_profile") for k in PROFILE_METRICS]
        for m in numeric:
            values = pd.to_numeric(ok[m], errors="coerce")
            row[m] = values.median() if values.notna().any() else np.nan
        first = ok.iloc[0] if len(ok) else None  # text fields: the first successful repeat's
        for m in ("profile_top_kernels", "reference_profile_top_kernels", "kernel_kind", "graph_break_reasons"):
            row[m] = first[m] if first is not None else None
        row["evidence_errors"] = "; ".join(sorted({e for e in g.evidence_errors if isinstance(e, str)})) or None
        row["recompile_limit_hit"] = bool(ok.recompile_limit_hit.any()) if len(ok) else False
        row["step_cv_within_run"] = ok.step_cv.median() if len(ok) else np.nan
        # across repeats: how much the per-process median step time moves
        row["step_cv_across_repeats"] = ok.steady_step_ms.std() / ok.steady_step_ms.mean() if len(ok) > 1 else np.nan
        row["speedup"] = ok.in_process_speedup.median() if len(ok) else np.nan
        row["speedup_ci_low"], row["speedup_ci_high"] = median_ci(ok.in_process_speedup) if len(ok) else (np.nan,) * 2
        gain = pd.to_numeric(ok.gain_over_eager_static, errors="coerce").dropna()
        row["gain_ci_low"], row["gain_ci_high"] = median_ci(gain) if len(gain) else (np.nan,) * 2
        inf = pd.to_numeric(ok.inference_speedup, errors="coerce").dropna()
        row["inference_speedup_ci_low"], row["inference_speedup_ci_high"] = median_ci(inf) if len(inf) else (np.nan,) * 2
        for phase in ("forward", "backward", "optimizer"):  # per phase, eager reference / subject, same process
            row[f"{phase}_speedup"] = row[f"reference_{phase}_ms"] / row[f"{phase}_ms"]
        for state in ("cold", "warm"):  # epoch 1 - epoch 2: compilation, recompilations, CUDA-graph recording
            sel = ok[ok.inductor_cache == state]
            row[f"{state}_epoch1_overhead_s"] = (sel.epoch1_s - sel.epoch2_s).median() if len(sel) else np.nan
        out.append(row)
    summary = pd.DataFrame(out)
    return _against_eager(summary, records)


def _against_eager(summary: pd.DataFrame, records: pd.DataFrame) -> pd.DataFrame:
    """Columns that compare each configuration with the eager runs of its cell."""
    eager_ok = records[(records.compile_mode == "eager") & (records.status == "ok")]
    eager = {k: g for k, g in eager_ok.groupby(CELL)}
    cols = {c: [] for c in ("eager_step_ms", "aa_ratio", "aa_band", "verdict", "cross_process_speedup",
                            "cold_compile_s", "warm_compile_s", "break_even_steps", "memory_ratio")}
    for _, row in summary.iterrows():
        e = eager.get(tuple(row[c] for c in CELL))
        if e is None:
            for c in cols:
                cols[c].append(np.nan if c != "verdict" else "—")
            continue
        band = aa_spread(e.in_process_speedup.to_numpy(float))
        eager_step = e.steady_step_ms.median()
        eager_overhead = (e.epoch1_s - e.epoch2_s).median()
        compiled = row.compile_mode != "eager"
        cols["eager_step_ms"].append(eager_step)
        cols["aa_ratio"].append(e.in_process_speedup.median())
        cols["aa_band"].append(band)
        cols["verdict"].append(verdict(row.speedup_ci_low, row.speedup_ci_high, row.speedup, band) if compiled else "A/A")
        cols["cross_process_speedup"].append(eager_step / row.steady_step_ms)
        cold = row.cold_epoch1_overhead_s - eager_overhead if compiled else np.nan
        cols["cold_compile_s"].append(cold)
        cols["warm_compile_s"].append(row.warm_epoch1_overhead_s - eager_overhead if compiled else np.nan)
        saved_s = (row.reference_step_ms - row.steady_step_ms) / 1e3  # per step, same process
        cols["break_even_steps"].append(
            (np.inf if saved_s <= 0 else max(cold, 0) / saved_s) if compiled and np.isfinite(cold) else np.nan
        )
        cols["memory_ratio"].append(e.peak_memory_bytes.median() / row.peak_memory_bytes)
    for c, v in cols.items():
        summary[c] = v
    return summary


def add_mfu(summary: pd.DataFrame, peaks: dict) -> pd.DataFrame:
    """MFU = achieved TFLOP/s / the measured peak of the run's precision (peak.json)."""
    peak = summary.precision.map(lambda p: peaks.get(p, {}).get("tflops", np.nan))
    summary["peak_tflops"] = peak
    summary["mfu"] = summary.achieved_tflops / peak
    return summary


def environment(records: pd.DataFrame) -> dict:
    """The hardware and versions behind the records; every distinct value is listed."""
    env = {}
    for k in ENV_KEYS:
        values = sorted({str(v) for v in records[k] if v is not None and v == v})
        env[k] = values[0] if len(values) == 1 else values
    env["n_records"] = len(records)
    env["statuses"] = records.status.value_counts().to_dict()
    return env
