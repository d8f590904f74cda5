"""The figures: one colour per compile mode in every figure, intervals on speedup figures, no line across a
batch size a series did not run, legends off the axes, and only figures with data made (the paper cites
exactly those: tests/test_latex.py)."""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer

from compile_study.aggregate import figures
from compile_study.core import record, vocab

from .conftest import GPU_REFERENCE
from .paper_study import make_study

pytestmark = pytest.mark.unit

STORED = GPU_REFERENCE
NEUTRAL = {mcolors.to_hex(c) for c in ("black", "grey", "white")}  # reference lines, bands, hollow faces


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    """Every figure figures.draw_all makes for the stored H200 study, kept open: name -> matplotlib figure."""
    if not (STORED / "summary.csv").is_file():
        pytest.skip("the stored H200 study is not in this checkout")
    import pandas as pd

    kept = {}
    monkeypatch.setattr(figures, "_save", lambda fig, title, stem, legend=None: kept.__setitem__(stem.name, (fig, legend)))
    summary = pd.read_csv(STORED / "summary.csv")
    records = record.table(sorted(str(p) for p in (STORED / "runs").rglob("r*.json") if "trace" not in p.name))
    made = figures.draw_all(summary, records, {"device_name": "NVIDIA H200", "torch": "2.11"}, tmp_path)
    assert {p.stem for p in made} == set(kept) == set(figures.read_index(tmp_path))
    return kept


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


def test_no_line_joins_two_batch_sizes_with_a_measured_one_between(monkeypatch):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    figures._line(ax, [32, 64, 256, 512], [32, 512], [1.2, 1.6], color="tab:blue", marker="o")  # default: 32, 512
    figures._line(ax, [32, 64, 256, 512], [32, 64, 256], [3.0, 2.9, 1.9], color="tab:orange", marker="o")
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
