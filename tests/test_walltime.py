"""Every second of a call goes to one part, and the estimate counts every job of the plan."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from compile_study.aggregate.estimate import calls, costs, estimate, walltime
from compile_study.aggregate.estimate.at_once import at_once_factor
from compile_study.core import compile_record, record
from compile_study.core.config import grid
from compile_study.core.layout import Layout
from compile_study.core.record import RunConfig, RunKey

from .conftest import REPO

pytestmark = pytest.mark.unit

# A Snakemake log in local time one hour ahead of UTC: Snakemake starts 3 s into the call, data preparation
# runs alone, then a run and the summary overlap for 2 s; the call ends 2 s after the last job.
LOG = """SNAKEMAKE
  Date: 2026-12-01 13:00:03
study plan: 2 of 2 runs to do, about 0.5 min on the CPU (31 s in all: runs 20 s, ...)
[Tue Dec  1 13:00:05 2026]
localrule prepare_data:
    output: resources/data/train_ids.npy, resources/data/facts.json
    jobid: 3
[Tue Dec  1 13:00:09 2026]
Finished jobid: 3 (Rule: prepare_data)
[Tue Dec  1 13:00:10 2026]
localrule train_run:
    output: results/cpu/runs/static/fp32/eager/module/bs8/r0.json, results/cpu/runs/static/fp32/eager/module/bs8/r0.trace.json.gz
    jobid: 1
[Tue Dec  1 13:00:18 2026]
localrule summarize:
    output: results/cpu/summary.csv
    jobid: 7
