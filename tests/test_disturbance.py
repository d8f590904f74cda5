"""A run disturbed by other work on its host: the rule, its redo in the job, the summary's and the paper's handling,
and how much of the step's spread the host's recorded state explains (aggregate/variance.py)."""

from __future__ import annotations

import json
from dataclasses import asdict, fields

import numpy as np
import pandas as pd
import pytest
import yaml

from compile_study.aggregate import variance
from compile_study.aggregate.decide import decide
from compile_study.aggregate.environment import disturbance_counts, environment
from compile_study.aggregate.summary import CONFIG, summarize
from compile_study.core import disturbance, record
from compile_study.core.calls.clock import Clock
from compile_study.core.disturbance import Limits, judge
from compile_study.measure import jobs
from compile_study.measure.process import isolation, launch
from compile_study.report import appendix, method
from compile_study.report.findings import Context
from compile_study.report.paper import words

from .conftest import REPO
from .paper_study import build, make_study
from .test_summary_report import record as make_record

pytestmark = pytest.mark.unit

LIMITS = Limits(max_outside_cores=0.25, max_other_gpu_util=5.0, max_aa_ratio=1.5, redos=2)


def rec(mode="eager", step=6.0, ref=6.1, outside=0.0, gpu_util=None, status="ok", scope="module") -> dict:
    block = {"outside_cores": outside, "busiest": [[4242, "neighbour", 1.9]]}
    if gpu_util is not None:
        block["gpu"] = {"other_sm_util": gpu_util}
    return {"config": {"compile_mode": mode, "compile_scope": scope}, "status": status,
            "metrics": {"steady_step_ms": step, "reference_step_ms": ref, "host_load": {"block": block}}}


# --- the rule ---------------------------------------------------------------------------------------------------
def test_the_limits_default_to_the_schema_and_config_yaml_states_them():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())["properties"]["disturbance"]
    assert {f.name: f.default for f in fields(Limits)} == {k: v["default"] for k, v in schema["properties"].items()}
    config = yaml.safe_load((REPO / "config.yaml").read_text())["disturbance"]
    assert Limits.of(config) == Limits()


def test_outside_load_is_judged_against_its_limit_and_only_above_it():
    assert judge(rec(outside=0.25), LIMITS) is None  # at the limit: not above it
    found = judge(rec(outside=0.26), LIMITS)
    assert found["reasons"] == ["cpu-load"] and found["outside_cores"] == 0.26
    assert found["limits"] == asdict(LIMITS) and found["busiest"] == [[4242, "neighbour", 1.9]]
    assert "other processes took 0.26 CPU s/s on its cores (limit 0.25); busiest: neighbour 4242" in disturbance.describe(found)


def test_time_a_hypervisor_gave_another_guest_is_named_as_steal():
    """On a virtual machine, part of the outside load can be steal: no process of this host, a neighbour guest."""
    r = rec(outside=0.33)
    r["metrics"]["host_load"]["block"] |= {"steal_cpu_s": 3.0, "wall_s": 10.0}
    found = judge(r, LIMITS)
    assert found["steal_cores"] == pytest.approx(0.3)
    assert disturbance.describe(found).startswith(
        "work outside the study took 0.33 CPU s/s on its cores (limit 0.25), 0.30 of it steal (the hypervisor ran "
        "another guest); busiest: neighbour 4242")


def test_another_process_on_the_gpu_is_judged_only_where_nvml_told_the_processes_apart():
    assert judge(rec(gpu_util=5), LIMITS) is None
    assert judge(rec(gpu_util=40), LIMITS)["reasons"] == ["gpu-load"]
    assert judge(rec(gpu_util=None), LIMITS) is None  # not measured: no evidence either way


