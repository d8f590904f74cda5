"""Jobs for tests/test_launch.py: what a launcher's child runs (importable as tests.launch_targets; no torch)."""

from __future__ import annotations

import os
import signal
import tempfile
import time

from tqdm import tqdm

tempfile.gettempdir()  # as an import in the launcher's server may: a child must read its TMPDIR again


def temp_dir() -> str:
    """Where the child's temporary files go."""
    return tempfile.gettempdir()


def named(name: str):
    """A launcher target for the functions below: functools.partial(named, "facts") imports nothing more."""
    return globals()[name]


def facts(word: str, clock) -> dict:
    """What the child sees: its parent, environment, cores; all its time booked on the job's clock."""
    time.sleep(0.05)
    print(f"child says {word}")
    value = {"word": word, "pid": os.getpid(), "ppid": os.getppid(), "env": os.environ.get("STUDY_TEST_VALUE"),
             "cores": sorted(os.sched_getaffinity(0))}
    clock.lap("timed_s")  # as run_and_record books its last part: up to the value's return
    return value


def crash() -> None:
    os.abort()


def interrupted() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)


def fails() -> None:
    raise ValueError("a bad value, raised in the child")


def disk_full() -> None:
    raise OSError(28, "No space left on device", "/study/runs/r0.json")


def sleeps(pid_file: str) -> None:
    with open(pid_file, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(60)


def progress_bar() -> str:
    """What Inductor's compile progress bar does in a job: a tqdm bar, which takes tqdm's lock."""
    for _ in tqdm(range(3)):
        pass
    return type(tqdm.get_lock()).__name__


def imports(name: str) -> str:
    """Import a module the server did not preload -> where its bytecode would go."""
    import importlib
    import importlib.util

    module = importlib.import_module(name)
    return importlib.util.cache_from_source(module.__file__)


def window(name: str, seconds: float) -> dict:
    """A check that takes `seconds`: when it ran, in which process, on which Inductor cache."""
    start = time.time()
    time.sleep(seconds)
    return {"name": name, "pid": os.getpid(), "start": start, "end": time.time(),
            "cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}


def loads(clock, ready, pid_file: str | None = None) -> dict:
    """A run's process in short: its load phase on the cores it started on, the handover, its timed part."""
    if pid_file:
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
    before = sorted(os.sched_getaffinity(0))
    time.sleep(0.05)
    handed = ready()
    clock.lap("timed_s")
    return {"load_cores": before, "timed_cores": sorted(os.sched_getaffinity(0)), "handed": handed}


def dies_loading(ready) -> None:
    os.abort()
