"""What else ran on the host during a timed block (measure/process/hostwatch.py): the /proc accounting on known busy processes,
the readings kept out of the timed part, NVML absent, and the GPU's readings (a stand-in NVML here, the real one in
the gpu tier)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from compile_study.core import record
from compile_study.core.calls.clock import Clock
from compile_study.measure.process import hostwatch
from compile_study.measure.process.hostwatch import TICK_S, HostWatch, Proc, Reading, gpu_uuid

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"  # busy for 30 s at most


# --- the accounting, on readings made by hand ------------------------------------------------------------------------
@pytest.mark.unit
def test_own_study_and_outside_time_from_two_readings():
    """The run (pid 100) with a compile worker, under a launcher and Snakemake; a neighbour, a process started
    during the window, and a pid whose process ended and was reused by one started during the window."""
    watch = HostWatch(pid=100, cores=[0, 1])
    procs = {1: Proc("init", 0, 5.0, 0.0), 50: Proc("snakemake", 1, 10.0, 1.0), 60: Proc("forkserver", 50, 3.0, 2.0),
             100: Proc("python", 60, 7.0, 3.0), 101: Proc("compile_worker", 100, 2.0, 4.0),
             200: Proc("neighbour", 1, 40.0, 1.0), 300: Proc("old", 1, 9.0, 5.0)}
    start = Reading(0.0, 1000.0, {0: (10.0, 0.0), 1: (20.0, 0.5)}, procs, 0.2, 2000.0)
    later = dict(procs) | {50: Proc("snakemake", 1, 10.05, 1.0), 100: Proc("python", 60, 8.0, 3.0),
                           101: Proc("compile_worker", 100, 2.3, 4.0), 200: Proc("neighbour", 1, 41.2, 1.0),
                           300: Proc("reused", 1, 0.4, 1001.0),  # the pid of a process that ended meanwhile
                           400: Proc("new", 1, 0.2, 999.5)}  # started inside the window (its start time rounded)
    end = Reading(2.0, 1002.0, {0: (11.5, 0.0), 1: (21.5, 0.6)}, later, 0.3, 1900.0)
    got = watch.account(start, end)
    assert got["busy_cpu_s"] == pytest.approx(3.0) and got["steal_cpu_s"] == pytest.approx(0.1)
    assert got["own_cpu_s"] == pytest.approx(1.0 + 0.3 + 0.1)  # itself, its worker, its children reaped meanwhile
    assert got["study_cpu_s"] == pytest.approx(0.05)  # Snakemake's idle loop; the launcher spent nothing
    assert got["outside_cpu_s"] == pytest.approx(3.0 - 1.4 - 0.05)
    assert got["resolution_cpu_s"] == pytest.approx(2 * 2 * TICK_S)
    assert got["outside_cores"] == pytest.approx((1.55 - 4 * TICK_S) / 2.0)
    assert got["busiest"] == [[200, "neighbour", 1.2], [300, "reused", 0.4], [400, "new", 0.2]]
    assert got["cpu_mhz"] == [2000.0, 1900.0] and got["wall_s"] == 2.0 and "gpu" not in got
    assert got["unix"] == [1000.0, 1002.0]  # when the window ran


@pytest.mark.unit
def test_a_window_shorter_than_the_counters_resolution_shows_no_load():
    watch = HostWatch(pid=100, cores=[0, 1])
    procs = {100: Proc("python", 1, 1.0, 0.0)}
    start = Reading(0.0, 0.0, {0: (10.0, 0.0), 1: (10.0, 0.0)}, procs, 0.0, None)
    end = Reading(0.02, 0.02, {0: (10.01, 0.0), 1: (10.02, 0.0)}, procs, 0.0, None)  # 3 ticks in 20 ms
    assert watch.account(start, end)["outside_cores"] == 0.0


# --- the accounting, on real processes -------------------------------------------------------------------------------
def _outsider() -> psutil.Process:
    """A busy process that is neither a descendant nor an ancestor of this one: its parent exits at once."""
    code = ("import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', sys.argv[1]], start_new_session=True,"
            " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")
    pid = int(subprocess.run([sys.executable, "-c", code, SPIN], capture_output=True, text=True, check=True).stdout)
    return psutil.Process(pid)


def _busy(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def _started(proc: psutil.Process) -> None:
    deadline = time.time() + 20
    while _busy(proc) < 0.05 and time.time() < deadline:  # its interpreter is up and spinning
        time.sleep(0.05)


@pytest.mark.compile  # a busy child process beside it
def test_a_busy_process_outside_the_study_is_outside_load_and_named():
    neighbour = _outsider()
    try:
        _started(neighbour)
        assert neighbour.pid not in {c.pid for c in psutil.Process().children(recursive=True)}
        watch = HostWatch(named=1000)
        before = _busy(neighbour)
        with watch.window("block"):
            time.sleep(1.0)
        spent = _busy(neighbour) - before  # bounds what the window may attribute to it
    finally:
        neighbour.kill()
    got = watch.windows["block"]
    named = {pid: cpu for pid, _, cpu in got["busiest"]}
    assert spent > 0.1, "the neighbour should have run during the window"
    assert spent - 0.3 <= named[neighbour.pid] <= spent + 2 * TICK_S
    # all of it ran on the window's cores (this host's, all of them): counted as outside, less the counters' ticks
    assert got["outside_cpu_s"] + got["resolution_cpu_s"] + 0.05 >= named[neighbour.pid]
    assert got["own_cpu_s"] < 0.5  # this process slept


@pytest.mark.compile  # a busy child process beside it
def test_a_busy_child_of_the_run_is_its_own_work_not_outside_load():
    child = psutil.Process(subprocess.Popen([sys.executable, "-c", SPIN]).pid)  # e.g. a compile worker
    try:
        _started(child)
        watch = HostWatch(named=1000)
        before = _busy(child)
        with watch.window("block"):
            time.sleep(1.0)
        spent = _busy(child) - before
    finally:
        child.kill()
        child.wait()
    got = watch.windows["block"]
    assert child.pid not in {pid for pid, _, _ in got["busiest"]}
    assert got["own_cpu_s"] >= spent - 0.3 and spent > 0.1


@pytest.mark.unit
def test_the_host_is_read_at_the_windows_ends_only_and_booked_apart_from_the_timed_part(monkeypatch):
    reads = []
    real = HostWatch.read
    monkeypatch.setattr(HostWatch, "read", lambda self: reads.append(time.perf_counter()) or real(self))
    watch, clock = HostWatch(), Clock()
    with watch.window("block", clock), clock.part("timed_s"):
        t0 = time.perf_counter()
        time.sleep(0.3)
        t1 = time.perf_counter()
    assert len(reads) == 2 and reads[0] < t0 and reads[1] > t1  # before the block began, after it ended
    assert clock.parts["watch_s"] > 0 and clock.parts["timed_s"] < (t1 - t0) + 0.01  # the block alone
    assert watch.windows["block"]["wall_s"] >= 0.3


# --- without NVML -------------------------------------------------------------------------------------------------------
@pytest.mark.unit
def test_a_cpu_run_reads_no_gpu():
    assert gpu_uuid(SimpleNamespace(type="cpu")) is None
    watch = HostWatch(gpu_uuid(SimpleNamespace(type="cpu")))
    with watch.window("block"):
        pass
    assert "gpu" not in watch.windows["block"] and watch.windows["block"]["cpu_mhz"][0] is not None


@pytest.mark.unit
def test_nvml_absent_or_without_its_library_is_said_not_raised(monkeypatch):
    import pynvml

    def no_library():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", no_library)  # a CPU host: no libnvidia-ml
    watch = HostWatch("GPU-00000000-0000-0000-0000-000000000000")
    with watch.window("block"):
        pass
    assert watch.windows["block"]["gpu"] == {"unavailable": "NVML not read: NVML Shared Library Not Found"}
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    watch = HostWatch("GPU-00000000-0000-0000-0000-000000000000")
    with watch.window("block"):
        pass
    assert watch.windows["block"]["gpu"] == {"unavailable": "NVML not read: nvidia-ml-py is not installed"}


@pytest.mark.unit
def test_the_nvml_calls_exist_in_the_pinned_nvidia_ml_py():
    import pynvml

    for name in ("nvmlInit", "nvmlDeviceGetHandleByUUID", "nvmlDeviceGetClockInfo", "nvmlDeviceGetTemperature",
                 "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetUtilizationRates",
                 "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetProcessUtilization",
                 "nvmlDeviceGetCurrentClocksEventReasons", "NVML_CLOCK_SM", "NVML_CLOCK_MEM", "NVML_TEMPERATURE_GPU",
                 "NVML_ERROR_NOT_FOUND"):
        assert hasattr(pynvml, name), name
    assert not any(name.startswith("nvmlDeviceSet") for name in _called(hostwatch))  # read-only


def _called(module) -> set[str]:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(module))
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("nvml")}


# --- the GPU's readings, through a stand-in NVML -------------------------------------------------------------------------
class FakeNvml(SimpleNamespace):
    """The part of nvidia-ml-py that hostwatch calls, answering from `state` (the test changes it mid-window)."""

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__(value)
            self.value = value

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_FOUND = 3, 6

    def __init__(self, state: dict):
        super().__init__(state=state, since=[])

    def _value(self, key):
        value = self.state[key]
        if isinstance(value, int) and value < 0:  # a negative code: this call fails with it
            raise self.NVMLError(-value)
        return value

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return uuid

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return self._value("sm" if kind == self.NVML_CLOCK_SM else "mem")

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return self._value("temp")

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._value("power_mw")

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return self._value("energy_mj")

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self._value("reasons")

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=self._value("util"), memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._value("procs").items()]

    def nvmlDeviceGetProcessUtilization(self, handle, since):
        self.since.append(since)
        return [SimpleNamespace(pid=p, smUtil=u) for p, u in self._value("samples")]


def _gpu_window(monkeypatch, change: dict, **start) -> tuple[dict, FakeNvml, float]:
    own = os.getpid()
    state = {"sm": 1980, "mem": 2619, "temp": 41, "power_mw": 300_000, "energy_mj": 1_000_000, "reasons": 0, "util": 0,
             "procs": {own: 2**30}, "samples": [(own, 90), (777, 30), (777, 55)]} | start
    fake = FakeNvml(state)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    watch = HostWatch("GPU-fake")
    with watch.window("block"):
        state |= change
    return watch.windows["block"], fake, own


@pytest.mark.unit
def test_the_gpu_window_holds_both_ends_mean_power_and_the_other_processes(monkeypatch):
    own = os.getpid()
    got, fake, _ = _gpu_window(monkeypatch, {"sm": 1755, "temp": 47, "energy_mj": 1_350_000, "reasons": 4,
                                             "util": 97, "procs": {own: 2**30, 777: 2**31}})
    gpu = got["gpu"]
    assert gpu["sm_clock_mhz"] == [1980, 1755] and gpu["memory_clock_mhz"] == [2619, 2619]
    assert gpu["temperature_c"] == [41, 47] and gpu["clocks_event_reasons"] == [0, 4] and gpu["utilization"] == 97
    assert gpu["power_w"] == pytest.approx(350.0 / got["wall_s"]) and gpu["power_from"] == "energy counter"
    assert gpu["own_pid_visible"] and gpu["other_processes"] == [{"pid": 777, "memory_bytes": 2**31}]
    assert gpu["other_sm_util"] == 55  # the other process's largest sample; this one's own 90 is not counted
    assert len(fake.since) == 1 and fake.since[0] <= time.time() * 1e6  # samples since the window's start
    row = record.disturbance_columns({"metrics": {"host_load": {"block": got}}, "disturbed": None, "earlier_attempts": []})
    assert row["host_gpu_sm_clock_mhz"] == (1980 + 1755) / 2 and row["host_gpu_other_sm_util"] == 55


@pytest.mark.unit
def test_what_the_gpu_does_not_report_is_none_and_power_falls_back_to_two_readings(monkeypatch):
    unsupported = -FakeNvml.NVML_ERROR_NOT_SUPPORTED
    got, _, _ = _gpu_window(monkeypatch, {"power_mw": 340_000}, energy_mj=unsupported, reasons=unsupported)
    gpu = got["gpu"]
    assert gpu["power_w"] == pytest.approx(320.0) and gpu["power_from"] == "two readings"
    assert gpu["clocks_event_reasons"] == [None, None]
    got, _, _ = _gpu_window(monkeypatch, {}, samples=-FakeNvml.NVML_ERROR_NOT_FOUND)  # no samples since the start
    assert got["gpu"]["other_sm_util"] == 0
    got, _, _ = _gpu_window(monkeypatch, {}, samples=unsupported)
    assert got["gpu"]["other_sm_util"] is None  # not measured: core/disturbance.py does not judge it


@pytest.mark.unit
def test_a_reading_that_fails_is_said_in_the_window_and_never_fails_the_run(monkeypatch):
    got, fake, _ = _gpu_window(monkeypatch, {"procs": "not a mapping"})  # the end's reading raises AttributeError
    assert got["gpu"] == {"unavailable": "NVML reading failed: AttributeError: 'str' object has no attribute 'items'"}
    assert got["outside_cpu_s"] >= 0  # the CPU's side is read all the same

    class Mismatch(Exception):  # nvidia-ml-py's NVMLLibraryMismatchError is no NVMLError
        pass

    def mismatch(handle):
        raise Mismatch("Unversioned function called and the pyNVML version does not match the NVML lib version")

    fake.NVMLLibraryMismatchError = Mismatch
    fake.nvmlDeviceGetComputeRunningProcesses = mismatch
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    watch = HostWatch("GPU-fake")
    with watch.window("block"):
        pass
    assert watch.windows["block"]["gpu"]["other_processes"] is None  # not read: this driver lacks the call


@pytest.mark.unit
def test_in_another_pid_namespace_other_processes_are_not_told_apart(monkeypatch):
    got, _, _ = _gpu_window(monkeypatch, {}, procs={123456: 2**30, 777: 2**31})  # the host's pids, not ours
    gpu = got["gpu"]
    assert gpu["own_pid_visible"] is False and gpu["other_processes"] is None and gpu["other_sm_util"] is None


# --- the real NVML, on a GPU -------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_a_gpu_window_reads_clocks_temperature_power_and_tells_this_process_apart():
    import torch

    device = torch.device("cuda")
    x = torch.randn(4096, 4096, device=device)
    torch.cuda.synchronize()
    watch = HostWatch(gpu_uuid(device))
    assert watch.nvml.problem is None, watch.nvml.problem
    with watch.window("block"):
        for _ in range(200):
            y = x @ x
        torch.cuda.synchronize()
    del y
    gpu = watch.windows["block"]["gpu"]
    assert all(v and v > 0 for v in gpu["sm_clock_mhz"] + gpu["memory_clock_mhz"])
    assert all(v is not None and 5 < v < 110 for v in gpu["temperature_c"])
    assert gpu["power_w"] is not None and gpu["power_w"] > 0 and 0 <= gpu["utilization"] <= 100
    if gpu["own_pid_visible"]:  # outside a container NVML lists this process by its own pid
        assert all(p["pid"] != os.getpid() for p in gpu["other_processes"])
        assert gpu["other_sm_util"] is None or 0 <= gpu["other_sm_util"] <= 100


@pytest.mark.gpu
def test_a_gpu_runs_record_holds_the_blocks_gpu_readings(synthetic_data):
    from compile_study.measure.run import run_and_record

    from .test_train import tiny_model_cfg, tiny_run

    rec = run_and_record(tiny_model_cfg(synthetic_data), tiny_run(timed_steps=50, interleave_chunk=10), synthetic_data,
                         "cuda")
    assert rec["status"] == "ok", rec["error"]
    loads = rec["metrics"]["host_load"]
    assert set(loads) == {"epochs", "block", "inference"}
    assert "unavailable" not in loads["block"]["gpu"], loads["block"]["gpu"]
    row = record.disturbance_columns(rec)
    assert row["host_gpu_sm_clock_mhz"] > 0 and row["host_gpu_temperature_c"] > 0 and row["host_gpu_power_w"] > 0
    assert rec["metrics"]["overhead_s"]["watch_s"] > 0
