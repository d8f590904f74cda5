"""Figures from the summary table and the run records (plotting only; never touches a device).

    figures.draw_all(summary, record.table(paths), environment, "results/cpu/figures")   # -> the figures made

Only a figure with data is made: `drawable` decides which, `draw_all` draws those as PNG and as a PDF without a
creation date (byte-identical on a rebuild) and writes `index.json`, the list the paper cites (read_index).
Every figure: one colour per compile mode (MODE_COLOURS), one marker per training scope (SCOPE_MARKERS: the
whole step in one CUDA graph is a star wherever it is drawn), intervals wherever a speedup or gain is drawn (95%
t, three or more processes; fewer: a hollow marker and no bar) on a log axis (0.5x and 2x equally far from 1x),
lines only between batch sizes next to each other in the panel (never across one where the series did not
run), point labels that overlap nothing, and the legend below the axes.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from compile_study.aggregate import drawing
from compile_study.core import record, vocab

FIGURES = ("overhead", "speedup", "roofline", "regimes", "timeline", "breakeven", "kernels", "buckets")
INDEX = "index.json"
MODE_COLOURS = dict(zip(vocab.COMPILE_MODES, ("tab:grey", "tab:blue", "tab:orange", "tab:green", "tab:red")))
MARKERS = "osD^v<>p"  # by regime, in the vocabulary's order
SCOPE_MARKERS = {"module": "o", "fused-adamw": "s", "regional": "P", "step": "D", "step-graph": "*"}
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
    s = summary[summary.compile_scope.isin(("module", STEP_GRAPH))]
    return vocab.usable(s).dropna(subset=["achieved_tflops"])


def roofline(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Achieved TFLOP/s vs batch size per mode and regime (the module compiled; the whole step as one CUDA graph
    where it ran), each point's real tokens only hollow at the foot of a dashed stem; the measured peak."""
    s = _roofline_rows(summary)
    precisions = sorted(s.precision.unique())
    regimes = sorted(set(s.shape_regime), key=lambda r: (r != "static", r))
    fig, axes = drawing.panels(len(precisions), 4.4)
    for ax, p in zip(axes[0], precisions):
        panel = s[s.precision == p]
        sizes = sorted(panel.batch_size.unique())
        series = sorted(panel.groupby(["compile_scope", "shape_regime", "compile_mode"]),
                        key=lambda k: (k[0][0] == STEP_GRAPH, regimes.index(k[0][1]), vocab.COMPILE_MODES.index(k[0][2])))
        for ((scope, regime, mode), g), dodge in zip(series, drawing.dodges(series, 0.07)):
            marker = SCOPE_MARKERS[STEP_GRAPH] if scope == STEP_GRAPH else MARKERS[regimes.index(regime) % len(MARKERS)]
            kw = dict(color=MODE_COLOURS[mode], marker=marker)
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
        drawing.log2_batches(ax, sizes)
        ax.set(ylabel="achieved matmul TFLOP/s", title=p)
    legend = [drawing.handle(m, MODE_COLOURS[m]) for m in _modes(s)]
    legend += [drawing.handle(r, "black", MARKERS[i % len(MARKERS)], "none") for i, r in enumerate(regimes)]
    if (s.compile_scope == STEP_GRAPH).any():
        legend.append(drawing.handle("scope step-graph (static)", "black", SCOPE_MARKERS[STEP_GRAPH], "none"))
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


def _config_label(r) -> str:
    return f"{int(r.batch_size)} {r.precision}" + ("" if r.shape_regime == "static" else f" {r.shape_regime}")


def breakeven(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Cold compile time vs break-even steps (the module compiled), labelled with batch size and precision."""
    s = _breakeven_rows(summary)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    points = []
    for mode in _modes(s):
        g = s[s.compile_mode == mode]
        ax.plot(g.cold_compile_s, g.break_even_steps, "o", color=MODE_COLOURS[mode])
        points += [((r.cold_compile_s, r.break_even_steps), _config_label(r)) for r in g.itertuples()]
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.margins(0.12)  # room for the labels of the outermost points
    ax.set(xlabel="cold compile (s)", ylabel="break-even (training steps, log)")
    ax.grid(alpha=0.3)
    drawing.save(fig, title, stem, [drawing.handle(m, MODE_COLOURS[m], "o", "none") for m in _modes(s)],
          place=lambda: drawing.place_labels(ax, points))


def _breakeven_rows(summary: pd.DataFrame) -> pd.DataFrame:
    s = vocab.usable(summary[(summary.compile_mode != "eager") & (summary.compile_scope == "module")])
    return s[np.isfinite(s.break_even_steps.astype(float)) & s.cold_compile_s.notna()]


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
    drawing.save(fig, title, stem)


def _bucket_groups(summary: pd.DataFrame) -> pd.DataFrame:
    s = vocab.usable(summary[summary.shape_regime.map(lambda x: vocab.Regime.parse(x).kind == "bucketed")
                                & (summary.compile_scope == "module")])
    sets = s.groupby(["compile_mode", "batch_size"]).shape_regime.transform("nunique")
    return s[sets >= 2]  # a comparison of bucket sets needs two of them in one mode and batch size


def buckets(summary: pd.DataFrame, title: str, stem: Path, meta: dict) -> None:
    """Bucket sets at one batch size per panel: padding waste vs real tokens/s, each labelled with its graphs."""
    s = _bucket_groups(summary)
    sizes = sorted(s.batch_size.unique())
    fig, axes = drawing.panels(len(sizes), 4.2)
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
    drawing.save(fig, title, stem, [drawing.handle(m, MODE_COLOURS[m], "o", "none") for m in _modes(s)])


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
        legend.append(drawing.handle(row.shape_regime, colour, "none", ls))
    ax.set_yscale("log")
    ax.set(xlabel="step in epoch 1", ylabel="step time (ms, log)",
           title=f"{meta['mode']}, batch size {meta['batch']}; × = a new graph existed after this step")
    ax.grid(alpha=0.3)
    drawing.save(fig, title, stem, legend)


DRAW = {"overhead": overhead, "speedup": speedup, "roofline": roofline, "regimes": regimes, "timeline": timeline,
        "breakeven": breakeven, "kernels": kernels, "buckets": buckets}


def drawable(summary: pd.DataFrame, records: pd.DataFrame) -> dict[str, dict]:
    """The figures this study has data for, in FIGURES' order, each with what its caption names."""
    over = [f"overhead_{k}" for k in record.OVERHEAD if k != "total_s" and f"overhead_{k}" in records]
    has = {
        "overhead": bool(over) and pd.to_numeric(records[over].stack(), errors="coerce").sum() > 0,
        "speedup": not vocab.usable(vocab.headline(summary)).query("compile_mode != 'eager'").speedup.dropna().empty,
        "roofline": not _roofline_rows(summary).empty,
        "regimes": vocab.usable(summary[summary.shape_regime != "static"]).gain_over_eager_static.notna().any(),
        "breakeven": not _breakeven_rows(summary).empty,
        "kernels": not _profiled(summary).empty,
        "buckets": not _bucket_groups(summary).empty,
    }
    runs, meta = _timeline_runs(records)
    out = {name: {} for name in FIGURES if has.get(name)}
    if not runs.empty:
        out["timeline"] = meta
    for name, rows in (("roofline", _roofline_rows(summary)), ("kernels", _profiled(summary))):
        if name in out:  # its caption says what the stars are only where there are some
            out[name] = {"step_graph": bool((rows.compile_scope == STEP_GRAPH).any())}
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
