"""The handover between a timed run's job (a thread of Snakemake's process) and the run's process: the process
loads on its load cores, says it is ready and waits; the job takes its lane's timed hold (measure/process/isolation.py
Host) and says go; the process moves to its timed cores and times.

    the run's process (measure/run.py, after its warm-up steps)     the job's thread (measure/process/launch.py run)
    ready(): writes READY, waits for GO                      ->     serve(): sees READY, gate(it) takes the host
    moves to GO's cores, returns what the record keeps       <-     writes GO

The two messages are files in the job's temporary directory (the launcher's), each written whole (a rename);
each side polls for the other's every POLL_S: the same in the launcher's warm and fresh ways, and a process
that dies while loading or waiting simply ends, which the launcher sees as any crash or interrupt. A process
whose job gave it no gate (a method check's, a compile's) is never asked: it loads and times on one set of
cores. Torch-free.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from compile_study.core.calls.clock import Clock

READY, GO = "ready.json", "go.json"
POLL_S = 0.005  # seconds between two looks: a few hundred cheap stat calls a second, on the waiting side's cores


def ready(folder: str, clock: Clock, set_threads: Callable[[int], None], started_unix: float) -> dict:
    """In the run's process (started at `started_unix`), at the end of its load phase: say so, wait for the go
    (booked `gpu_wait_s`), move to the timed cores with the go's threads -> what the record keeps: metrics
    `load_phase` (from the process's start) and `timed_part`."""
    load_cores, end = sorted(os.sched_getaffinity(0)), time.time()
    parts = dict(clock.parts)  # where the job's time went up to here: its load phase (and the wait before it)
    with clock.part("gpu_wait_s"):  # the wait itself timed inside its booked part, which therefore holds it all
        waiting = time.perf_counter()  # before the word goes out: the gate's wait then lies wholly inside it
        _write(Path(folder) / READY, {"load_s": end - started_unix})
        go = _wait_for(Path(folder) / GO, lambda: True)
        waited = time.perf_counter() - waiting
    if go["cores"]:
        os.sched_setaffinity(0, go["cores"])
    set_threads(go["threads"])
    start = time.time()
    return {"load_phase": {"cores": load_cores, "unix": [round(started_unix, 3), round(end, 3)],
                           "parts": parts, "beside_timed_work": go["overlap"]},
            "timed_part": {"cores": sorted(os.sched_getaffinity(0)), "threads": go["threads"],
                           "start_unix": round(start, 3), "waited_s": waited, "lane": go["lane"]}}


def move(parts: dict, source: str, target: str, seconds: float) -> None:
    """Rebook up to `seconds` of the load phase's `source` part as `target` (as Clock.move does for the run)."""
    seconds = min(max(0.0, seconds), parts.get(source, 0.0))
    parts[source] = parts.get(source, 0.0) - seconds
    parts[target] = parts.get(target, 0.0) + seconds


def serve(folder: str, alive: Callable[[], bool], gate: Callable[[dict], dict]) -> None:
    """In the job's thread, while the run's process lives: when it says it is ready, `gate(what it said)` (which
    waits for the host) -> the go, written. Returns when the go is written or the process has ended."""
    said = _wait_for(Path(folder) / READY, alive)
    if said is not None:
        _write(Path(folder) / GO, gate(said))


def _wait_for(path: Path, alive: Callable[[], bool]) -> dict | None:
    """The message at `path` once it is there, or None once `alive()` says the other side has ended."""
    while not path.exists():
        if not alive():
            return None
        time.sleep(POLL_S)
    return json.loads(path.read_text())


def _write(path: Path, message: dict) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(message))
    os.replace(tmp, path)