def test_an_eager_reference_astray_from_its_own_step_is_the_evidence_in_either_direction():
    found = judge(rec(step=6.0, ref=658.0), LIMITS)  # the record issue 40 found
    assert found["reasons"] == ["aa-stray"] and found["aa_ratio"] == pytest.approx(109.67, abs=0.01)
    assert judge(rec(step=10.0, ref=6.0), LIMITS)["reasons"] == ["aa-stray"]  # 0.6: the reference faster
    assert judge(rec(step=6.0, ref=8.9), LIMITS) is None  # 1.48: inside the limit
    # a compiled run's reference is eager against a compiled step: their ratio is the speedup, not a stray
    assert judge(rec(mode="reduce-overhead", step=1.3, ref=12.0), LIMITS) is None
    assert judge(rec(scope="fused-adamw", step=5.0, ref=12.0), LIMITS) is None  # fused AdamW against foreach


def test_reasons_add_up_and_a_failed_run_is_not_judged():
    assert judge(rec(step=6.0, ref=658.0, outside=1.0, gpu_util=90), LIMITS)["reasons"] == ["cpu-load", "gpu-load", "aa-stray"]
    assert judge(rec(outside=3.0, status="oom"), LIMITS) is None
    assert judge({"status": "ok", "config": {"compile_mode": "eager"}, "metrics": {}}, LIMITS) is None  # no readings


# --- the redo, in the job ----------------------------------------------------------------------------------------
def _answers(monkeypatch, outsides: list[float | None]):
    """launch.run answers one record per attempt, with the given outside load (None: the process died)."""
    calls = []

    def run(target, kwargs, setup, clock, way=None, gate=None):
        calls.append(dict(clock.parts))
        outside = outsides[len(calls) - 1]
        if outside is None:
            return launch.Outcome(None, clock, -9, "warm", answered=False)
        cfg = record.RunConfig(**kwargs["run"])
        r = record.new(cfg, {}, {})
        r["metrics"] = {"steady_step_ms": 6.0, "reference_step_ms": 6.1, "attempt": len(calls),
                        "host_load": {"block": {"outside_cores": outside, "busiest": []}}}
        done = Clock.resume(clock.state())
        done.parts["timed_s"] += 1.0
        return launch.Outcome(r, done, 0, "warm")

    monkeypatch.setattr(launch, "run", run)
    monkeypatch.setattr(jobs.env, "host_facts", lambda device: {"device_type": device})
    return calls


def _train_run(tmp_path, redos=2, repeat=0):
    cache = tmp_path / "cache"
    params = {"run": {"compile_mode": "eager", "batch_size": 8, "shape_regime": "static", "precision": "fp32",
                      "repeat": repeat}, "model": {}, "device": "cpu", "cache_dir": str(cache),
              "disturbance": asdict(LIMITS) | {"redos": redos}}
    out = tmp_path / "r0.json"
    jobs.train_run(params, str(tmp_path), str(out), str(tmp_path / "trace.json"), str(tmp_path / "log"), 1)
    return json.loads(out.read_text())


def test_a_disturbed_run_is_redone_and_its_disturbed_attempt_kept_inside_the_new_record(tmp_path, monkeypatch, capsys):
    calls = _answers(monkeypatch, [0.9, 0.0])
    got = _train_run(tmp_path)
    assert len(calls) == 2 and got["metrics"]["attempt"] == 2 and got["disturbed"] is None
    [earlier] = got["earlier_attempts"]
    assert earlier["metrics"]["attempt"] == 1 and earlier["disturbed"]["reasons"] == ["cpu-load"]
    assert earlier["env"]["inductor_cache"] == "cold" and earlier["env"]["launcher"] == "warm"
    # the redo's clock runs on from the job's start: the first attempt is booked as redo_s, the total is the job's
    overhead = got["metrics"]["overhead_s"]
    assert calls[0].get("redo_s", 0) == 0 and calls[1]["redo_s"] > 0 and overhead["redo_s"] == calls[1]["redo_s"]
    assert overhead["timed_s"] == 1.0  # the last attempt's own parts; the first one's are inside redo_s
    assert overhead["total_s"] >= overhead["redo_s"] + overhead["gpu_wait_s"]
    assert "disturbed (other processes took 0.90 CPU s/s on its cores (limit 0.25)); redoing it, 1 of at most 2" in capsys.readouterr().out
    assert record.problem(tmp_path / "r0.json") is None  # the record keeps today's shape
    assert record.table([tmp_path / "r0.json"]).redone.tolist() == [1]


