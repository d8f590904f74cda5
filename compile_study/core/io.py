"""Atomic writes: a temporary file in the same directory, then os.replace.

A run killed mid-write leaves no truncated output behind, only a stray `.tmp` file.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np


def _atomic(path: str | os.PathLike, write) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):  # left by a writer that was killed
        stale.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    _atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_npy_atomic(path: str | os.PathLike, arr: np.ndarray) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.save(f, arr)

    _atomic(path, write)


def write_empty_trace(trace_path: str | os.PathLike, note: str) -> None:
    """A valid, empty gzipped Chrome trace carrying `note` (for a run that took no profile, or failed before it)."""
    data = json.dumps({"traceEvents": [], "otherData": {"note": note}}).encode()

    def write(tmp: Path) -> None:
        with gzip.open(tmp, "wb") as g:
            g.write(data)

    _atomic(trace_path, write)
