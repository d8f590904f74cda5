"""A run's load beside the timed part of the run before it (config overlap_loads; measure/process/handover.py,
measure/process/isolation.py Host): the loads overlap timed parts, the timed parts never overlap one another, each record
says which cores its load and its timed part held; under a call's time limit no run loads that could not time
before it, and no job starts that has waited past what it could still fit; the host watch keeps the loading
neighbour apart as the study's own work; a call's seconds count each overlapped load once, and the estimate hides
all but the first."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from compile_study.aggregate.estimate import costs, estimate, walltime
from compile_study.core import record
from compile_study.core.calls import deadline
from compile_study.core.calls.clock import Clock
from compile_study.core.layout import Layout
from compile_study.core.record import RunConfig, RunKey
from compile_study.measure import jobs
from compile_study.measure.process import hostwatch, isolation
from compile_study.measure.process.hostwatch import HostWatch, Proc, Reading

from .test_resilience import tiny_study
from .test_walltime import CALL, START


@pytest.fixture
def host(monkeypatch) -> isolation.Host:
    """A Host of the test's own (the jobs take isolation.HOST)."""
    fresh = isolation.Host()
    monkeypatch.setattr(isolation, "HOST", fresh)
    return fresh


def turn(tmp_path: Path, expected_s, name: str = "r0.json"):
    """A run's turn on the CPU's one lane, its loads beside timed work (jobs.run_setup)."""
    params = {"cache_dir": str(tmp_path / "cache"), "overlap": True}
    return jobs.run_setup(str(tmp_path / f"{name}.log"), 1, "cpu", Clock(), params, expected_s, str(tmp_path / name))


@pytest.mark.unit
def test_under_a_time_limit_a_run_does_not_load_where_it_could_not_time_after_the_lanes_timed_run(
        tmp_path, host, monkeypatch):
    monkeypatch.setenv(deadline.VAR, str(time.time() + 100))
    timing, done = threading.Event(), threading.Event()

    def first():  # a run that times for about 9 s more (its estimate less its load)
        with turn(tmp_path, lambda: 10.0, "a.json") as (_, _, gate):
            gate({"load_s": 1.0})
            timing.set()
            done.wait(20)

    t = threading.Thread(target=first)
    t.start()
    assert timing.wait(20)
    # 70 s alone fits (94.5 s with the margin); after the 9 s the lane's run still takes, it does not (106 s)
    with pytest.raises(deadline.PastDeadline, match=r"b.json: not started: it takes about 79 s"):
        with turn(tmp_path, lambda: 70.0, "b.json"):
            pass
    done.set()
    t.join(20)
    with turn(tmp_path, lambda: 70.0, "c.json"):  # the lane is free: it fits
        pass


@pytest.mark.unit
def test_a_loaded_run_whose_timed_part_no_longer_fits_is_refused_at_the_handover_and_lets_the_lane_go(
        tmp_path, host, monkeypatch):
    monkeypatch.setenv(deadline.VAR, str(time.time() + 100))
    with pytest.raises(deadline.PastDeadline, match=r"r0.json \(its timed part\): not started: it takes about 60 s"):
        with turn(tmp_path, lambda: 70.0) as (_, _, gate):
            monkeypatch.setenv(deadline.VAR, str(time.time() + 30))  # its load (and a wait) took the time
            gate({"load_s": 10.0})
    with host.timed():  # the refused run holds nothing: the lane is free at once
        pass


@pytest.mark.unit
def test_a_job_that_waited_for_the_host_past_what_it_still_fits_does_not_start(tmp_path, host, monkeypatch):
    monkeypatch.setenv(deadline.VAR, str(time.time() + 2.0))
    held = threading.Event()

    def busy():
        with host.timed():
            held.set()
            time.sleep(0.8)

    t = threading.Thread(target=busy)
    t.start()
    assert held.wait(20)
    deadline.check(1.2, "the job as it starts to wait")  # it fits now (1.62 s with the margin)...
    with pytest.raises(deadline.PastDeadline, match="peak.json: not started"):  # ...but not after the wait
        with jobs.job_setup(str(tmp_path / "log"), 1, "cpu", Clock(), expected_s=lambda: 1.2, what="peak.json"):
            pass
    t.join(20)
    assert not (tmp_path / "log").exists()  # nothing launched


