"""The figures: one colour per compile mode in every figure, intervals on speedup and break-even figures (on a log
axis where values span more than 10x), no line across a batch size a series did not run, legends off the axes,
every series a caption names drawn (real tokens, the whole step as one CUDA graph), row labels that say what a row
is, no floating point labels, and only figures with data made (the paper cites exactly those: tests/test_latex.py)."""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from compile_study.aggregate.figures import drawing, figures
from compile_study.core import record, vocab

from .conftest import GPU_REFERENCE
from .paper_study import make_study

pytestmark = pytest.mark.unit

STORED = GPU_REFERENCE
NEUTRAL = {mcolors.to_hex(c) for c in ("black", "grey", "white")}  # reference lines, bands, hollow faces


@pytest.fixture(scope="module")
def stored():
    """The stored H200 study's summary and records."""
    if not (STORED / "summary.csv").is_file():
        pytest.skip("the stored H200 study is not in this checkout")
    records = record.table(sorted(str(p) for p in (STORED / "runs").rglob("r*.json") if "trace" not in p.name))
    return pd.read_csv(STORED / "summary.csv"), records


@pytest.fixture(scope="module")
def drawn(stored, tmp_path_factory):
    """Every figure figures.draw_all makes for the stored H200 study, laid out as it is saved and kept open:
    name -> (matplotlib figure, its legend's handles)."""
    kept = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(drawing, "write", lambda fig, stem: kept.__setitem__(stem.name, (fig, _legend(fig))))
        out = tmp_path_factory.mktemp("figures")
        made = figures.draw_all(*stored, {"device_name": "NVIDIA H200", "torch": "2.11"}, out)
    assert {p.stem for p in made} == set(kept) == set(figures.read_index(out))
    return kept


def _legend(fig) -> list:
    """The handles of the figure's legend, each labelled as the legend shows it."""
    if not fig.legends:
        return []
    legend = fig.legends[0]
    for handle, text in zip(legend.legend_handles, legend.get_texts()):
        handle.set_label(text.get_text())
    return list(legend.legend_handles)


def _colours(fig) -> set[str]:
    """The colours of everything drawn as data: lines, markers, error bars."""
    out = set()
    for ax in fig.axes:
        for line in ax.get_lines():
            out |= {mcolors.to_hex(line.get_color())}
        for coll in ax.collections:
            out |= {mcolors.to_hex(c) for c in coll.get_edgecolor()}
    return out


def test_every_mode_has_one_colour_in_every_figure(drawn):
    allowed = {mcolors.to_hex(c) for c in figures.MODE_COLOURS.values()} | NEUTRAL
    for name, (fig, legend) in drawn.items():
        assert _colours(fig) <= allowed, (name, _colours(fig) - allowed)
        for handle in legend or []:  # a mode named in a legend wears its own colour
            if handle.get_label() in vocab.COMPILE_MODES:
                assert mcolors.to_hex(handle.get_color()) == mcolors.to_hex(figures.MODE_COLOURS[handle.get_label()])


def test_legends_sit_below_the_axes_never_over_the_data(drawn):
    for name, (fig, legend) in drawn.items():
        assert all(ax.get_legend() is None for ax in fig.axes), name
        assert name == "overhead" or legend, name


def test_speedup_figures_carry_intervals_where_three_processes_ran(drawn):
    for name in ("speedup", "regimes"):
        fig, _ = drawn[name]
        bars = [c for ax in fig.axes for c in ax.containers if isinstance(c, ErrorbarContainer) and c.has_yerr + c.has_xerr]
        assert len(bars) >= 5, name  # e.g. speedup: 7.24x [6.10, 8.60] at batch 32 among them


def test_no_line_joins_two_batch_sizes_with_a_measured_one_between():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    drawing.line(ax, [32, 64, 256, 512], [32, 512], [1.2, 1.6], color="tab:blue", marker="o")  # default: 32, 512
    drawing.line(ax, [32, 64, 256, 512], [32, 64, 256], [3.0, 2.9, 1.9], color="tab:orange", marker="o")
    segments = [tuple(line.get_xdata()) for line in ax.get_lines() if line.get_linestyle() != "None"]
    assert segments == [(32, 64), (64, 256)]  # 32-512 would cross 64 and 256, where default never ran
    plt.close(fig)


