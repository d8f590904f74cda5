"""A job's process, the launcher's child (measure/process/launch.py makes it): its first steps, its target, its answer.

It dies with its parent (PR_SET_PDEATHSIG: the server exits when Snakemake does), takes its GPU and core share
before CUDA starts (launch.Setup), calls its target, sends the return value back through a file and exits
without the interpreter's teardown. A target that takes `clock` is given the job's clock; one that takes `ready`
is given, where its job has a gate, the handover (measure/process/handover.py): called at the end of its load phase, it
waits for the job's go and moves the process to its timed cores. Torch is only looked up, never imported here.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
import traceback

from compile_study.core.calls.clock import Clock
from compile_study.core.logs import one_line_for_full_disk
from compile_study.measure.process import handover
from compile_study.measure.process.hostwatch import JOBS_VAR


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (Linux), so that no orphan keeps a GPU busy.

    A forkserver's child inherits the server's "alive" pipe, whose last writer closing tells the server its
    client (Snakemake) is gone; the child lets go of it, or the server would outlive Snakemake for its sake.
    """
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    if getattr(server, "_forkserver_alive_fd", None) is not None:
        os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def apply(setup) -> None:
    """The child's first steps, before torch is touched: log, environment, cores."""
    from compile_study.core.logs import redirect_output

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a ^C stops the child at once (the server ignores it)
    redirect_output(setup.log)
    os.environ.update(setup.env | {JOBS_VAR: str(os.getppid())})  # its siblings are the study's other jobs
    tempfile.tempdir = None  # the server may have asked for it already: TMPDIR (isolation.TEMP) is read again
    if setup.cores:
        os.sched_setaffinity(0, setup.cores)


def thread_lock_for_progress_bars() -> None:
    """tqdm (which torch imports) makes its lock a multiprocessing one, a named semaphore, on first use (Inductor's
    compile progress bar). The child ends with os._exit, which releases none, so multiprocessing's resource tracker
    warned of one per compiling job when the study ended. A job is one process: a thread lock serves it."""
    tqdm = sys.modules.get("tqdm")
    if tqdm is not None:
        tqdm.tqdm.set_lock(threading.RLock())


def torch_threads(threads: int) -> None:
    """Thread counts that torch and Inductor read when they were imported (in the server), set again."""
    torch = sys.modules.get("torch")
    if torch is not None:  # a job that does not use torch leaves it unimported
        torch.set_num_threads(threads)
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        inductor.compile_threads = threads


def bad_fork() -> bool:
    """Whether CUDA was started in the process this one was forked from (it cannot start again here)."""
    torch = sys.modules.get("torch")
    return torch is not None and bool(getattr(torch.cuda, "_is_in_bad_fork", lambda: False)())


def main(spec: dict) -> None:
    """A job's process: set up, call the target, hand its value back, exit (no interpreter teardown)."""
    started = time.time()
    die_with_parent()
    if sys.pycache_prefix:  # core/calls/bytecode.py keeps bytecode there: write what this job imports first (a
        sys.dont_write_bytecode = False  # plugged model's transformers), which the server's -B would forbid
    setup = spec["setup"]  # a launch.Setup
    apply(setup)
    clock = Clock.resume(spec["clock"])
    clock.lap("process_start_s")  # the parent's set-up of the job and the process's creation
    try:
        with clock.part("imports_s"):
            fn = spec["target"]()
            torch_threads(setup.threads)
            thread_lock_for_progress_bars()
        if bad_fork():
            answer = {"bad_fork": True}
        else:
            value = fn(**spec["kwargs"], **_given(fn, spec, clock, started))
            answer = {"value": value, "clock": clock.state(), "handoff": time.perf_counter()}
    except BaseException:
        one_line_for_full_disk(*sys.exc_info())  # a full disk as one line with the path; anything else its traceback
        answer = {"error": traceback.format_exc(limit=4).strip().splitlines()[-1]}
    _write(spec["result"], answer)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _given(fn, spec: dict, clock: Clock, started: float) -> dict:
    """What the child gives a target that asks for it: the job's clock, and the handover where its job has a gate
    (else None: the target loads and times on one set of cores)."""
    asks = inspect.signature(fn).parameters
    ready = (functools.partial(handover.ready, spec["handover"], clock, torch_threads, started)
             if spec.get("handover") else None)
    return {name: value for name, value in (("clock", clock), ("ready", ready)) if name in asks}


def _write(path: str, answer: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump(answer, f)
    os.replace(tmp, path)