[Tue Dec  1 13:00:20 2026]
Finished jobid: 1 (Rule: train_run)
[Tue Dec  1 13:00:28 2026]
Finished jobid: 7 (Rule: summarize)
"""
START = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC).timestamp()
CALL = {"call": 1, "start_utc": "2026-12-01T12:00:00+00:00", "wall_s": 30.0, "snakemake_log": "calls/1.snakemake.log"}


def run_record(total: float, launcher: str | None = "warm", window=None) -> dict:
    rec = record.new(RunConfig("eager", 8, "static", "fp32", 0), {}, {"device_type": "cpu", "launcher": launcher})
    parts = {"process_start_s": 0.2, "imports_s": 0.1, "cuda_init_s": 0.0, "timed_s": total / 2, "compile_s": 1.0}
    rec["metrics"] = {"overhead_s": {k: parts.get(k, 0.0) for k in record.OVERHEAD if k != "total_s"}
                      | {"total_s": total}}
    if window:
        rec["metrics"]["job_window_unix"] = window
    return rec


def test_a_log_gives_each_job_its_rule_output_and_seconds_since_the_epoch():
    jobs = {j.rule: j for j in walltime.jobs_of(LOG, START)}
    assert set(jobs) == {"prepare_data", "train_run", "summarize"}
    assert jobs["prepare_data"].start == START + 5 and jobs["prepare_data"].end == START + 9
    assert jobs["train_run"].output == "runs/static/fp32/eager/module/bs8/r0.json"  # its path in the study
    plugged = LOG.replace("results/cpu/", "results/cuda-hf-bert/")  # a plugged model's study: the same path
    assert {j.output for j in walltime.jobs_of(plugged, START)} == {j.output for j in jobs.values()}
    assert walltime.plan_seconds(LOG) == 31


def test_every_second_of_a_call_goes_to_one_part():
    run = run_record(8.0, window=[START + 11, START + 19])  # the job's own window, inside its log interval
    parts = walltime.breakdown(CALL, LOG, {"runs/static/fp32/eager/module/bs8/r0.json": run})
    assert sum(parts.values()) == pytest.approx(CALL["wall_s"])
    assert parts["data preparation"] == pytest.approx(4)
    # 13:00:18-19 the run and the summary share: half a second each; the run's window is 8 s
    run_seconds = sum(v for k, v in parts.items() if k.startswith("runs: "))
    assert run_seconds == pytest.approx(7.5) and parts["summary"] == pytest.approx(9.5)
    assert parts["runs: timed"] == pytest.approx(7.5 * 4 / 8)
    # Snakemake: 0-5 s, 9-11 s, 19 s-... no: 28-30 s, and the run's log interval outside its window
    assert parts[walltime.SNAKEMAKE] == pytest.approx(30 - 4 - 7.5 - 9.5)


def test_a_run_a_time_limit_stopped_is_booked_as_stopped_though_a_later_call_wrote_its_record():
    stopped = LOG.replace("Finished jobid: 1 (Rule: train_run)\n", "")  # the limit's SIGTERM ends the call
    later = run_record(8.0, window=[START + 100, START + 108])  # written by the next call
    parts = walltime.breakdown(CALL, stopped, {"runs/static/fp32/eager/module/bs8/r0.json": later})
    assert sum(parts.values()) == pytest.approx(CALL["wall_s"])
    # 10-30 s: the run's job, sharing 18-28 s with the summary; none of it split by the later record's parts
    assert parts["runs: stopped before a record"] == pytest.approx(20 - 5)
    assert not [k for k in parts if k.startswith("runs: ") and k != "runs: stopped before a record"]
    assert parts[walltime.SNAKEMAKE] == pytest.approx(5 + 1) and parts["summary"] == pytest.approx(5)  # 0-5, 9-10 s


def test_a_record_from_before_the_launcher_is_counted_as_the_launcher_would_run_it():
    old = run_record(20.0, launcher=None)
    old["metrics"]["overhead_s"]["imports_s"] = 7.0
    booked = sum(v for k, v in old["metrics"]["overhead_s"].items() if k != "total_s")
    unbooked = 20.0 - booked
    assert costs.run_cost(old, "cpu") == pytest.approx(20.0 - 0.2 - 7.0 - unbooked + costs.LAUNCHER_S["cpu"])
    assert costs.run_cost(run_record(20.0), "cpu") == 20.0
    assert costs.run_cost(run_record(20.0), "cuda") is None  # another device's record says nothing


def test_the_estimate_counts_every_job_of_the_plan_from_the_stored_records(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    config = grid.load_config([REPO / "config.yaml"])
    runs = grid.expand(config["grids"]["cuda"])
    compiles = grid.compiles(runs, 3)
    jobs = estimate.plan_jobs(5, ["timer_check"], pdf=True)
    e = estimate.estimate(runs, Layout(str(tmp_path / "results/cuda")), "cuda", jobs, compiles=compiles, slots=8)
    assert e["todo"] == len(runs) == e["measured"]  # the stored H200 study has every kind of run the grid has
    assert e["compiles"] == sum(c["n"] for c in compiles.values()) == 44  # 14 configurations x 3, two searches x 1
    assert set(e["other_s"]) == {r for r, n in jobs.items() if n} - {"parity"}  # parity: in the compile phase
    assert e["seconds"] == pytest.approx(e["compile_s"] + e["runs_s"] + sum(e["other_s"].values()) + e["snakemake_s"])
    known = costs.known_runs(["reference/*/runs/**/r*.json"], "cuda")
    one, _ = estimate.run_seconds(RunKey("eager", "module", 32, "static", "bf16", 1), "cuda", known)
    assert 0 < one < 10  # a warm eager repeat, without the imports it paid then
    ro = RunKey("reduce-overhead", "module", 32, "static", "bf16", 0)
    cold = costs.known_compiles(costs.plan_compiles(Layout(str(tmp_path))), "cuda")
    assert estimate.run_seconds(ro, "cuda", known)[0] < estimate.run_seconds(ro, "cuda", known)[0] + 1  # (finite)
    assert estimate.run_seconds(ro, "cuda", known)[0] < estimate.compile_seconds(ro, "cuda", cold) + 30
    message = estimate.plan_message(runs, Layout(str(tmp_path / "results/cuda")), "cuda", 1, jobs, None, compiles, 8)
    assert walltime.plan_seconds(message) == round(e["seconds"])


def test_a_run_is_priced_from_its_warm_cache_and_a_cold_compile_as_a_job_of_its_own(tmp_path):
    """A run of an older study that compiled cold is priced as its warm repeats run now: its time less its
    compile, plus a warm load; its cold compile becomes a compile phase job: fixed cost, compile, two epochs."""
    key = RunKey("default", "module", 32, "static", "bf16", 0)

    def rec(cache, total, compile_s, repeat=0, epoch2=0.5):
        r = record.new(RunConfig(*key[:1], 32, "static", "bf16", repeat, compile_scope="module",
                                 evidence=repeat == 0), {}, {"device_type": "cuda", "launcher": "warm",
                                                              "inductor_cache": cache})
        r["metrics"] = {"epoch2_s": epoch2, "overhead_s": {k: 0.0 for k in record.OVERHEAD} | {
            "total_s": total, "compile_s": compile_s, "timed_s": 3.0}}
        return r

    for name, r in {"r0.json": rec("cold", 30.0, 20.0), "r1.json": rec("warm", 8.0, 2.0, repeat=1)}.items():
        (tmp_path / name).write_text(json.dumps(r))
    known = costs.known_runs([str(tmp_path / "r*.json")], "cuda")
    assert estimate.run_seconds(key, "cuda", known) == (30.0 - 20.0 + 2.0, True)  # evidence, warm load
    assert estimate.run_seconds(key.with_repeat(1), "cuda", known) == (8.0, True)
    cold = costs.known_compiles([str(tmp_path / "r*.json")], "cuda")
    fixed = 30.0 - 20.0 - 3.0  # the run less its work
    assert estimate.compile_seconds(key, "cuda", cold) == pytest.approx(fixed + 20.0 + 2 * 0.5)
    # a search never measured is priced by the prior; one that shares another's is priced as a plain compile
    ma = key._replace(compile_mode="max-autotune", batch_size=512)
    assert estimate.compile_seconds(ma, "cuda", {}, "own") == estimate.PRIOR_COMPILE_S["cuda"]["searching"]
    assert estimate.compile_seconds(ma, "cuda", {}, "shared") == estimate.PRIOR_COMPILE_S["cuda"]["compiled"]


def test_the_compile_phase_runs_its_slots_at_once_and_its_searches_alone():
    assert estimate.phase_seconds([10.0] * 8, [], 8) == pytest.approx(10.0 * costs.AT_ONCE)
    assert estimate.phase_seconds([10.0] * 16, [200.0], 8) == pytest.approx(20.0 * costs.AT_ONCE + 200.0)
    assert estimate.phase_seconds([10.0] * 9, [], 8) == pytest.approx(20.0 * costs.AT_ONCE)  # one slot twice
    assert estimate.phase_seconds([60.0, 5.0, 5.0], [], 8) == pytest.approx(60.0 * costs.AT_ONCE)  # the longest
    assert estimate.phase_seconds([], [], 8) == 0.0
    assert estimate.phase_seconds([10.0] * 8, [], 8, factor=1.5) == pytest.approx(15.0)  # a measured factor
    assert estimate.phase_seconds([10.0, 10.0], [], 1) == pytest.approx(20.0)  # one slot: none at once


def test_the_phase_factor_comes_from_the_stored_checks_and_compiles_made_among_others_count_as_if_alone(tmp_path):
    """The compile_concurrency checks of the stored studies set how much longer a compile takes among others
    (their median); a compile record made among others is priced as if alone, so the phase does not count the
    slowdown twice; without a check, AT_ONCE."""
    assert at_once_factor(str(tmp_path), "cuda") == costs.AT_ONCE
    for name, ratio, device in [("a", 1.4, "cuda"), ("b", 1.2, "cuda"), ("c", 1.3, "cuda"), ("d", 3.0, "cpu")]:
        (tmp_path / name / "checks").mkdir(parents=True)
        (tmp_path / name / "checks" / "compile_concurrency.json").write_text(json.dumps(
            {"applicable": True, "device": device, "summary": {"ratio": ratio}}))
    assert at_once_factor(str(tmp_path), "cuda") == pytest.approx(1.3)
    assert at_once_factor(str(tmp_path), "cpu") == pytest.approx(3.0)
    key = RunKey("default", "module", 32, "static", "bf16", 0)
    for i, at_once in enumerate([8, 1]):
        r = record.new(RunConfig("default", 32, "static", "bf16", 0, compile_scope="module"), {},
                       {"device_type": "cuda"})
        r |= {"kind": compile_record.KIND, "status": "ok", "compile": {"at_once": at_once},
              "metrics": {"overhead_s": {"total_s": 26.0}}}
        (tmp_path / f"c{i}.json").write_text(json.dumps(r))
    cold = costs.known_compiles([str(tmp_path / "c*.json")], "cuda", factor=1.3)
    assert sorted(cold[(key, ("cold",))]) == pytest.approx([20.0, 26.0])  # 26 s among eight is 20 s alone; alone stays 26 s


def test_the_mlp_claim_is_estimated_per_batch_size_and_parity_per_check(tmp_path, monkeypatch):
    """The MLP claim runs every batch size in one job: twice the batch sizes take about twice as long. A parity
    check is a job of the compile phase: twice the checks add to the phase, not to the timed jobs."""
    monkeypatch.chdir(REPO)
    config = grid.load_config([REPO / "config.yaml"])
    runs = grid.expand(config["grids"]["cuda"])
    where = Layout(str(tmp_path / "results/cuda"))
    sizes = {1: [3], 2: [3, 5]}  # batch sizes no stored study's claim ran: priced per size
    one, two = (estimate.estimate(runs, where, "cuda", estimate.plan_jobs(n, [], pdf=False, mlp=sizes[n]), slots=1)
                for n in (1, 2))
    assert two["other_s"]["mlp_claim:3+5"] == pytest.approx(2 * one["other_s"]["mlp_claim:3"])
    assert two["compile_s"] == pytest.approx(2 * one["compile_s"])  # one slot, parity alone in the phase
    assert estimate.mlp_sizes(config, "cuda") == config["claims"]["mlp"]["cuda"]["batch_sizes"]


def test_progress_scales_what_is_left_by_how_the_study_compares_with_the_estimate(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no stored studies under reference/ here: the estimate is the priors'
    layout = Layout(str(tmp_path / "results/cpu"))
    keys = [RunKey("eager", "module", 8, "static", "fp32", r) for r in (0, 1)]
    runs = {k: {} for k in keys}
    path = tmp_path / layout.record(keys[0]).split(str(tmp_path) + "/")[-1]
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(run_record(2 * estimate.run_seconds(keys[0], "cpu", {})[0])))
    line = estimate.progress_message(runs, layout, "cpu", compiles={})
    left = 2 * estimate.run_seconds(keys[1], "cpu", {})[0]  # this study runs at twice the estimate
    assert line.startswith("progress: 1/2 runs recorded") and f"about {left / 60:.1f} min" in line


def test_a_call_no_session_logged_is_adopted_from_its_log_in_time_order(tmp_path):
    """The log's local time (an hour ahead) is placed by the run's record; a later logged call becomes call 2."""
    study, logs = tmp_path / "results" / "cpu", tmp_path / "logs" / "cpu"
    rec = run_record(10.0, window=[START + 10.4, START + 20.1])
    rec["env"] |= {"git_commit": "abc", "git_dirty": False, "cpu_cores": 2}
    path = study / "runs/static/fp32/eager/module/bs8/r0.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rec))
    later = {"call": 1, "start_utc": "2026-12-01T13:00:00+00:00", "wall_s": 5.0, "exit_status": 0,
             "command": ["snakemake"], "snakemake_log": "calls/1.snakemake.log"}
    (study / "calls.jsonl").write_text(json.dumps(later) + "\n")
    (logs / "calls").mkdir(parents=True)
    (logs / "calls/1.snakemake.log").write_text("the later call")
    (tmp_path / "cut.snakemake.log").write_text(LOG)
    line = calls.adopt(study, tmp_path / "cut.snakemake.log", logs, stopped_by="SIGTERM")
    first, second = walltime.read_calls(study / "calls.jsonl")
    assert first == line and (first["call"], second["call"]) == (1, 2) and second["command"] == ["snakemake"]
    assert first["start_utc"] == "2026-12-01T12:00:03+00:00" and first["wall_s"] == 25.0  # Date line to last stamp
    assert (first["exit_status"], first["command"], first["stopped_by"]) == (None, None, "SIGTERM")
    assert (first["git_commit"], first["git_dirty"], first["host_cpus"]) == ("abc", False, 2)
    assert (logs / "calls/1.snakemake.log").read_text() == LOG
    assert (logs / "calls/2.snakemake.log").read_text() == "the later call" and second["snakemake_log"] == "calls/2.snakemake.log"
    with pytest.raises(SystemExit, match="none of its runs has a record"):
        calls.adopt(tmp_path / "empty", tmp_path / "cut.snakemake.log", logs)


def test_each_calls_estimate_is_set_against_the_wall_time_from_its_start_to_the_studys_end(tmp_path):
    """A call stopped by a time limit leaves its plan to the next call: its estimate covers both."""
    from compile_study.report.docs import readme

    (tmp_path / "calls").mkdir()
    (tmp_path / "calls" / "1.snakemake.log").write_text(LOG.replace("31 s in all", "600 s in all"))
    (tmp_path / "calls" / "2.snakemake.log").write_text(LOG.replace("31 s in all", "120 s in all"))
    host = {"host_cpus": 2, "gpus": [], "command": ["snakemake", "--cores", "all"]}
    calls = [CALL | host | {"wall_s": 500.0, "exit_status": 1, "stopped_by": "SIGTERM"},
             CALL | host | {"call": 2, "snakemake_log": "calls/2.snakemake.log", "wall_s": 100.0, "exit_status": 0}]
    rows = readme._calls(calls, tmp_path)
    assert "| 10.0 min (+0% of 10.0 min) | 1 (stopped: SIGTERM) |" in rows[2]
    assert "| 2.0 min (+20% of 1.7 min) | 0 |" in rows[3]
    cut = CALL | host | {"wall_s": 95.0, "exit_status": -9, "stopped_by": "time limit", "killed_after_s": 94.6}
    assert "| -9 (stopped: time limit), its running jobs killed at 95 s |" in readme._calls([cut], tmp_path)[2]


def test_the_newest_study_sets_a_kind_and_an_older_one_adds_only_what_it_lacks_scaled(tmp_path):
    """Two studies measured eager bs32; only the older measured bs512. The newer one's bs32 runs took half the
    older one's: bs32 is the newer one's alone, and bs512 the older one's at half (its host and protocol as the
    newest study's). A study without logged calls (the one in progress) is newest of all."""
    def study(name, start, seconds):
        root = tmp_path / name
        if start:
            root.mkdir()
            (root / "calls.jsonl").write_text(json.dumps({"call": 1, "start_utc": start}) + "\n")
        for batch, total in seconds.items():
            key = RunKey("eager", "module", batch, "static", "bf16", 1)
            r = record.new(RunConfig("eager", batch, "static", "bf16", 1, compile_scope="module", evidence=False),
                           {}, {"device_type": "cuda", "launcher": "warm"})
            r["metrics"] = {"overhead_s": {k: 0.0 for k in record.OVERHEAD} | {"total_s": total, "compile_s": 0.0}}
            path = tmp_path / name / "runs" / f"bs{batch}" / "r1.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(r))
        return key

    study("old", "2026-12-01T10:00:00+00:00", {32: 8.0, 512: 12.0})
    study("new", "2026-12-02T10:00:00+00:00", {32: 4.0})
    known = costs.known_runs([str(tmp_path / "*/runs/**/r*.json")], "cuda")
    bs32, bs512 = (RunKey("eager", "module", b, "static", "bf16", 1) for b in (32, 512))
    assert estimate.run_seconds(bs32, "cuda", known)[0] == pytest.approx(4.0)
    assert estimate.run_seconds(bs512, "cuda", known)[0] == pytest.approx(6.0)
    study("now", None, {32: 2.0})  # the study in progress: newest, and the others scale to it
    known = costs.known_runs([str(tmp_path / "*/runs/**/r*.json")], "cuda")
    assert estimate.run_seconds(bs32, "cuda", known)[0] == pytest.approx(2.0)
    assert estimate.run_seconds(bs512, "cuda", known)[0] == pytest.approx(3.0)


