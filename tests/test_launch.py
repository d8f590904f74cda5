"""The warm launcher: a fresh process per job, its set-up applied, its time booked, crashes and interrupts told apart,
no orphan left behind. Each test drives the launcher from a Python process of its own (the forkserver is one per
process), with a light preload so that no torch import slows the fast tier."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import REPO, alive

pytestmark = pytest.mark.compile  # every test starts job processes (the compile tier's child processes)

PRELUDE = """
import functools, json, os, sys
from compile_study.core.calls.clock import Clock
from compile_study.measure.process import launch
launch._State.preload = ("compile_study.measure.process.launch", "tests.launch_targets")
def go(target, way="warm", **kwargs):
    setup = launch.Setup(log=sys.argv[1], threads=1, env={"STUDY_TEST_VALUE": "set"}, cores=[min(os.sched_getaffinity(0))])
    return launch.run(target_of(target), kwargs, setup, Clock(), way)
def target_of(name):
    from tests import launch_targets
    return functools.partial(launch_targets.named, name)
"""


def drive(body: str, tmp_path: Path, timeout: float = 120) -> dict:
    """Run PRELUDE + body (which prints one JSON line last) in a fresh interpreter -> that JSON."""
    res = subprocess.run([sys.executable, "-c", PRELUDE + body, str(tmp_path / "job.log")], cwd=REPO,
                         capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_each_way_makes_a_fresh_process_with_the_job_set_up_and_every_second_booked(tmp_path):
    got = drive("""
out = {}
for way in ("warm", "fresh", "warm"):
    o = go("facts", way, word=way)
    out.setdefault(way, []).append({"value": o.value, "parts": dict(o.clock.parts), "elapsed": o.clock.elapsed(),
                                    "way": o.way, "crash": o.crash})
print(json.dumps(out | {"me": os.getpid(), "core": min(os.sched_getaffinity(0))}))
""", tmp_path)
    first, second = got["warm"]
    fresh = got["fresh"][0]
    for run in (first, second, fresh):
        v, parts = run["value"], run["parts"]
        assert run["crash"] is None and v["env"] == "set" and v["cores"] == [got["core"]]
        assert v["pid"] != got["me"] and parts["timed_s"] >= 0.05
        assert {"process_start_s", "imports_s", "teardown_s"} <= set(parts)
        assert sum(parts.values()) == pytest.approx(run["elapsed"], rel=0.05)  # every second booked
    assert first["value"]["pid"] != second["value"]["pid"]  # a process per job
    assert first["value"]["ppid"] == second["value"]["ppid"] != got["me"]  # forked by the server
    assert fresh["value"]["ppid"] == got["me"]  # started by the job itself
    assert second["parts"]["process_start_s"] < 1.0  # the server is up: a fork, no interpreter
    assert "child says warm" in (tmp_path / "job.log").read_text()  # the child's output goes to the job's log


def test_a_job_that_draws_a_progress_bar_leaves_no_semaphore_behind(tmp_path):
    """tqdm's default lock is a named semaphore; a child ends with os._exit, so the resource tracker used to warn
    of one per compiling job when the study ended."""
    body = 'print(json.dumps([go("progress_bar", way).value for way in ("warm", "fresh")]))'
    res = subprocess.run([sys.executable, "-c", PRELUDE + body, str(tmp_path / "job.log")], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == ["RLock", "RLock"]  # a thread lock in each way
    assert "leaked semaphore" not in res.stderr + (tmp_path / "job.log").read_text()


def test_two_jobs_at_once_each_get_their_own_process(tmp_path):
    got = drive("""
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(2) as pool:  # as Snakemake runs two timed jobs on two GPUs
    values = list(pool.map(lambda w: go("facts", word=w).value, ["a", "b"]))
print(json.dumps(values))
""", tmp_path)
    assert [v["word"] for v in got] == ["a", "b"] and got[0]["pid"] != got[1]["pid"]


def test_a_parity_check_runs_in_its_own_process_on_its_cache_and_a_failing_one_fails_its_job(tmp_path):
    """Rule parity's job (jobs.parity_job): the check's process on the check's Inductor cache; its output written
    from the answer; a check that raises fails the job and writes nothing."""
    got = drive(f"""
from compile_study.measure import jobs
check = {{"kwargs": {{"name": "a", "seconds": 0.1}}, "cache_dir": "{tmp_path}/cache-a"}}
jobs.parity_job(target_of("window"), check, "{tmp_path}/a.json", "{tmp_path}/a.log", 1, "cpu")
try:
    jobs.parity_job(target_of("window"), {{**check, "kwargs": {{}}}}, "{tmp_path}/e.json", "{tmp_path}/e.log", 1, "cpu")
    failed = None
