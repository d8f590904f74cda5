"""One sitting of a study, logged: run the study's command and note the call in the study's calls.jsonl.

    python -m compile_study session results/cuda -- snakemake --cores all --resources timed_run=2
    python -m compile_study session --time-limit 570 results/cuda -- snakemake --cores all

A study cut by a time limit resumes with the same command, so one study may take several calls. Each call
appends one line to `<study>/calls.jsonl`: start and end (UTC), wall seconds, exit status, the command,
the host's CPUs, GPUs and load averages and the code's commit; the call's Snakemake log is copied to
`logs/<device>/calls/<n>.snakemake.log` (job logs live beside it). The stored study's README (readme.py)
says from these lines how long each call took. The exit status is the command's. With `--time-limit S` the
session stops the command after S seconds as `timeout` would (SIGTERM), and tells it when: a job that would
not end by then is not started (core/calls/deadline.py: every job that holds the device or a compile slot), so the
call ends between jobs. Snakemake lets the jobs it started finish, so a job far slower than its estimate can
still run past the limit; `--grace G` bounds that: G seconds after the limit the session kills the command and
everything it started (its own process group), books the call (`killed_after_s`), and the next call redoes the
jobs cut short (the profile's rerun-incomplete). Under a host's hard command limit, a call that stops itself
is logged; one the host kills is not. A config file the command layers (--configfile) that is missing, a
directory, empty, no mapping or gives a key twice stops the call before it starts, named with its path in one line
(Snakemake's own message names none, or ends a traceback). The command is told which call it runs (CALL): the
paper and the README it makes are made before the call is logged, and say so (call_in_progress). Torch-free.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from compile_study.core.calls import deadline, env, study_lock
from compile_study.core.layout import Layout


def _gpus() -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def _commit() -> dict:
    """The code's commit and state (env.git_state), and the tag it is at, if any."""
    return env.git_state() | {"git_describe": env._run(["git", "-C", str(env.CODE), "describe", "--tags", "--always"])}


def newest_snakemake_log(since: float, directory: str = ".snakemake/log") -> Path | None:
    logs = [p for p in Path(directory).glob("*.snakemake.log") if p.stat().st_mtime >= since]
    return max(logs, key=lambda p: p.stat().st_mtime) if logs else None


CALL = "COMPILE_STUDY_CALL"  # set for the command: "<the study's absolute path>\t<the number its call will be logged as>"


def next_call(study: Path) -> int:
    """The number the study's next logged call gets: one more than the lines of its calls.jsonl."""
    calls = Path(Layout(str(study)).calls)
    return sum(1 for _ in calls.open()) + 1 if calls.exists() else 1


def call_in_progress(study: str | Path) -> int | None:
    """The number of the call a session is running on `study`, which its calls.jsonl does not hold yet (the
    session logs a call when its command ends, after the paper and the README were made in it); None outside a
    session or for another study (a stored one remade during a call)."""
    where, _, n = os.environ.get(CALL, "").rpartition("\t")
    return int(n) if where and n.isdigit() and Path(where) == Path(study).resolve() else None


def log_call(study: Path, logs: Path, command: list[str], started: float, ended: float, rc: int,
             load: dict | None = None) -> dict:
    """Append the call to study/calls.jsonl and keep its Snakemake log under logs/calls/ -> the line. `load`: the
    host's load averages at the start and the end (a shared host's other work slows every part of a call), and
    the signal that stopped the call where one did."""
    calls = Path(Layout(str(study)).calls)
    n = next_call(study)
    line = {"call": n, "start_utc": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
            "end_utc": datetime.fromtimestamp(ended, UTC).isoformat(timespec="seconds"),
            "wall_s": round(ended - started, 1), "exit_status": rc, "command": command,
            "host_cpus": os.cpu_count(), "gpus": _gpus(), "hostname": socket.gethostname()} | (load or {}) | _commit()
    log = newest_snakemake_log(started)
    if log is not None:
        (logs / "calls").mkdir(parents=True, exist_ok=True)
        shutil.copy2(log, logs / "calls" / f"{n}.snakemake.log")
        line["snakemake_log"] = f"calls/{n}.snakemake.log"
    study.mkdir(parents=True, exist_ok=True)
    with calls.open("a") as f:
        f.write(json.dumps(line) + "\n")
    return line


