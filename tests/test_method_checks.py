"""The method checks run as rules of the DAG (config `checks`): the step timer against torch.utils.benchmark."""

from __future__ import annotations

import importlib

import pytest
import torch

from compile_study import timer_check

from .conftest import TINY_MODEL


def test_timer_check_times_one_step_three_ways_and_compares_them(synthetic_data):
    out = timer_check.check(str(synthetic_data), TINY_MODEL, "eager", 8, "fp32", torch.device("cpu"), steps=5,
                            min_run_time=0.05, rounds=2)
    assert out["harness_median_ms"] > 0 and out["timer_median_ms"] > 0 and len(out["harness_rounds_ms"]) == 2
    assert out["harness_vs_timer"] == pytest.approx(out["harness_median_ms"] / out["timer_median_ms"])
    assert out["within_3pct"] == (abs(out["harness_vs_timer"] - 1) <= 0.03)


@pytest.mark.parametrize("name", ["timer_check", "reference_drift"])
def test_each_check_the_rule_names_has_a_main_taking_the_studys_model(name):
    main = importlib.import_module(f"compile_study.{name}").main
    assert list(main.__code__.co_varnames[:3]) == ["data_dir", "out_path", "model"]
