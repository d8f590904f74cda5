"""Figures from the summary table and the run records (plotting only; never touches a device).

    figures.draw_all(summary, record.table(paths), environment, "results/cpu/figures")   # -> the figures made

Only a figure with data is made: `drawable` decides which, `draw_all` draws those as PNG and as a PDF without a
creation date (byte-identical on a rebuild) and writes `index.json`, the list the paper cites (read_index).
Every figure: one colour per compile mode (MODE_COLOURS), intervals wherever a speedup or gain is drawn (95%
t, three or more processes; fewer: a hollow marker and no bar), lines only between batch sizes next to each
other in the panel (never across one where the series did not run), and the legend below the axes.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import NullFormatter, ScalarFormatter  # noqa: E402

from compile_study.aggregate.columns import POINT  # noqa: E402
from compile_study.core import record, stats, vocab  # noqa: E402

FIGURES = ("overhead", "speedup", "roofline", "regimes", "timeline", "breakeven", "kernels", "buckets")
INDEX = "index.json"
matplotlib.rcParams["svg.hashsalt"] = "compile-study"  # deterministic ids
MODE_COLOURS = dict(zip(vocab.COMPILE_MODES, ("tab:grey", "tab:blue", "tab:orange", "tab:green", "tab:red")))
MARKERS = "osD^v<>p"  # by scope or regime, in the vocabulary's order
TRAINING_SCOPES = ("module", "fused-adamw", "step", "step-graph")


def _save(fig, title: str, stem: Path, legend: list | None = None) -> None:
    fig.suptitle("\n".join(textwrap.wrap(title, 100)), fontsize=9)
    fig.tight_layout()
    if legend:  # below the axes, never over the data
        fig.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(legend)), fontsize=7,
                   frameon=False)
    kw = {"bbox_inches": "tight"}
    fig.savefig(stem.with_suffix(".png"), dpi=150, metadata={"Software": None}, **kw)
    fig.savefig(stem.with_suffix(".pdf"), metadata={"CreationDate": None, "ModDate": None, "Producer": None}, **kw)
    plt.close(fig)


def _log2_batches(ax, sizes) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(sizes))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("batch size")
    ax.grid(alpha=0.3)


def _modes(df: pd.DataFrame) -> list[str]:
    return sorted(set(df.compile_mode), key=vocab.COMPILE_MODES.index)


def _panels(n: int, height: float = 4.0, rows: int = 1):
    return plt.subplots(rows, max(1, n), figsize=(max(6.0, 4.8 * n), height * rows), squeeze=False)


def _handle(label: str, colour="black", marker="o", ls="-", face=None) -> Line2D:
    return Line2D([], [], color=colour, marker=marker, ls=ls, label=label, mfc=face or colour)


HOLLOW = _handle("hollow: n < 3, no interval", "black", "o", "none", "white")


def _line(ax, sizes: list, x, y, dodge: float = 1.0, **kw) -> None:
    """Points, joined only where two batch sizes are next to each other among the panel's `sizes` (never across
    one where the series did not run); `dodge` shifts the series sideways (log2 axis) so series do not overlap."""
    pos = {b: i for i, b in enumerate(sorted(sizes))}
    pts = sorted((a, b) for a, b in zip(x, y) if np.isfinite(b))
    ls = kw.pop("ls", "-")
    if kw.get("marker", "none") != "none":
        ax.plot([p[0] * dodge for p in pts], [p[1] for p in pts], ls="none", **kw)
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if pos[x1] - pos[x0] == 1:
            ax.plot([x0 * dodge, x1 * dodge], [y0, y1], color=kw.get("color"), ls=ls, lw=1.2)


def _interval(ax, x, row, prefix: str, colour, marker, horizontal=False) -> None:
    """One point with its interval (MIN_N processes or more) or a hollow marker (fewer: no interval)."""
    point = row[POINT[prefix]]
    n, lo, hi = row.get(f"{prefix}_n", 0), row[f"{prefix}_low"], row[f"{prefix}_high"]
    has = n >= stats.MIN_N and np.isfinite(lo) and np.isfinite(hi)
    err = [[point - lo], [hi - point]] if has else None
    face = colour if has else "white"
    kw = dict(xerr=err) if horizontal else dict(yerr=err)
    xy = (point, x) if horizontal else (x, point)
    ax.errorbar(*xy, **kw, fmt=marker, color=colour, mfc=face, capsize=3, ms=6)


def speedup(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Static shapes: one panel per precision, one series per mode and training scope, intervals, the A/A band."""
    h = vocab.usable(summary[(summary.shape_regime == "static") & summary.compile_scope.isin(TRAINING_SCOPES)])
    precisions = sorted(h.precision.unique())
    fig, axes = _panels(len(precisions))
    scopes = sorted(set(h[h.compile_mode != "eager"].compile_scope), key=TRAINING_SCOPES.index)
    for ax, p in zip(axes[0], precisions):
        panel = h[h.precision == p]
        sizes = sorted(panel.batch_size.unique())
        for r in panel[(panel.compile_mode == "eager") & (panel.compile_scope == "module")].itertuples():
            if np.isfinite(r.aa_low):
                ax.fill_between([r.batch_size / 1.2, r.batch_size * 1.2], r.aa_low, r.aa_high, color="grey", alpha=0.3)
        comp = panel[panel.compile_mode != "eager"]
        series = list(comp.groupby(["compile_mode", "compile_scope"]))
        for i, ((mode, scope), g) in enumerate(series):
            colour, marker = MODE_COLOURS[mode], MARKERS[scopes.index(scope)]
            dodge = 2 ** (0.08 * (i - (len(series) - 1) / 2))  # side by side at one batch size, not on top
            _line(ax, sizes, g.batch_size, g.speedup, color=colour, marker="none", ls="-" if scope == "module" else ":",
                  dodge=dodge)
            for _, r in g.iterrows():
                _interval(ax, r.batch_size * dodge, r, "speedup", colour, marker)
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        _log2_batches(ax, sizes)
        ax.set(ylabel="speedup over eager, same process", title=f"static shapes, {p}")
    legend = [_handle(m, MODE_COLOURS[m]) for m in _modes(h[h.compile_mode != "eager"])]
    legend += [_handle(f"scope {s}", "black", MARKERS[scopes.index(s)], "none") for s in scopes]
    _save(fig, title, stem, legend + [HOLLOW])


