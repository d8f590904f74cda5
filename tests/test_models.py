"""A plugged model's speedups against the built-in model's on the cells both studies ran (aggregate/compare/models.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from compile_study.aggregate.compare.models import compare_studies, is_plugged, same_cells, speedup_comparison

from .conftest import GPU_REFERENCE

pytestmark = pytest.mark.unit
STORED = GPU_REFERENCE


def summary(rows: list[tuple]) -> pd.DataFrame:
    """Summary rows: (mode, batch, speedup, low, high), bf16 static module on cuda, status ok."""
    return pd.DataFrame([{"device_type": "cuda", "shape_regime": "static", "precision": "bf16", "batch_size": bs,
                          "compile_mode": mode, "compile_scope": "module", "status": "ok", "speedup": s,
                          "speedup_low": lo, "speedup_high": hi, "speedup_method": "95% t", "speedup_n": 3,
                          "verdict": "faster"} for mode, bs, s, lo, hi in rows])


def test_the_comparison_takes_the_compiled_cells_both_studies_have():
    builtin = summary([("eager", 32, 1.0, 0.98, 1.02), ("default", 32, 2.0, 1.8, 2.2),
                       ("reduce-overhead", 32, 3.0, 2.8, 3.2), ("default", 512, 1.6, 1.5, 1.7)])
    plugged = summary([("eager", 32, 1.0, 0.97, 1.03), ("default", 32, 1.5, 1.4, 1.6),
                       ("reduce-overhead", 32, 3.3, 3.1, 3.5), ("max-autotune", 32, 2.5, 2.4, 2.6)])
    cells = same_cells(plugged, builtin)
    assert list(zip(cells.compile_mode, cells.batch_size)) == [("default", 32), ("reduce-overhead", 32)]
    out = speedup_comparison(plugged, builtin)
    assert (out["cells"], out["plugged_higher"], out["with_intervals"], out["intervals_overlap"]) == (2, 1, 2, 1)
    assert out["median_ratio"] == pytest.approx((0.75 + 1.1) / 2)
    assert (out["lowest"]["compile_mode"], out["lowest"]["ratio"]) == ("default", pytest.approx(0.75))
    assert (out["highest"]["compile_mode"], out["highest"]["ratio"]) == ("reduce-overhead", pytest.approx(1.1))
    assert speedup_comparison(plugged, summary([("default", 64, 2.0, 1.9, 2.1)])) == {"cells": 0}


def test_a_stored_study_against_itself_agrees_in_every_compiled_cell():
    out = compare_studies(STORED, STORED)
    compiled = pd.read_csv(STORED / "summary.csv").query("compile_mode != 'eager' and status == 'ok'")
    assert out["cells"] == compiled.speedup.notna().sum() and out["median_ratio"] == 1.0
    with_interval = compiled.speedup_low.notna().sum()  # a single run has none
    assert out["intervals_overlap"] == out["with_intervals"] == with_interval < out["cells"]
    assert out["plugged_higher"] == 0
    assert out["plugged_model"] == out["builtin_model"] == "built-in TextClassifier"


def test_a_study_config_says_whether_it_plugs_a_model_in():
    assert not is_plugged({"model": {"n_layers": 4}}) and not is_plugged({})
    assert is_plugged({"model": {"hf_config": {"model_type": "bert"}}})
    assert is_plugged({"model": {"factory": "pkg.mod:make", "hf_config": None}})