@pytest.mark.dag
def test_a_run_loads_on_its_own_core_beside_the_timed_part_before_it_and_the_timed_parts_never_overlap(tmp_path):
    """Two configurations (200 timed steps each, so that a timed part lasts about 2 s) on this host's two cores,
    loads let overlap timed work: the second run's load ran on the other core while the first timed, its timed
    part began once the first's had ended, and each record and its host watch say so."""
    cmd = tiny_study(tmp_path, [8, 16])
    cfg = yaml.safe_load((tmp_path / "config.yaml").read_text())
    cfg["overlap_loads"] = True
    cfg["disturbance"] = {"redos": 0}  # a neighbour's load on this shared host flags a run, never redoes it
    # a timed part of about 2 s (4 steps took 0.4 s): on a busy 2-core host (the suite's other test process
    # compiling) the next run's process can start a few hundred ms after the go, and must still start beside it
    cfg["grids"]["cpu"][0] |= {"timed_steps": 200, "interleave_chunk": 20}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    targets = [f"results/cpu/runs/static/fp32/eager/module/bs{b}/r0.json" for b in (8, 16)]
    res = subprocess.run(cmd + targets, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    recs = sorted((json.loads((tmp_path / t).read_text()) for t in targets),
                  key=lambda r: r["metrics"]["timed_part"]["start_unix"])
    cores = sorted(os.sched_getaffinity(0))
    for rec in recs:
        m = rec["status"] == "ok" and rec["metrics"]
        assert m["load_phase"]["cores"] == cores[1:] and m["timed_part"]["cores"] == cores[:1]  # one core each
        assert m["load_phase"]["beside_timed_work"] and m["timed_part"]["threads"] == 1
        assert m["load_phase"]["unix"][1] <= m["timed_part"]["start_unix"]
        assert m["overhead_s"]["gpu_wait_s"] >= m["timed_part"]["waited_s"]  # the wait, booked
        assert all(w["neighbours"]["counted_as"] == "study" for w in m["host_load"].values())
    first, second = (r["metrics"] for r in recs)
    first_end = first["job_window_unix"][1] - first["overhead_s"]["record_s"] - first["overhead_s"]["teardown_s"]
    assert first["timed_part"]["start_unix"] < second["load_phase"]["unix"][0] < first_end  # loaded beside it
    assert second["timed_part"]["start_unix"] >= first_end - 0.01  # timed only once the first's had ended
    beside = [p for w in first["host_load"].values() for p in w["neighbours"]["processes"]]
    assert beside and all(p[3] == cores[1:] for p in beside)  # the first's watch saw the loader, on the other core
    assert all(w["neighbours"]["shared_cores_cpu_s"] == 0 for w in first["host_load"].values())


# --- the host watch: the loading neighbour is the study's own work, kept apart ------------------------------------
@pytest.mark.unit
def test_the_studys_other_jobs_are_its_own_work_kept_apart_and_outside_load_only_where_it_is_not(monkeypatch):
    """The run (pid 100) forked by the launcher's server (60) beside the next run loading (110, on cores 2-3 of its
    own, with a compile worker 111) and a job allowed on the run's core 1 (120): each is listed as the study's
    neighbour; the one that could run on the run's cores is booked as the study's, not outside load; none of them
    is named among the busiest outsiders."""
    allowed = {110: [2, 3], 111: [2, 3], 120: [1]}
    monkeypatch.setattr(hostwatch, "_allowed", allowed.get)
    watch = HostWatch(pid=100, cores=[0, 1], jobs_parent=60)
    procs = {50: Proc("snakemake", 1, 10.0, 1.0), 60: Proc("forkserver", 50, 3.0, 2.0), 100: Proc("python", 60, 7.0, 3.0),
             110: Proc("python", 60, 1.0, 4.0), 111: Proc("compile_worker", 110, 0.0, 5.0), 120: Proc("python", 60, 0.0, 6.0),
             200: Proc("other", 1, 40.0, 1.0)}
    start = Reading(0.0, 1000.0, {0: (10.0, 0.0), 1: (20.0, 0.0)}, procs, 0.0, None)
    later = procs | {100: Proc("python", 60, 8.0, 3.0), 110: Proc("python", 60, 2.5, 4.0),
                     111: Proc("compile_worker", 110, 0.5, 5.0), 120: Proc("python", 60, 0.3, 6.0),
                     200: Proc("other", 1, 40.2, 1.0)}
    end = Reading(2.0, 1002.0, {0: (11.0, 0.0), 1: (21.5, 0.0)}, later, 0.0, None)
    got = watch.account(start, end)
    near = got["neighbours"]
    assert near["counted_as"] == hostwatch.NEIGHBOURS_COUNTED_AS == "study"
    assert near["processes"] == [[110, "python", 1.5, [2, 3]], [111, "compile_worker", 0.5, [2, 3]],
                                 [120, "python", 0.3, [1]]]
    assert near["shared_cores_cpu_s"] == pytest.approx(0.3)  # only the one allowed on the run's cores
    assert got["outside_cpu_s"] == pytest.approx(2.5 - 1.0 - 0.3)  # busy less own less the shared neighbour
    assert got["busiest"] == [[200, "other", 0.2]]
    assert HostWatch(pid=100, cores=[0, 1], jobs_parent=None).account(start, end)["neighbours"]["processes"] == []


@pytest.mark.unit
def test_a_neighbours_share_of_the_gpu_is_kept_apart_from_other_processes():
    """The next run's warm-up steps on the same GPU: its SM share is the study's (`neighbour_sm_util`), never the
    `other_sm_util` that core/disturbance.py judges; a process outside the study still counts there."""
    own = 100
    nvml = SimpleNamespace(sm_util_by_pid=lambda since: {own: 90, 110: 55, 888: 3})
    ends = {"sm_clock_mhz": 1980, "memory_clock_mhz": 2619, "temperature_c": 40, "clocks_event_reasons": 0,
            "energy_j": None, "power_w": 300.0, "utilization": 99, "processes": {own: 1, 110: 2, 888: 3}}
    gpu = hostwatch.gpu_window(nvml, ends, ends, 0.0, 1.0, own, frozenset({110}))
    assert gpu["neighbour_sm_util"] == 55 and gpu["other_sm_util"] == 3
    assert gpu["other_processes"] == [{"pid": 888, "memory_bytes": 3}]
    alone = hostwatch.gpu_window(nvml, ends, ends, 0.0, 1.0, own)
    assert alone["other_sm_util"] == 55 and alone["neighbour_sm_util"] is None


# --- where the seconds of a call with overlapped loads went, and the estimate --------------------------------------
# Two runs of one lane whose loads may overlap timed work: r0's job 10-30 s (loads 10-12, times 12-30); r1's job
# 14-40 s (loads 14-18 beside r0's timed part, waits 18-30, times 30-40). The call ends at 42 s.
OVERLAPPED_LOG = """SNAKEMAKE
  Date: 2026-12-01 13:00:03
[Tue Dec  1 13:00:10 2026]
localrule train_run:
    output: results/cuda/runs/static/bf16/eager/module/bs8/r0.json, results/cuda/runs/static/bf16/eager/module/bs8/r0.trace.json.gz
    jobid: 1
[Tue Dec  1 13:00:14 2026]
localrule train_run:
    output: results/cuda/runs/static/bf16/eager/module/bs8/r1.json, results/cuda/runs/static/bf16/eager/module/bs8/r1.trace.json.gz
    jobid: 2
[Tue Dec  1 13:00:30 2026]
Finished jobid: 1 (Rule: train_run)
[Tue Dec  1 13:00:40 2026]
Finished jobid: 2 (Rule: train_run)
"""


def overlapped_run(repeat: int, window: tuple[float, float], load_end: float, timed_start: float) -> dict:
    """A run whose load ran beside timed work: its load's parts (process, data, compile), its wait, its timed part."""
    rec = record.new(RunConfig("eager", 8, "static", "bf16", repeat), {}, {"device_type": "cuda", "launcher": "warm"})
    start, end = START + window[0], START + window[1]
    load = {"process_start_s": 0.5, "data_load_s": 0.5, "compile_s": load_end - window[0] - 1.0}
    waited = timed_start - load_end
    timed = {"timed_s": (window[1] - timed_start) - 1.0, "record_s": 1.0}
    overhead = {k: 0.0 for k in record.OVERHEAD} | load | timed | {"gpu_wait_s": waited, "total_s": end - start}
    rec["metrics"] = {"overhead_s": overhead, "job_window_unix": [start, end],
                      "load_phase": {"cores": [8, 9], "unix": [start, START + load_end], "parts": load,
                                     "beside_timed_work": True},
                      "timed_part": {"cores": [0, 1], "threads": 2, "start_unix": START + timed_start,
                                     "waited_s": waited, "lane": 0}}
    return rec


@pytest.mark.unit
def test_a_load_beside_another_runs_timed_part_is_counted_once_and_shown_apart():
    runs = {"runs/static/bf16/eager/module/bs8/r0.json": overlapped_run(0, (10, 30), 12, 12),
            "runs/static/bf16/eager/module/bs8/r1.json": overlapped_run(1, (14, 40), 18, 30)}
    call = CALL | {"wall_s": 42.0}
    parts = walltime.breakdown(call, OVERLAPPED_LOG, runs)
    counted = {k: v for k, v in parts.items() if k != walltime.OVERLAPPED}
    assert sum(counted.values()) == pytest.approx(42.0)  # every second once
    assert parts[walltime.OVERLAPPED] == pytest.approx(30 - 14)  # r1's load and wait, beside r0's timed part
    assert sum(v for k, v in counted.items() if k.startswith("runs: ")) == pytest.approx(20 + 10)  # 10-30, 30-40
    assert sum(v for k, v in counted.items() if k.startswith("runs: load: ")) == pytest.approx(2)  # r0's, alone
    assert parts["runs: load: compile"] == pytest.approx(1.0) and counted["runs: gpu wait"] == pytest.approx(0)
    assert parts["runs: timed"] == pytest.approx(17 + 9)  # each timed part's own parts, nothing of the loads
    assert walltime.floor(parts) == pytest.approx(26)  # a load beside timed work needs no device of its own
    rows = walltime.table(parts, 42.0)
    assert f"| {walltime.OVERLAPPED} | 16.0 | 38.1% |" in rows
    assert "| sum of the parts (the calls' wall time: 42.0 s) | 42.0 | 100.0% |" in rows


@pytest.mark.unit
def test_overlapped_loads_add_to_the_runs_wall_time_only_where_no_timed_part_hides_them(tmp_path):
    three = [(10.0, 3.0)] * 3
    assert estimate.runs_wall(three, overlap=False) == pytest.approx(30)
    assert estimate.runs_wall(three, overlap=True) == pytest.approx(3 + 7 + 7 + 7)  # the first load, then timed parts
    assert estimate.runs_wall([(5.0, 4.0), (10.0, 8.0)], True) == pytest.approx(4 + 8 + 2)  # 8 s load > 1 s timed
    assert estimate.runs_wall(three + [(10.0, 3.0)], True, lanes=2) == pytest.approx(3 + 7 + 7)  # two lanes at once
    # the estimate of two such runs, from their records: the second's load is hidden, its wait is nobody's cost
    layout = Layout(str(tmp_path / "results/cuda"))
    recs = [overlapped_run(0, (10, 30), 12, 12), overlapped_run(1, (14, 40), 18, 30)]
    for rec in recs:
        path = tmp_path / "reference/s/runs/static/bf16/eager/module/bs8" / f"r{rec['config']['repeat']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec))
    assert costs.run_cost(recs[1], "cuda") == pytest.approx(26 - 12)  # less its wait for the host
    assert costs.load_cost(recs[1], "cuda") == pytest.approx(1.0)  # process and data; its compile is the warm load
    keys = [RunKey("eager", "module", 8, "static", "bf16", r) for r in (0, 1)]
    runs = {k: {} for k in keys}
    apart = estimate.estimate(runs, layout, "cuda", {}, references=str(tmp_path / "reference"))
    beside = estimate.estimate(runs, layout, "cuda", {}, references=str(tmp_path / "reference"), overlap=True)
    loads = [estimate.load_seconds(k, "cuda", costs.known_runs([str(tmp_path / "reference/*/runs/**/r*.json")],
                                                               "cuda")) for k in keys]
    assert apart["hidden_s"] == 0 and loads[1] > 0 and beside["hidden_s"] == pytest.approx(loads[1])  # all but the first
    assert apart["seconds"] - beside["seconds"] == pytest.approx(loads[1])
