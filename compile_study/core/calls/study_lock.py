"""One running invocation per study directory: a second one is refused when the Snakefile starts, before it
imports torch or plans anything, so that two invocations never time runs side by side and the refused one
competes for the cores no longer than Snakemake's own start.

The lock is an OS file lock (filelock's flock on Unix), held by the Snakemake process for its whole life: the
kernel releases it when that process ends, however it ends (even SIGKILL), so a killed study resumes with the
same command and there is never a stale lock to clear by hand. Who holds it (pid, start, command) is read from
the kernel's lock table (/proc/locks) for the refusal's message, so taking the lock writes nothing but the
empty lock file. Snakemake's own lock is off (profiles/default: nolock) because it outlives a SIGKILL.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from filelock import FileLock, Timeout  # a dependency of torch

_held: FileLock | None = None  # kept for the process's life: releasing it is the process's exit


def lock_path(directory: str | os.PathLike = ".") -> Path:
    return Path(directory) / ".snakemake" / "study.lock"


def hold(directory: str | os.PathLike = ".") -> None:
    """Take the study's lock for the rest of this process, or exit with who holds it and what to do."""
    global _held
    if _held is not None:
        return
    path = lock_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise SystemExit(refusal(directory)) from None
    _held = lock


def hold_for(workflow, directory: str | os.PathLike = ".") -> None:
    """The Snakefile's first act: an invocation that may run jobs takes the lock before it imports anything else
    or plans anything, so that a second one is refused before it competes for the cores. A dry run (it changes
    nothing) and Snakemake's own job processes take none."""
    if workflow.is_main_process and not workflow.output_settings.dryrun:
        hold(directory)


def holder(directory: str | os.PathLike = ".") -> int | None:
    """The pid holding the study's lock, from the kernel's lock table (None where it says nothing)."""
    try:
        inode = os.stat(lock_path(directory)).st_ino
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()  # "1: FLOCK  ADVISORY  WRITE 20105 fe:00:2149211 0 EOF"
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
                return int(fields[4])
    except (OSError, ValueError):
        pass
    return None


def _described(pid: int) -> str:
    """pid, how long it has run and its command line (from /proc)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
        started = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - age))
        return f"pid {pid}, started {started}: {command}"
    except (OSError, ValueError, IndexError):
        return f"pid {pid}"


def refusal(directory: str | os.PathLike = ".") -> str:
    """The message for a second invocation: who runs the study and how to go on."""
    pid = holder(directory)
    who, stop = (_described(pid), f"or stop it (kill {pid})") if pid else ("its holder is not known", "or stop it")
    return (f"{Path(directory).absolute()}: another invocation is running this study ({who}); two at once would "
            f"time runs side by side. Wait for it to finish, {stop}, then run the same command again: what it "
            "finished is kept.")
