"""What else ran on the host during a timed block, read at the block's two ends (never between two timed steps).

    watch = HostWatch(gpu_uuid(device))
    with watch.window("block", clock), clock.part("timed_s"):
        ...                                   # the timed block; the readings are booked as the clock's `watch_s`
    metrics["host_load"] = watch.windows      # {"block": {...}}

What counts as the study's own work, and is therefore not outside load:
- the run's process (every thread of it) and its descendants, Inductor's compile workers (`own_cpu_s`);
- its ancestors: the launcher's server, the Snakemake process whose job thread waits on this run, and whatever
  started Snakemake. Each waits on the run, so their time (Snakemake's idle loop) is the study's, booked
  apart as `study_cpu_s`.
- its neighbours: the study's other jobs' processes, the other children of the launcher's server (in its fresh
  way, of Snakemake's process) and their descendants: the next run, loading beside this one's timed part by
  design (measure/process/handover.py); on a host with several GPUs, the other GPUs' runs. They run on cores of their own: where one was allowed on the run's cores, its CPU time
  in the window is booked as the study's (`neighbours.shared_cores_cpu_s`), and the window says so; on a GPU
  it shares by design, its SM share is kept apart (`gpu.neighbour_sm_util`), not with other processes'. Each
  window lists them (`neighbours`: pid, name, CPU seconds, allowed cores) and says how they were counted.
Everything else that ran on the run's cores is outside load: other users' processes, those of another
container (which this one cannot even list), the study's other work wherever it shared the run's cores (in the
warm way, a rule Snakemake runs as a process of its own), the kernel's work for any of them, and time a
hypervisor gave another guest (steal). It is the busy time of the run's cores (/proc/stat, per core) less own,
study and shared neighbours' time: `outside_cpu_s`; per second of the window, less the
counters' resolution (a tick per core at either end: a short window cannot show a small load), `outside_cores`.
`busiest` names the visible outside processes that took the most CPU time during the window, on any core: of
those alive at its end (a process the first reading did not list started meanwhile and counts whole; one that
ended inside the window is in the cores' total but cannot be named).

On a GPU (NVML through nvidia-ml-py, read-only: nothing is set), each end reads the SM and memory clocks, the
temperature, the power and the clocks' event (throttle) reasons; the window gets the mean power from the
energy counter, the device's utilisation at its end, the other processes holding the device, and the largest
SM share another process had in NVML's samples during the window. Without NVML (a CPU host, no driver, the
package absent) `gpu` says why. The CPU's frequency is read at both ends from sysfs (or /proc/cpuinfo).
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import psutil  # process listing that survives processes ending mid-scan

from compile_study.core.calls.clock import Clock

TICK_S = 1 / os.sysconf("SC_CLK_TCK")  # /proc's CPU time unit
BUSIEST = 5  # outside processes named in a window's record
JOBS_VAR = "COMPILE_STUDY_JOBS_PARENT"  # set in a launcher's child (measure/process/child.py): the pid its siblings share
NEIGHBOURS_COUNTED_AS = "study"  # how a window counts the study's other jobs' processes (module docstring)


def gpu_uuid(device) -> str | None:
    """The NVML name of a torch CUDA device ("GPU-<uuid>"; CUDA_VISIBLE_DEVICES already applied), else None."""
    if getattr(device, "type", None) != "cuda":
        return None
    import torch

    try:
        return f"GPU-{torch.cuda.get_device_properties(device).uuid}"
    except (AttributeError, RuntimeError) as e:  # a build without device UUIDs: NVML is not read, the window says why
        return f"GPU-unknown ({type(e).__name__})"


# --- the CPU side -------------------------------------------------------------------------------------------------
def core_times(cores: list[int], path: str = "/proc/stat") -> dict[int, tuple[float, float]]:
    """Per core of `cores`: (busy seconds, of them stolen by the hypervisor) since boot. Busy is user, nice,
    system, irq, softirq and steal (guest time is inside user already); idle and iowait are not."""
    out = {}
    with open(path) as f:
        for line in f:
            name, *values = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
                ticks = [int(v) for v in values[:8]] + [0] * (8 - len(values[:8]))
                user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
                out[int(name[3:])] = ((user + nice + system + irq + softirq + steal) * TICK_S, steal * TICK_S)
    return out


def cpu_mhz(cores: list[int]) -> float | None:
    """The mean current frequency of `cores` (sysfs cpufreq, else /proc/cpuinfo), MHz; None where neither says."""
    found = []
    for core in cores:
        try:
            with open(f"/sys/devices/system/cpu/cpu{core}/cpufreq/scaling_cur_freq") as f:
                found.append(int(f.read()) / 1e3)  # kHz
        except (OSError, ValueError):
            pass
    if not found:
        listed = _cpuinfo_mhz()
        found = [listed[c] for c in cores if c in listed]
    return sum(found) / len(found) if found else None


def _cpuinfo_mhz() -> dict[int, float]:
    out, core = {}, None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "processor":
                    core = int(value)
                elif key.strip() == "cpu MHz" and core is not None:
                    out[core] = float(value)
    except (OSError, ValueError):
        return {}
    return out


@dataclass
class Proc:
    name: str
    ppid: int
    cpu_s: float  # user + system of the process itself (its threads, not its children)
    created: float  # seconds since the epoch


def processes() -> dict[int, Proc]:
    """Every process this one can see, with its CPU time so far."""
    out = {}
    for p in psutil.process_iter(["name", "ppid", "cpu_times", "create_time"], ad_value=None):
        t = p.info["cpu_times"]
        if t is not None:
            out[p.pid] = Proc(p.info["name"] or "?", p.info["ppid"] or 0, t.user + t.system, p.info["create_time"] or 0.0)
    return out


def ancestors(pid: int, procs: dict[int, Proc]) -> set[int]:
    out, cur = set(), procs[pid].ppid if pid in procs else 0
    while cur and cur in procs and cur not in out:
        out.add(cur)
        cur = procs[cur].ppid
    return out


def descendants(pid: int, procs: dict[int, Proc]) -> set[int]:
    children: dict[int, list[int]] = {}
    for p, info in procs.items():
        children.setdefault(info.ppid, []).append(p)
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def reaped_children_s() -> float:
    """CPU time of this process's children that have ended and been waited for (compile workers that exited)."""
    t = psutil.Process().cpu_times()
    return t.children_user + t.children_system