def seconds(text: str) -> float:
    """A finite number of seconds (argparse names the option and the value it refuses)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a study's command and note the call in calls.jsonl.")
    parser.add_argument("--time-limit", type=seconds, metavar="SECONDS",
                        help="stop the command after this long (SIGTERM); no run starts that would not end by then")
    parser.add_argument("--grace", type=seconds, metavar="SECONDS",
                        help="with --time-limit: kill the command and all it started this long after the limit, "
                             "if its running jobs have not ended by then")
    parser.add_argument("study", type=Path, help="the study's directory, e.g. results/cuda")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    if command[0] in ("--time-limit", "--grace"):
        parser.error(f"put {command[0]} before the study's directory")
    if args.time_limit is not None and args.time_limit <= 0:
        parser.error(f"--time-limit {args.time_limit:g}: it must be a positive number of seconds")
    if args.grace is not None and (args.time_limit is None or args.grace < 0):
        parser.error(f"--grace {args.grace:g}: it needs --time-limit and a number of seconds >= 0")
    if args.study.exists() and not args.study.is_dir():
        parser.error(f"{args.study}: not a directory (the study's, e.g. results/cuda, where calls.jsonl goes)")
    if study_lock.holder(".") is not None:  # refused before Snakemake starts: no call to log, nothing competes
        print(study_lock.refusal("."), file=sys.stderr)
        return 1
    problems = configfile_problems(command)
    if problems:  # before the command starts: Snakemake's own message names no file
        print("\n".join(problems), file=sys.stderr)
        return 2
    logs = Path("logs") / args.study.name  # results/cuda -> logs/cuda, where the study's job logs go
    started, load_start = time.time(), os.getloadavg()
    call = {CALL: f"{args.study.resolve()}\t{next_call(args.study)}"}  # what the paper and README made in it say
    rc, stopped_by, killed = run_to_the_end(command, args.time_limit, args.grace, call)
    load = {"load_avg_start": [round(x, 2) for x in load_start], "load_avg_end": [round(x, 2) for x in os.getloadavg()]}
    noted = load | ({"stopped_by": stopped_by} if stopped_by else {})  # the signal that cut the call short
    noted |= {"time_limit_s": args.time_limit} if args.time_limit is not None else {}
    noted |= {"grace_s": args.grace} if args.grace is not None else {}
    noted |= {"killed_after_s": killed} if killed is not None else {}  # its running jobs cut short, redone next call
    line = log_call(args.study, logs, command, started, time.time(), rc, noted)
    print(f"call {line['call']}: {line['wall_s']:.0f} s, exit status {rc} ({Layout(str(args.study)).calls}; "
          f"{len(line['gpus'])} GPU(s))", file=sys.stderr)
    return rc


def configfiles(command: list[str]) -> list[str]:
    """The files a Snakemake command layers with --configfile (or --configfiles), in its order."""
    found, taking = [], False
    for arg in command:
        if arg in ("--configfile", "--configfiles"):
            taking = True
        elif arg.startswith(("--configfile=", "--configfiles=")):
            found.append(arg.partition("=")[2])
            taking = False
        elif arg.startswith("-"):
            taking = False
        elif taking:
            found.append(arg)
    return found


def configfile_problems(command: list[str]) -> list[str]:
    """Each config file of the command that is empty, no mapping, unreadable, not YAML or gives a key twice, named
    with its path."""
    from compile_study.core.config.grid import config_file_problem

    return [p for p in map(config_file_problem, configfiles(command)) if p]


STOPS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)  # a time limit, a closed terminal, ^C


def run_to_the_end(command: list[str], time_limit: float | None = None, grace: float | None = None,
                   env: dict | None = None) -> tuple[int, str | None, float | None]:
    """Run the command -> (its exit status, what stopped the call, if anything did, and the seconds after the
    start at which the session killed it, if it did). The session outlives a stop signal and waits for the
    command to end, so that a call cut short is logged too: a time limit's SIGTERM or a hang-up is passed on to
    the command (Snakemake then finishes its running jobs and exits); a ^C is not, since the terminal sends it
    to the command as well (a second one would cut Snakemake's own clean-up short). `time_limit`: the session's
    own limit, its end passed to the command (core/calls/deadline.py) and a SIGTERM sent when it comes ("time
    limit"). `grace`: the command then runs in a process group of its own (the terminal's ^C no longer reaches
    it, so the session passes that on too), and `grace` seconds after the limit the whole group is killed.
    `env`: variables added to the command's environment (the call in progress, CALL)."""
    extra = dict(env or {}) | ({deadline.VAR: f"{time.time() + time_limit:.3f}"} if time_limit is not None else {})
    grouped = grace is not None and time_limit is not None
    started = time.time()
    proc = subprocess.Popen(command, env=os.environ | extra, process_group=0 if grouped else None)
    stopped: list[str] = []
    killed: list[float] = []

    def pass_on(signum, _frame):
        stopped.append(signal.Signals(signum).name)
        if grouped or signum != signal.SIGINT:
            proc.send_signal(signum)

    def limit_reached():
        stopped.append("time limit")
        proc.send_signal(signal.SIGTERM)

    def grace_over():  # SIGKILL to the command's whole process group (already gone: nothing to kill)
        killed.append(round(time.time() - started, 1))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    timers = [threading.Timer(time_limit, limit_reached)] if time_limit is not None else []
    timers += [threading.Timer(time_limit + grace, grace_over)] if grouped else []
    previous = {sig: signal.signal(sig, pass_on) for sig in STOPS}
    try:
        for timer in timers:
            timer.daemon = True
            timer.start()
        rc = proc.wait()
    finally:
        for timer in timers:
            timer.cancel()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return rc, (stopped[0] if stopped else None), (killed[0] if killed else None)


if __name__ == "__main__":
    sys.exit(main())
