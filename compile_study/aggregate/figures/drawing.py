"""The pieces every figure is drawn with (aggregate/figures/figures.py, cost_figures.py): one colour per compile mode and
one marker per scope or shape regime, saving without dates, a log axis for ratios, a log2 axis of batch sizes,
series set side by side, lines that never cross a batch size a series did not run, and points with their
intervals (no point carries a floating label: panels, axes and the legend say what a point is).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FixedLocator,
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
    ScalarFormatter,
)

from compile_study.aggregate.columns import POINT  # noqa: E402
from compile_study.core import stats, vocab  # noqa: E402

matplotlib.rcParams["svg.hashsalt"] = "compile-study"  # deterministic ids
MODE_COLOURS = dict(zip(vocab.COMPILE_MODES, ("tab:grey", "tab:blue", "tab:orange", "tab:green", "tab:red")))
MARKERS = "os^v<>pD"  # the module compiled, by shape regime, in the vocabulary's order
# one marker per scope wherever a figure draws it (none among MARKERS but the module's, so that a scope never
# reads as a regime); the whole step in one CUDA graph is a star
SCOPE_MARKERS = {"module": "o", "fused-adamw": "P", "forward": "X", "backward": "h", "aot-eager": "d", "step": "8",
                 "step-graph": "*", "eager-step-graph": "x", "graph-break": "H", "regional": "2"}


def marker(scope: str, regime: str, regimes: list[str]) -> str:
    """A series' marker: the module compiled by its regime (of `regimes`, static first), any other scope by its scope."""
    return MARKERS[regimes.index(regime) % len(MARKERS)] if scope == "module" else SCOPE_MARKERS[scope]


def series_label(scope: str, regime: str) -> str:
    return f"module, {regime} shapes" if scope == "module" else f"scope {scope}, {regime} shapes"
RATIO_TICKS = (0.125, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def save(fig, title: str, stem: Path, legend: list | None = None, place=None) -> None:
    """Title and layout, then `place` (what needs the final positions: labels that must not overlap), then the
    legend below the axes, then the files."""
    fig.suptitle("\n".join(textwrap.wrap(title, 100)), fontsize=9)
    fig.tight_layout()
    if place:
        place()
    if legend:  # below the axes, never over the data
        fig.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(legend)), fontsize=7,
                   frameon=False)
    write(fig, stem)


def write(fig, stem: Path) -> None:
    kw = {"bbox_inches": "tight"}
    fig.savefig(stem.with_suffix(".png"), dpi=150, metadata={"Software": None}, **kw)
    fig.savefig(stem.with_suffix(".pdf"), metadata={"CreationDate": None, "ModDate": None, "Producer": None}, **kw)
    plt.close(fig)


def ratio_axis(ax, axis: str = "y") -> None:
    """A speedup or gain on a log axis: 0.5x as far below 1x as 2x above it, and one wide interval no longer
    crushes the points near 1x; ticks at round ratios (finer where the axis spans less than a few of them)."""
    getattr(ax, f"set_{axis}scale")("log", base=2)
    lo, hi = getattr(ax, f"get_{axis}lim")()
    gap = np.log2(hi / lo) / (14 if axis == "y" else 7)  # labels of a horizontal axis are wider
    ticks = []
    for t in sorted((t for t in RATIO_TICKS if lo <= t <= hi), key=lambda t: (not np.log2(t).is_integer(), abs(np.log2(t)))):
        if all(abs(np.log2(t / k)) >= gap for k in ticks):  # 1x and powers of 2 first, then round ratios between
            ticks.append(t)
    if len(ticks) < 3:  # a narrow axis: evenly spaced ticks
        ticks = [t for t in MaxNLocator(5, steps=[1, 2, 5, 10]).tick_values(lo, hi) if lo <= t <= hi]
    target = getattr(ax, f"{axis}axis")
    target.set_major_locator(FixedLocator(ticks))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    target.set_minor_locator(NullLocator())


def log_values(axis) -> None:
    """A log axis of values (seconds, steps, TFLOP/s): ticks at 1, 2 and 5 of each decade, one plain label each and
    none on the minor ticks, so that no two labels collide however narrow the span."""
    axis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


