"""The warm launcher: every timed job a fresh process of its own, none paying for imports or a job start.

Snakemake runs the timed rules' `run:` blocks in threads of its own process (profiles/default sets
`force-use-threads`; a cluster's job step always does), so a timed job starts no interpreter and no
Snakemake of its own. Each block calls `run` here (through measure/jobs.py), which makes the job's process
in one of two ways:

- `warm` (the default): forked by a server that has imported torch, torch._dynamo and the package once
  (the standard library's forkserver, preloading PRELOAD). The server never touches CUDA, so each child
  initialises its own CUDA context; Dynamo and Inductor start in it as in any process that has only
  imported them. Importing `torch._inductor.compile_fx` (or anything that starts the CUDA driver) before
  the fork breaks CUDA in every child; a child that finds itself so broken says so, and the launcher
  restarts the server with SAFE_PRELOAD (torch and torch._dynamo, shown to be safe on an H200), then,
  should that fail too, starts every later job `fresh`;
- `fresh`: a new Python interpreter that imports what it needs, as every run did before the launcher.
  The method check `launcher` runs the same cells both ways and compares their speedups.

The child (measure/process/child.py) dies with its parent, takes its GPU and core share before CUDA starts (Setup),
sends its target's return value back through a file, and exits without the interpreter's teardown. A child
that dies without an answer is a crash (segfault, the kernel's OOM killer), which the caller records as the
job's outcome; one ended by SIGINT, SIGTERM or SIGHUP was interrupted, and `run` raises Interrupted: no output
is written and Snakemake reruns the job. A job with a `gate` (a timed run's: measure/jobs.py) hands its child
over from its load phase to its timed part (measure/process/handover.py): when the child says it is ready, the job's
thread calls the gate, which waits for the host and names the timed cores, and tells the child to go; a gate
that raises (the call's time limit) ends the child, and nothing is recorded. Torch-free in the parent (torch is
imported only inside the child's functions).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from compile_study.core.calls.clock import Clock
from compile_study.measure.process import child, handover

# what the server imports once; none of it may start CUDA (see the module docstring)
PRELOAD = ("torch", "torch._dynamo", "compile_study.measure.process.launch", "compile_study.measure.targets",
           "compile_study.measure.checks.targets", "compile_study.measure.run", "compile_study.measure.checks.parity",
           "compile_study.measure.checks.peak", "compile_study.measure.checks.mlp_claim")
SAFE_PRELOAD = ("torch", "torch._dynamo", "compile_study.measure.process.launch", "compile_study.measure.targets",
                "compile_study.measure.checks.targets")
WAYS = ("warm", "fresh")
JOB = "compile-study job "  # the name of a launcher's child process
INTERRUPTS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])  # a fresh child imports the code the parent runs
FRESH = "import pickle, sys; from compile_study.measure.process.child import main; main(pickle.load(open(sys.argv[1], 'rb')))"
Gate = Callable[[dict], dict]  # in the job's thread: the child's ready message -> its go (measure/process/handover.py)


class Interrupted(RuntimeError):
    """The job's process was stopped by a signal meant to stop the study: nothing is recorded."""


class ChildError(RuntimeError):
    """The target raised in the child (its traceback is in the job's log)."""


@dataclass
class Setup:
    """What the child applies before anything else: its log, threads, environment and cores."""

    log: str
    threads: int
    env: dict[str, str] = field(default_factory=dict)  # CUDA_VISIBLE_DEVICES, Inductor/Triton cache, ...
    cores: list[int] | None = None  # CPU affinity: a GPU's share of the cores on a host with several


@dataclass
class Outcome:
    """What came back: the target's value (None where the child died), the job's clock, how it ended."""

    value: object
    clock: Clock
    exitcode: int
    way: str
    answered: bool = True

    @property
    def crash(self) -> str | None:
        """Why the child gave no answer, or None."""
        if self.answered:
            return None
        how = (f"killed by {signal.Signals(-self.exitcode).name}" if self.exitcode < 0
               else f"exited with status {self.exitcode}")
        return f"the run's process {how} before it returned a result (a crash; SIGKILL: e.g. the kernel's OOM killer)"


class _State:
    """The launcher of this process: one forkserver, its preload, the way jobs start."""

    lock = threading.Lock()
    way = os.environ.get("COMPILE_STUDY_LAUNCHER", "warm")  # `fresh`: every job a new interpreter
    preload = PRELOAD


def start() -> None:
    """Start the warm server now (its imports then overlap whatever runs first); run() also starts it."""
    from multiprocessing import forkserver, spawn

    with _State.lock:
        if _State.way == "warm":
            if not getattr(spawn.get_preparation_data, "leaves_main_alone", False):
                spawn.get_preparation_data = _without_main(spawn.get_preparation_data)
            multiprocessing.get_context("forkserver").set_forkserver_preload(list(_State.preload))
            forkserver.ensure_running()


def _without_main(get_preparation_data):
    """multiprocessing runs the parent's main script again in every forkserver child (so that pickles can name
    its functions); a job's child needs none of it, and Snakemake's console script would import all of Snakemake
    again in each child. Only the launcher's processes (named JOB) are spared it."""
    def prepare(name):
        data = get_preparation_data(name)
        if name.startswith(JOB):
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
        return data

    prepare.leaves_main_alone = True
    return prepare


