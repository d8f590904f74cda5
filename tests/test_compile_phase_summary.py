"""The compile phase's records in the summary, the decisions and the Setup: each configuration's cold compiles
come from them (replacing a cold run's), the Method counts them and says how they ran, and the compile-concurrency
check is read against 1. Hand-made records (tests/test_summary_report.py's), no torch."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from compile_study.aggregate import decide
from compile_study.aggregate.environment import compile_phase
from compile_study.aggregate.payback import cold_compiles
from compile_study.aggregate.summary import summarize
from compile_study.core import compile_record, record, vocab
from compile_study.report.document import Text
from compile_study.report.paper import words

from .test_summary_report import ROWS
from .test_summary_report import record as make_record

pytestmark = pytest.mark.unit


def _compile(mode: str, index: int, epoch1: float, at_once: int = 2, cores=(0,), alone=False, status="ok",
             cache="cold") -> dict:
    """One row of compile_record.table for batch 64, bf16, static, module on cuda."""
    row = {k: None for k in [*record.CONFIGURATION_KEYS, "device_type", *compile_record.COMPILE,
                             *compile_record.METRICS, "status", "error", "total_s"]}
    row |= {"compile_mode": mode, "batch_size": 64, "shape_regime": "static", "precision": "bf16",
            "compile_scope": "module", "repeat": index, "device_type": "cuda", "index": index, "at_once": at_once,
            "slots": 8, "cores": list(cores), "alone": alone, "inductor_cache": cache, "start": "cold", "status": status,
            "epoch1_s": epoch1 if status == "ok" else None, "epoch2_s": 10.0 if status == "ok" else None}
    return row


@pytest.fixture
def runs(tmp_path):
    paths = [make_record(tmp_path, "eager", 64, r, ms, ref) for r, (ms, ref) in enumerate([(10.0, 10.1), (10.2, 10.0),
                                                                                             (9.8, 9.9)])]
    paths += [make_record(tmp_path, "default", 64, r, ms, 10.0, cache="warm") for r, ms in enumerate([8.0, 8.1, 7.9])]
    return record.table(paths)


def test_cold_compiles_come_from_the_compile_phase_less_eagers_first_epoch_costs(runs):
    compiles = pd.DataFrame([_compile("default", i, 10.0 + s) for i, s in enumerate([21.0, 23.0, 22.0])])
    key = ("cuda", "static", "bf16", 64, "default", "module")
    # eager's epoch 1 - epoch 2 is 1 s in every eager record: each cold compile is its epoch 1 - epoch 2 less that
    assert cold_compiles(runs, compiles)[key] == pytest.approx([20.0, 22.0, 21.0])
    assert key not in cold_compiles(runs)  # every timed run is warm: without the phase's records there are none
    row = summarize(runs, ROWS, compiles).set_index("compile_mode").loc["default"]
    assert row.cold_n == 3 and row.cold_low < 20.0 < 22.0 < row.cold_high
    assert row.cold_compile_s == pytest.approx(math.exp(np.mean(np.log([20.0, 22.0, 21.0]))), rel=0.03)
    assert row.break_even_n == 3 and row.break_even_low < row.break_even_steps < row.break_even_high


def test_a_failed_cold_compile_is_left_out_and_a_phase_record_replaces_a_cold_runs(tmp_path, runs):
    cold_run = record.table([make_record(tmp_path, "default", 64, 0, 8.0, 10.0, cache="cold")])
    both = pd.concat([runs, cold_run], ignore_index=True)
    compiles = pd.DataFrame([_compile("default", 0, 30.0), _compile("default", 1, 0.0, status="failed")])
    key = ("cuda", "static", "bf16", 64, "default", "module")
    assert cold_compiles(both)[key] == pytest.approx([12.5])  # the run's own cold epoch (13.5 - 1) without the phase
    assert cold_compiles(both, compiles)[key] == pytest.approx([19.0])  # the phase's one successful compile


def test_the_method_counts_the_phases_compiles_and_says_how_they_ran():
    compiles = pd.DataFrame(
        [_compile("default", i, 30.0, at_once=k, cores=(2 * i, 2 * i + 1)) for i, k in enumerate([3, 3, 2])]
        + [_compile("max-autotune", 0, 240.0, at_once=1, cores=range(16), alone=True)]
        + [_compile("max-autotune-no-cudagraphs", 0, 40.0, cores=(6, 7), cache=vocab.SEARCH_SHARED)]
        + [_compile("reduce-overhead", i, 30.0, status="failed" if i == 2 else "ok", cores=(0, 1)) for i in range(3)]
        + [_compile("default", i, 13.0) | {"start": "portable", "artifacts_bytes": size, "fx_cache_misses": 0,
                                           "aot_cache_misses": i} for i, size in enumerate([11_000_000, 11_500_000])])
    timed = pd.DataFrame({"status": ["ok"] * 5 + ["oom"], "compile_mode": ["eager"] + ["default"] * 5,
                          "inductor_cache": ["cold", "warm", "warm", "warm", "cold", "cold"]})
    p = compile_phase(compiles, timed)
    assert p == {"compiles": 8, "failed": 1, "configurations": 4, "per_configuration": [1, 3], "at_once": 3,
                 "slots": 8, "cores_per_compile": [2], "alone_modes": ["max-autotune"], "alone": 1,
                 "search_shared_modes": ["max-autotune-no-cudagraphs"], "host_cores": [16],
                 "failed_configurations": 0, "timed_cache": {"warm": 3, "cold": 1},
                 # the portable starts apart from the cold compiles (counted above without them)
                 "portable": {"starts": 2, "failed": 0, "configurations": 1, "artifacts_bytes": [11_000_000, 11_500_000],
                              "fx_cache_misses": 0, "aot_cache_misses": 1}}
    check = {"iv": decide.stats.speedup_interval([1.04, 1.07, 1.05]), "verdict": "faster"}
    phase = {"p": p, "n_cold": 3, "gpu": True, "check": check}
    costs = {"cold": 0, "warm": 9, "recorded": True, "gpu": True, "train_rows": ROWS, "peaks": [], "payback": True}
    text = words(Text("method", "costs", costs | {"phase": phase}))
    for number in ("8 of them for 4 configurations", "one to three per configuration", "Up to three", "2 cores",
                   "`max-autotune` benchmarks", "(1 in all)", "`max-autotune-no-cudagraphs` started", "1 cold compile",
                   "1 of the 4 compiled timed runs did not find that cache filled"):
        assert number in text, (number, text)
    assert "had none that succeeded" not in text and "Every timed run" not in text
    # every compile of a configuration failed, every timed run found its cache filled
    failed = compiles.assign(status="failed")
    every = words(Text("method", "costs", costs | {"phase": phase | {"p": compile_phase(failed, timed.iloc[1:4])}}))
    assert "8 cold compiles failed" in every and "4 configurations had none that succeeded" in every
    assert "Every timed run started from the cache" in every
    assert "(three configured)" not in text  # the most any configuration had is the configured count
    assert "were cold" not in text  # the timed runs' cache states are not the cold compiles' any more
    old = words(Text("method", "costs", costs | {"cold": 3, "warm": 6, "phase": phase | {"p": {}}}))
    assert "3 were cold and 6 warm" in old and "compile phase" not in old  # a study made before the phase
    assert compile_phase(pd.DataFrame()) == {}
    assert "inference graph" not in text  # records made before the first cold compiles compiled it


def test_the_method_counts_the_first_cold_compiles_that_compiled_the_inference_graph():
    """Only successful cold compiles that say so count (a portable start never compiles it; a record made before
    the field has None)."""
    compiles = pd.DataFrame(
        [_compile("default", i, 30.0) | {"inference": i == 0} for i in range(3)]
        + [_compile("reduce-overhead", 0, 30.0) | {"inference": True},
           _compile("max-autotune", 0, 200.0, alone=True, status="failed") | {"inference": True},
           _compile("default", 0, 13.0) | {"start": "portable", "inference": False}])
    p = compile_phase(compiles)
    assert p["inference"] == 2 and "inference" not in compile_phase(compiles.assign(inference=None))
    phase = {"p": p, "n_cold": 3, "gpu": True, "check": None}
    costs = {"cold": 0, "warm": 6, "recorded": True, "gpu": True, "train_rows": ROWS, "peaks": [], "payback": True}
    text = words(Text("method", "costs", costs | {"phase": phase}))
    assert "Two first cold compiles also compiled their configurations' inference graph" in text


@pytest.mark.parametrize("ratios, verdict", [([1.04, 1.07, 1.05], "faster"), ([0.9, 1.1, 1.0], "underpowered"),
                                             ([0.80, 0.82, 0.81], "slower"), ([1.2, 1.3], "few-runs")])
def test_the_compile_concurrency_check_is_read_against_one(ratios, verdict):
    check = {"applicable": True, "k": 8, "cores_per_compile": 2, "host_cores": 16,
             "results": [{"ratio": r, "alone_s": 20.0, "batch_s": [20.0 * r] * 8} for r in ratios]}
    got = decide.compile_concurrency(check)
    assert got["verdict"] == verdict and got["rounds"] == len(ratios) and got["k"] == 8
    assert got["batch_s"] == pytest.approx(20.0 * sorted(ratios)[len(ratios) // 2] if len(ratios) % 2 else
                                           20.0 * np.median(ratios))
    assert decide.compile_concurrency({"applicable": False}) is None


@pytest.mark.parametrize("among, alone, verdict", [([24.0, 25.0, 26.0], [20.0, 20.5, 19.5], "faster"),
                                                   ([19.0, 22.0, 20.5], [20.0, 21.0, 19.5], "underpowered"),
                                                   ([24.0, 25.0], [20.0, 20.5, 19.5], "few-runs")])
def test_the_compile_concurrency_check_reads_the_phases_own_compiles_against_n_alone(among, alone, verdict):
    """Today's check: the compile phase's compiles of its cell (at once with others) over the same configuration
    compiled alone n times; Welch's t on the log ratio of the two sides' geometric means."""
    check = {"applicable": True, "k": 8, "cores_per_compile": 2, "host_cores": 16,
             "phase": [{"cold_compile_s": s, "at_once": 8} for s in among],
             "alone": [{"cold_compile_s": s, "first_step_s": s + 1} for s in alone]}
    got = decide.compile_concurrency(check)
    assert got["verdict"] == verdict and got["rounds"] == min(len(among), len(alone))
    assert got["interval"]["point"] == pytest.approx(np.exp(np.mean(np.log(among)) - np.mean(np.log(alone))))
    assert got["alone_s"] == pytest.approx(np.median(alone)) and got["batch_s"] == pytest.approx(np.median(among))
    assert ("Welch" in got["interval"]["method"]) == (verdict != "few-runs")