def test_a_run_still_disturbed_after_its_redos_keeps_its_flag(tmp_path, monkeypatch):
    calls = _answers(monkeypatch, [0.9, 0.8, 0.7])
    got = _train_run(tmp_path, redos=2)
    assert len(calls) == 3 and len(got["earlier_attempts"]) == 2
    assert got["disturbed"]["reasons"] == ["cpu-load"] and got["disturbed"]["outside_cores"] == 0.7
    assert [e["metrics"]["attempt"] for e in got["earlier_attempts"]] == [1, 2]


def test_redos_zero_flags_without_redoing_and_a_crash_is_not_redone(tmp_path, monkeypatch):
    calls = _answers(monkeypatch, [0.9])
    got = _train_run(tmp_path, redos=0)
    assert len(calls) == 1 and got["disturbed"]["reasons"] == ["cpu-load"] and got["earlier_attempts"] == []
    calls = _answers(monkeypatch, [None])
    got = _train_run(tmp_path)
    assert len(calls) == 1 and got["status"] == "error" and got["earlier_attempts"] == []


def test_no_redo_is_started_that_the_calls_time_limit_would_cut_short(tmp_path, monkeypatch, capsys):
    calls = _answers(monkeypatch, [0.9, 0.0])
    monkeypatch.setattr(jobs.deadline, "seconds_left", lambda: -1.0)  # the limit has come: a redo would be lost
    got = _train_run(tmp_path)
    assert len(calls) == 1 and got["disturbed"]["reasons"] == ["cpu-load"] and got["earlier_attempts"] == []
    assert "disturbed, and not redone: a redo takes about 0 s and the call's time limit comes in 0 s" in capsys.readouterr().out


def test_a_redo_starts_from_the_same_warm_cache_nothing_emptied(tmp_path, monkeypatch):
    """Every timed run starts warm, from the cache its configuration's cold compile filled (rule cold_compile): a
    redo too, so the redo measures what the first attempt would have, and no compile runs beside timed work."""
    seen = []
    _answers(monkeypatch, [0.9, 0.0])
    real_run = launch.run

    def run(target, kwargs, setup, clock, way=None, gate=None):
        cache = tmp_path / "cache"
        seen.append(sorted(p.name for p in cache.iterdir() if p.name != isolation.TEMP))
        (cache / f"graph-{len(seen)}").write_text("compiled")  # what the attempt's compile left behind
        return real_run(target, kwargs, setup, clock, way, gate)

    monkeypatch.setattr(launch, "run", run)
    _train_run(tmp_path, repeat=0)
    assert seen == [[], ["graph-1"]]  # the redo found the cache as the first attempt left it


# --- the summary and the paper ------------------------------------------------------------------------------------
def _disturb(path, reasons=None, earlier=0, outside=0.0):
    r = json.loads(path.read_text())
    r["schema_version"] = record.SCHEMA_VERSION
    r["metrics"]["host_load"] = {"block": {"outside_cores": outside, "cpu_mhz": [2000.0, 2000.0]}}
    r["disturbed"] = {"reasons": reasons} if reasons else None
    r["earlier_attempts"] = [{"disturbed": {"reasons": ["cpu-load"]}, "metrics": {}} for _ in range(earlier)]
    path.write_text(json.dumps(r))
    return path


def _cell(tmp_path, eager_disturbed=False, compiled_disturbed=False):
    tmp_path.mkdir(parents=True, exist_ok=True)
    paths = [_disturb(make_record(tmp_path, "eager", 64, r, ms, ref), ["cpu-load"] if eager_disturbed and r == 2 else None,
                      earlier=1 if r == 0 else 0)
             for r, (ms, ref) in enumerate([(10.0, 10.1), (10.2, 10.0), (9.8, 9.9)])]
    paths += [_disturb(make_record(tmp_path, "default", 64, r, ms, 10.0), ["cpu-load"] if compiled_disturbed and r == 1 else None,
                       earlier=2 if r == 1 else 0) for r, ms in enumerate([8.0, 8.1, 7.9])]
    return record.table(paths)


