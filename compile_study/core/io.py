"""Atomic writes: a temporary file in the same directory, then os.replace.

A run killed mid-write leaves no truncated output behind, only a stray `.<name>.<pid>.tmp` file, which the
next write of that name removes. A full disk (or quota) ends the write with a DiskFullError naming the path
and the free space, and the temporary file is removed.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import numpy as np

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(OSError):
    """No space left where a file was being written; str() is one line with the path and the free space."""

    def __str__(self) -> str:
        return self.strerror


def human(n: float) -> str:
    """Bytes in binary units: 1.4 PiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} EiB"


def free_space(path: str | os.PathLike) -> str:
    """The free space of the file system holding `path` (or its nearest existing parent), e.g. "12.0 MiB"."""

    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return human(shutil.disk_usage(p).free)
    except OSError:
        return "unknown"


def disk_full(path: str | os.PathLike, err: OSError) -> DiskFullError:
    """The one-line error for `err` (ENOSPC or EDQUOT) while writing `path`."""
    what = "disk quota exceeded" if err.errno == errno.EDQUOT else "no space left on device"
    return DiskFullError(err.errno, f"{what} writing {path} ({free_space(path)} free there); free some space and "
                                    "run the same command again: every finished output is kept")


@contextmanager
def disk_full_named(path: str | os.PathLike):
    """Inside it, a full disk or quota (OSError ENOSPC, EDQUOT) becomes a DiskFullError naming `path`."""
    try:
        yield
    except OSError as e:
        if e.errno in DISK_FULL and not isinstance(e, DiskFullError):
            raise disk_full(path, e) from None
        raise


def _atomic(path: str | os.PathLike, write) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    own = f".{path.name}.{os.getpid()}."
    for stale in path.parent.glob(f".{path.name}.*.tmp"):  # left by a writer that was killed
        if not stale.name.startswith(own):  # this process's own (e.g. the profiler's raw trace) are in use
            stale.unlink(missing_ok=True)
    tmp = temporary(path)
    try:
        with disk_full_named(path):
            write(tmp)
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def temporary(path: str | os.PathLike, tag: str = "") -> Path:
    """A temporary name beside `path` that _atomic's clean-up of `path` removes if its writer is killed."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}{tag}.tmp")


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    _atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    _atomic(path, lambda tmp: tmp.write_bytes(data))


def write_npy_atomic(path: str | os.PathLike, arr: np.ndarray) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.save(f, arr)

    _atomic(path, write)


def copy_atomic(src: str | os.PathLike, dest: str | os.PathLike) -> None:
    """dest becomes a copy of src, whole or not at all."""
    write_text_atomic(dest, Path(src).read_text())


def write_empty_trace(trace_path: str | os.PathLike, note: str) -> None:
    """A valid, empty gzipped Chrome trace carrying `note` (for a run that took no profile, or failed before it)."""
    data = json.dumps({"traceEvents": [], "otherData": {"note": note}}).encode()

    def write(tmp: Path) -> None:
        with gzip.open(tmp, "wb") as g:
            g.write(data)

    _atomic(trace_path, write)
