"""One running invocation per study directory: a second one is refused before its first job, so that two
invocations never time runs side by side.

The lock is an OS file lock (filelock's flock on Unix), held by the Snakemake process for its whole life: the
kernel releases it when that process ends, however it ends (even SIGKILL), so a killed study resumes with the
same command and there is never a stale lock to clear by hand. Beside it, `study.lock.json` says who holds
it (pid, start, command), for the refusal's message. Snakemake's own lock is off (profiles/default: nolock)
because it outlives a SIGKILL.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock, Timeout  # a dependency of torch; the GPU locks use it too

from compile_study.core.io import write_json_atomic

_held: FileLock | None = None  # kept for the process's life: releasing it is the process's exit


def lock_path(directory: str | os.PathLike = ".") -> Path:
    return Path(directory) / ".snakemake" / "study.lock"


def holder_path(directory: str | os.PathLike = ".") -> Path:
    """Who holds the lock: pid, start, command (JSON)."""
    return Path(directory) / ".snakemake" / "study.lock.json"


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
    write_json_atomic(holder_path(directory), {
        "pid": os.getpid(), "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv)})


def refusal(directory: str | os.PathLike = ".") -> str:
    """The message for a second invocation: who runs the study and how to go on."""
    try:
        holder = json.loads(holder_path(directory).read_text())
        who = f"pid {holder['pid']}, started {holder['started']}: {holder['command']}"
        stop = f"or stop it (kill {holder['pid']})"
    except (OSError, ValueError, KeyError):
        who, stop = "its holder did not say who it is", "or stop it"
    return (f"{Path(directory).absolute()}: another invocation is running this study ({who}); two at once would "
            f"time runs side by side. Wait for it to finish, {stop}, then run the same command again: what it "
            "finished is kept.")