except launch.ChildError as exc:
    failed = str(exc)
print(json.dumps({{"failed": failed, "pid": os.getpid()}}))
""", tmp_path)
    out = json.loads((tmp_path / "a.json").read_text())
    assert out["pid"] != got["pid"] and Path(out["cache"]).name == "cache-a"
    assert not (tmp_path / "e.json").exists()
    assert "window() missing 2 required positional arguments" in got["failed"]


def test_a_job_hands_its_process_over_from_its_load_cores_to_its_timed_cores_in_either_way(tmp_path):
    """The handover (measure/process/handover.py): the process loads on the cores it started on, says it is ready and
    waits; the job's gate (which would wait for the host) names the timed cores; the process moves there. The
    wait is booked `gpu_wait_s`, the record keeps both sets of cores and the times. A gate that refuses (the call's
    time limit) ends the process; a process that dies while loading is a crash and its gate is never asked."""
    got = drive(f"""
cores = sorted(os.sched_getaffinity(0))
asked = []
def gate(said):
    asked.append(said)
    import time; time.sleep(0.2)  # the host is busy a while
    return {{"cores": cores[:1], "threads": 1, "overlap": True, "lane": 0}}
def setup():
    return launch.Setup(log=sys.argv[1], threads=1, cores=cores[-1:])
out = {{"cores": cores}}
for way in ("warm", "fresh"):
    o = launch.run(target_of("loads"), {{}}, setup(), Clock(), way, gate)
    out[way] = {{"value": o.value, "parts": dict(o.clock.parts), "elapsed": o.clock.elapsed()}}
def refuse(said):
    raise RuntimeError("not started: past the time limit")
try:
    launch.run(target_of("loads"), {{"pid_file": {str(tmp_path / "refused.pid")!r}}}, setup(), Clock(), "warm", refuse)
except RuntimeError as exc:
    out["refused"] = str(exc)
n = len(asked)
out["crash"] = launch.run(target_of("dies_loading"), {{}}, setup(), Clock(), "warm", gate).crash
out["asked_after_crash"] = len(asked) - n
print(json.dumps(out))
""", tmp_path)
    cores = got["cores"]
    for way in ("warm", "fresh"):
        v, parts = got[way]["value"], got[way]["parts"]
        assert v["load_cores"] == cores[-1:] and v["timed_cores"] == cores[:1]
        load, timed = v["handed"]["load_phase"], v["handed"]["timed_part"]
        assert load["cores"] == cores[-1:] and timed["cores"] == cores[:1] and timed["threads"] == 1
        assert load["unix"][0] < load["unix"][1] <= timed["start_unix"]
        assert timed["waited_s"] >= 0.2 and parts["gpu_wait_s"] >= 0.2  # the gate's wait, booked
        assert load["parts"]["process_start_s"] > 0 and "timed_s" not in load["parts"]  # booked up to the ready
        assert sum(parts.values()) == pytest.approx(got[way]["elapsed"], rel=0.05)  # every second booked
    assert got["refused"] == "not started: past the time limit"
    refused = int((tmp_path / "refused.pid").read_text())
    assert not alive(refused)  # ended with the refusal: nothing left running
    assert "SIGABRT" in got["crash"] and got["asked_after_crash"] == 0


def test_a_child_puts_its_temporary_files_where_its_setup_says_even_if_the_server_asked_first(tmp_path):
    """Inductor keeps its C++ precompiled header in the temporary directory: a job's TMPDIR (its cache's,
    isolation.prepare_cache) must hold in its process, in either way, though the server resolved its own first."""
    temp = tmp_path / "cache" / "tmp"
    temp.mkdir(parents=True)
    body = f"""
setup = launch.Setup(log=sys.argv[1], threads=1, env={{"TMPDIR": {str(temp)!r}}}, cores=None)
got = {{way: launch.run(target_of("temp_dir"), {{}}, setup, Clock(), way).value for way in launch.WAYS}}
print(json.dumps(got))
"""
    assert drive(body, tmp_path) == {"warm": str(temp), "fresh": str(temp)}


def test_a_crash_comes_back_as_an_outcome_and_an_interrupt_as_an_exception(tmp_path):
    got = drive("""
crash = go("crash")
try:
    go("interrupted"); interrupted = None
except launch.Interrupted as exc:
    interrupted = str(exc)
try:
    go("fails"); failed = None
except launch.ChildError as exc:
    failed = str(exc)
