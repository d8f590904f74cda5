"""The figures of what compiling costs (aggregate/figures/figures.py registers and saves them): where the study's run
time went, each configuration's cost to reach its compiled step against its break-even, the first epoch's
step times, and where a cold start's seconds go by compiler stage (environment.json's compile_stages). Each `*_meta` says what its figure draws (figures/index.json), so that a caption and a test can name it.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from compile_study.aggregate.columns import WAYS, break_even_prefix, interval_of, start_prefix
from compile_study.aggregate.figures import drawing
from compile_study.core import record, vocab
from compile_study.core.compile_stages import STAGES

SPAN = 10.0  # values spanning more than this factor go on a log axis
# each way of reaching the compiled step (columns.WAYS): how its markers are filled, and what the legend calls it
WAY_FILL = {"cold": "full", "portable": "bottom", "warm": "none"}
WAY_WORDS = {"cold": "from an empty cache", "portable": "from shipped portable artifacts", "warm": "from a filled cache"}
TRAINING_SCOPES = vocab.TRAINING_SCOPES
MODE_COLOURS, marker, series_label = drawing.MODE_COLOURS, drawing.marker, drawing.series_label


def keys(df: pd.DataFrame) -> list[dict]:
    """Each row's configuration as the report names it (mode, scope, regime, precision, batch)."""
    return [{"mode": m, "scope": s, "regime": r, "precision": p, "batch": int(b)} for m, s, r, p, b in
            zip(df.compile_mode, df.compile_scope, df.shape_regime, df.precision, df.batch_size)]


# --- where the run time went ---------------------------------------------------------------------------------------
def overhead_parts(records: pd.DataFrame) -> dict[str, str]:
    """The parts of the runs' wall time drawn, by their bar's name: those the records carry (a part newer than the
    records is not drawn) and, on the CPU, none that only a GPU has (its wait for a GPU, its CUDA init)."""
    cuda = (records.device_type == "cuda").any()
    parts = [k for k in record.OVERHEAD if k != "total_s" and f"overhead_{k}" in records
             and records[f"overhead_{k}"].notna().any() and (cuda or k != "gpu_wait_s")]
    return {k: ("CUDA init" if cuda else "device init") if k == "cuda_init_s" else k.removesuffix("_s").replace("_", " ")
            for k in parts}