# --- the GPU side --------------------------------------------------------------------------------------------------
class Nvml:
    """One GPU as NVML sees it, read-only. `problem` says why it cannot be read (then nothing else is set)."""

    def __init__(self, uuid: str) -> None:
        self.problem, self.handle = None, None
        try:
            import pynvml
        except ImportError:
            self.problem = "NVML not read: nvidia-ml-py is not installed"
            return
        self.nv = pynvml
        try:
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        except pynvml.NVMLError as e:
            self.problem = f"NVML not read: {e}"

    def _failures(self) -> tuple:
        # an unversioned call that this driver's NVML lacks raises a mismatch error that is no NVMLError
        mismatch = getattr(self.nv, "NVMLLibraryMismatchError", None)
        return (self.nv.NVMLError, mismatch) if mismatch else (self.nv.NVMLError,)

    def _get(self, fn, *args):
        """fn(handle, *args), or None where this GPU or driver does not support it."""
        try:
            return fn(self.handle, *args)
        except self._failures():
            return None

    def read(self) -> dict:
        """One end's point readings (None for what the device does not report)."""
        nv = self._get
        power = nv(self.nv.nvmlDeviceGetPowerUsage)
        utilization = nv(self.nv.nvmlDeviceGetUtilizationRates)
        procs = nv(self.nv.nvmlDeviceGetComputeRunningProcesses)
        return {"sm_clock_mhz": nv(self.nv.nvmlDeviceGetClockInfo, self.nv.NVML_CLOCK_SM),
                "memory_clock_mhz": nv(self.nv.nvmlDeviceGetClockInfo, self.nv.NVML_CLOCK_MEM),
                "temperature_c": nv(self.nv.nvmlDeviceGetTemperature, self.nv.NVML_TEMPERATURE_GPU),
                "power_w": _scaled(power, 1e-3),  # milliwatts
                "energy_j": _scaled(nv(self.nv.nvmlDeviceGetTotalEnergyConsumption), 1e-3),  # millijoules
                "clocks_event_reasons": nv(self.nv.nvmlDeviceGetCurrentClocksEventReasons),
                "utilization": utilization.gpu if utilization is not None else None,
                "processes": None if procs is None else {int(p.pid): p.usedGpuMemory for p in procs}}

    def sm_util_by_pid(self, since_unix: float) -> dict[int, int] | None:
        """The largest SM share (percent) each process had in NVML's samples since `since_unix`; None if unsupported."""
        try:
            samples = self.nv.nvmlDeviceGetProcessUtilization(self.handle, int(since_unix * 1e6))
        except self._failures() as e:
            return {} if getattr(e, "value", None) == self.nv.NVML_ERROR_NOT_FOUND else None  # NOT_FOUND: no samples
        out: dict[int, int] = {}
        for s in samples:
            out[int(s.pid)] = max(out.get(int(s.pid), 0), int(s.smUtil))
        return out


