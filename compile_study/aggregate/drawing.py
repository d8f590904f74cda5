"""The pieces every figure is drawn with (aggregate/figures.py): saving without dates, a log axis for ratios, a
log2 axis of batch sizes, series set side by side, lines that never cross a batch size a series did not run,
points with their intervals, and point labels placed where they overlap nothing.
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
    MaxNLocator,
    NullFormatter,
    NullLocator,
    ScalarFormatter,
)
from matplotlib.transforms import Bbox  # noqa: E402

from compile_study.aggregate.columns import POINT  # noqa: E402
from compile_study.core import stats  # noqa: E402

matplotlib.rcParams["svg.hashsalt"] = "compile-study"  # deterministic ids
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


def log2_batches(ax, sizes) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlim(min(sizes) / 1.6, max(sizes) * 1.6)  # room for series set side by side, even at one batch size
    ax.set_xticks(sorted(sizes))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("batch size")
    ax.grid(alpha=0.3)


def panels(n: int, height: float = 4.0, rows: int = 1, sharey: bool = False):
    return plt.subplots(rows, max(1, n), figsize=(max(6.0, 4.8 * n), height * rows), squeeze=False, sharey=sharey)


def dodges(series: list, step: float = 0.08) -> list[dict]:
    """For each (key, rows) of `series`, in order: batch size -> a factor on the log2 axis that sets the series
    present at that batch size side by side around it, not on top of each other."""
    at = {}
    for i, (_, g) in enumerate(series):
        for bs in g.batch_size.unique():
            at.setdefault(bs, []).append(i)
    factor = {(i, bs): 2 ** (step * (j - (len(ids) - 1) / 2)) for bs, ids in at.items() for j, i in enumerate(ids)}
    return [{bs: factor[(i, bs)] for bs in g.batch_size.unique()} for i, (_, g) in enumerate(series)]


def handle(label: str, colour="black", marker="o", ls="-", face=None) -> Line2D:
    return Line2D([], [], color=colour, marker=marker, ls=ls, label=label, mfc=face or colour)


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


def interval(ax, x, row, prefix: str, colour, marker, horizontal=False) -> None:
    """One point with its interval (MIN_N processes or more) or a hollow marker (fewer: no interval)."""
    point = row[POINT[prefix]]
    n, lo, hi = row.get(f"{prefix}_n", 0), row[f"{prefix}_low"], row[f"{prefix}_high"]
    has = n >= stats.MIN_N and np.isfinite(lo) and np.isfinite(hi)
    err = [[point - lo], [hi - point]] if has else None
    face = colour if has else "white"
    kw = dict(xerr=err) if horizontal else dict(yerr=err)
    xy = (point, x) if horizontal else (x, point)
    ax.errorbar(*xy, **kw, fmt=marker, color=colour, mfc=face, capsize=3, ms=6)


# where a point's label may go, nearest first: (dx, dy) in points and the alignment that keeps it off the point
_AROUND = [((1, 0), "left", "center"), ((1, 1), "left", "bottom"), ((1, -1), "left", "top"), ((0, 1), "center", "bottom"),
           ((0, -1), "center", "top"), ((-1, 0), "right", "center"), ((-1, 1), "right", "bottom"),
           ((-1, -1), "right", "top")]
LABEL_PLACES = [((d * x, d * y), ha, va) for d in (5, 10, 16, 24, 34, 46) for (x, y), ha, va in _AROUND]


def place_labels(ax, points: list[tuple[tuple[float, float], str]], fontsize: float = 6) -> None:
    """Each point's label at the nearest of LABEL_PLACES where it stays inside the axes and overlaps no other
    label and no point (a thin leader line where it had to move away); run after the figure's layout."""
    renderer = ax.figure.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    radius = 3.5 * ax.figure.dpi / 72  # a marker of 6 points, and a little air
    centres = [ax.transData.transform(xy) for xy, _ in points]
    taken = [Bbox.from_extents(x - radius, y - radius, x + radius, y + radius) for x, y in centres]
    for xy, text in points:
        for i, ((dx, dy), ha, va) in enumerate(LABEL_PLACES):
            kw = dict(xytext=(dx, dy), textcoords="offset points", fontsize=fontsize, ha=ha, va=va)
            label = ax.annotate(text, xy, **kw)
            box = label.get_window_extent(renderer)
            label.remove()
            free = inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1)
            if free and not any(box.overlaps(t) for t in taken) or i == len(LABEL_PLACES) - 1:
                taken.append(box)  # the last place is kept even if crowded: tests/test_figures.py says so
                far = max(abs(dx), abs(dy)) > 5  # a label moved away points at its point
                ax.annotate(text, xy, **kw, arrowprops=dict(arrowstyle="-", color="grey", lw=0.5) if far else None)
                break
