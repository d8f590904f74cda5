"""The method checks run as rules of the DAG (config `checks`): the step timer against torch.utils.benchmark, and
two timed runs at once against one alone (on the CPU: two processes on one core each)."""

from __future__ import annotations

import importlib
import json
import math

import pandas as pd
import pytest
import torch
import yaml

from compile_study.aggregate import decide
from compile_study.core.config import config_schema
from compile_study.measure.checks import concurrency, launcher, spec, timer_check
from compile_study.report import method_checks, paper

from .conftest import REPO, TINY_MODEL


@pytest.mark.compile
def test_timer_check_times_one_step_three_ways_and_compares_them(synthetic_data):
    out = timer_check.check(str(synthetic_data), TINY_MODEL, "eager", 8, "fp32", torch.device("cpu"), steps=5,
                            min_run_time=0.05, rounds=2)
    assert out["harness_median_ms"] > 0 and out["timer_median_ms"] > 0 and len(out["harness_rounds_ms"]) == 2
    assert out["harness_vs_timer"] == pytest.approx(out["harness_median_ms"] / out["timer_median_ms"])
    assert out["within_3pct"] == (abs(out["harness_vs_timer"] - 1) <= 0.03)


@pytest.mark.unit
@pytest.mark.parametrize("name", ["timer_check", "reference_drift", "concurrency"])
def test_each_check_the_rule_names_has_a_main_taking_the_studys_model(name):
    main = importlib.import_module(f"compile_study.measure.checks.{name}").main
    assert list(main.__code__.co_varnames[:3]) == ["data_dir", "out_path", "model"]


@pytest.mark.compile
def test_two_concurrent_runs_on_disjoint_cores_are_timed_against_one_alone(synthetic_data):
    out = concurrency.run_check(str(synthetic_data), TINY_MODEL, device="cpu", shares=2, rounds=2, steps=30, warmup=3,
                                batch_size=8)
    assert out["applicable"] and [r["order"] for r in out["results"]] == ["concurrent first", "solo first"]
    for r in out["results"]:
        assert len(r["concurrent_ms"]) == 2 and all(ms > 0 for ms in r["concurrent_ms"] + [r["solo_ms"]])
        assert r["ratio"] == pytest.approx(r["concurrent_ms"][0] / r["solo_ms"])
        first, second = map(set, r["concurrent_cores"])
        assert first and second and not first & second and r["solo_cores"] == r["concurrent_cores"][0]
        assert r["overlap"] > 0  # both released at one signal: their timed blocks ran together
    s = out["summary"]
    assert s["n"] == 2 and s["overlaps"] == [r["overlap"] for r in out["results"]]
    assert math.isnan(s["low"]) and math.isnan(s["high"])  # two rounds: no interval (fewer than stats.MIN_N)


@pytest.mark.unit
def test_the_concurrency_check_does_not_apply_with_fewer_than_two_gpus(tmp_path, monkeypatch):
    monkeypatch.setattr(concurrency, "count_gpus", lambda: 1)
    concurrency.main("unused", str(tmp_path / "concurrency.json"), TINY_MODEL)
    out = json.loads((tmp_path / "concurrency.json").read_text())
    assert out["applicable"] is False and "1 GPU" in out["reason"]


@pytest.mark.unit
def test_every_declared_check_is_one_a_config_may_turn_on_and_no_other_is():
    schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    checks = list(spec.method_checks())
    assert {"compile_concurrency", "concurrency", "launcher", "reference_drift", "timer_check"} <= set(checks)
    config = yaml.safe_load((REPO / "config.yaml").read_text()) | {"checks": {"cuda": checks}}
    assert config_schema.schema_errors(config, schema) == [] and spec.config_problems(config) == []
    bad = config | {"checks": {"cuda": ["timer_check", "timer_chek"], "cpu": ["launcher"]}}
    (problem,) = spec.config_problems(bad)
    assert problem.startswith("checks.cuda: no method check 'timer_chek' (measure/checks/ declares compile_concurrency,")
    assert problem.keys == (("checks", "cuda"),)