def roofline(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Achieved TFLOP/s (real tokens only: dashed) vs batch size per mode and regime; the measured peak."""
    s = vocab.usable(summary[summary.compile_scope == "module"]).dropna(subset=["achieved_tflops"])
    precisions = sorted(s.precision.unique())
    regimes = sorted(set(s.shape_regime), key=lambda r: (r != "static", r))
    fig, axes = _panels(len(precisions), 4.4)
    for ax, p in zip(axes[0], precisions):
        panel = s[s.precision == p]
        sizes = sorted(panel.batch_size.unique())
        for (mode, regime), g in panel.groupby(["compile_mode", "shape_regime"]):
            kw = dict(color=MODE_COLOURS[mode], marker=MARKERS[regimes.index(regime) % len(MARKERS)])
            _line(ax, sizes, g.batch_size, g.achieved_tflops, **kw)
            if g.real_tflops.notna().any():
                _line(ax, sizes, g.batch_size, g.real_tflops, **(kw | {"ls": "--", "marker": "none"}))
        peak = panel.peak_tflops.dropna()
        if len(peak):
            ax.axhline(peak.iloc[0], color="black", lw=1.2)
            ax.annotate(f"measured {p} peak {peak.iloc[0]:.3g} TFLOP/s", (0.02, peak.iloc[0]), fontsize=7, va="top",
                        xycoords=("axes fraction", "data"), xytext=(0, -3), textcoords="offset points")
        ax.set_yscale("log")
        _log2_batches(ax, sizes)
        ax.set(ylabel="achieved matmul TFLOP/s", title=p)
    legend = [_handle(m, MODE_COLOURS[m]) for m in _modes(s)]
    legend += [_handle(r, "black", MARKERS[i % len(MARKERS)], "none") for i, r in enumerate(regimes)]
    _save(fig, title, stem, legend + [_handle("real tokens only", "black", "none", "--")])


def regimes(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Per batch size with several regimes: each (mode, regime)'s gain over eager on static batches, intervals."""
    s = vocab.usable(summary[summary.compile_scope == "module"]).dropna(subset=["gain_over_eager_static"])
    sizes = sorted(s[s.shape_regime != "static"].batch_size.unique())
    fig, axes = _panels(len(sizes), 4.2)
    for ax, bs in zip(axes[0], sizes):
        panel = s[s.batch_size == bs].assign(_m=lambda d: d.compile_mode.map(vocab.COMPILE_MODES.index))
        panel = panel.sort_values(["shape_regime", "_m"], ascending=[False, False]).reset_index(drop=True)
        for i, r in panel.iterrows():
            _interval(ax, i, r, "gain", MODE_COLOURS[r.compile_mode], "o", horizontal=True)
        ax.set_yticks(range(len(panel)), [f"{r.shape_regime}" for r in panel.itertuples()], fontsize=7)
        ax.axvline(1.0, color="black", ls="--", lw=1)
        ax.set(xlabel="real tokens/s over eager on static batches", title=f"batch size {bs}")
        ax.grid(alpha=0.3, axis="x")
    legend = [_handle(m, MODE_COLOURS[m], "o", "none") for m in _modes(s)]
    _save(fig, title, stem, legend + [HOLLOW])


def breakeven(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Cold compile time vs break-even steps (the module compiled), labelled with batch size and precision."""
    s = _breakeven_rows(summary)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for mode in _modes(s):
        g = s[s.compile_mode == mode]
        ax.plot(g.cold_compile_s, g.break_even_steps, "o", color=MODE_COLOURS[mode])
        for r in g.itertuples():
            ax.annotate(f"{int(r.batch_size)} {r.precision}" + ("" if r.shape_regime == "static" else f" {r.shape_regime}"),
                        (r.cold_compile_s, r.break_even_steps), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_yscale("log")
    ax.set(xlabel="cold compile (s)", ylabel="break-even (training steps, log)")
    ax.grid(alpha=0.3)
    _save(fig, title, stem, [_handle(m, MODE_COLOURS[m], "o", "none") for m in _modes(s)])


def _breakeven_rows(summary: pd.DataFrame) -> pd.DataFrame:
    s = vocab.usable(summary[(summary.compile_mode != "eager") & (summary.compile_scope == "module")])
    return s[np.isfinite(s.break_even_steps.astype(float)) & s.cold_compile_s.notna()]


def _profiled(summary: pd.DataFrame) -> pd.DataFrame:
    return vocab.usable(vocab.headline(summary)).dropna(subset=["profile_kernels_per_step"])


def kernels(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Kernels (CPU: top-level operators) per step and, where measured, the device's idle share, per mode."""
    h = _profiled(summary)
    idle = h.profile_idle_fraction.notna().any()
    precisions = sorted(h.precision.unique())
    fig, axes = _panels(len(precisions), 3.5, rows=2 if idle else 1)
    kind = h.kernel_kind.dropna().iloc[0] if h.kernel_kind.notna().any() else "kernels"
    for col, p in enumerate(precisions):
        panel = h[h.precision == p]
        sizes = sorted(panel.batch_size.unique())
        for mode, g in panel.groupby("compile_mode"):
            _line(axes[0, col], sizes, g.batch_size, g.profile_kernels_per_step, color=MODE_COLOURS[mode], marker="o")
            if idle:
                _line(axes[1, col], sizes, g.batch_size, 100 * g.profile_idle_fraction, color=MODE_COLOURS[mode],
                      marker="o")
        for row, ylabel in enumerate((f"{kind} per step", "device idle (% of profiled step)")[:2 if idle else 1]):
            _log2_batches(axes[row, col], sizes)
            axes[row, col].set(ylabel=ylabel, title=f"static shapes, {p}")
        axes[0, col].set_ylim(bottom=0)
    _save(fig, title, stem, [_handle(m, MODE_COLOURS[m]) for m in _modes(h)])


def overhead(records: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Where the study's time went: each part of the runs' wall time summed over every record."""
    cuda = (records.device_type == "cuda").any()
    parts = [k for k in record.OVERHEAD if k != "total_s" and f"overhead_{k}" in records
             and records[f"overhead_{k}"].notna().any()]  # a part newer than the records is not drawn
    names = {k: ("CUDA init" if cuda else "device init") if k == "cuda_init_s" else k.removesuffix("_s").replace("_", " ")
             for k in parts}
    totals = pd.Series({names[k]: pd.to_numeric(records[f"overhead_{k}"]).sum() for k in parts}) / 60
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    totals.sort_values().plot.barh(ax=ax, color="tab:blue")
    ax.set(xlabel=f"minutes, summed over {len(records)} runs", ylabel="")
    ax.grid(alpha=0.3, axis="x")
    _save(fig, title, stem)


def _bucket_groups(summary: pd.DataFrame) -> pd.DataFrame:
    s = vocab.usable(summary[summary.shape_regime.map(lambda x: vocab.Regime.parse(x).kind == "bucketed")
                                & (summary.compile_scope == "module")])
    sets = s.groupby(["compile_mode", "batch_size"]).shape_regime.transform("nunique")
    return s[sets >= 2]  # a comparison of bucket sets needs two of them in one mode and batch size


def buckets(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Bucket sets at one batch size per panel: padding waste vs real tokens/s, each labelled with its graphs."""
    s = _bucket_groups(summary)
    sizes = sorted(s.batch_size.unique())
    fig, axes = _panels(len(sizes), 4.2)
    for ax, bs in zip(axes[0], sizes):
        for mode, g in s[s.batch_size == bs].groupby("compile_mode"):
            ax.plot(100 * g.padding_fraction, g.real_tokens_per_s, "o", color=MODE_COLOURS[mode])
            for r in g.itertuples():
                edges = "/".join(map(str, vocab.Regime.parse(r.shape_regime).edges))
                note = edges + ("" if mode == "eager" else f" ({int(r.graphs_compiled)} graphs)")
                ax.annotate(note, (100 * r.padding_fraction, r.real_tokens_per_s), fontsize=6, xytext=(3, 3),
                            textcoords="offset points")
        ax.set(xlabel="padding (% of computed token positions)", ylabel="real tokens / s", title=f"batch size {bs}")
        ax.grid(alpha=0.3)
    _save(fig, title, stem, [_handle(m, MODE_COLOURS[m], "o", "none") for m in _modes(s)])


def _timeline_runs(records: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Repeat 0's epoch-1 series of the (mode, batch size) with the most shape regimes (two at least)."""
    r = vocab.usable(records[(records.repeat == 0) & (records.compile_mode != "eager")
                             & (records.compile_scope == "module")])
    r = r[pd.Series([isinstance(v, list) and len(v) > 0 for v in r.epoch1_step_ms], index=r.index, dtype=bool)]
    counts = r.groupby(["compile_mode", "batch_size"]).shape_regime.nunique()
    counts = counts[counts >= 2]
    if counts.empty:
        return r.iloc[0:0], {}
    mode, bs = max(counts.index, key=lambda k: (counts[k], k[1]))
    return r[(r.compile_mode == mode) & (r.batch_size == bs)], {"mode": mode, "batch": int(bs)}


def timeline(records: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Epoch-1 step times of repeat 0 for one mode and batch size, one line style per regime, new graphs marked."""
    r, _ = _timeline_runs(records)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    colour, legend = MODE_COLOURS[meta["mode"]], []
    for i, (_, row) in enumerate(r.sort_values("shape_regime").iterrows()):
        ms, ls = np.asarray(row.epoch1_step_ms), ("-", "--", ":", "-.")[i % 4]
        ax.plot(np.arange(len(ms)), ms, lw=0.9, color=colour, ls=ls)
        marks = [s for s in (row.graph_steps or []) if s < len(ms)]
        ax.plot(marks, ms[marks], "x", color="black", ms=7)
        legend.append(_handle(row.shape_regime, colour, "none", ls))
    ax.set_yscale("log")
    ax.set(xlabel="step in epoch 1", ylabel="step time (ms, log)",
           title=f"{meta['mode']}, batch size {meta['batch']}; × = a new graph existed after this step")
    ax.grid(alpha=0.3)
    _save(fig, title, stem, legend)


DRAW = {"overhead": overhead, "speedup": speedup, "roofline": roofline, "regimes": regimes, "timeline": timeline,
        "breakeven": breakeven, "kernels": kernels, "buckets": buckets}


def drawable(summary: pd.DataFrame, records: pd.DataFrame) -> dict[str, dict]:
    """The figures this study has data for, in FIGURES' order, each with what its caption names."""
    over = [f"overhead_{k}" for k in record.OVERHEAD if k != "total_s" and f"overhead_{k}" in records]
    has = {
        "overhead": bool(over) and pd.to_numeric(records[over].stack(), errors="coerce").sum() > 0,
        "speedup": not vocab.usable(vocab.headline(summary)).query("compile_mode != 'eager'").speedup.dropna().empty,
        "roofline": vocab.usable(summary).achieved_tflops.notna().any(),
        "regimes": vocab.usable(summary[summary.shape_regime != "static"]).gain_over_eager_static.notna().any(),
        "breakeven": not _breakeven_rows(summary).empty,
        "kernels": not _profiled(summary).empty,
        "buckets": not _bucket_groups(summary).empty,
    }
    runs, meta = _timeline_runs(records)
    out = {name: {} for name in FIGURES if has.get(name)}
    if not runs.empty:
        out["timeline"] = meta
    return {name: out[name] for name in FIGURES if name in out}


def draw_all(summary: pd.DataFrame, records: pd.DataFrame, environment: dict, out_dir: str | Path) -> list[Path]:
    """The figures with data into out_dir as <name>.png and <name>.pdf, and index.json naming them."""
    name = environment.get("device_name")
    name = name if isinstance(name, str) else ", ".join(map(str, name or []))
    title = f"torch.compile training on {name} (torch {environment.get('torch')})"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = summary.copy()  # one block per dtype: read_csv's block per column makes every added column warn
    made = drawable(summary, records)
    for fig, meta in made.items():
        data = records if fig in ("overhead", "timeline") else summary
        DRAW[fig](data, title, out / fig, meta)
    (out / INDEX).write_text(json.dumps(made, indent=1) + "\n")
    return [out / f"{f}.{ext}" for f in made for ext in ("png", "pdf")]


def read_index(figure_dir: str | Path) -> dict[str, dict]:
    """The figures a study's figure directory holds (index.json), in their order; none where it has no index."""
    path = Path(figure_dir) / INDEX
    return json.loads(path.read_text()) if path.is_file() else {}
