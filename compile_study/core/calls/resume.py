"""A measurement written completely is never thrown away because of the moment of an interrupt.

Snakemake marks a job's outputs incomplete when the job starts and unmarks them when it has registered the
job as finished; with `rerun-incomplete` (profiles/default) it deletes and remakes whatever is still marked
on the next run. A study stopped between a job's last write and that bookkeeping (SIGINT, SIGKILL, a
cluster's time limit) would so remeasure a run it has. But every measured output (a run's record, a parity,
peak, MLP or method-check result) is written atomically and last, so one that exists and reads as a whole is
complete: before Snakemake looks at the outputs (plan/repairs.py, in an invocation that runs jobs), `keep` clears
the marker of each such output (`whole_but_marked`; and of a record's trace, written before it), as Snakemake's
own `--cleanup-metadata` would; anything that does not read as a whole keeps its marker and is remade. Snakemake's file-based bookkeeping
(`.snakemake/incomplete/`, the default `--persistence-backend file`) is what is read. Torch-free.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from pathlib import Path

from compile_study.core import record, vocab
from compile_study.core.layout import RECORD, Layout

INCOMPLETE = ".snakemake/incomplete"  # snakemake.persistence.file: one marker per output, named by its path
_RECORD_RE = re.compile(re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(RECORD)) + "$")


def marker(path: str, incomplete: str | Path = INCOMPLETE) -> Path:
    """Where Snakemake keeps the mark of an output (urlsafe base64 of its path, cut into the file system's
    longest names, all but the last prefixed "@"), as snakemake.persistence.file does it."""
    b64 = base64.urlsafe_b64encode(path.encode()).decode()
    limit = max(2, os.pathconf(incomplete if Path(incomplete).exists() else ".", "PC_NAME_MAX") or 255) - 1
    parts = [b64[i:i + limit] for i in range(0, len(b64), limit)]
    return Path(incomplete, *["@" + p for p in parts[:-1]], parts[-1])


def marked(incomplete: str | Path = INCOMPLETE) -> list[str]:
    """The outputs Snakemake marks incomplete."""
    out = []
    for directory, _, names in os.walk(incomplete):
        for name in names:
            rel = Path(directory, name).relative_to(incomplete).parts
            try:
                out.append(base64.urlsafe_b64decode("".join(p.removeprefix("@") for p in rel)).decode())
            except (binascii.Error, UnicodeDecodeError):
                continue  # not a marker (Snakemake's own migration flag)
    return sorted(out)


def is_whole(path: str, root: str) -> bool:
    """A measured output that reads as a whole: a run record of its own path's run (with its trace), or any
    other JSON object of the study's."""
    rel = os.path.relpath(path, root)
    try:
        match = _RECORD_RE.match(rel)
        if match is None:
            return isinstance(json.loads(Path(path).read_text()), dict)
        rec = record.read(path)
        trace = Path(path[: -len(".json")] + ".trace.json.gz")
        return (rec["status"] in vocab.STATUSES and record.RunKey.of(rec["config"]) == record.RunKey.of(match)
                and trace.is_file())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def whole_but_marked(layout: Layout, incomplete: str | Path = INCOMPLETE) -> list[str]:
    """The study's JSON outputs that Snakemake marks incomplete although they read as a whole (is_whole). Reads only."""
    prefix = layout.root.rstrip("/") + "/" if layout.root not in ("", ".") else ""
    return [path for path in marked(incomplete) if path.startswith(prefix) and path.endswith(".json")
            and Path(path).is_file() and is_whole(path, layout.root)]


def keep(paths: list[str], incomplete: str | Path = INCOMPLETE) -> None:
    """Clear Snakemake's incomplete mark on each output (and on a record's trace, written before it), as its own
    --cleanup-metadata would."""
    for path in paths:
        for output in (path, path[: -len(".json")] + ".trace.json.gz"):
            marker(output, incomplete).unlink(missing_ok=True)