def test_a_figure_without_data_is_not_made(tmp_path):
    study = make_study(tmp_path / "r")
    names = figures.drawable(study["summary"], study["records"])
    assert "timeline" not in names and "buckets" not in names and "overhead" not in names  # no series, no sets
    eager_only = study["summary"][study["summary"].compile_mode == "eager"]
    assert "speedup" not in figures.drawable(eager_only, study["records"])
    assert np.all([n in figures.FIGURES for n in names])


def _points(ax, marker=None, hollow=None) -> list[tuple[float, float]]:
    """The (x, y) of every marker drawn on ax, of one marker shape and face (hollow: a white face) if asked."""
    out = []
    for line in ax.get_lines():
        if line.get_marker() in ("None", "", None) or (marker and line.get_marker() != marker):
            continue
        white = mcolors.to_hex(line.get_markerfacecolor()) == "#ffffff"
        if hollow is None or white == hollow:
            out += list(zip(line.get_xdata(), line.get_ydata()))
    return out


def test_the_roofline_draws_real_tokens_and_the_whole_step_graph_where_the_records_have_them(drawn, stored):
    """Its caption names a dashed real-tokens series: every point has its real-token twin, hollow on a dashed stem;
    the step-graph rows (the whole step in one CUDA graph) are stars."""
    summary, _ = stored
    fig, legend = drawn["roofline"]
    rows = figures._roofline_rows(summary)
    for ax in fig.axes:
        panel = rows[rows.precision == ax.get_title()]
        hollow = sorted(y for _, y in _points(ax, hollow=True))
        assert np.allclose(hollow, sorted(panel.real_tflops)), ax.get_title()  # one hollow point per row, its value
        stems = [line for line in ax.get_lines() if line.get_linestyle() == "--" and len(set(line.get_xdata())) == 1]
        assert len(stems) == len(panel)
        stars = sorted(y for _, y in _points(ax, "*", hollow=False))
        assert np.allclose(stars, sorted(panel[panel.compile_scope == "step-graph"].achieved_tflops))
    assert len(rows[rows.compile_scope == "step-graph"]) == 2  # the stored study profiled it at batch 32 and 512
    labels = [h.get_label() for h in legend]
    assert "hollow, dashed: real tokens only" in labels and "scope step-graph, static shapes" in labels


def test_kernels_include_the_whole_step_graph_where_it_was_profiled(drawn, stored):
    summary, _ = stored
    fig, legend = drawn["kernels"]
    graph = summary[(summary.compile_scope == "step-graph") & summary.profile_kernels_per_step.notna()]
    bf16_kernels, bf16_idle = fig.axes[0], fig.axes[2]  # two rows of panels, bf16 first
    assert sorted(y for _, y in _points(bf16_kernels, "*")) == sorted(graph.profile_kernels_per_step)
    assert np.allclose(sorted(y for _, y in _points(bf16_idle, "*")), sorted(100 * graph.profile_idle_fraction))
    assert "scope step-graph" in [h.get_label() for h in legend]


def test_without_step_graph_rows_no_figure_shows_one(tmp_path, monkeypatch):
    study = make_study(tmp_path / "r")
    kept = {}
    monkeypatch.setattr(drawing, "write", lambda fig, stem: kept.__setitem__(stem.name, fig))
    figures.draw_all(study["summary"], study["records"], study["environment"], tmp_path / "figures")
    assert {"roofline", "kernels", "speedup"} <= set(kept)
    for name in ("roofline", "kernels", "speedup"):
        assert not any(_points(ax, "*") for ax in kept[name].axes), name
        assert not any("step-graph" in h.get_label() for h in _legend(kept[name])), name


