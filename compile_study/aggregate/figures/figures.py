"""Figures from the summary table and the run records (plotting only; never touches a device).

    figures.draw_all(summary, record.table(paths), environment, "results/cpu/figures")   # -> the figures made

Only a figure with data is made: `drawable` decides which, `draw_all` draws those as PNG and as a PDF without a
creation date (byte-identical on a rebuild) and writes `index.json`, the list the paper cites (read_index).
Every figure: one colour per compile mode (MODE_COLOURS), one marker per scope (SCOPE_MARKERS: the whole step in
one CUDA graph is a star wherever it is drawn) or, for the module, per shape regime, intervals wherever a speedup,
gain, cost or break-even is drawn (95%, three or more processes; fewer: no bar) on a log axis where values span
more than 10x (a ratio always: 0.5x and 2x equally far from 1x), lines only between batch sizes next to each other
in the panel (never across one where the series did not run), no floating point labels, and the legend below
the axes. The figures of what compiling costs are in cost_figures.py; each figure's entry in index.json says
what it drew.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from compile_study.aggregate.figures import cost_figures, drawing
from compile_study.core import record, vocab

FIGURES = ("overhead", "speedup", "roofline", "regimes", "timeline", "breakeven", "stages", "kernels", "buckets")
INDEX = "index.json"
MODE_COLOURS, MARKERS, SCOPE_MARKERS = drawing.MODE_COLOURS, drawing.MARKERS, drawing.SCOPE_MARKERS
TRAINING_SCOPES = cost_figures.TRAINING_SCOPES
STEP_GRAPH = "step-graph"  # the whole step captured as one CUDA graph: drawn beside the module wherever it ran


def _modes(df: pd.DataFrame) -> list[str]:
    return sorted(set(df.compile_mode), key=vocab.COMPILE_MODES.index)


def speedup(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Static shapes: one panel per precision (one log axis for all), one series per mode and training scope,
    intervals, the A/A band."""
    h = vocab.usable(summary[(summary.shape_regime == "static") & summary.compile_scope.isin(vocab.TRAINING_SCOPES)])
    precisions = sorted(h.precision.unique())
    fig, axes = drawing.panels(len(precisions), 4.6, sharey=True)
    scopes = sorted(set(h[h.compile_mode != "eager"].compile_scope), key=vocab.TRAINING_SCOPES.index)
    for ax, p in zip(axes[0], precisions):
        panel = h[h.precision == p]
        sizes = sorted(panel.batch_size.unique())
        for r in panel[(panel.compile_mode == "eager") & (panel.compile_scope == "module")].itertuples():
            if np.isfinite(r.aa_low):
                ax.fill_between([r.batch_size / 1.2, r.batch_size * 1.2], r.aa_low, r.aa_high, color="grey", alpha=0.3)
        comp = panel[panel.compile_mode != "eager"]
        series = list(comp.groupby(["compile_mode", "compile_scope"]))
        for ((mode, scope), g), dodge in zip(series, drawing.dodges(series)):
            colour, marker = MODE_COLOURS[mode], SCOPE_MARKERS[scope]
            drawing.line(ax, sizes, g.batch_size, g.speedup, color=colour, marker="none", ls="-" if scope == "module" else ":",
                  dodge=dodge)
            for _, r in g.iterrows():
                drawing.interval(ax, r.batch_size * dodge[r.batch_size], r, "speedup", colour, marker)
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        drawing.log2_batches(ax, sizes)
        ax.set(ylabel="speedup over eager, same process (log)", title=f"static shapes, {p}")
    for ax in axes[0]:  # after every panel is drawn: the shared limits are final
        drawing.ratio_axis(ax)
    legend = [drawing.handle(m, MODE_COLOURS[m]) for m in _modes(h[h.compile_mode != "eager"])]
    legend += [drawing.handle(f"scope {s}", "black", SCOPE_MARKERS[s], "none") for s in scopes]
    drawing.save(fig, title, stem, legend + [drawing.HOLLOW])


def _roofline_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """Every usable configuration with achieved TFLOP/s, every scope and shape regime: the ones the paper's model
    FLOP utilisation ranges over (report/findings.py mfu)."""
    return vocab.usable(summary).dropna(subset=["achieved_tflops"])