def overhead(records: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Where the study's time went: each part of the runs' wall time summed over every record."""
    names = overhead_parts(records)
    totals = pd.Series({names[k]: pd.to_numeric(records[f"overhead_{k}"]).sum() for k in names}) / 60
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    totals.sort_values().plot.barh(ax=ax, color="tab:blue")
    ax.set(xlabel=f"minutes, summed over {len(records)} runs", ylabel="")
    ax.grid(alpha=0.3, axis="x")
    drawing.save(fig, title, stem)


# --- the break-even ----------------------------------------------------------------------------------------------------
def breakeven_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The configurations that pay back (payback "pays-after": faster than eager), every training scope and shape
    regime, with a finite break-even from an empty cache."""
    s = vocab.usable(summary[(summary.compile_mode != "eager") & summary.compile_scope.isin(TRAINING_SCOPES)])
    s = s[s.payback == "pays-after"] if "payback" in s else s.iloc[:0]
    return s[np.isfinite(pd.to_numeric(s.break_even_steps, errors="coerce"))]


def _ways(rows: pd.DataFrame) -> list[str]:
    """The ways drawn: those of columns.WAYS with a finite cost and break-even in some row."""
    return [w for w in WAYS if f"{break_even_prefix(w)}_steps" in rows and f"{start_prefix(w)}_s" in rows
            and np.isfinite(pd.to_numeric(rows[f"{break_even_prefix(w)}_steps"], errors="coerce")).any()]


def breakeven_meta(summary: pd.DataFrame) -> dict:
    rows = breakeven_rows(summary)
    ways = _ways(rows)
    xs = pd.concat([pd.to_numeric(rows[f"{start_prefix(w)}_s"], errors="coerce") for w in ways]).dropna()
    ys = pd.concat([pd.to_numeric(rows[f"{break_even_prefix(w)}_steps"], errors="coerce") for w in ways]).dropna()
    return {"configs": keys(rows), "ways": ways,
            "log_x": bool(len(xs) and xs.max() > SPAN * xs.min()), "log_y": bool(len(ys) and ys.max() > SPAN * ys.min())}


def breakeven(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Per (precision, batch size) a panel: each configuration that pays back, its cost to reach the compiled
    step (x: cold start filled, warm-cache load hollow) against its break-even (y), with both intervals; colour the
    mode, marker the scope or regime. No point labels: the panel says the batch, the legend the rest."""
    s = breakeven_rows(summary)
    regimes = sorted(set(s.shape_regime), key=lambda r: (r != "static", r))
    cells = sorted(s.groupby(["precision", "batch_size"]).groups)
    fig, axes = drawing.panels(len(cells), 4.0, sharey=True, sharex=True)
    for ax, (p, b) in zip(axes[0], cells):
        for r in s[(s.precision == p) & (s.batch_size == b)].itertuples():
            for way in meta["ways"]:
                x, y = interval_of(r, start_prefix(way)), interval_of(r, break_even_prefix(way))
                if np.isfinite(x.point) and np.isfinite(y.point):
                    drawing.point(ax, x, y, MODE_COLOURS[r.compile_mode], marker(r.compile_scope, r.shape_regime, regimes),
                                  fill=WAY_FILL.get(way, "left"))
        ax.set(xscale="log" if meta["log_x"] else "linear", yscale="log" if meta["log_y"] else "linear",
               xlabel="seconds to the first compiled step" + (" (log)" if meta["log_x"] else ""),
               title=f"{p}, batch size {b}")
        ax.grid(alpha=0.3)
        for axis, log in ((ax.xaxis, meta["log_x"]), (ax.yaxis, meta["log_y"])):
            if log:
                drawing.log_values(axis)
    axes[0, 0].set_ylabel("break-even (training steps" + (", log)" if meta["log_y"] else ")"))
    legend = [drawing.handle(m, MODE_COLOURS[m], "o", "none") for m in sorted(set(s.compile_mode), key=vocab.COMPILE_MODES.index)]
    legend += [drawing.handle(series_label(sc, rg), "black", marker(sc, rg, regimes), "none")
               for sc, rg in sorted(set(zip(s.compile_scope, s.shape_regime)), key=lambda k: (k[0] != "module", k))]
    legend += [drawing.handle(f"{WAY_FILL.get(w, 'left').replace('full', 'filled').replace('none', 'hollow')}: "
                              f"{WAY_WORDS.get(w, w)}", "black", "o", "none", fill=WAY_FILL.get(w, "left"))
               for w in meta["ways"]]
    drawing.save(fig, title, stem, legend)


# --- the first epoch -----------------------------------------------------------------------------------------------------
def timeline_runs(records: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Repeat 0's epoch-1 series of the (mode, batch size) with the most shape regimes (two at least), and what
    they are: mode, batch, and the cache each run found (`cache`: warm runs load compiled code, cold ones compile)."""
    r = vocab.usable(records[(records.repeat == 0) & (records.compile_mode != "eager")
                             & (records.compile_scope == "module")])
    r = r[pd.Series([isinstance(v, list) and len(v) > 0 for v in r.epoch1_step_ms], index=r.index, dtype=bool)]
    counts = r.groupby(["compile_mode", "batch_size"]).shape_regime.nunique()
    counts = counts[counts >= 2]
    if counts.empty:
        return r.iloc[0:0], {}
    mode, bs = max(counts.index, key=lambda k: (counts[k], k[1]))
    runs = r[(r.compile_mode == mode) & (r.batch_size == bs)]
    return runs, {"mode": mode, "batch": int(bs), "cache": sorted({str(c) for c in runs.inductor_cache}),
                  "runs": len(runs)}


def timeline(records: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Epoch-1 step times of repeat 0 for one mode and batch size, one line style per regime, new graphs marked."""
    r, _ = timeline_runs(records)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    colour, legend = MODE_COLOURS[meta["mode"]], []
    for i, (_, row) in enumerate(r.sort_values("shape_regime").iterrows()):
        ms, ls = np.asarray(row.epoch1_step_ms), ("-", "--", ":", "-.")[i % 4]
        ax.plot(np.arange(len(ms)), ms, lw=0.9, color=colour, ls=ls)
        marks = [s for s in (row.graph_steps or []) if s < len(ms)]
        ax.plot(marks, ms[marks], "x", color="black", ms=7)
        legend.append(drawing.handle(f"{row.shape_regime} ({row.inductor_cache} cache)", colour, "none", ls))
    ax.set_yscale("log")
    ax.set(xlabel="step in epoch 1", ylabel="step time (ms, log)",
           title=f"{meta['mode']}, batch size {meta['batch']}; × = a new graph existed after this step")
    ax.grid(alpha=0.3)
    drawing.save(fig, title, stem, legend)


# --- where a cold start's seconds go ----------------------------------------------------------------------------------
STAGE_COLOURS = dict(zip([*STAGES, "rest"], ("tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan",
                                              "tab:red", "tab:green", "lightgrey")))


def stage_label(row: dict) -> str:
    """A bar's name: the configuration and the way it reached its compiled step."""
    return (f"{row['compile_mode']} {row['compile_scope']} {row['shape_regime']} {row['precision']} "
            f"bs{int(row['batch_size'])}, {WAY_WORDS[row['way']]}")


def stages_meta(environment: dict) -> dict:
    """What the stages figure draws: each bar's configuration and way, and the stages (figures/index.json)."""
    rows = environment["compile_stages"]["rows"]
    return {"bars": [stage_label(r) for r in rows], "ways": sorted({r["way"] for r in rows}, key=WAYS.index)}


def stages(environment: dict, title: str, stem: Path, meta: dict) -> None:
    """Stages of a cold start per mode and scope, and what a portable start and a warm load skip: each bar one
    configuration's way, its stages' and its rest's mean shares of the measured latency (left, linear), and that
    latency's mean with its interval (right, seconds on a log axis where they span more than SPAN)."""
    rows = environment["compile_stages"]["rows"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 1.2 + 0.32 * len(rows)), sharey=True,
                                      gridspec_kw={"width_ratios": [3, 1.3]})
    y = np.arange(len(rows))[::-1]
    for yi, r in zip(y, rows):
        total = r["latency"]["point"]
        parts = [(s, r["stages"][s]["point"]) for s in STAGES] + [("rest", max(r["rest"]["point"], 0.0))]
        start = 0.0
        for name, seconds in parts:
            share = seconds / total if total > 0 else 0.0
            left.barh(yi, share, left=start, color=STAGE_COLOURS[name], height=0.7)
            start += share
        iv = r["latency"]
        has = r["n"] >= 3 and np.isfinite(iv["low"]) and np.isfinite(iv["high"])
        err = [[iv["point"] - iv["low"]], [iv["high"] - iv["point"]]] if has else None
        right.errorbar([iv["point"]], [yi], xerr=err, fmt="o", color="black", mfc="black" if has else "white",
                       capsize=3, ms=5)
    left.set(yticks=y, yticklabels=[stage_label(r) for r in rows], xlim=(0, 1.05),
             xlabel="share of the measured latency (mean over processes)")
    left.tick_params(axis="y", labelsize=7)
    points = [r["latency"]["point"] for r in rows if r["latency"]["point"] > 0]
    if points and max(points) / min(points) > SPAN:
        right.set_xscale("log")
    right.set(xlabel="latency, s [interval]")
    for ax in (left, right):
        ax.grid(alpha=0.3, axis="x")
    spent = {s for r in rows for s in STAGES if r["stages"][s]["point"] > 0} | {"rest"}  # a stage none spent: no key
    legend = [drawing.handle(name.replace("_", " "), colour, "s", "none") for name, colour in STAGE_COLOURS.items()
              if name in spent]
    drawing.save(fig, title, stem, legend + [drawing.HOLLOW])