def _scaled(value, factor: float):
    return value * factor if value is not None else None


def gpu_window(nvml: Nvml, start: dict, end: dict, since_unix: float, wall_s: float, own: int,
               neighbours: frozenset[int] = frozenset()) -> dict:
    """What the GPU did over a window, from its two ends' readings; other processes told apart from this one (and
    from its `neighbours`, the study's other jobs) only where NVML lists this one's pid (in another PID namespace,
    a container's, it lists the host's pids)."""
    both = {k: [start[k], end[k]] for k in ("sm_clock_mhz", "memory_clock_mhz", "temperature_c", "clocks_event_reasons")}
    energy = (end["energy_j"] - start["energy_j"]) if None not in (start["energy_j"], end["energy_j"]) else None
    samples = [p for p in (start["power_w"], end["power_w"]) if p is not None]
    power = energy / wall_s if energy is not None and wall_s > 0 else (sum(samples) / len(samples) if samples else None)
    listed = {**(start["processes"] or {}), **(end["processes"] or {})}
    visible = own in listed
    util = nvml.sm_util_by_pid(since_unix) if visible else None
    others = {own} | neighbours

    def most(pids) -> int | None:
        return max((u for p, u in util.items() if p in pids), default=0) if util is not None else None

    return both | {"power_w": power, "power_from": "energy counter" if energy is not None else "two readings",
                   "utilization": end["utilization"], "own_pid_visible": visible,
                   "other_processes": ([{"pid": p, "memory_bytes": m} for p, m in sorted(listed.items())
                                        if p not in others] if visible else None),
                   "other_sm_util": most(set(util or ()) - others),
                   "neighbour_sm_util": most(neighbours) if neighbours else None}


# --- the window ------------------------------------------------------------------------------------------------------
@dataclass
class Reading:
    """One end of a window."""

    t: float  # time.perf_counter
    unix: float
    cores: dict[int, tuple[float, float]]
    procs: dict[int, Proc]
    reaped_s: float
    mhz: float | None
    gpu: dict | None = None