def test_each_row_of_the_regimes_figure_says_its_regime_and_precision_once(drawn, stored):
    """bf16 and fp32 static rows used to read "static" alike: a row is now one (regime, precision), its modes the
    colours within it."""
    summary, _ = stored
    fig, _ = drawn["regimes"]
    shown = vocab.usable(summary[summary.compile_scope == "module"]).dropna(subset=["gain_over_eager_static"])
    for ax in fig.axes:
        labels = [t.get_text() for t in ax.get_yticklabels()]
        bs = int(ax.get_title().removeprefix("batch size "))
        here = shown[shown.batch_size == bs]
        assert len(labels) == len(set(labels)) == len(here.groupby(["shape_regime", "precision"]))
        assert all(label.rsplit(", ", 1)[1] in vocab.PRECISIONS for label in labels)
        points = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert len(points) == len(here)  # every configuration once
    assert {"static, bf16", "static, fp32"} <= {t.get_text() for t in fig.axes[-1].get_yticklabels()}


def test_speedups_sit_on_a_log_axis_that_keeps_the_batch_512_cluster_apart(drawn, stored):
    """0.5x and 2x equally far from 1x; the 1.26-2.0x points at batch 512 spread over more than a tenth of the
    axis' height (3% on the old linear 0-23 axis, which one 5.3-22.8x interval stretched)."""
    summary, _ = stored
    fig, _ = drawn["speedup"]
    assert [ax.get_yscale() for ax in fig.axes] == ["log", "log"]  # bf16 and fp32 share the first one's labels
    bf16 = fig.axes[0]
    assert {"1×", "2×", "4×"} <= {t.get_text() for t in bf16.get_yticklabels()}
    ys = [y for x, y in _points(bf16) if 400 < x < 650]
    lo, hi = np.log(bf16.get_ylim())
    assert (np.log(max(ys)) - np.log(min(ys))) / (hi - lo) > 0.10
    regimes, _ = drawn["regimes"]
    assert all(ax.get_xscale() == "log" for ax in regimes.axes)


def test_the_breakeven_figure_plots_what_pays_back_with_intervals_and_no_floating_labels(drawn, stored):
    """It once plotted the dynamic configuration that is not shown faster than eager, on a linear axis crushed by
    the 172.6-s point, with labels ("512 fp32") beside the wrong points and no intervals, and left out the
    recommended step-graph configurations."""
    summary, _ = stored
    fig, legend = drawn["breakeven"]
    rows = figures.cost_figures.breakeven_rows(summary)
    assert set(rows.payback) == {"pays-after"} and "dynamic" not in set(rows.shape_regime)
    assert len(rows[rows.compile_scope == "step-graph"]) == 2  # the whole step in one CUDA graph, at 32 and 512
    meta = figures.drawable(summary, stored[1])["breakeven"]
    panels = {ax.get_title() for ax in fig.axes}
    assert panels == {f"{p}, batch size {b}" for p, b in zip(rows.precision, rows.batch_size)}
    for ax in fig.axes:
        assert not ax.texts  # no point carries a floating label: panels and the legend say what a point is
        assert (ax.get_xscale(), ax.get_yscale()) == ("log" if meta["log_x"] else "linear", "log" if meta["log_y"] else "linear")
    assert meta["log_x"] and meta["log_y"]  # 1.8 s to 201.6 s, 256 to 41,628 steps: both span more than 10x
    shapes = set(drawing.MARKERS) | set(drawing.SCOPE_MARKERS.values())
    points = [p for ax in fig.axes for line in ax.get_lines() if line.get_marker() in shapes
              for p in zip(line.get_xdata(), line.get_ydata())]
    assert len(points) == len(rows) * len(meta["ways"])  # each configuration once per way (empty, filled cache)
    bars = [c for ax in fig.axes for c in ax.containers if isinstance(c, ErrorbarContainer) and c.has_yerr]
    assert len(bars) >= len(rows)  # intervals drawn where the break-even has one
    stars = [p for ax in fig.axes for p in _points(ax, "*")]
    assert len(stars) == 2 * len(meta["ways"])
    assert "scope step-graph, static shapes" in [h.get_label() for h in legend]