print(json.dumps({"answered": crash.answered, "crash": crash.crash, "interrupted": interrupted, "failed": failed}))
""", tmp_path)
    assert not got["answered"] and "SIGABRT" in got["crash"]
    assert "SIGINT" in got["interrupted"] and "nothing recorded" in got["interrupted"]
    assert "ValueError: a bad value, raised in the child" in got["failed"]


def test_a_child_on_a_full_disk_logs_one_line_and_no_traceback(tmp_path):
    got = drive("""
try:
    go("disk_full", "fresh"); failed = None
except launch.ChildError as exc:
    failed = str(exc)
print(json.dumps({"failed": failed}))
""", tmp_path)
    log = (tmp_path / "job.log").read_text()
    assert "No space left on device" in got["failed"] and "Traceback" not in log
    assert log.splitlines()[0].startswith("error: no space left on device writing /study/runs/r0.json (")


def test_a_time_limit_that_stops_the_server_and_its_child_is_an_interrupt_and_the_next_job_runs(tmp_path):
    """`timeout` signals Snakemake's whole process group: the forkserver dies with the job's child, which then
    has no exit status to report (255); that is an interrupt (nothing recorded), not a crash of the run."""
    got = drive(f"""
import threading, signal as sig
from multiprocessing import forkserver
pid_file = {str(tmp_path / "child.pid")!r}
box = {{}}
def job():
    try:
        box["outcome"] = go("sleeps", pid_file=pid_file)
    except launch.Interrupted as exc:
        box["interrupted"] = str(exc)
t = threading.Thread(target=job); t.start()
import time
while not (os.path.exists(pid_file) and open(pid_file).read()):
    time.sleep(0.05)
os.kill(forkserver._forkserver._forkserver_pid, sig.SIGTERM)
t.join(60)
after = go("facts", word="after")  # the next job gets a new server
print(json.dumps({{"interrupted": box.get("interrupted"), "outcome": repr(box.get("outcome")),
                  "after": after.value["word"]}}))
""", tmp_path)
    assert got["interrupted"] and "stopped by SIGTERM" in got["interrupted"] and "nothing recorded" in got["interrupted"]
    assert got["outcome"] == "None" and got["after"] == "after"


def test_a_child_writes_the_bytecode_of_what_it_imports_first_where_the_study_keeps_bytecode(tmp_path):
    """Snakemake's process may run with -B (PYTHONDONTWRITEBYTECODE), which multiprocessing passes to the server
    and so to every child: where core/calls/bytecode.py keeps bytecode (PYTHONPYCACHEPREFIX), a child writes it anyway,
    so that a module no process imported before (a plugged model's) is compiled from source once, not per run."""
    (tmp_path / "first_import_here.py").write_text("VALUE = 1\n")
    prefix = tmp_path / "pycache"
    env = os.environ | {"PYTHONPYCACHEPREFIX": str(prefix), "PYTHONDONTWRITEBYTECODE": "1",
                        "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)])}
    body = 'print(json.dumps({"pyc": go("imports", name="first_import_here").value, "flag": sys.flags.dont_write_bytecode}))'
    res = subprocess.run([sys.executable, "-c", PRELUDE + body, str(tmp_path / "job.log")], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["flag"] == 1 and got["pyc"].startswith(str(prefix)) and Path(got["pyc"]).is_file()


def test_a_child_that_finds_cuda_broken_by_the_fork_is_run_again_by_a_safer_server(tmp_path):
    got = drive("""
launch._State.preload = ("compile_study.measure.process.launch", "tests.launch_targets", "tests.launch_bad_fork")
launch.SAFE_PRELOAD = ("compile_study.measure.process.launch", "tests.launch_targets")
o = go("facts", word="again")
print(json.dumps({"value": o.value, "preload": launch._State.preload, "way": launch._State.way}))
""", tmp_path)
    assert got["value"]["word"] == "again" and got["way"] == "warm"
    assert "tests.launch_bad_fork" not in got["preload"]


def test_no_child_outlives_the_process_that_launched_it(tmp_path):
    pid_file = tmp_path / "child.pid"
    body = f"go('sleeps', pid_file={str(pid_file)!r})"
    driver = subprocess.Popen([sys.executable, "-c", PRELUDE + body, str(tmp_path / "job.log")], cwd=REPO)
    deadline = time.time() + 120
    while not (pid_file.is_file() and pid_file.read_text()) and time.time() < deadline:
        time.sleep(0.1)
    child = int(pid_file.read_text())
    os.kill(driver.pid, signal.SIGKILL)  # like Snakemake killed: the server exits, its child dies with it
    driver.wait()
    deadline = time.time() + 20
    while alive(child) and time.time() < deadline:
        time.sleep(0.1)
    assert not alive(child)