@dataclass
class HostWatch:
    """Readings of the host at the two ends of named windows (the module docstring says what they hold)."""

    uuid: str | None = None  # gpu_uuid(device): a GPU to read through NVML, or None
    pid: int = field(default_factory=os.getpid)
    cores: list[int] = field(default_factory=lambda: sorted(os.sched_getaffinity(0)))
    windows: dict[str, dict] = field(default_factory=dict)
    named: int = BUSIEST  # outside processes named per window
    jobs_parent: int | None = field(default_factory=lambda: int(os.environ[JOBS_VAR]) if JOBS_VAR in os.environ else None)

    def __post_init__(self) -> None:
        self.nvml = Nvml(self.uuid) if self.uuid else None

    def _gpu(self) -> dict | None:
        if self.nvml is None or self.nvml.problem:
            return None
        try:
            return self.nvml.read()
        except Exception as e:  # reading the GPU's state must never fail the run it watches: the window says why
            return {"error": f"{type(e).__name__}: {e}"}

    def read(self) -> Reading:
        gpu = self._gpu()
        t = time.perf_counter()  # the cores' counters are read now: the window's edge
        return Reading(t, time.time(), core_times(self.cores), processes(), reaped_children_s(), cpu_mhz(self.cores), gpu)

    @contextmanager
    def window(self, name: str, clock: Clock | None = None):
        """Read the host before and after the block inside; the readings are booked as `watch_s` on `clock`."""
        with clock.part("watch_s") if clock is not None else nullcontext():
            start = self.read()
        yield
        with clock.part("watch_s") if clock is not None else nullcontext():
            end = self.read()
            self.windows[name] = self.account(start, end)

    def account(self, start: Reading, end: Reading) -> dict:
        """The window's record from its two ends."""
        wall = max(end.t - start.t, 1e-9)
        busy = sum(end.cores[c][0] - start.cores[c][0] for c in end.cores if c in start.cores)
        steal = sum(end.cores[c][1] - start.cores[c][1] for c in end.cores if c in start.cores)
        own = {self.pid} | descendants(self.pid, start.procs) | descendants(self.pid, end.procs)
        study = (ancestors(self.pid, start.procs) | ancestors(self.pid, end.procs)) - own
        spent = {p: _spent(start.procs.get(p), end.procs[p]) for p in end.procs}
        own_s = sum(spent[p] for p in own if p in spent) + (end.reaped_s - start.reaped_s)
        study_s = sum(spent[p] for p in study if p in spent)
        near = self.neighbours(start, end, own | study, spent)
        shared_s = sum(cpu_s for _, _, cpu_s, cores in near if set(cores or self.cores) & set(end.cores))
        resolution = 2 * len(end.cores) * TICK_S
        outside = max(0.0, busy - own_s - study_s - shared_s)
        kin = own | study | {n[0] for n in near}
        busiest = sorted(((p, end.procs[p].name, round(s, 3)) for p, s in spent.items()
                          if p not in kin and s > 0), key=lambda x: -x[2])[:self.named]
        out = {"unix": [round(start.unix, 3), round(end.unix, 3)], "wall_s": wall, "cores": sorted(end.cores), "busy_cpu_s": busy, "own_cpu_s": own_s,
               "study_cpu_s": study_s, "outside_cpu_s": outside, "steal_cpu_s": steal, "resolution_cpu_s": resolution,
               "outside_cores": max(0.0, outside - resolution) / wall, "busiest": [list(b) for b in busiest],
               "cpu_mhz": [start.mhz, end.mhz],
               "neighbours": {"counted_as": NEIGHBOURS_COUNTED_AS, "processes": [list(n) for n in near],
                              "shared_cores_cpu_s": shared_s}}
        if self.nvml is not None:
            failed = next((g["error"] for g in (start.gpu, end.gpu) if g and "error" in g), None)
            out["gpu"] = ({"unavailable": self.nvml.problem} if self.nvml.problem else
                          {"unavailable": f"NVML reading failed: {failed}"} if failed else
                          gpu_window(self.nvml, start.gpu, end.gpu, start.unix, wall, self.pid,
                                     frozenset(n[0] for n in near)))
        return out

    def neighbours(self, start: Reading, end: Reading, kin: set[int], spent: dict[int, float]) -> list[tuple]:
        """The study's other jobs' processes in the window (module docstring): (pid, name, CPU seconds, the cores
        each was allowed at the window's end, None where it had ended), none outside a launcher's child."""
        if self.jobs_parent is None:
            return []
        pids = (descendants(self.jobs_parent, start.procs) | descendants(self.jobs_parent, end.procs)) - kin
        return [(p, end.procs[p].name, round(spent[p], 3), _allowed(p)) for p in sorted(pids) if p in end.procs]


def _allowed(pid: int) -> list[int] | None:
    """The cores a process may run on now, or None where it has ended."""
    try:
        return sorted(psutil.Process(pid).cpu_affinity())
    except (psutil.Error, OSError):
        return None


def _spent(before: Proc | None, after: Proc) -> float:
    """CPU seconds a process took between two readings. One the first reading did not list (or whose pid another
    process had then: another start time) started after it: all its time. Start times are compared with each
    other only, never with the clock: /proc gives them against a boot time rounded to the second."""
    if before is not None and before.created == after.created:
        return max(0.0, after.cpu_s - before.cpu_s)
    return after.cpu_s