Target = Callable[[], Callable]  # imports the job's function in the child and returns it (measure/targets.py)


def name_of(target: Target) -> str:
    fn = getattr(target, "func", target)  # a functools.partial: its function's name
    return f"{fn.__module__}.{fn.__qualname__}"


def run(target: Target, kwargs: dict, setup: Setup, clock: Clock | None = None, way: str | None = None,
        gate: Gate | None = None) -> Outcome:
    """Run target()(**kwargs) in a fresh process -> its Outcome (raises Interrupted, ChildError). `target` is a
    module-level function of no arguments that imports the job's function and returns it (measure/targets.py):
    pickled by name, it is called in the child, where the job's imports belong. `gate`: the handover from the
    child's load phase to its timed part (module docstring), for a target that takes `ready`."""
    clock = clock or Clock()
    way = way or _State.way
    if way not in WAYS:
        raise ValueError(f"launcher way {way!r} is not one of {WAYS}")
    with tempfile.TemporaryDirectory(prefix="compile-study-job-") as tmp:
        spec = {"target": target, "kwargs": kwargs, "setup": setup, "result": f"{tmp}/result.pickle",
                "handover": tmp if gate else None}
        exitcode = (_warm if way == "warm" else _fresh)(spec | {"clock": clock.state()}, gate)
        answer = _read(spec["result"])
    if answer.get("bad_fork") and way == "warm":
        _degrade()
        return run(target, kwargs, setup, clock, None, gate)
    if "error" in answer:
        raise ChildError(f"{name_of(target)} failed in its process (see {setup.log}): {answer['error']}")
    if answer:
        clock = Clock.resume(answer["clock"])
        # pickling the answer, exit, CUDA teardown, reading the answer back: booked up to this return
        clock.parts["teardown_s"] += time.perf_counter() - answer["handoff"]
        return Outcome(answer["value"], clock, exitcode, way)
    if exitcode < 0 and -exitcode in INTERRUPTS:
        raise Interrupted(f"{name_of(target)}: its process was stopped by {signal.Signals(-exitcode).name}; nothing recorded")
    stop = _server_stopped_by() if way == "warm" and exitcode == SERVER_GONE else None
    if stop in INTERRUPTS:  # a time limit's SIGTERM to the process group stops the server and, with it, the child
        raise Interrupted(f"{name_of(target)}: the launcher's server was stopped by {signal.Signals(stop).name} and its "
                          "process with it; nothing recorded")
    return Outcome(None, clock, exitcode, way, answered=False)


# multiprocessing's forkserver reports a child's exit status through the server; where the server died, it reads
# none and says 255 (popen_forkserver.Popen.poll)
SERVER_GONE = 255
SERVER_EXIT_WAIT_S = 2.0  # how long a signalled server may take to exit (seconds on a loaded host)


def _server_stopped_by() -> int | None:
    """The signal that ended the forkserver, if it has ended by one (it is left unreaped for multiprocessing)."""
    from multiprocessing import forkserver

    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    if pid is None:
        return None
    deadline = time.monotonic() + SERVER_EXIT_WAIT_S  # the child's pipe closes before the server has exited
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return None
        if info is not None or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if info is None or info.si_code not in (os.CLD_KILLED, os.CLD_DUMPED):
        return None
    return info.si_status


def _warm(spec: dict, gate: Gate | None) -> int:
    start()
    proc = multiprocessing.get_context("forkserver").Process(target=child.main, args=(spec,),
                                                             name=f"{JOB}{name_of(spec['target'])}")
    proc.start()
    _hand_over(spec, gate, proc.is_alive, lambda: (proc.kill(), proc.join()))
    proc.join()
    return proc.exitcode


def _fresh(spec: dict, gate: Gate | None) -> int:
    path = Path(spec["result"]).with_name("spec.pickle")
    path.write_bytes(pickle.dumps(spec))
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-c", FRESH, str(path)], env=env, stdin=subprocess.DEVNULL)
    _hand_over(spec, gate, lambda: proc.poll() is None, lambda: (proc.kill(), proc.wait()))
    return proc.wait()


def _hand_over(spec: dict, gate: Gate | None, alive: Callable[[], bool], end: Callable[[], object]) -> None:
    """Serve the child's handover (measure/process/handover.py) where its job has a gate; a gate that raises (e.g. the
    call's time limit) ends the child first, so that nothing is left running."""
    if gate is None:
        return
    try:
        handover.serve(spec["handover"], alive, gate)
    except BaseException:
        end()
        raise


def _read(path: str) -> dict:
    try:
        return pickle.loads(Path(path).read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError):
        return {}  # the child died before its answer was complete


def _degrade() -> None:
    """A child found CUDA unusable after the fork: restart the server with less preloaded, else go fresh."""
    from multiprocessing import forkserver

    with _State.lock:
        server = getattr(forkserver, "_forkserver", None)
        if _State.preload != SAFE_PRELOAD and hasattr(server, "_stop"):
            server._stop()
            _State.preload = SAFE_PRELOAD
            print(f"launcher: a preloaded module started CUDA before the fork; restarting the server with "
                  f"{', '.join(SAFE_PRELOAD)} only", file=sys.stderr)
        else:
            _State.way = "fresh"
            print("launcher: CUDA is unusable in forked children here; every later job starts a fresh interpreter",
                  file=sys.stderr)
