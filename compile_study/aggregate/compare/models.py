"""Two models on the same cells: how a plugged model's speedups compare with the built-in model's.

    python -m compile_study compare-models reference/<plugged study> reference/<built-in study>

Each study's speedup of a configuration is its own (its runs' compiled step against the eager reference of the
same model in the same process, summary.csv `speedup` with its interval), so two studies' speedups compare
across processes, sessions and hosts of the same kind (ratios carry where absolute step times do not). A cell
here is a compiled configuration (device type, regime, precision, batch, mode, scope) that both summaries
have numbers for. `speedup_comparison` gives the numbers of one sentence, e.g. "On the 6 cells both studies
ran, BERT's speedups are 0.71 to 1.02 times the built-in model's (median 0.86); in 4 of them the intervals
overlap"; `same_cells` gives the rows behind it. Torch-free.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import yaml

from compile_study.core import vocab
from compile_study.core.layout import Layout, require_study

CONFIG = ["device_type", "shape_regime", "precision", "batch_size", "compile_mode", "compile_scope"]
SIDES = ("plugged", "builtin")


def is_plugged(config: dict) -> bool:
    """Whether a study's config (its config.yaml) plugs a model in instead of the built-in one."""
    model = config.get("model") or {}
    return model.get("factory") is not None or model.get("hf_config") is not None


def _compiled(summary: pd.DataFrame) -> pd.DataFrame:
    rows = vocab.usable(summary[summary.compile_mode != "eager"]).dropna(subset=["speedup"])
    return rows[CONFIG + ["speedup", "speedup_low", "speedup_high", "speedup_method", "speedup_n", "verdict"]]


def same_cells(plugged: pd.DataFrame, builtin: pd.DataFrame) -> pd.DataFrame:
    """The compiled cells both summaries have: each side's speedup, interval and verdict, the ratio
    plugged / built-in, and whether the two intervals overlap."""
    cells = _compiled(plugged).merge(_compiled(builtin), on=CONFIG, suffixes=tuple(f"_{s}" for s in SIDES))
    cells["ratio"] = cells.speedup_plugged / cells.speedup_builtin
    both = cells[[f"speedup_{e}_{s}" for e in ("low", "high") for s in SIDES]].notna().all(axis=1)
    cells["overlap"] = ((cells.speedup_low_plugged <= cells.speedup_high_builtin)
                        & (cells.speedup_low_builtin <= cells.speedup_high_plugged)).where(both)  # NaN: no interval
    return cells.sort_values(CONFIG).reset_index(drop=True)


def _cell(row: pd.Series) -> dict:
    return {k: (int(row[k]) if k == "batch_size" else row[k]) for k in CONFIG} | {
        "speedup_plugged": float(row.speedup_plugged), "speedup_builtin": float(row.speedup_builtin),
        "ratio": float(row.ratio)}


def speedup_comparison(plugged: pd.DataFrame, builtin: pd.DataFrame) -> dict:
    """The numbers of the sentence: cells in common, the ratio of speedups (median, lowest and highest, each
    with its cell), in how many cells the plugged model's speedup is the higher, and, of the cells where both
    sides have an interval (`with_intervals`), in how many the two overlap (the difference is within the runs'
    spread there)."""
    cells = same_cells(plugged, builtin)
    if cells.empty:
        return {"cells": 0}
    return {
        "cells": len(cells), "median_ratio": float(cells.ratio.median()),
        "lowest": _cell(cells.loc[cells.ratio.idxmin()]), "highest": _cell(cells.loc[cells.ratio.idxmax()]),
        "plugged_higher": int((cells.ratio > 1).sum()), "with_intervals": int(cells.overlap.notna().sum()),
        "intervals_overlap": int(cells.overlap.eq(True).sum()),  # NaN (no interval) is not an overlap
        "rows": [_cell(r) for _, r in cells.iterrows()],
    }


def compare_studies(plugged_dir: str | Path, builtin_dir: str | Path) -> dict:
    """speedup_comparison of two study directories (their summary.csv), with each study's model named."""
    out = {}
    for side, d in zip(SIDES, (Layout(str(plugged_dir)), Layout(str(builtin_dir)))):
        config = yaml.safe_load(Path(d.config).read_text()) or {}
        out[f"{side}_model"] = ("built-in TextClassifier" if not is_plugged(config)
                                else json.loads(Path(d.model).read_text())["class"] if Path(d.model).is_file()
                                else None)
    summaries = [pd.read_csv(Layout(str(d)).summary) for d in (plugged_dir, builtin_dir)]
    return out | speedup_comparison(*summaries)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A plugged model's speedups against the built-in model's, "
                                                 "on the cells both studies ran.")
    parser.add_argument("plugged", type=Path, help="the plugged model's study directory")
    parser.add_argument("builtin", type=Path, help="the built-in model's study directory")
    args = parser.parse_args(argv)
    for side, d in zip(SIDES, (args.plugged, args.builtin)):  # one plugged model's study, then the built-in's
        if is_plugged(yaml.safe_load(Path(Layout(str(require_study(d))).config).read_text()) or {}) != (side == "plugged"):
            raise SystemExit(f"{d}: a study of {'the built-in' if side == 'plugged' else 'a plugged'} model, given "
                             f"as the {side} one: compare-models compares a plugged model's study (first) with "
                             "the built-in model's (second); two studies of one model: python -m compile_study compare")
    print(json.dumps(compare_studies(args.plugged, args.builtin), indent=1))


if __name__ == "__main__":
    main()
