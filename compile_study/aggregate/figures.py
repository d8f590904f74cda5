"""Figures from the summary table and the run records (plotting only; never touches a device).

    figures.draw_all(summary, record.table(paths), environment, "paper/figures")   # -> [<name>.png, <name>.pdf]

Every figure selects configurations with vocab.usable (ok or partly failed), as the tables do, and is saved as
PNG and as a PDF without a creation date (byte-identical on a rebuild). A figure whose data the study lacks
says so on its canvas; the paper leaves it out.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import NullFormatter, ScalarFormatter  # noqa: E402

from compile_study.core import record, vocab  # noqa: E402

FIGURES = ("speedup", "roofline", "regimes", "breakeven", "kernels", "overhead", "buckets", "timeline")
matplotlib.rcParams["svg.hashsalt"] = "compile-study"  # deterministic ids
MODE_COLOURS = dict(zip(vocab.COMPILE_MODES, ("tab:grey", "tab:blue", "tab:orange", "tab:green", "tab:red")))


def _save(fig, title: str, stem: Path) -> None:
    fig.suptitle("\n".join(textwrap.wrap(title, 100)), fontsize=9)
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"), dpi=150, metadata={"Software": None})
    fig.savefig(stem.with_suffix(".pdf"), metadata={"CreationDate": None, "ModDate": None, "Producer": None})
    plt.close(fig)


def _empty(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} in this study's grid", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


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


def speedup(summary: pd.DataFrame, title: str, stem: Path) -> None:
    """Static shapes: one panel per precision, one line per mode, interval bars, the A/A band shaded."""
    h = vocab.usable(vocab.headline(summary))
    precisions = sorted(h.precision.unique()) or ["fp32"]
    fig, axes = _panels(len(precisions))
    for ax, p in zip(axes[0], precisions):
        panel = h[h.precision == p].sort_values("batch_size")
        eager = panel[panel.compile_mode == "eager"]
        if eager.aa_low.notna().any():
            ax.fill_between(eager.batch_size, eager.aa_low, eager.aa_high, color="grey", alpha=0.25, label="A/A band")
        for mode in _modes(panel[panel.compile_mode != "eager"]):
            g = panel[panel.compile_mode == mode].dropna(subset=["speedup"])
            low, high = g.speedup_low.fillna(g.speedup), g.speedup_high.fillna(g.speedup)
            err = np.vstack([g.speedup - low, high - g.speedup]).clip(min=0)
            ax.errorbar(g.batch_size, g.speedup, yerr=err, marker="o", capsize=3, label=mode)
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        _log2_batches(ax, panel.batch_size.unique())
        ax.set(ylabel="speedup over eager (same process)", title=f"static shapes, {p}")
        ax.legend(fontsize=7)
    _save(fig, title, stem)


def roofline(summary: pd.DataFrame, title: str, stem: Path) -> None:
    """Achieved TFLOP/s (and real-token TFLOP/s, dashed) vs batch size per mode and regime; the measured peak."""
    s = vocab.usable(summary[summary.compile_scope == "module"]).dropna(subset=["achieved_tflops"])
    precisions = sorted(s.precision.unique())
    fig, axes = _panels(len(precisions), 4.4)
    if s.empty:
        _empty(axes[0][0], "FLOP measurement")
    for ax, p in zip(axes[0], precisions):
        panel = s[s.precision == p]
        regimes_here = sorted(set(s.shape_regime), key=lambda r: (r != "static", r))
        for (mode, regime), g in panel.groupby(["compile_mode", "shape_regime"]):
            g = g.sort_values("batch_size")
            (line,) = ax.plot(g.batch_size, g.achieved_tflops, color=MODE_COLOURS[mode],
                              marker="osD^v<>p"[regimes_here.index(regime) % 8], label=f"{mode}, {regime}")
            if "real_tflops" in g and g.real_tflops.notna().any():
                ax.plot(g.batch_size, g.real_tflops, ls="--", color=line.get_color())
        peak = panel.peak_tflops.dropna()
        if len(peak):
            ax.axhline(peak.iloc[0], color="black", lw=1.2, label=f"measured {p} peak {peak.iloc[0]:.3g} TFLOP/s")
        ax.set_yscale("log")
        _log2_batches(ax, panel.batch_size.unique())
        ax.set(ylabel="achieved matmul TFLOP/s (dashed: real tokens only)", title=p)
        ax.legend(fontsize=6)
    _save(fig, title, stem)


def regimes(summary: pd.DataFrame, title: str, stem: Path) -> None:
    """Real tokens/s per regime and mode at each batch size with several regimes; eager static as a line."""
    s = vocab.usable(summary[summary.compile_scope == "module"])
    sizes = sorted(s[s.shape_regime != "static"].batch_size.unique())
    fig, axes = _panels(len(sizes), 4.2)
    if not sizes:
        _empty(axes[0][0], "shape regimes beyond static")
    for ax, bs in zip(axes[0], sizes):
        panel = s[s.batch_size == bs]
        table = panel.pivot_table(index="shape_regime", columns="compile_mode", values="real_tokens_per_s")
        table = table[[m for m in _modes(panel) if m in table.columns]]
        if table.empty:
            _empty(ax, f"real tokens/s at batch {bs}")
            continue
        table.plot.barh(ax=ax, width=0.8)
        base = panel.eager_static_real_tokens_per_s.dropna()
        if len(base):
            ax.axvline(base.median(), color="black", ls="--", lw=1, label="eager, static batches")
        ax.set(xlabel="real (non-pad) tokens / s", ylabel="", title=f"batch size {bs}")
        ax.grid(alpha=0.3, axis="x")
        ax.legend(fontsize=7)
    _save(fig, title, stem)


def breakeven(summary: pd.DataFrame, title: str, stem: Path) -> None:
    """Cold compile time vs break-even steps (the module compiled), one colour per mode, labelled with batch size
    and precision (and the shape regime where not static)."""
    s = vocab.usable(summary[(summary.compile_mode != "eager") & (summary.compile_scope == "module")])
    s = s[np.isfinite(s.break_even_steps.astype(float)) & s.cold_compile_s.notna()]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    if s.empty:
        _empty(ax, "compiled configuration that saves time")
    for mode in _modes(s):
        g = s[s.compile_mode == mode]
        ax.plot(g.cold_compile_s, g.break_even_steps, "o", color=MODE_COLOURS[mode], label=mode)
        for r in g.itertuples():
            ax.annotate(f"{int(r.batch_size)} {r.precision}" + ("" if r.shape_regime == "static" else f" {r.shape_regime}"),
                        (r.cold_compile_s, r.break_even_steps), fontsize=6, xytext=(3, 3), textcoords="offset points")
    if not s.empty:
        ax.set_yscale("log")
        ax.set(xlabel="cold compile (s)", ylabel="break-even (training steps, log)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    _save(fig, title, stem)


def kernels(summary: pd.DataFrame, title: str, stem: Path) -> None:
    """Profiler: kernels per training step (CPU: top-level aten ops) and device idle share, per mode."""
    h = vocab.usable(vocab.headline(summary)).dropna(subset=["profile_kernels_per_step"])
    precisions = sorted(h.precision.unique())
    fig, axes = _panels(len(precisions), 3.5, rows=2)
    if h.empty:
        for ax in axes.flat:
            _empty(ax, "profiled run")
    kind = h.kernel_kind.dropna().iloc[0] if h.kernel_kind.notna().any() else "kernels"
    for col, p in enumerate(precisions):
        panel = h[h.precision == p].sort_values("batch_size")
        for mode in _modes(panel):
            g = panel[panel.compile_mode == mode]
            axes[0, col].plot(g.batch_size, g.profile_kernels_per_step, marker="o", label=mode)
            if g.profile_idle_fraction.notna().any():
                axes[1, col].plot(g.batch_size, 100 * g.profile_idle_fraction, marker="o", label=mode)
        for row, ylabel in enumerate((f"{kind} per step", "device idle (% of step wall time)")):
            ax = axes[row, col]
            _log2_batches(ax, panel.batch_size.unique())
            ax.set(ylabel=ylabel, title=f"static shapes, {p}")
            if ax.lines:
                ax.legend(fontsize=7)
            elif row == 1:
                _empty(ax, "device idle measurement (CPU run)")
        axes[0, col].set_ylim(bottom=0)
    _save(fig, title, stem)


def overhead(records: pd.DataFrame, title: str, stem: Path) -> None:
    """Where the study's time went: each part of the runs' wall time summed over every record."""
    parts = [k for k in record.OVERHEAD if k != "total_s" and f"overhead_{k}" in records
             and records[f"overhead_{k}"].notna().any()]  # a part newer than the records is not drawn
    totals = pd.Series({k.removesuffix("_s").replace("_", " "): pd.to_numeric(records[f"overhead_{k}"]).sum()
                        for k in parts}) / 60
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    if totals.empty or not totals.sum() > 0:
        _empty(ax, "overhead breakdown (records before schema 4)")
    else:
        totals.sort_values().plot.barh(ax=ax, color="tab:blue")
        ax.set(xlabel=f"minutes, summed over {len(records)} runs", ylabel="")
        ax.grid(alpha=0.3, axis="x")
    _save(fig, title, stem)


def buckets(summary: pd.DataFrame, title: str, stem: Path) -> None:
    """Bucket sets: padding waste vs real tokens/s, each point labelled with its graph count."""
    s = vocab.usable(summary[summary.shape_regime.map(lambda x: vocab.Regime.parse(x).kind == "bucketed")
                                & (summary.compile_scope == "module")])
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    if s.empty:
        _empty(ax, "bucket sets")
    for (mode, bs), g in s.groupby(["compile_mode", "batch_size"]):
        ax.plot(100 * g.padding_fraction, g.real_tokens_per_s, "o", label=f"{mode}, batch {bs}")
        for r in g.itertuples():
            edges = "/".join(map(str, vocab.Regime.parse(r.shape_regime).edges))
            note = edges + ("" if mode == "eager" else f" ({int(r.graphs_compiled)} graphs)")
            ax.annotate(note, (100 * r.padding_fraction, r.real_tokens_per_s), fontsize=6, xytext=(3, 3),
                        textcoords="offset points")
    if not s.empty:
        ax.set(xlabel="padding waste (% of computed token positions)", ylabel="real tokens / s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    _save(fig, title, stem)


def timeline(records: pd.DataFrame, title: str, stem: Path) -> None:
    """Epoch-1 step times of repeat 0 at one batch size, one line per regime, steps with a new graph marked."""
    r = vocab.usable(records[(records.repeat == 0) & (records.compile_mode != "eager")
                             & (records.compile_scope == "module")])
    r = r[r.epoch1_step_ms.map(lambda v: isinstance(v, list) and len(v) > 0)] if "epoch1_step_ms" in r else r.iloc[0:0]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    if r.empty:
        _empty(ax, "epoch-1 step series")
        _save(fig, title, stem)
        return
    sizes = sorted(r[r.shape_regime != "static"].batch_size.unique()) or sorted(r.batch_size.unique())
    mode = "default" if (r.compile_mode == "default").any() else r.compile_mode.iloc[0]
    for _, row in r[(r.batch_size == sizes[0]) & (r.compile_mode == mode)].sort_values("shape_regime").iterrows():
        ms = np.asarray(row.epoch1_step_ms)
        (line,) = ax.plot(np.arange(len(ms)), ms, lw=0.8, label=row.shape_regime)
        marks = [s for s in (row.graph_steps or []) if s < len(ms)]
        ax.plot(marks, ms[marks], "x", color=line.get_color(), ms=7)
    ax.set_yscale("log")
    ax.set(xlabel="step in epoch 1", ylabel="step time (ms, log)",
           title=f"compile mode {mode}, batch size {sizes[0]}; × = step that compiled a new graph")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    _save(fig, title, stem)


def draw_all(summary: pd.DataFrame, records: pd.DataFrame, environment: dict, out_dir: str | Path) -> list[Path]:
    """Every figure into out_dir as <name>.png and <name>.pdf; returns their paths."""
    name = environment.get("device_name")
    name = name if isinstance(name, str) else ", ".join(map(str, name or []))
    title = f"torch.compile training on {name} (torch {environment.get('torch')})"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for fn in (speedup, roofline, regimes, breakeven, kernels, buckets):
        fn(summary, title, out / fn.__name__)
    overhead(records, title, out / "overhead")
    timeline(records, title, out / "timeline")
    return [out / f"{f}.{ext}" for f in FIGURES for ext in ("png", "pdf")]