def test_a_configuration_whose_run_stayed_disturbed_gets_no_verdict_and_its_numbers_stay(tmp_path):
    clean = summarize(_cell(tmp_path / "a"), 6840).set_index("compile_mode")
    assert clean.loc["default", "verdict"] == "faster" and clean.loc["default", "redone_n"] == 1
    assert clean.loc["eager", "redone_n"] == 1 and (clean.disturbed_n == 0).all()
    s = summarize(_cell(tmp_path / "b", compiled_disturbed=True), 6840).set_index("compile_mode")
    assert s.loc["default", "verdict"] == "disturbed" and s.loc["default", "disturbed_n"] == 1
    assert s.loc["default", "speedup"] == pytest.approx(clean.loc["default", "speedup"])  # the numbers stay
    assert s.loc["eager", "verdict"] == "aa"


def test_a_disturbed_eager_run_withholds_the_verdict_of_every_configuration_of_its_cell(tmp_path):
    s = summarize(_cell(tmp_path, eager_disturbed=True), 6840).set_index("compile_mode")
    assert s.loc["default", "verdict"] == "disturbed" and s.loc["default", "disturbed_n"] == 0
    assert s.loc["eager", "disturbed_n"] == 1


def test_the_counts_the_setup_reads(tmp_path):
    counts = disturbance_counts(_cell(tmp_path, compiled_disturbed=True))
    assert counts == {"recorded": 6, "records": 6, "redone_runs": 2, "attempts_set_aside": 3,
                      "redone_by": {"cpu-load": 2}, "stayed_disturbed": 1}


def _setup_sentence(study: dict) -> str:
    ctx = Context(study["summary"], study["claims"], decide(study["summary"]), study["environment"], study["facts"],
                  study["config"], study["device"], "figures", study["calls"], study["checks"], {})
    [para] = [p for p in method.setup(ctx) if p.text.macro == "disturbance"]
    return words(para.text)


def test_the_setup_counts_the_runs_redone_after_outside_load(tmp_path):
    study = make_study(tmp_path)
    records = study["records"].copy()
    records["redone"] = [2, 1] + [0] * (len(records) - 2)
    records["redone_reasons"] = ["cpu-load", "cpu-load"] + [None] * (len(records) - 2)
    records["host_outside_cores"] = 0.01
    study["environment"] = study["environment"] | {"disturbance": disturbance_counts(records)}
    study["config"]["disturbance"] = {"max_outside_cores": 0.3, "redos": 2}
    text = _setup_sentence(study)
    assert "This study has 2 runs redone after outside load." in text
    assert "redone, at most twice" in text and "stayed disturbed" not in text
    # the rule itself is the appendix's (Environment), beside the versions
    [rule] = [p for s in appendix.sections(Context(study["summary"], study["claims"], decide(study["summary"]),
                                                    study["environment"], study["facts"], study["config"],
                                                    study["device"], "figures", study["calls"], study["checks"], {}),
                                            pd.DataFrame())
              if s.title == "Environment" for p in s.blocks if p.text.macro == "disturbance_rule"]
    assert ("took more than 0.30 CPU seconds a second on its cores or another process used more than 5% of its "
            "GPU's SMs") in words(rule.text)
    records.loc[records.index[0], "disturbed"] = True
    study["environment"]["disturbance"] = disturbance_counts(records)
    study["summary"].loc[study["summary"].index[0], "verdict"] = "disturbed"
    assert "1 run stayed disturbed after its redos, and 1 configuration gets no verdict." in _setup_sentence(study)
    paper = words(build(study).main[1].blocks[2].text)  # the whole report model places the same sentence
    assert paper == _setup_sentence(study)
    study["summary"].loc[study["summary"].index[0], "verdict"] = "aa"  # an eager-only cell: no verdict to withhold
    assert _setup_sentence(study).endswith("1 run stayed disturbed after its redos.")
    study["config"]["disturbance"]["redos"] = 0
    assert "was flagged and not redone." in _setup_sentence(study)
    assert _setup_sentence(study).endswith("1 run stayed disturbed.")


