"""Send a Snakemake job's stdout and stderr (its subprocesses' too) to the rule's log file; a full disk ends
the job in one line (the path and the free space) instead of a traceback."""

from __future__ import annotations

import errno
import os
import sys

_console = None  # the job's stderr before the redirect: Snakemake's own output


def one_line_for_full_disk(kind, value, tb) -> None:
    """sys.excepthook: a full disk (io.DiskFullError, or an OSError ENOSPC/EDQUOT raised by a library) is one
    line naming the path and the free space; anything else keeps its traceback."""
    if isinstance(value, OSError) and value.errno in (errno.ENOSPC, errno.EDQUOT):
        from compile_study.core.io import DiskFullError, disk_full  # here: the shims import this module first

        err = value if isinstance(value, DiskFullError) else disk_full(value.filename or "a file", value)
        print(f"error: {err}", file=sys.stderr)
        return
    sys.__excepthook__(kind, value, tb)


def redirect_output(log_path: str) -> None:
    global _console
    sys.excepthook = one_line_for_full_disk
    if _console is None:
        _console = os.dup(2)
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def to_console(line: str) -> None:
    """One line where Snakemake's own output goes (the study's progress), beside the job's log."""
    print(line, flush=True)
    if _console is not None:
        os.write(_console, (line + "\n").encode())
