"""Send a Snakemake job's stdout and stderr (its subprocesses' too) to the rule's log file."""

from __future__ import annotations

import os
import sys

_console = None  # the job's stderr before the redirect: Snakemake's own output


def redirect_output(log_path: str) -> None:
    global _console
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