def test_a_study_whose_older_records_lack_the_readings_says_how_many_have_them(tmp_path):
    study = make_study(tmp_path)
    records = study["records"].copy()
    ok = records.index[records.status == "ok"]
    records["host_outside_cores"] = 0.01
    records.loc[ok[0], "host_outside_cores"] = None  # a record from before the readings
    records.loc[records.status != "ok", "host_outside_cores"] = None  # a failed run measured nothing
    study["environment"] = study["environment"] | {"disturbance": disturbance_counts(records)}
    text = _setup_sentence(study)
    assert text.startswith(f"{len(ok) - 1} of the {len(ok)} successful runs' records say what else ran on the host "
                           "during their timed blocks; the others do not (not recorded).")
    assert text.endswith("No run was redone.")


def test_a_study_without_the_readings_says_they_were_not_recorded(tmp_path):
    study = make_study(tmp_path)  # records of schema 3: no host readings
    assert study["environment"]["disturbance"]["recorded"] == 0
    assert _setup_sentence(study).startswith("The records do not say what else ran on the host during their timed "
                                             "blocks (not recorded)")
    assert "No run was redone." not in _setup_sentence(study)


def test_the_stored_cpu_study_says_what_its_host_readings_show_from_its_records():
    """The stored CPU study recorded its host readings: no run was redone, its CPU frequency did not vary, and the
    widest spread of eager's steps is its records' slowest and fastest steady steps."""
    study = REPO / "reference/cpu-2core-2026-12-06"
    paper = (study / "paper.md").read_text()
    assert "No run was redone." in paper
    assert "The recorded CPU frequency did not vary within any configuration" in paper
    steps = [json.loads(p.read_text())["metrics"]["steady_step_ms"]
             for p in sorted((study / "runs").rglob("*.json")) if "/eager/" in p.as_posix()]
    assert len(steps) == 3
    assert f"took {min(steps):.0f} to {max(steps):.0f} ms over three processes" in paper