def roofline(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Achieved TFLOP/s (the model FLOPs torch.utils.flop_counter counts) vs batch size per mode, scope and regime,
    each point's real tokens only hollow at the foot of a dashed stem; the measured peak."""
    s = _roofline_rows(summary)
    precisions = sorted(s.precision.unique())
    regimes = sorted(set(s.shape_regime), key=lambda r: (r != "static", r))
    fig, axes = drawing.panels(len(precisions), 4.4)
    for ax, p in zip(axes[0], precisions):
        panel = s[s.precision == p]
        sizes = sorted(panel.batch_size.unique())
        series = sorted(panel.groupby(["compile_scope", "shape_regime", "compile_mode"]),
                        key=lambda k: (vocab.COMPILE_SCOPES.index(k[0][0]), regimes.index(k[0][1]),
                                       vocab.COMPILE_MODES.index(k[0][2])))
        for ((scope, regime, mode), g), dodge in zip(series, drawing.dodges(series, 0.07)):
            kw = dict(color=MODE_COLOURS[mode], marker=drawing.marker(scope, regime, regimes))
            drawing.line(ax, sizes, g.batch_size, g.achieved_tflops, dodge=dodge, **kw)
            real = g.dropna(subset=["real_tflops"])
            drawing.line(ax, sizes, real.batch_size, real.real_tflops, dodge=dodge, ls="--", mfc="white", ms=5, **kw)
            for r in real.itertuples():  # what padding costs: a stem from every token down to the real ones
                ax.plot([r.batch_size * dodge[r.batch_size]] * 2, [r.achieved_tflops, r.real_tflops], color=kw["color"],
                        ls="--", lw=0.8)
        peak = panel.peak_tflops.dropna()
        if len(peak):
            ax.axhline(peak.iloc[0], color="black", lw=1.2)
            ax.annotate(f"measured {p} peak {peak.iloc[0]:.3g} TFLOP/s", (0.02, peak.iloc[0]), fontsize=7, va="top",
                        xycoords=("axes fraction", "data"), xytext=(0, -3), textcoords="offset points")
        ax.set_yscale("log")
        drawing.log_values(ax.yaxis)
        drawing.log2_batches(ax, sizes)
        ax.set(ylabel="achieved TFLOP/s (model FLOPs)", title=p)
    legend = [drawing.handle(m, MODE_COLOURS[m]) for m in _modes(s)]
    kinds = sorted(set(zip(s.compile_scope, s.shape_regime)), key=lambda k: (vocab.COMPILE_SCOPES.index(k[0]), k[1]))
    legend += [drawing.handle(drawing.series_label(sc, rg), "black", drawing.marker(sc, rg, regimes), "none")
               for sc, rg in kinds]
    drawing.save(fig, title, stem, legend + [drawing.handle("hollow, dashed: real tokens only", "black", "o", "--", "white")])


def _regime_groups(panel: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """One row of the figure per (regime, precision), static first: its label names both, so no two rows of a
    panel read alike; its modes in the vocabulary's order."""
    keys = sorted(panel.groupby(["shape_regime", "precision"]).groups, key=lambda k: (k[0] != "static", k))
    return [(f"{regime}, {precision}", panel[(panel.shape_regime == regime) & (panel.precision == precision)]
             .sort_values("compile_mode", key=lambda m: m.map(vocab.COMPILE_MODES.index)))
            for regime, precision in keys]


def regimes(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Per batch size with several regimes: each (regime, precision) a row, each mode's gain over eager on static
    batches a point in it, intervals, on a log axis."""
    s = vocab.usable(summary[summary.compile_scope == "module"]).dropna(subset=["gain_over_eager_static"])
    sizes = sorted(s[s.shape_regime != "static"].batch_size.unique())
    groups = {bs: _regime_groups(s[s.batch_size == bs]) for bs in sizes}
    fig, axes = drawing.panels(len(sizes), 1.6 + 0.28 * max(sum(len(g) for _, g in gs) for gs in groups.values()))
    for ax, bs in zip(axes[0], sizes):
        for row, (_, g) in enumerate(groups[bs]):
            step = 0.8 / len(g)
            for j, (_, r) in enumerate(g.iterrows()):
                drawing.interval(ax, row + step * (j - (len(g) - 1) / 2), r, "gain", MODE_COLOURS[r.compile_mode], "o",
                          horizontal=True)
            if row:
                ax.axhline(row - 0.5, color="grey", lw=0.5)
        ax.set_yticks(range(len(groups[bs])), [label for label, _ in groups[bs]], fontsize=7)
        ax.set_ylim(len(groups[bs]) - 0.5, -0.5)  # the first group on top
        ax.axvline(1.0, color="black", ls="--", lw=1)
        ax.set(xlabel="real tokens/s over eager on static batches (log)", title=f"batch size {bs}")
        ax.grid(alpha=0.3, axis="x")
        drawing.ratio_axis(ax, "x")
    legend = [drawing.handle(m, MODE_COLOURS[m], "o", "none") for m in _modes(s)]
    drawing.save(fig, title, stem, legend + [drawing.HOLLOW])


def _profiled(summary: pd.DataFrame) -> pd.DataFrame:
    """Static shapes, the module compiled and the whole step as one CUDA graph, where profiled."""
    s = summary[(summary.shape_regime == "static") & summary.compile_scope.isin(("module", STEP_GRAPH))]
    return vocab.usable(s).dropna(subset=["profile_kernels_per_step"])


def kernels(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Kernels (CPU: top-level operators) per step and, where measured, the device's idle share, per mode (the
    whole step as one CUDA graph: stars, dotted)."""
    h = _profiled(summary)
    idle = h.profile_idle_fraction.notna().any()
    precisions = sorted(h.precision.unique())
    fig, axes = drawing.panels(len(precisions), 3.5, rows=2 if idle else 1)
    kind = h.kernel_kind.dropna().iloc[0] if h.kernel_kind.notna().any() else "kernels"
    for col, p in enumerate(precisions):
        panel = h[h.precision == p]
        sizes = sorted(panel.batch_size.unique())
        series = list(panel.groupby(["compile_scope", "compile_mode"]))
        for ((scope, mode), g), dodge in zip(series, drawing.dodges(series, 0.05)):
            kw = dict(color=MODE_COLOURS[mode], marker=SCOPE_MARKERS[scope], ls=":" if scope == STEP_GRAPH else "-",
                      dodge=dodge)
            drawing.line(axes[0, col], sizes, g.batch_size, g.profile_kernels_per_step, **kw)
            if idle:
                drawing.line(axes[1, col], sizes, g.batch_size, 100 * g.profile_idle_fraction, **kw)
        for row, ylabel in enumerate((f"{kind} per step", "device idle (% of profiled step)")[:2 if idle else 1]):
            drawing.log2_batches(axes[row, col], sizes)
            axes[row, col].set(ylabel=ylabel, title=f"static shapes, {p}")
        axes[0, col].set_ylim(bottom=0)
    legend = [drawing.handle(m, MODE_COLOURS[m]) for m in _modes(h)]
    if (h.compile_scope == STEP_GRAPH).any():
        legend.append(drawing.handle("scope step-graph", "black", SCOPE_MARKERS[STEP_GRAPH], ":"))
    drawing.save(fig, title, stem, legend)


def _bucket_groups(summary: pd.DataFrame) -> pd.DataFrame:
    s = vocab.usable(summary[summary.shape_regime.map(lambda x: vocab.Regime.parse(x).kind == "bucketed")
                                & (summary.compile_scope == "module")])
    sets = s.groupby(["compile_mode", "batch_size"]).shape_regime.transform("nunique")
    return s[sets >= 2]  # a comparison of bucket sets needs two of them in one mode and batch size


def buckets(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Bucket sets at one batch size per panel: padding waste vs real tokens/s, one marker per bucket set (the
    legend names its edges; no floating labels), one colour per mode."""
    s = _bucket_groups(summary)
    sizes, sets = sorted(s.batch_size.unique()), sorted(set(s.shape_regime))
    fig, axes = drawing.panels(len(sizes), 4.2)
    for ax, bs in zip(axes[0], sizes):
        for r in s[s.batch_size == bs].itertuples():
            ax.plot(100 * r.padding_fraction, r.real_tokens_per_s, MARKERS[sets.index(r.shape_regime) % len(MARKERS)],
                    color=MODE_COLOURS[r.compile_mode])
        ax.set(xlabel="padding (% of computed token positions)", ylabel="real tokens / s", title=f"batch size {bs}")
        ax.grid(alpha=0.3)
    legend = [drawing.handle(m, MODE_COLOURS[m], "o", "none") for m in _modes(s)]
    legend += [drawing.handle("buckets " + "/".join(map(str, vocab.Regime.parse(b).edges)), "black",
                              MARKERS[i % len(MARKERS)], "none") for i, b in enumerate(sets)]
    drawing.save(fig, title, stem, legend)


DRAW = {"overhead": cost_figures.overhead, "speedup": speedup, "roofline": roofline, "regimes": regimes,
        "timeline": cost_figures.timeline, "breakeven": cost_figures.breakeven, "stages": cost_figures.stages,
        "kernels": kernels, "buckets": buckets}


def drawable(summary: pd.DataFrame, records: pd.DataFrame, environment: dict | None = None) -> dict[str, dict]:
    """The figures this study has data for, in FIGURES' order, each with what it draws (its caption names it, and
    the paper's invariants check it against the text: tests/paper_invariants.py); the stages' figure where the
    environment (environment.json) says they were measured."""
    over = [f"overhead_{k}" for k in record.OVERHEAD if k != "total_s" and f"overhead_{k}" in records]
    has = {
        "overhead": bool(over) and pd.to_numeric(records[over].stack(), errors="coerce").sum() > 0,
        "speedup": not vocab.usable(vocab.headline(summary)).query("compile_mode != 'eager'").speedup.dropna().empty,
        "roofline": not _roofline_rows(summary).empty,
        "regimes": vocab.usable(summary[summary.shape_regime != "static"]).gain_over_eager_static.notna().any(),
        "breakeven": not cost_figures.breakeven_rows(summary).empty,
        "kernels": not _profiled(summary).empty,
        "buckets": not _bucket_groups(summary).empty,
    }
    runs, meta = cost_figures.timeline_runs(records)
    out = {name: {} for name in FIGURES if has.get(name)}
    if not runs.empty:
        out["timeline"] = meta
    if "overhead" in out:
        out["overhead"] = {"parts": list(cost_figures.overhead_parts(records).values())}
    if "breakeven" in out:
        out["breakeven"] = cost_figures.breakeven_meta(summary)
    if ((environment or {}).get("compile_stages") or {}).get("measured"):
        out["stages"] = cost_figures.stages_meta(environment)
    if "roofline" in out:  # its caption says what the stars are only where there are some
        rows = _roofline_rows(summary)
        out["roofline"] = {"step_graph": bool((rows.compile_scope == STEP_GRAPH).any()),
                           "configs": cost_figures.keys(rows)}
    if "kernels" in out:
        out["kernels"] = {"step_graph": bool((_profiled(summary).compile_scope == STEP_GRAPH).any())}
    return {name: out[name] for name in FIGURES if name in out}


def draw_all(summary: pd.DataFrame, records: pd.DataFrame, environment: dict, out_dir: str | Path) -> list[Path]:
    """The figures with data into out_dir as <name>.png and <name>.pdf, and index.json naming them."""
    name = environment.get("device_name")
    name = name if isinstance(name, str) else ", ".join(map(str, name or []))
    title = f"torch.compile training on {name} (torch {environment.get('torch')})"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = summary.copy()  # one block per dtype: read_csv's block per column makes every added column warn
    made = drawable(summary, records, environment)
    for fig, meta in made.items():
        data = records if fig in ("overhead", "timeline") else environment if fig == "stages" else summary
        DRAW[fig](data, title, out / fig, meta)
    (out / INDEX).write_text(json.dumps(made, indent=1) + "\n")
    return [out / f"{f}.{ext}" for f in made for ext in ("png", "pdf")]


def read_index(figure_dir: str | Path) -> dict[str, dict]:
    """The figures a study's figure directory holds (index.json), in their order; none where it has no index."""
    path = Path(figure_dir) / INDEX
    return json.loads(path.read_text()) if path.is_file() else {}
