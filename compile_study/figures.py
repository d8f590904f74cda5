"""Figures from the summary table (plotting only; never touches a device)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # headless
import textwrap  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter, ScalarFormatter  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def speedup_vs_batch_size(summary: pd.DataFrame, title: str, outputs: list[str]) -> None:
    """One panel per (shape regime, precision); one line per compile mode; 95% CI as error bars."""
    compiled = summary[summary.compile_mode != "eager"]
    panels = sorted(compiled.groupby(["shape_regime", "precision"]).groups) or [("static", "fp32")]
    fig, axes = plt.subplots(1, len(panels), figsize=(max(6.0, 4.5 * len(panels)), 4.0), squeeze=False, sharey=True)
    for ax, (regime, precision) in zip(axes[0], panels):
        panel = compiled[(compiled.shape_regime == regime) & (compiled.precision == precision)]
        for mode, g in panel.groupby("compile_mode"):
            g = g.sort_values("batch_size")
            err = np.vstack([g.speedup - g.speedup_ci_low, g.speedup_ci_high - g.speedup]).clip(min=0)
            has_ci = np.isfinite(err).all()
            ax.errorbar(g.batch_size, g.speedup, yerr=err if has_ci else None, marker="o", capsize=3, label=mode)
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(summary.batch_size.unique()))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("batch size")
        ax.set_title(f"{regime}, {precision}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speedup over eager (steady-state step)")
    axes[0][0].legend(title="compile mode", fontsize=8)
    fig.suptitle("\n".join(textwrap.wrap(title, 90)), fontsize=9)
    fig.tight_layout()
    for path in outputs:
        fig.savefig(path, dpi=150)
    plt.close(fig)