# --- how much of the spread the host's state explains ---------------------------------------------------------------
def _runs(n_configs=6, repeats=5, seed=0, effect=1.0, noise=0.0, constant_cpu=True) -> pd.DataFrame:
    """Generated runs: each configuration's log step is its own level plus `effect` x the SM clock's deviation
    (per 100 MHz, slower when lower) plus noise; temperature and power vary independently of the step."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(n_configs):
        for r in range(repeats):
            clock = 1800 + rng.normal(0, 60)
            log_step = np.log(5.0 + c) - effect * 0.05 * (clock - 1800) / 100 + rng.normal(0, noise)
            rows.append({"compile_mode": "eager" if c % 2 == 0 else "default", "compile_scope": "module",
                         "device_type": "cuda", "shape_regime": "static", "precision": "bf16", "batch_size": 32 * (c + 1),
                         "status": "ok", "steady_step_ms": float(np.exp(log_step)), "host_gpu_sm_clock_mhz": clock,
                         "host_gpu_memory_clock_mhz": 2619.0, "host_gpu_temperature_c": 40 + rng.normal(0, 3),
                         "host_gpu_power_w": 300 + rng.normal(0, 20),
                         "host_cpu_mhz": 2000.0 if constant_cpu else 2000 + rng.normal(0, 50)})
    return pd.DataFrame(rows)


def test_a_step_set_by_the_clock_alone_is_explained_whole():
    got = variance.explained(_runs(effect=1.0, noise=0.0), CONFIG)
    assert got["fit"]["r2"] == pytest.approx(1.0, abs=1e-9)
    assert got["fit"]["n"] == 30 and got["fit"]["configurations"] == 6 and got["fit"]["k"] == 3
    assert got["constant"] == ["gpu_memory_clock_mhz", "cpu_mhz"]  # left out: they never vary
    assert got["recorded"] == list(variance.QUANTITIES)


def test_the_fit_agrees_with_a_regression_on_configuration_dummies():
    runs = _runs(effect=1.0, noise=0.01, seed=3)
    got = variance.explained(runs, CONFIG)["fit"]
    y = np.log(runs.steady_step_ms.to_numpy())
    dummies = pd.get_dummies(runs.batch_size).to_numpy(float)  # one configuration per batch size here
    x = runs[["host_gpu_sm_clock_mhz", "host_gpu_temperature_c", "host_gpu_power_w"]].to_numpy()
    within_sst = sum(((y[runs.batch_size == b] - y[runs.batch_size == b].mean()) ** 2).sum() for b in runs.batch_size.unique())
    full = np.hstack([dummies, x])
    residual = y - full @ np.linalg.lstsq(full, y, rcond=None)[0]
    assert got["r2"] == pytest.approx(1 - residual @ residual / within_sst, rel=1e-9)
    assert 0.5 < got["r2"] < 1 and got["adjusted_r2"] < got["r2"]


def test_quantities_unrelated_to_the_step_explain_about_nothing_once_adjusted():
    got = [variance.explained(_runs(n_configs=10, effect=0.0, noise=0.05, seed=s), CONFIG)["fit"] for s in range(20)]
    assert abs(np.mean([g["adjusted_r2"] for g in got])) < 0.05  # unbiased for chance
    assert np.mean([g["r2"] for g in got]) == pytest.approx(3 / (50 - 10), abs=0.04)  # k / (n - g) by chance


def test_the_widest_eager_spread_and_records_without_readings():
    runs = _runs(constant_cpu=False)
    for q in variance.QUANTITIES:
        runs[f"host_{q}"] = None  # a stored study's records: nothing recorded
    got = variance.explained(runs, CONFIG)
    assert got["recorded"] == [] and got["fit"] is None
    eager = runs[runs.compile_mode == "eager"]
    widest = max(eager.groupby("batch_size").steady_step_ms, key=lambda kv: kv[1].max() / kv[1].min())
    assert got["spread"]["batch_size"] == widest[0] and got["spread"]["n"] == 5
    assert got["spread"]["low"] == widest[1].min() and got["spread"]["high"] == widest[1].max()
    json.dumps(got)  # environment.json holds it


def test_too_few_runs_to_fit_gives_no_fit_and_the_environment_carries_the_result(tmp_path):
    one_each = _runs(repeats=1)
    assert variance.explained(one_each, CONFIG)["fit"] is None  # one run per configuration: no spread to explain
    table = _cell(tmp_path)
    env = environment(table)
    assert env["step_variance"]["recorded"] == ["cpu_mhz"] and env["step_variance"]["constant"] == ["cpu_mhz"]
    assert env["disturbance"]["redone_runs"] == 2


def test_the_appendix_words_the_fit_and_names_what_did_not_vary():
    from compile_study.report.document import Text

    v = variance.explained(_runs(effect=1.0, noise=0.01, seed=3), CONFIG)
    text = words(Text("appendix", "variance", {"v": v}))
    assert f"explains R² = {v['fit']['r2']:.2f} of the step's variance between processes" in text
    assert "(30 runs in 6 configurations)" in text and f"({v['fit']['adjusted_r2']:.2f} adjusted for the three" in text
    assert "on the recorded SM clock, GPU temperature and GPU power," in text
    assert "The memory clock and CPU frequency did not vary within a configuration and were left out." in text
    assert f"eager on static batches at batch {v['spread']['batch_size']} (bf16)" in text
    cpu = _runs()
    for q in variance.QUANTITIES[:-1]:
        cpu[f"host_{q}"] = None  # a CPU study: only the CPU's frequency, constant on this kind of host
    text = words(Text("appendix", "variance", {"v": variance.explained(cpu, CONFIG)}))
    assert "The recorded CPU frequency did not vary within any configuration, so it explains none of that spread." in text
