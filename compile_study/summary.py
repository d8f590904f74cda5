"""Run records -> one row per configuration, with the speedup over eager and its uncertainty.

    python -c "from compile_study.summary import *; summarize(load_records(paths))"
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

# A configuration apart from the compile mode; speedups compare modes within one of these.
CELL = ["device_type", "shape_regime", "precision", "batch_size"]
CONFIG = CELL + ["compile_mode"]
SCALAR_METRICS = [
    "steady_step_ms",
    "block_mean_step_ms",
    "samples_per_s",
    "real_tokens_per_s",
    "warmup_excess_s",
    "first_step_s",
    "epoch_steps",
    "epoch1_s",
    "epoch2_s",
    "final_loss",
    "eval_accuracy",
    "peak_memory_bytes",
    "graphs_compiled",
]
ENV_KEYS = ["device_name", "torch", "triton", "cuda", "driver", "python", "cpu_model", "cpu_cores", "git_commit", "git_dirty"]


def load_records(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per run record: its config, status, error, environment and scalar metrics."""
    rows = []
    for path in paths:
        rec = json.loads(Path(path).read_text())
        cfg, env, metrics = rec["config"], rec["env"], rec.get("metrics") or {}
        row = {k: cfg[k] for k in ("compile_mode", "batch_size", "shape_regime", "precision", "repeat")}
        row |= {"device_type": env["device_type"], "status": rec["status"], "error": rec.get("error")}
        row["inductor_cache"] = env.get("inductor_cache")  # cold | warm
        row |= {k: env.get(k) for k in ENV_KEYS}
        row |= {k: metrics.get(k) for k in SCALAR_METRICS}
        rows.append(row)
    if not rows:
        raise ValueError("no run records to summarise")
    return pd.DataFrame(rows)


def ratio_of_medians_ci(reference: np.ndarray, compiled: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Bootstrap CI of median(reference) / median(compiled) over independent repeats (NaN if n < 2)."""
    if len(reference) < 2 or len(compiled) < 2:
        return float("nan"), float("nan")

    def ratio(a, b, axis=-1):
        return np.median(a, axis=axis) / np.median(b, axis=axis)

    res = stats.bootstrap(
        (reference, compiled), ratio, confidence_level=confidence, n_resamples=2000,
        method="percentile", vectorized=True, random_state=0,
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def summarize(records: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: repeats, status, medians of the metrics, speedup over eager (+95% CI)."""
    out = []
    for key, g in records.groupby(CONFIG, sort=True):
        ok = g[g.status == "ok"]
        row = dict(zip(CONFIG, key)) | {"n": len(g), "n_ok": len(ok)}
        failed = g[g.status != "ok"]
        row["status"] = "ok" if failed.empty else ("partial" if len(ok) else failed.status.iloc[0])
        row["error"] = None if failed.empty else failed.error.iloc[0]
        for m in SCALAR_METRICS:
            row[m] = ok[m].median() if len(ok) else np.nan
        for state in ("cold", "warm"):  # warm-up excess with an empty vs a populated Inductor cache
            sel = ok[ok.inductor_cache == state]
            row[f"{state}_warmup_excess_s"] = sel.warmup_excess_s.median() if len(sel) else np.nan
        row["steady_step_ms_min"] = ok.steady_step_ms.min() if len(ok) else np.nan
        row["steady_step_ms_max"] = ok.steady_step_ms.max() if len(ok) else np.nan
        out.append(row)
    summary = pd.DataFrame(out)
    eager = records[(records.compile_mode == "eager") & (records.status == "ok")]
    speedup, low, high, eager_ms = [], [], [], []
    for _, row in summary.iterrows():
        sel = (eager[CELL] == row[CELL].values).all(axis=1)
        ref = eager[sel].steady_step_ms.to_numpy(float)
        comp = records[
            (records[CONFIG] == row[CONFIG].values).all(axis=1) & (records.status == "ok")
        ].steady_step_ms.to_numpy(float)
        eager_ms.append(np.median(ref) if len(ref) else np.nan)
        if len(ref) and len(comp):
            speedup.append(np.median(ref) / np.median(comp))
            lo, hi = ratio_of_medians_ci(ref, comp)
        else:
            speedup.append(np.nan)
            lo = hi = np.nan
        low.append(lo)
        high.append(hi)
    summary["eager_step_ms"] = eager_ms
    # compile latency = the compiled run's warm-up excess beyond eager's (CUDA init etc. cancel out)
    eager_excess = summary[summary.compile_mode == "eager"].set_index(CELL).warmup_excess_s
    base = summary.set_index(CELL).index.map(lambda k: eager_excess.get(k, np.nan)).to_numpy(float)
    for state in ("cold", "warm"):
        summary[f"{state}_compile_s"] = np.where(
            summary.compile_mode == "eager", np.nan, summary[f"{state}_warmup_excess_s"] - base
        )
    summary["speedup"] = speedup
    summary["speedup_ci_low"] = low
    summary["speedup_ci_high"] = high
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