@pytest.mark.unit
def test_a_check_is_declared_by_literals_read_without_importing_its_module(tmp_path):
    """The plan reads each CHECK from its module's source (the plan's process imports no torch): a module that
    declares none is no check, a keyword that is no literal or a name that is not the module's is refused."""
    (tmp_path / "helper.py").write_text("import torch\nX = 1\n")
    (tmp_path / "echo.py").write_text('import torch\nCHECK = MethodCheck(name="echo", key="e", says="s.", prior_s=2,'
                                      ' cases={"cpu": ((1,), (2,))})\n')
    found = spec.method_checks.__wrapped__(tmp_path)
    assert list(found) == ["echo"] and found["echo"].units("cpu") == 2 and found["echo"].units("cuda") == 1
    (tmp_path / "bad.py").write_text('N = 3\nCHECK = MethodCheck(name="bad", key="b", says="s.", prior_s=N)\n')
    with pytest.raises(spec.CheckDeclarationError, match="bad.py: CHECK's keywords must be literals"):
        spec.declaration(tmp_path / "bad.py")
    (tmp_path / "other.py").write_text('CHECK = MethodCheck(name="echo", key="e", says="s.", prior_s=1)\n')
    with pytest.raises(spec.CheckDeclarationError, match="other.py: CHECK's name is 'echo', not its module's"):
        spec.declaration(tmp_path / "other.py")


@pytest.mark.unit
def test_every_method_check_has_each_place_the_change_table_names():
    """ARCHITECTURE.md's row "a method check": each CHECK is found by the report (its key: a check a config turns
    on without one would fail the paper) and by the estimate (its prior, else it is priced at 60 s)."""
    from compile_study.aggregate.estimate.estimate import PRIOR_JOB_S
    from compile_study.report.appendix import CHECK_KEYS
    from compile_study.report.build import read_checks

    checks = spec.method_checks()
    assert CHECK_KEYS == {name: c.key for name, c in checks.items()} and len(set(CHECK_KEYS.values())) == len(checks)
    assert {c: PRIOR_JOB_S[f"method_check:{c}"] for c in checks} == {c: spec.prior_s for c, spec in checks.items()}
    assert set(read_checks({})) == {c.key for c in checks.values()}


@pytest.mark.compile
def test_the_launcher_check_runs_one_cell_both_ways_alternating(synthetic_data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # its Inductor cache goes under resources/
    settings = {"warmup_steps": 2, "timed_steps": 6, "interleave_chunk": 3, "max_epoch_steps": 3, "phase_steps": 1,
                "profile_steps": 1, "recompile_limit": 8, "lr": 3e-4, "seed": 0}
    out = launcher.run_check(str(synthetic_data), TINY_MODEL, "cpu", settings, str(tmp_path / "check.log"), threads=1,
                             rounds=2, cell=("eager", 8, "fp32"))  # the protocol, not a compiler: no compile
    assert [r["order"] for r in out["results"]] == ["warm first", "fresh first"]
    for r in out["results"]:
        assert r["ratio"] == pytest.approx(r["speedup"]["warm"] / r["speedup"]["fresh"])
        warm, fresh = r["overhead_s"]["warm"], r["overhead_s"]["fresh"]
        assert fresh["imports_s"] > warm["imports_s"]  # the fresh process imports torch; the launcher's child not
        assert r["fixed_cost_s"]["fresh"] > r["fixed_cost_s"]["warm"] > 0
        for o in (warm, fresh):  # every second of each process booked (a forked eager child takes 0.2 s in all;
            # on a host the other test processes keep busy, the scheduler's delays go unbooked: tens of ms)
            assert sum(v for k, v in o.items() if k != "total_s") == pytest.approx(o["total_s"], rel=0.05, abs=0.05)
    s = out["summary"]
    assert s["n"] == 2 and math.isnan(s["low"]) and math.isnan(s["high"])  # two rounds: no interval (stats.MIN_N)


@pytest.mark.unit
def test_the_appendix_reads_the_launcher_check_against_its_cells_band():
    check = {"applicable": True, "compile_mode": "default", "shape_regime": "static", "precision": "fp32",
             "batch_size": 8, "summary": {"ratio": 1.01, "low": 0.97, "high": 1.05, "method": "t on log ratio, n = 3"},
             "results": [{"ratio": r, "fixed_cost_s": {"warm": 0.4, "fresh": 3.5}} for r in (0.99, 1.01, 1.03)]}
    row = {"compile_mode": "default", "compile_scope": "module", "shape_regime": "static", "precision": "fp32",
           "batch_size": 8, "aa_low": 0.9, "aa_high": 1.11, "aa_n": 3}
    decided = decide.checks_decided({"launcher": check}, pd.DataFrame([row]))["launcher"]
    para = method_checks.launcher_para(check, decided)
    data = para.text.data
    assert data["iv"].n == 3 and data["iv"].low < 1.01 < data["iv"].high and data["verdict"] == "within-noise"
    assert (data["warm_s"], data["fresh_s"], data["rounds"]) == (0.4, 3.5, 3)
    text = paper.words(para.text)
    assert "0.40 s" in text and "3.50 s" in text and "[0.90, 1.11]" in text and "1.01×" in text
    assert method_checks.launcher_para({"applicable": False}, None) is None
    assert decide.checks_decided({"launcher": {"applicable": False}}, pd.DataFrame([row])) == {}
