"""How much hosts of one kind differ: the between-study component of a configuration's speedup, per class of
configuration, estimated from stored studies made on different hosts of that kind (torch-free).

    from compile_study.aggregate.compare import hosts
    effect = hosts.estimate({"reference/<one>": records, "reference/<another>": records, ...})  # one device kind
    effect.loc["compiled waits on the host", "sd"]  # the host effect (SD, log units), with df, n and method
    hosts.effect_for(hosts.load(), "NVIDIA H200")       # what aggregate/compare/compare.py adds to a verdict's interval

H200 hosts of one kind differ in their CPUs, and a speedup over a step the host's CPU sets moves with that CPU
(the stored kick-the-tires studies' eager step at batch 32 against the yardstick's); a study's processes all
share one host. So a study's mean log speedup of a
configuration c carries an effect of its own beside its processes' scatter:

    log speedup of process p of study s = mu_c + h_sc + e_scp,   h_sc ~ N(0, tau_k^2),   e_scp ~ N(0, sigma_sc^2)

where k is c's class (CLASSES). tau_k, the host effect, is estimated by the method of moments of the one-way
random-effects model: per configuration shared by two or more studies (each with MIN_N processes or more),
the variance of the studies' mean log speedups less the mean squared standard error of those means (what the
processes' scatter alone would make of it); pooled over the class's configurations weighted by their degrees
of freedom (studies - 1), and truncated at zero. A study's host cannot be told from its time and commit: the
component is "between studies on different hosts of one kind", whatever else differed between them.

Classes, decided from the records: what sets the pace of each of the two steps a speedup divides, from each
side's profiled processes (median step / the GPU's busy time per step: `idle`; at or below DEVICE_BOUND the GPU's
own work sets the step, above it the host's launches do). The compiled side replays CUDA graphs where its mode
records them (vocab.CUDAGRAPH_MODES) or its scope captures the whole step (vocab.GRAPH_SCOPES, eager's control too):
one launch a step, so the GPU sets its pace.
The eager side is eager's configuration of the same regime, precision and batch; unprofiled, it counts as host-
bound below LARGE_BATCH (the stored studies' profiles: eager at batch 32 waits on the host, at 512 it does not).
  eager against eager             the A/A control: both sides eager (the step-graph's eager control is graph-replayed)
  compiled over host-bound eager  the compiled step graph-replayed or device-bound, eager's waiting on the host:
                                  the speedup carries the host's CPU speed fully (bs32 `reduce-overhead`)
  compiled waits on the host      the compiled step launches its kernels from the host and outlasts the GPU's
                                  work (or no process of it was profiled), eager's is device-bound: how fast the
                                  host is shows in the compiled step alone (bs512 `default`; aggregate/spread.py)
  both wait on the host           both steps wait on the host: its speed moves both, and much of it cancels
                                  (bs32 `default`)
  device-bound                    both steps device-bound: the host moves neither much (bs512 `reduce-overhead`)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from compile_study.core import digits, vocab
from compile_study.core.intervals import LEVEL, MIN_N
from compile_study.core.io import write_text_atomic
from compile_study.core.layout import host_effect_path

LARGE_BATCH = 512  # unprofiled eager counts as host-bound below this batch (the stored H200 studies' profiles)
DEVICE_BOUND = 1.05  # median step / GPU busy time per step at or below which the GPU's work sets the step
CLASSES = ("eager against eager", "compiled over host-bound eager", "compiled waits on the host",
           "both wait on the host", "device-bound")
WAITS = CLASSES[2]  # the class the host moves most (reruns.launched lays its configurations side by side)
KEY = ("shape_regime", "precision", "batch_size", "compile_mode", "compile_scope")  # compare.KEY
METHOD = ("method-of-moments one-way random effects: variance of the studies' mean log speedups less their mean "
          "squared standard error, pooled over the class's configurations by degrees of freedom (studies - 1), "
          "truncated at 0")


def _known(x) -> float | None:
    return None if x is None or x != x else float(x)


def class_of(batch_size: int, compile_mode: str, compile_scope: str, idle: float | None = None,
             eager_idle: float | None = None) -> str:
    """A configuration's class (CLASSES): what sets the pace of the two steps its speedup divides; `idle`: the
    largest median step / GPU busy time of its profiled processes, `eager_idle` the same of eager's configuration
    beside it (None: none profiled)."""
    idle, eager_idle = _known(idle), _known(eager_idle)
    graphs = compile_mode in vocab.CUDAGRAPH_MODES or compile_scope in vocab.GRAPH_SCOPES
    if compile_mode == "eager" and not graphs:
        return CLASSES[0]
    waits = not graphs and (idle is None or idle > DEVICE_BOUND)
    eager_waits = int(batch_size) < LARGE_BATCH if eager_idle is None else eager_idle > DEVICE_BOUND
    if waits:
        return CLASSES[3] if eager_waits else CLASSES[2]
    return CLASSES[1] if eager_waits else CLASSES[4]


def idle_of(records: pd.DataFrame) -> pd.Series:
    """Per configuration (index KEY) of a study: its profiled processes' largest median step / GPU busy time per
    step (NaN where none was profiled)."""
    ok = records[records.status == "ok"]
    ratio = pd.to_numeric(ok.steady_step_ms, errors="coerce") / pd.to_numeric(ok.profile_device_busy_ms_per_step,
                                                                              errors="coerce")
    return ratio.groupby([ok[k] for k in KEY]).max()


def paces(records: pd.DataFrame) -> pd.DataFrame:
    """Per configuration (index KEY) of a study: `idle` (idle_of) and `eager_idle`, that of eager's configuration
    of the same regime, precision and batch (the module scope's where it ran, else the largest of eager's scopes)."""
    idle = idle_of(records).rename("idle")
    frame = idle.reset_index()
    eager = frame[frame.compile_mode == "eager"]
    module = eager[eager.compile_scope == "module"].groupby(list(KEY[:3])).idle.max()
    any_scope = eager.groupby(list(KEY[:3])).idle.max()
    cell = list(zip(*(frame[k] for k in KEY[:3])))
    frame["eager_idle"] = [module.get(c, any_scope.get(c, np.nan)) for c in cell]
    return frame.set_index(list(KEY))


def t_quantile(q: float, df):
    """Student's t quantile, the normal's where df is infinite (a variance known: the host effect's alone)."""
    df = np.asarray(df, float)
    with np.errstate(all="ignore"):
        return np.where(np.isinf(df), sps.norm.ppf(q), sps.t.ppf(q, np.where(np.isinf(df), 1.0, df)))


def parts(stored_logs, study_logs, host_sd=0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The variance of the difference of mean logs, by part: the stored side's mean, the study's mean, and the
    two hosts' (2 tau^2), over the last axis (one pair, or [pairs, processes])."""
    a, b = np.asarray(stored_logs, float), np.asarray(study_logs, float)
    with np.errstate(all="ignore"):
        va, vb = a.var(axis=-1, ddof=1) / a.shape[-1], b.var(axis=-1, ddof=1) / b.shape[-1]
    return va, vb, np.broadcast_to(2 * np.asarray(host_sd, float) ** 2, np.shape(va))


def interval(stored_logs, study_logs, host_sd=0.0, host_df=np.inf,
             level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The t interval of mean(study_logs) - mean(stored_logs) over the last axis, its variance both means' plus
    2 host_sd^2, on Welch-Satterthwaite degrees of freedom with host_sd estimated on host_df of its own (infinite:
    known), and never narrower than Welch's interval for the two means alone (more degrees of freedom must not
    make a host effect narrow it); with host_sd 0, Welch's interval. Where nothing varies, the difference itself."""
    a, b = np.asarray(stored_logs, float), np.asarray(study_logs, float)
    va, vb, h = parts(a, b, host_sd)
    q = 1 - (1 - level) / 2
    with np.errstate(all="ignore"):
        spread = va ** 2 / (a.shape[-1] - 1) + vb ** 2 / (b.shape[-1] - 1)
        total, measured = va + vb + h, va + vb
        half = np.fmax(t_quantile(q, total ** 2 / (spread + h ** 2 / host_df)) * np.sqrt(total),
                       t_quantile(q, measured ** 2 / spread) * np.sqrt(measured))
    half = np.where(total > 0, np.nan_to_num(half, nan=0.0), 0.0)
    diff = b.mean(axis=-1) - a.mean(axis=-1)
    return diff - half, diff + half


def cells(records: pd.DataFrame) -> pd.DataFrame:
    """Per configuration (KEY columns) of one study: n, the mean log speedup and its squared standard error, over
    the successful processes with a finite speedup; configurations with fewer than MIN_N left out."""
    ok = records[records.status == "ok"].copy()
    ok["log"] = np.log(pd.to_numeric(ok.in_process_speedup, errors="coerce"))
    ok = ok[np.isfinite(ok.log)]
    g = ok.groupby(list(KEY)).log
    out = pd.DataFrame({"n": g.size(), "mean": g.mean(), "se2": g.var(ddof=1) / g.size()}).reset_index()
    return out[out.n >= MIN_N].reset_index(drop=True)


def shared_cells(studies: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Every study's cells (a column `study`) of the configurations two or more studies share, with their class
    (`idle` taken over all the studies' profiled processes)."""
    found = studies_cells(studies)
    found = found[found.groupby(list(KEY)).study.transform("nunique") >= 2].copy()
    return classed(found)


def studies_cells(studies: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Every study's cells (a column `study`), each with its configuration's `idle` and `eager_idle` (paces)."""
    frames = [cells(records).join(paces(records), on=list(KEY)).assign(study=name)
              for name, records in studies.items()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=[*KEY, "n", "mean", "se2", "idle", "eager_idle", "study"])


def classed(found: pd.DataFrame) -> pd.DataFrame:
    """Cells with their configuration's class (`class`), each side's pace taken over all the studies' profiled
    processes (the largest ratio of each)."""
    found = found.copy()
    idle = found.groupby(list(KEY)).idle.transform("max") if len(found) else found.idle
    eager = found.groupby(list(KEY)).eager_idle.transform("max") if len(found) else found.eager_idle
    found["class"] = [class_of(b, m, s, i, e) for b, m, s, i, e in
                      zip(found.batch_size, found.compile_mode, found.compile_scope, idle, eager)]
    return found.reset_index(drop=True)


def per_configuration(found: pd.DataFrame) -> pd.DataFrame:
    """Per shared configuration: its class, studies, the between-study variance of the means (`between`), the
    mean squared standard error (`within`) and their difference (`excess`, the configuration's raw tau^2)."""
    g = found.groupby(list(KEY))
    out = pd.DataFrame({"class": g["class"].first(), "studies": g.study.nunique(), "between": g["mean"].var(ddof=1),
                        "within": g.se2.mean(), "processes": g.n.sum()})
    out["excess"] = out.between - out.within
    return out.reset_index()


def estimate(studies: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The host effect per class (index CLASSES) from studies of one device kind (name -> run records): `sd`
    (tau, log units; 0 where the pooled excess is negative, NaN where no configuration of the class is shared)
    and `sd_ratio` (exp(sd): one SD as a factor on a speedup), `df`, `configurations`, `cells` (study x
    configuration), `studies`, `processes` and `method`."""
    return estimate_from(shared_cells(studies))


def estimate_from(found: pd.DataFrame) -> pd.DataFrame:
    """estimate's table from cells already classed (classed: KEY, class, study, n, mean, se2), those of
    configurations one study alone has left out (aggregate/compare/pool.py keeps every cell)."""
    found = found[found.groupby(list(KEY)).study.transform("nunique") >= 2] if len(found) else found
    per = per_configuration(found) if len(found) else pd.DataFrame(columns=["class"])
    rows = {}
    for name in CLASSES:
        p, f = per[per["class"] == name], found[found["class"] == name] if len(found) else found
        df = int((p.studies - 1).sum()) if len(p) else 0
        pooled = float(((p.studies - 1) * p.excess).sum() / df) if df else float("nan")
        sd = float(np.sqrt(max(pooled, 0.0))) if df else float("nan")
        rows[name] = {"sd": sd, "sd_ratio": float(np.exp(sd)), "pooled_excess": pooled,
                      "df": df, "configurations": len(p), "cells": len(f),
                      "studies": int(f.study.nunique()) if len(f) else 0,
                      "processes": int(f.n.sum()) if len(f) else 0, "method": METHOD}
    return pd.DataFrame.from_dict(rows, orient="index")


def effect_dict(effect: pd.DataFrame) -> dict[str, dict]:
    """estimate's table as the JSON file holds it: class -> its numbers (the method, the same for all, once beside
    them: reruns.build)."""
    return {name: {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items() if k != "method"}
            for name, row in effect.iterrows()}


def load(path: str | Path | None = None) -> dict:
    """The stored estimate (reference/host-effect.json: `python -m compile_study host-effect`, from
    aggregate/compare/reruns.py build); {} where there is none."""
    p = Path(path) if path is not None else host_effect_path()
    return json.loads(p.read_text()) if p.is_file() else {}


def effect_for(stored: dict, device_name: str | None) -> dict[str, dict]:
    """The host effect per class for hosts of one kind (the device's name), {} where none was estimated."""
    return ((stored.get("kinds") or {}).get(device_name) or {}).get("classes") or {}


def sd_of(effect: dict[str, dict], batch_size: int, compile_mode: str, compile_scope: str,
          idle: float | None = None, eager_idle: float | None = None) -> tuple[str, float, float]:
    """(class, tau in log units, its degrees of freedom) of a configuration (`idle`, `eager_idle`: class_of's);
    tau 0 on infinite degrees of freedom where its class has no estimate (NaN or absent)."""
    name = class_of(batch_size, compile_mode, compile_scope, idle, eager_idle)
    found = effect.get(name) or {}
    sd = found.get("sd")
    if sd is None or not np.isfinite(sd) or not found.get("df"):
        return name, 0.0, float("inf")
    return name, float(sd), float(found["df"])


def write(stored: dict, path: str | Path | None = None) -> Path:
    """The estimate (and what reruns.py adds to it) as JSON, every float with digits.SIGNIFICANT digits."""
    p = Path(path) if path is not None else host_effect_path()
    write_text_atomic(p, digits.dumps(stored, indent=1) + "\n")
    return p