def test_the_estimates_floor_is_what_holds_the_device_alone_and_matches_the_stored_quick_studys(monkeypatch):
    """The estimate's floor: the runs less their loads, the timed jobs and the compiles that run alone (the GEMM
    search); below the wall time; for the kick-the-tires config as its stored study ran it (its own config.yaml) within
    15% of the floor that study measured (walltime.floor of its breakdown: 129 s against 141 s estimated)."""
    monkeypatch.chdir(REPO)
    nowhere = Layout("results/no-study")
    full, _ = estimate.config_estimate(grid.load_config([REPO / "config.yaml"]), "cuda", nowhere, pdf=True)
    timed_jobs = sum(v for r, v in full["other_s"].items() if costs.timed_rule(r))
    assert timed_jobs + full["runs_s"] / 2 < full["floor_s"] < full["seconds"] - full["compile_s"] / 4
    study = REPO / "reference/h200-quick-2026-12-05"
    quick, _ = estimate.config_estimate(grid.load_config([study / "config.yaml"]), "cuda", nowhere, pdf=True)
    layout = Layout(str(study))
    _, parts = walltime.study_breakdown(walltime.read_calls(study / "calls.jsonl"), study / "logs",
                                        layout.stored_records() + layout.stored_compiles(), study)
    assert walltime.floor(parts) == pytest.approx(129.1, abs=0.1)
    assert quick["floor_s"] == pytest.approx(walltime.floor(parts), rel=0.15)
