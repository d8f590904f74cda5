"""Figures from the summary table and the run records (plotting only; never touches a device)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import NullFormatter, ScalarFormatter  # noqa: E402

FIGURES = ("speedup", "regimes", "buckets", "timeline", "kernels")  # each saved as .png and .pdf


def _save(fig, title: str, stem: Path) -> None:
    fig.suptitle("\n".join(textwrap.wrap(title, 100)), fontsize=9)
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"), dpi=150)
    fig.savefig(stem.with_suffix(".pdf"), metadata={"CreationDate": None})  # byte-identical on a rebuild
    plt.close(fig)


def _empty(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} in this study's grid", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


def speedup_vs_batch_size(summary: pd.DataFrame, title: str, stem: Path) -> None:
    """Static shapes: one panel per precision, one line per compile mode, 95% CI bars, A/A band shaded."""
    static = summary[(summary.shape_regime == "static") & (summary.compile_scope == "module")]
    precisions = sorted(static.precision.unique()) or ["fp32"]
    fig, axes = plt.subplots(1, len(precisions), figsize=(max(6.0, 4.8 * len(precisions)), 4.0), squeeze=False)
    for ax, precision in zip(axes[0], precisions):
        panel = static[static.precision == precision].sort_values("batch_size")
        eager = panel[panel.compile_mode == "eager"]
        if eager.aa_band.notna().any():
            ax.fill_between(eager.batch_size, 1 / eager.aa_band, eager.aa_band, color="grey", alpha=0.25,
                            label="A/A band (eager vs eager)")
        for mode, g in panel[panel.compile_mode != "eager"].dropna(subset=["speedup"]).groupby("compile_mode"):
            err = np.vstack([g.speedup - g.speedup_ci_low, g.speedup_ci_high - g.speedup]).clip(min=0)
            ax.errorbar(g.batch_size, g.speedup, yerr=err if np.isfinite(err).all() else None, marker="o",
                        capsize=3, label=mode)
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(panel.batch_size.unique()))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set(xlabel="batch size", ylabel="speedup over eager (same process)", title=f"static shapes, {precision}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    _save(fig, title, stem)


def regimes(summary: pd.DataFrame, title: str, stem: Path) -> None:
    """Real (non-pad) tokens/s per shape regime, one group per compile mode, one panel per batch size."""
    summary = summary[summary.compile_scope == "module"]
    sizes = sorted(summary[summary.shape_regime != "static"].batch_size.unique())
    fig, axes = plt.subplots(1, max(1, len(sizes)), figsize=(max(6.0, 5.5 * len(sizes)), 4.2), squeeze=False)
    if not sizes:
        _empty(axes[0][0], "shape regimes beyond static")
    for ax, bs in zip(axes[0], sizes):
        panel = summary[(summary.batch_size == bs) & (summary.status == "ok")]
        table = panel.pivot_table(index="shape_regime", columns="compile_mode", values="real_tokens_per_s")
        table.plot.barh(ax=ax, width=0.8)
        ax.set(xlabel="real (non-pad) tokens / s", ylabel="", title=f"batch size {bs}")
        ax.grid(alpha=0.3, axis="x")
        ax.legend(fontsize=7, title="compile mode", title_fontsize=7)
    _save(fig, title, stem)


def buckets(summary: pd.DataFrame, title: str, stem: Path) -> None:
    """Bucket sweep: padding waste vs real tokens/s, each point labelled with its graph count."""
    sel = summary[summary.shape_regime.str.startswith("bucketed") & (summary.status == "ok")
                  & (summary.compile_scope == "module")]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    if sel.empty:
        _empty(ax, "bucket sets")
    for (mode, bs), g in sel.groupby(["compile_mode", "batch_size"]):
        ax.plot(100 * g.padding_fraction, g.real_tokens_per_s, "o", label=f"{mode}, batch {bs}")
        for _, r in g.iterrows():
            edges = r.shape_regime.removeprefix("bucketed-").replace("-", "/")
            note = f"{edges}" + ("" if mode == "eager" else f" ({int(r.graphs_compiled)} graphs)")
            ax.annotate(note, (100 * r.padding_fraction, r.real_tokens_per_s), fontsize=6,
                        xytext=(3, 3), textcoords="offset points")
    ax.set(xlabel="padding waste (% of computed token positions)", ylabel="real tokens / s")
    ax.grid(alpha=0.3)
    if not sel.empty:
        ax.legend(fontsize=7)
    _save(fig, title, stem)


def timeline(record_paths: list[str | Path], title: str, stem: Path) -> None:
    """Epoch-1 step times vs step index for each regime (repeat 0 of one batch size), new graphs marked."""
    recs = [json.loads(Path(p).read_text()) for p in record_paths]
    recs = [r for r in recs if r["status"] == "ok" and r["config"]["repeat"] == 0 and r["config"]["compile_mode"] != "eager"
            and r["config"].get("compile_scope", "module") == "module" and "epoch1_step_ms" in r["metrics"]]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    if not recs:
        _empty(ax, "compiled runs")
    else:
        sizes = sorted({r["config"]["batch_size"] for r in recs if r["config"]["shape_regime"] != "static"}) or sorted(
            {r["config"]["batch_size"] for r in recs})
        bs = sizes[0]
        mode = "default" if any(r["config"]["compile_mode"] == "default" for r in recs) else recs[0]["config"]["compile_mode"]
        for r in sorted(recs, key=lambda r: r["config"]["shape_regime"]):
            c = r["config"]
            if c["batch_size"] != bs or c["compile_mode"] != mode:
                continue
            ms = np.asarray(r["metrics"]["epoch1_step_ms"])
            (line,) = ax.plot(np.arange(len(ms)), ms, lw=0.8, label=c["shape_regime"])
            marks = [s for s in r["metrics"]["graph_steps"] if s < len(ms)]
            ax.plot(marks, ms[marks], "x", color=line.get_color(), ms=7)
        ax.set_yscale("log")
        ax.set(xlabel="step in epoch 1", ylabel="step time (ms, log)",
               title=f"compile mode {mode}, batch size {bs}; × = step that compiled a new graph")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    _save(fig, title, stem)


def kernels(summary: pd.DataFrame, title: str, stem: Path) -> None:
    """Profiler: kernels launched per training step (CPU: top-level aten ops) and device idle share, per mode."""
    static = summary[(summary.shape_regime == "static") & (summary.compile_scope == "module")
                     & summary.profile_kernels_per_step.notna()]
    precisions = sorted(static.precision.unique())
    fig, axes = plt.subplots(2, max(1, len(precisions)), figsize=(max(6.0, 4.8 * len(precisions)), 7.0), squeeze=False)
    if static.empty:
        for ax in axes.flat:
            _empty(ax, "profiled run")
        _save(fig, title, stem)
        return
    kind = static.kernel_kind.dropna().iloc[0] if static.kernel_kind.notna().any() else "kernels"
    for col, precision in enumerate(precisions):
        panel = static[static.precision == precision].sort_values("batch_size")
        for mode, g in panel.groupby("compile_mode"):
            axes[0, col].plot(g.batch_size, g.profile_kernels_per_step, marker="o", label=mode)
            if g.profile_idle_fraction.notna().any():
                axes[1, col].plot(g.batch_size, 100 * g.profile_idle_fraction, marker="o", label=mode)
        for row, ylabel in enumerate((f"{kind} per step", "device idle (% of step wall time)")):
            ax = axes[row, col]
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(panel.batch_size.unique()))
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set(xlabel="batch size", ylabel=ylabel, title=f"static shapes, {precision}")
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7)
            elif row == 1:
                _empty(ax, "device idle measurement (CPU run)")
        axes[0, col].set_ylim(bottom=0)
    _save(fig, title, stem)