def log2_batches(ax, sizes) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlim(min(sizes) / 1.6, max(sizes) * 1.6)  # room for series set side by side, even at one batch size
    ax.set_xticks(sorted(sizes))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("batch size")
    ax.grid(alpha=0.3)


def panels(n: int, height: float = 4.0, rows: int = 1, sharey: bool = False, sharex: bool = False):
    return plt.subplots(rows, max(1, n), figsize=(max(6.0, 4.8 * n), height * rows), squeeze=False, sharey=sharey,
                        sharex=sharex)


def dodges(series: list, step: float = 0.08) -> list[dict]:
    """For each (key, rows) of `series`, in order: batch size -> a factor on the log2 axis that sets the series
    present at that batch size side by side around it, not on top of each other."""
    at = {}
    for i, (_, g) in enumerate(series):
        for bs in g.batch_size.unique():
            at.setdefault(bs, []).append(i)
    factor = {(i, bs): 2 ** (step * (j - (len(ids) - 1) / 2)) for bs, ids in at.items() for j, i in enumerate(ids)}
    return [{bs: factor[(i, bs)] for bs in g.batch_size.unique()} for i, (_, g) in enumerate(series)]


def handle(label: str, colour="black", marker="o", ls="-", face=None, fill: str = "full") -> Line2D:
    return Line2D([], [], color=colour, marker=marker, ls=ls, label=label, mfc=face or colour, fillstyle=fill,
                  mfcalt="white")


HOLLOW = handle("hollow: n < 3, no interval", "black", "o", "none", "white")


def line(ax, sizes: list, x, y, dodge: float | dict = 1.0, **kw) -> None:
    """Points, joined only where two batch sizes are next to each other among the panel's `sizes` (never across
    one where the series did not run); `dodge` (a factor, or one per batch size: _dodges) shifts the series
    sideways on the log2 axis so series do not overlap."""
    pos = {b: i for i, b in enumerate(sorted(sizes))}
    shift = dodge if isinstance(dodge, dict) else {b: dodge for b in pos}
    pts = sorted((a, b) for a, b in zip(x, y) if np.isfinite(b))
    ls = kw.pop("ls", "-")
    if kw.get("marker", "none") != "none":
        ax.plot([p[0] * shift[p[0]] for p in pts], [p[1] for p in pts], ls="none", **kw)
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if pos[x1] - pos[x0] == 1:
            ax.plot([x0 * shift[x0], x1 * shift[x1]], [y0, y1], color=kw.get("color"), ls=ls, lw=1.2)


def interval(ax, x, row, prefix: str, colour, shape, horizontal=False) -> None:
    """One point with its interval (MIN_N processes or more) or a hollow marker (fewer: no interval)."""
    point = row[POINT[prefix]]
    n, lo, hi = row.get(f"{prefix}_n", 0), row[f"{prefix}_low"], row[f"{prefix}_high"]
    has = n >= stats.MIN_N and np.isfinite(lo) and np.isfinite(hi)
    err = [[point - lo], [hi - point]] if has else None
    face = colour if has else "white"
    kw = dict(xerr=err) if horizontal else dict(yerr=err)
    xy = (point, x) if horizontal else (x, point)
    ax.errorbar(*xy, **kw, fmt=shape, color=colour, mfc=face, capsize=3, ms=6)


def point(ax, x: stats.Interval, y: stats.Interval, colour, shape, fill: str = "full") -> None:
    """One point at two intervals' points, with each interval drawn where it has one (a bar on each axis); `fill`:
    matplotlib's fillstyle ("none": hollow, a white face)."""
    def err(iv):
        return [[iv.point - iv.low], [iv.high - iv.point]] if np.isfinite(iv.low) and np.isfinite(iv.high) else None

    ax.errorbar([x.point], [y.point], xerr=err(x), yerr=err(y), fmt=shape, color=colour,
                mfc="white" if fill == "none" else colour, fillstyle="full" if fill == "none" else fill,
                mfcalt="white", capsize=3, ms=7 if shape == "*" else 6, elinewidth=0.8)
